package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestPublishPreparesTheOutboxForDebezium: after Publish (twice: each
// start runs it), the publication covers the outbox and the heartbeat
// table only, and a new row's headers are in the columns the connector
// places as headers, the row marked sent; a row written before has them
// NULL and is unsent, and so is one written after Unpublish: back on the
// built-in relay, every row is published.
func TestPublishPreparesTheOutboxForDebezium(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	add := func(id string) {
		t.Helper()
		m := outbox.Message{Topic: "t.events", Key: []byte("k"), Value: []byte("v"), Headers: map[string]string{"event_id": id, "event_type": "OrderCreated", "dlq_reason": "why"}}
		if err := outbox.Add(ctx, db, m); err != nil {
			t.Fatal(err)
		}
	}
	add("before")
	for range 2 {
		if err := outbox.Publish(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
	}
	add("after")
	for range 2 {
		if err := outbox.Unpublish(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
	}
	add("unpublished")

	var tables []string
	if err := db.SelectContext(ctx, &tables, `SELECT tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, outbox.Publication); err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 || tables[0] != "outbox" || tables[1] != "outbox_heartbeat" {
		t.Errorf("publication covers %v, want [outbox outbox_heartbeat]", tables)
	}
	var rows []struct {
		ID        string  `db:"id"`
		EventID   *string `db:"event_id"`
		EventType *string `db:"event_type"`
		Reason    *string `db:"dlq_reason"`
		Sent      bool    `db:"sent"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT headers->>'event_id' AS id, event_id, event_type, dlq_reason, sent_at IS NOT NULL AS sent FROM outbox ORDER BY outbox.id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for _, i := range []int{0, 2} {
		if r := rows[i]; r.EventID != nil || r.EventType != nil || r.Reason != nil || r.Sent {
			t.Errorf("row %s has header columns %v %v %v, sent %v; want NULL, unsent", r.ID, r.EventID, r.EventType, r.Reason, r.Sent)
		}
	}
	if r := rows[1]; r.EventID == nil || *r.EventID != "after" || r.EventType == nil || *r.EventType != "OrderCreated" || r.Reason == nil || *r.Reason != "why" || !r.Sent {
		t.Errorf("row written after Publish has header columns %v %v %v, sent %v; want after OrderCreated why, sent", r.EventID, r.EventType, r.Reason, r.Sent)
	}
}

// TestSweepDeletesOnlyOldRows: the sweep takes the rows marked sent before
// its cutoff, however many batches that is, and leaves the newer ones.
func TestSweepDeletesOnlyOldRows(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `
		INSERT INTO outbox (topic, value, sent_at)
		SELECT 't', 'v', now() - interval '2 minutes' FROM generate_series(1, 12000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox (topic, value, sent_at) SELECT 't', 'new', now() FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	n, err := outbox.SweepOlderThan(ctx, db.DB, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := db.SelectContext(ctx, &left, `SELECT convert_from(value, 'UTF8') FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if n != 12000 || len(left) != 3 || left[0] != "new" {
		t.Errorf("swept %d rows, left %v; want 12000 swept and the 3 new ones left", n, left)
	}
}
