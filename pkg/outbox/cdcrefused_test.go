package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestEveryRefusedRowIsLoggedOnce: under Debezium the trigger refuses a row
// at insert, stamped with its transaction's start; the sweep's look logs
// it once its transaction commits, even one that began before the last
// look, and never twice, even while an older transaction keeps both rows
// "recent" so that every later look reads them again.
func TestEveryRefusedRowIsLoggedOnce(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	var buf bytes.Buffer
	look := outbox.RefusedLook(ctx, db.DB, slog.New(slog.NewTextHandler(&buf, nil)))
	insert := `INSERT INTO outbox (topic, key, value, headers, event_id, refused_at, last_error)
		VALUES ('t.events', 'k', 'v', jsonb_build_object('event_id', $1::text), $1, now(), 'too large')`

	// hold has an xid older than both rows' and stays open across the
	// later looks, so xmin stays below them: each look reads them again
	// and only the look's memory of logged rows keeps them from a second
	// line.
	hold := db.MustBegin()
	defer hold.Rollback()
	var holdXid string
	if err := hold.GetContext(ctx, &holdXid, `SELECT pg_current_xact_id()::text`); err != nil {
		t.Fatal(err)
	}

	// "long" is written by a transaction that began before the first look
	// and commits after it.
	long := db.MustBegin()
	defer long.Rollback()
	if _, err := long.ExecContext(ctx, insert, "long"); err != nil {
		t.Fatal(err)
	}
	look("svc")
	if err := long.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, insert, "short"); err != nil {
		t.Fatal(err)
	}
	look("svc")
	look("svc")
	look("svc")
	var recent int
	if err := db.GetContext(ctx, &recent, `SELECT count(*) FROM outbox WHERE txid > $1::xid8`, holdXid); err != nil {
		t.Fatal(err)
	}
	if recent != 2 {
		t.Fatalf("%d rows written after the holding transaction's xid, want 2: the looks did not read them again", recent)
	}
	for _, id := range []string{"long", "short"} {
		if n := strings.Count(buf.String(), "event_id="+id+" "); n != 1 {
			t.Errorf("row %s logged %d times, want once; log:\n%s", id, n, buf.String())
		}
	}
	if got := outbox.RefusedRows("svc"); got != 2 {
		t.Errorf("refused rows gauge %v, want 2", got)
	}
}
