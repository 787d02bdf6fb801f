package outbox_test

import (
	"context"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

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
