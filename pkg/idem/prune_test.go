package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// markAt marks a fresh event read at offset of t/0, processed age ago, and
// returns its id.
func markAt(t *testing.T, db *sqlx.DB, consumer string, offset int64, age time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	err := pg.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		if _, err := idem.Mark(context.Background(), tx, consumer, id, idem.Origin{Topic: "t", Partition: 0, Offset: offset}); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE processed_events SET processed_at = now() - make_interval(secs => $2) WHERE event_id = $1`, id, age.Seconds())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPruneForgetsOnlyWhatKafkaCannotRedeliver: a mark goes only when its
// offset is below the committed one and it is older than the window; a
// redelivery of any event still inside either bound is still a duplicate.
func TestPruneForgetsOnlyWhatKafkaCannotRedeliver(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	const committed, window = 10, time.Hour
	tests := []struct {
		name   string
		offset int64
		age    time.Duration
		pruned bool
	}{
		{"BelowCommittedAndOld", 3, 2 * time.Hour, true},
		{"BelowCommittedButInTheWindow", 4, time.Minute, false},
		{"AtTheCommittedOffset", committed, 2 * time.Hour, false},
		{"NotYetCommitted", 12, 2 * time.Hour, false},
	}
	ids := map[string]string{}
	for _, tt := range tests {
		ids[tt.name] = markAt(t, db, "svc", tt.offset, tt.age)
	}
	other := markAt(t, db, "other-svc", 1, 2*time.Hour) // another consumer's marks are its own
	n, err := idem.Prune(ctx, db, "svc", "t", 0, committed, window, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("pruned %d marks, want 1", n)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countMarkers(t, db, "svc", ids[tt.name]) == 0; got != tt.pruned {
				t.Fatalf("pruned = %v, want %v", got, tt.pruned)
			}
			if tt.pruned {
				return
			}
			// Kafka may still deliver it: it must still be a duplicate.
			var first bool
			err := pg.InTx(ctx, db, func(tx *sqlx.Tx) (err error) {
				first, err = idem.Mark(ctx, tx, "svc", ids[tt.name], idem.Origin{Topic: "t", Offset: tt.offset})
				return err
			})
			if err != nil || first {
				t.Fatalf("redelivery: first = %v, err %v; want a duplicate", first, err)
			}
		})
	}
	if countMarkers(t, db, "other-svc", other) != 1 {
		t.Error("pruning svc deleted another consumer's mark")
	}
}

// TestProcessedEventsStayBounded: a long run — rounds of events, their
// offsets committed, pruning after each — keeps the table at what the
// window holds instead of growing with every event ever processed.
func TestProcessedEventsStayBounded(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	const rounds, perRound = 30, 50
	offset := int64(0)
	for range rounds {
		for range perRound {
			markAt(t, db, "svc", offset, 2*time.Hour) // all past the window
			offset++
		}
		// The group has committed all but the last round's last event.
		if _, err := idem.Prune(ctx, db, "svc", "t", 0, offset-1, time.Hour, 1000); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM processed_events WHERE consumer = 'svc'`); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d marks after %d events, want 1 (the one not committed yet)", n, rounds*perRound)
	}
}
