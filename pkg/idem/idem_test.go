package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// effects is a stand-in for a business table: each applied event adds a row.
func effects(t *testing.T, db *sqlx.DB) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS idem_effects (scope text NOT NULL, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

func countEffects(t *testing.T, db *sqlx.DB, scope string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM idem_effects WHERE scope = $1`, scope); err != nil {
		t.Fatal(err)
	}
	return n
}

func countMarkers(t *testing.T, db *sqlx.DB, consumer, eventID string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM processed_events WHERE consumer = $1 AND event_id = $2`, consumer, eventID); err != nil {
		t.Fatal(err)
	}
	return n
}

// apply is what a consumer does with Mark: in one transaction, mark the
// event and, the first time only, make the effect; fail rolls both back.
func apply(ctx context.Context, db *sqlx.DB, scope, eventID string, fail error) (ran bool, err error) {
	err = pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		first, err := idem.Mark(ctx, tx, scope, eventID, idem.Origin{Topic: "t"})
		if err != nil || !first {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idem_effects (scope, n) VALUES ($1, 1)`, scope); err != nil {
			return err
		}
		ran = true
		return fail
	})
	return ran && err == nil, err
}

func TestMark(t *testing.T) {
	db := testenv.DB(t)
	effects(t, db)
	ctx := context.Background()

	t.Run("FirstDeliveryApplies", func(t *testing.T) {
		scope, id := uuid.NewString(), uuid.NewString()
		ran, err := apply(ctx, db, scope, id, nil)
		if err != nil || !ran {
			t.Fatalf("ran=%v err=%v, want ran", ran, err)
		}
		if got := countEffects(t, db, scope); got != 1 {
			t.Fatalf("effects = %d, want 1", got)
		}
	})
	t.Run("RedeliveryIsSkipped", func(t *testing.T) {
		scope, id := uuid.NewString(), uuid.NewString()
		for i := range 3 {
			ran, err := apply(ctx, db, scope, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ran != (i == 0) {
				t.Fatalf("delivery %d: ran=%v", i, ran)
			}
		}
		if got := countEffects(t, db, scope); got != 1 {
			t.Fatalf("effects = %d, want 1", got)
		}
		if got := countMarkers(t, db, scope, id); got != 1 {
			t.Fatalf("markers = %d, want 1", got)
		}
	})
	t.Run("FailedHandlerLeavesNoMarkerSoRetryApplies", func(t *testing.T) {
		scope, id := uuid.NewString(), uuid.NewString()
		boom := errors.New("boom")
		if _, err := apply(ctx, db, scope, id, boom); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		if got := countMarkers(t, db, scope, id); got != 0 {
			t.Fatalf("markers after failure = %d, want 0", got)
		}
		if ran, err := apply(ctx, db, scope, id, nil); err != nil || !ran {
			t.Fatalf("retry: ran=%v err=%v", ran, err)
		}
		if got := countEffects(t, db, scope); got != 1 {
			t.Fatalf("effects = %d, want 1 (the failed attempt rolled back)", got)
		}
	})
	t.Run("ConsumersAreIndependent", func(t *testing.T) {
		id := uuid.NewString()
		a, b := uuid.NewString(), uuid.NewString()
		for _, scope := range []string{a, b} {
			if ran, err := apply(ctx, db, scope, id, nil); err != nil || !ran {
				t.Fatalf("%s: ran=%v err=%v", scope, ran, err)
			}
		}
	})
}

// TestMarkConcurrent hands the same event to many goroutines at once, each
// in its own transaction, as a redelivery racing the original would. The
// unique key lets exactly one apply it.
func TestMarkConcurrent(t *testing.T) {
	db := testenv.DB(t)
	effects(t, db)
	ctx := context.Background()
	const n = 32
	scope, id := uuid.NewString(), uuid.NewString()

	var ranCount atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ran, err := apply(ctx, db, scope, id, nil)
			if err != nil {
				errs <- err
				return
			}
			if ran {
				ranCount.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent delivery failed: %v", err)
	}
	if got := ranCount.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	if got := countEffects(t, db, scope); got != 1 {
		t.Fatalf("effects = %d, want 1", got)
	}
}

// TestCheckThenActRaces shows why Mark relies on the unique key instead of
// looking first: two deliveries that both check before either records the
// event both decide "new" and apply the effect twice. The barrier makes the
// interleaving that happens in production under load certain here.
func TestCheckThenActRaces(t *testing.T) {
	db := testenv.DB(t)
	effects(t, db)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS naive_processed (event_id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	scope, id := uuid.NewString(), uuid.NewString()

	var checked sync.WaitGroup
	checked.Add(2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Error(err)
				checked.Done()
				return
			}
			defer tx.Rollback()
			var seen bool
			if err := tx.Get(&seen, `SELECT EXISTS (SELECT 1 FROM naive_processed WHERE event_id = $1)`, id); err != nil {
				t.Error(err)
				checked.Done()
				return
			}
			checked.Done()
			checked.Wait() // both have looked; neither has written
			if seen {
				return
			}
			if _, err := tx.Exec(`INSERT INTO naive_processed (event_id) VALUES ($1)`, id); err != nil {
				t.Error(err)
				return
			}
			if _, err := tx.Exec(`INSERT INTO idem_effects (scope, n) VALUES ($1, 1)`, scope); err != nil {
				t.Error(err)
				return
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := countEffects(t, db, scope); got != 2 {
		t.Fatalf("naive check-then-act applied %d times; this test documents that it applies twice", got)
	}
}
