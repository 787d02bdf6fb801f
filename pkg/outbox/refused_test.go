package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestPermanentFailuresAreRefusedAndTheRestFlows: rows Kafka will never
// accept — too large, for an invalid topic name, with headers the relay
// cannot read — are refused, with the reason, and counted; the others are
// published, in order, and the round reports no error to back off on.
func TestPermanentFailuresAreRefusedAndTheRestFlows(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-refuse")
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
	before := outbox.Refused(t.Name())
	publishAll(t, db, r, topic) // fails the test on any error

	if ids := refusedRows(t, db); !equalIDs(ids, []int64{huge, badTopic, badHeaders}) {
		t.Fatalf("refused rows = %v, want [%d %d %d]", ids, huge, badTopic, badHeaders)
	}
	if d := outbox.Refused(t.Name()) - before; d != 3 {
		t.Errorf("choreo_outbox_refused_total grew by %v, want 3", d)
	}
	got := eventIDs(testenv.ReadAll(t, topic, 3, 20*time.Second))
	if want := []string{a1.ID, a2.ID, a3.ID}; !equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	// Refused rows stay refused: later rounds neither publish nor error.
	if n, err := r.PublishOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("PublishOnce with only refused rows left = %d, %v; want 0, nil", n, err)
	}
}

// TestRetryPutsARefusedRowBackOnce: a refused row is listed with its
// reason; retrying it puts it back in line for the relay, once — a second
// retry, or one of a row never refused, changes nothing.
func TestRetryPutsARefusedRowBackOnce(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	var refused, plain int64
	if err := db.Get(&refused, `INSERT INTO outbox (topic, key, value, refused_at, last_error) VALUES ('t', 'k', 'v', now(), 'too large') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&plain, `INSERT INTO outbox (topic, key, value) VALUES ('t', 'k', 'v') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	rows, err := outbox.ListRefused(ctx, db, 1000)
	if err != nil || len(rows) != 1 || rows[0].ID != refused || rows[0].LastError != "too large" || rows[0].Key != "k" {
		t.Fatalf("refused rows %+v, err %v; want row %d, key k, too large", rows, err, refused)
	}
	for _, tt := range []struct {
		id   int64
		want bool
	}{{refused, true}, {refused, false}, {plain, false}} {
		got, err := outbox.Retry(ctx, db, tt.id)
		if err != nil || got != tt.want {
			t.Fatalf("Retry(%d) = %v, %v; want %v", tt.id, got, err, tt.want)
		}
	}
	var stillRefused int
	if err := db.Get(&stillRefused, `SELECT count(*) FROM outbox WHERE refused_at IS NOT NULL`); err != nil || stillRefused != 0 {
		t.Fatalf("%d rows refused after the retry (err %v), want 0", stillRefused, err)
	}
}

// TestListRefusedIsLimited: a list holds at most limit rows, the oldest.
func TestListRefusedIsLimited(t *testing.T) {
	db := testenv.DB(t)
	var ids []int64
	for range 3 {
		var id int64
		if err := db.Get(&id, `INSERT INTO outbox (topic, key, value, refused_at, last_error) VALUES ('t', 'k', 'v', now(), 'too large') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows, err := outbox.ListRefused(context.Background(), db, 2)
	if err != nil || len(rows) != 2 || rows[0].ID != ids[0] || rows[1].ID != ids[1] {
		t.Fatalf("ListRefused(2) = %+v, %v; want rows %v", rows, err, ids[:2])
	}
}
