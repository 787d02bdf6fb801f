package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestPermanentFailuresAreParkedAndTheRestFlows: rows Kafka will never
// accept — too large, for an invalid topic name, with headers the relay
// cannot read — are parked, with the reason, and counted; the others are
// published, in order, and the round reports no error to back off on.
func TestPermanentFailuresAreParkedAndTheRestFlows(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-park")
	orderID := testenv.ID("order")
	a1, a2, a3 := event(t, orderID), event(t, orderID), event(t, orderID)

	add(t, db, topic, a1)
	huge := addRaw(t, db, outbox.Message{Topic: topic, Key: []byte(orderID), Value: make([]byte, 1100<<10)})
	add(t, db, topic, a2)
	badTopic := addRaw(t, db, outbox.Message{Topic: "no such topic!", Key: []byte(orderID), Value: []byte("{}")})
	var badHeaders int64
	if err := db.Get(&badHeaders, `INSERT INTO outbox (topic, value, headers) VALUES ($1, '', '{"n": 1}') RETURNING id`, topic); err != nil {
		t.Fatal(err)
	}
	add(t, db, topic, a3)

	r := newRelay(t, db, producer(t))
	before := outbox.Parked(t.Name())
	flushAll(t, db, r, topic) // fails the test on any error

	if ids := parkedRows(t, db); !equalIDs(ids, []int64{huge, badTopic, badHeaders}) {
		t.Fatalf("parked rows = %v, want [%d %d %d]", ids, huge, badTopic, badHeaders)
	}
	if d := outbox.Parked(t.Name()) - before; d != 3 {
		t.Errorf("choreo_outbox_parked_total grew by %v, want 3", d)
	}
	got := eventIDs(testenv.ReadAll(t, topic, 3, 20*time.Second))
	if want := []string{a1.ID, a2.ID, a3.ID}; !equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	// Parked rows stay parked: later rounds neither publish nor error.
	if n, err := r.Flush(context.Background()); err != nil || n != 0 {
		t.Fatalf("Flush with only parked rows left = %d, %v; want 0, nil", n, err)
	}
}

// TestReleaseUnparksARowOnce: a parked row is listed with its reason;
// releasing it puts it back in the relay's way, once — a second release,
// or one of a row never parked, changes nothing.
func TestReleaseUnparksARowOnce(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	var parked, plain int64
	if err := db.Get(&parked, `INSERT INTO outbox (topic, key, value, parked_at, last_error) VALUES ('t', 'k', 'v', now(), 'too large') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&plain, `INSERT INTO outbox (topic, key, value) VALUES ('t', 'k', 'v') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	rows, err := outbox.ListParked(ctx, db, 1000)
	if err != nil || len(rows) != 1 || rows[0].ID != parked || rows[0].LastError != "too large" || rows[0].Key != "k" {
		t.Fatalf("parked rows %+v, err %v; want row %d, key k, too large", rows, err, parked)
	}
	for _, tt := range []struct {
		id   int64
		want bool
	}{{parked, true}, {parked, false}, {plain, false}} {
		got, err := outbox.Release(ctx, db, tt.id)
		if err != nil || got != tt.want {
			t.Fatalf("Release(%d) = %v, %v; want %v", tt.id, got, err, tt.want)
		}
	}
	var stillParked int
	if err := db.Get(&stillParked, `SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL`); err != nil || stillParked != 0 {
		t.Fatalf("%d rows parked after the release (err %v), want 0", stillParked, err)
	}
}

// TestListParkedIsLimited: a list holds at most limit rows, the oldest.
func TestListParkedIsLimited(t *testing.T) {
	db := testenv.DB(t)
	var ids []int64
	for range 3 {
		var id int64
		if err := db.Get(&id, `INSERT INTO outbox (topic, key, value, parked_at, last_error) VALUES ('t', 'k', 'v', now(), 'too large') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows, err := outbox.ListParked(context.Background(), db, 2)
	if err != nil || len(rows) != 2 || rows[0].ID != ids[0] || rows[1].ID != ids[1] {
		t.Fatalf("ListParked(2) = %+v, %v; want rows %v", rows, err, ids[:2])
	}
}
