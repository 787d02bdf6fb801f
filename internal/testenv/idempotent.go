package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/choreo-saga/choreo/pkg/fault"
)

// IdempotentAdd is an operator's add of Amounts (a deposit, a restock)
// sent with an Idempotency-Key.
type IdempotentAdd struct {
	// Create and Read are Amounts'.
	Create func(ctx context.Context, id string, amount int64) error
	Read   func(ctx context.Context, id string) (AmountRow, error)
	// Add adds delta to id under key ("" for none), and says whether its
	// answer replays an earlier one.
	Add func(ctx context.Context, id string, delta int64, key string) (AmountRow, bool, error)
}

// WantIdempotentAdd checks, step by step on one store, that an add with a
// key applies once: a retry returns the first answer and changes nothing,
// even after other changes; the key with another amount is fault.Invalid;
// a key belongs to its row; a failed add leaves its key free; retries
// racing with one key apply once between them.
func WantIdempotentAdd(t *testing.T, a IdempotentAdd) {
	ctx := context.Background()
	x, y, later := ID("idem"), ID("idem"), ID("idem")
	for _, id := range []string{x, y} {
		if err := a.Create(ctx, id, 10); err != nil {
			t.Fatal(err)
		}
	}
	var first AmountRow // the answer to the first add with key k-1
	steps := []struct {
		name     string
		id, key  string
		delta    int64
		wantErr  error
		replayed bool
		want     int64 // the row's amount after the step, read back
		answer   *AmountRow
	}{
		{"FirstApplies", x, "k-1", 5, nil, false, 15, nil},
		{"RetryReplaysTheFirstAnswer", x, "k-1", 5, nil, true, 15, &first},
		{"WithoutKeyAlwaysApplies", x, "", 1, nil, false, 16, nil},
		{"RetryAfterAnotherChangeStillReplays", x, "k-1", 5, nil, true, 16, &first},
		{"SameKeyOtherAmountIsInvalid", x, "k-1", 7, fault.Invalid, false, 16, nil},
		{"AKeyBelongsToItsRow", y, "k-1", 5, nil, false, 15, nil},
		{"FailedAddLeavesTheKeyFree", later, "k-2", 5, fault.NotFound, false, -1, nil},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got, replayed, err := a.Add(ctx, s.id, s.delta, s.key)
			if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
				t.Fatalf("Add(%s, %d, %q) = %v, want %v", s.id, s.delta, s.key, err, s.wantErr)
			}
			if replayed != s.replayed {
				t.Fatalf("replayed = %v, want %v", replayed, s.replayed)
			}
			if i == 0 {
				first = got
			}
			if s.answer != nil && got != *s.answer {
				t.Fatalf("answer %+v, want the first one, %+v", got, *s.answer)
			}
			if s.want < 0 {
				return
			}
			if row, err := a.Read(ctx, s.id); err != nil || row.Amount != s.want {
				t.Fatalf("after the step %s holds %+v (err %v), want %d", s.id, row, err, s.want)
			}
		})
	}
	t.Run("KeyOfAFailedAddAppliesLater", func(t *testing.T) {
		if err := a.Create(ctx, later, 10); err != nil {
			t.Fatal(err)
		}
		if got, replayed, err := a.Add(ctx, later, 5, "k-2"); err != nil || replayed || got.Amount != 15 {
			t.Fatalf("Add = %+v, %v, %v; want 15, applied", got, replayed, err)
		}
	})
	t.Run("RacingRetriesApplyOnce", func(t *testing.T) {
		var mu sync.Mutex
		applied := 0
		AllSucceedTimes(t, 8, func() error {
			_, replayed, err := a.Add(ctx, y, 3, "k-race")
			mu.Lock()
			defer mu.Unlock()
			if !replayed {
				applied++
			}
			return err
		})
		if row, err := a.Read(ctx, y); err != nil || row.Amount != 18 || applied != 1 {
			t.Fatalf("after 8 racing retries %+v (err %v), %d applied; want 18, once", row, err, applied)
		}
	})
}
