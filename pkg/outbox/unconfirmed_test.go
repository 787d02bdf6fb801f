package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestUnconfirmedCountsWhatTheSlotHasNotConfirmed: under Debezium a row
// counts as unpublished until the slot confirms a position its transaction
// ended before, whatever sent_at says; a transaction still running at the
// mark counts after the slot reached it, and so does a row pending a
// hand-over; a refused row does not (nothing publishes it). A reached mark
// with nothing after it stays, so a second call asks what came since.
// With the slot gone, the answer is ErrSlotGone.
func TestUnconfirmedCountsWhatTheSlotHasNotConfirmed(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	slot := newSlot(t, db, "unconfirmed")
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	// advance moves the slot past every mark taken before, on a server
	// others write to as well: the slot cannot pass the flushed WAL, so it
	// commits (a commit flushes) and advances until the slot is past the
	// insert position of when it was called.
	advance := func() {
		t.Helper()
		var target string
		if err := db.GetContext(ctx, &target, `SELECT pg_current_wal_insert_lsn()::text`); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the slot advanced past "+target, func() bool {
			if _, err := db.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
				t.Fatal(err)
			}
			var past bool
			if err := db.GetContext(ctx, &past, `SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn()) IS NOT NULL
				AND (SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1)`, slot, target); err != nil {
				t.Fatal(err)
			}
			return past
		})
	}
	count := func(mark *outbox.SweepMark) int {
		t.Helper()
		n, err := outbox.Unconfirmed(ctx, db.DB, slot, mark)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	addID(t, db, "a", []byte("v"))
	addID(t, db, "b", []byte("v"))
	// Begun before the mark, committed after it: the slot reaching the
	// mark says nothing of it.
	late := db.MustBegin()
	defer late.Rollback()
	if _, err := late.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	var mark outbox.SweepMark
	if n := count(&mark); n != 2 {
		t.Fatalf("before the slot confirmed: %d unconfirmed, want 2", n)
	}
	if _, err := late.ExecContext(ctx, `INSERT INTO outbox (topic, key, value, headers) VALUES ('t.events', 'k-late', 'v', '{"event_id":"late"}')`); err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	kept := mark
	advance()
	if n := count(&mark); n != 1 {
		t.Fatalf("after the slot confirmed the mark: %d unconfirmed, want 1 (the transaction running at the mark)", n)
	}
	if mark == kept {
		t.Errorf("a reached mark with a row after it is kept (%v); want a new one taken next", mark)
	}
	addID(t, db, "c", []byte("v"))
	if n := count(&mark); n != 4 {
		t.Fatalf("a row later, with a new mark not yet confirmed: %d unconfirmed, want all 4", n)
	}
	advance()
	if n := count(&mark); n != 0 {
		t.Fatalf("after the slot confirmed the new mark: %d unconfirmed, want 0", n)
	}
	kept = mark
	addID(t, db, "d", []byte("v"))
	advance()
	if n := count(&mark); n != 1 || kept.LSN == "" {
		t.Fatalf("a row after a reached mark, the slot past it too: %d unconfirmed under mark %v, want 1 under the mark kept", n, kept)
	}
	if n := count(&mark); n != 5 {
		t.Fatalf("with a new mark not yet confirmed: %d unconfirmed, want all 5", n)
	}
	advance()
	if n := count(&mark); n != 0 {
		t.Fatalf("the slot past the new mark: %d unconfirmed, want 0", n)
	}

	addID(t, db, "refused", bytes.Repeat([]byte("x"), outbox.MaxRecordBytes+1))
	if _, err := db.ExecContext(ctx, `UPDATE outbox SET cdc = false WHERE headers->>'event_id' = 'a'`); err != nil {
		t.Fatal(err)
	}
	count(&mark) // the reached mark, with a row to count: emptied
	count(&mark) // a mark after both rows
	advance()
	if n := count(&mark); n != 1 {
		t.Fatalf("a refused row and one pending a hand-over, the slot past both: %d unconfirmed, want 1 (the refused one is nobody's to publish)", n)
	}

	dropSlot(t, db, slot)
	if _, err := outbox.Unconfirmed(ctx, db.DB, slot, &mark); !errors.Is(err, outbox.ErrSlotGone) {
		t.Fatalf("without the slot: %v, want ErrSlotGone", err)
	}
}
