package idem_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
)

// BenchmarkMark measures one idempotent delivery: begin, record the event,
// apply a one-row effect, commit. "Duplicate" measures the cost of skipping
// a redelivery.
//
//	go test -run '^$' -bench Mark ./pkg/idem
func BenchmarkMark(b *testing.B) {
	db := testenv.DB(b)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS idem_effects (scope text NOT NULL, n int NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("New", func(b *testing.B) {
		scope := uuid.NewString()
		for b.Loop() {
			if _, err := apply(ctx, db, scope, uuid.NewString(), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Duplicate", func(b *testing.B) {
		scope, id := uuid.NewString(), uuid.NewString()
		if _, err := apply(ctx, db, scope, id, nil); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if ran, err := apply(ctx, db, scope, id, nil); err != nil || ran {
				b.Fatalf("ran=%v err=%v", ran, err)
			}
		}
	})
}
