package deadline_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/deadline"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestSweepCancelsOrdersPastTheDeadline ages the orders in the database:
// they are left alone until the deadline has passed, then every PENDING one
// is cancelled with reason timeout — over several batches — and counted.
func TestSweepCancelsOrdersPastTheDeadline(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, order.Schema)
	st := store.New(db)
	var ids []string
	for range 5 {
		ids = append(ids, ordertest.Pending(t, db))
	}
	s := deadline.Sweeper{
		Store: st, Deadline: time.Minute, Every: time.Second, Batch: 2,
		Source: order.Name, Log: testenv.Logger(t),
	}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep before the deadline = %d, %v; want 0", n, err)
	}
	before := timedOut(t)
	age(t, db, time.Minute+time.Second)
	if n, err := s.Sweep(ctx); err != nil || n != len(ids) {
		t.Fatalf("Sweep after the deadline = %d, %v; want %d", n, err, len(ids))
	}
	if got := timedOut(t) - before; got != float64(len(ids)) {
		t.Errorf("choreo_orders_timed_out_total rose by %v, want %d", got, len(ids))
	}
	ordertest.WantTimedOut(t, st, ids...)
	// The next sweep finds nothing: each order is cancelled once.
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", n, err)
	}
}

// TestSweepMeasuresOnTheDatabasesClock: created_at is the database's
// clock, so the deadline is too; an instance whose clock is off, ahead or
// behind, cancels an order neither early nor late.
func TestSweepMeasuresOnTheDatabasesClock(t *testing.T) {
	tests := []struct {
		name   string
		skew   time.Duration // of the application's clock
		age    time.Duration // of the order, by the database's clock
		cancel bool
	}{
		{"AheadYoungOrderKept", 2 * time.Hour, 0, false},
		{"AheadOldOrderCancelled", 2 * time.Hour, 2 * time.Minute, true},
		{"BehindOldOrderCancelled", -2 * time.Hour, 2 * time.Minute, true},
		{"BehindYoungOrderKept", -2 * time.Hour, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := testenv.DB(t, order.Schema)
			st := store.New(db)
			id := ordertest.Pending(t, db)
			age(t, db, tt.age)
			s := deadline.Sweeper{
				Store: st, Deadline: time.Minute, Every: time.Second,
				Source: order.Name, Now: func() time.Time { return time.Now().Add(tt.skew) },
				Log: testenv.Logger(t),
			}
			n, err := s.Sweep(ctx)
			if err != nil || (n == 1) != tt.cancel {
				t.Fatalf("Sweep = %d, %v; want the order cancelled: %v", n, err, tt.cancel)
			}
			o, err := st.Order(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]domain.Status{true: domain.StatusCancelling, false: domain.StatusPending}[tt.cancel]; o.Status != want {
				t.Fatalf("order is %s, want %s", o.Status, want)
			}
		})
	}
}

// age makes every order older by d, as the database's clock reads it.
func age(t *testing.T, db *sqlx.DB, d time.Duration) {
	t.Helper()
	if _, err := db.Exec(`UPDATE orders SET created_at = created_at - $1 * interval '1 microsecond'`, d.Microseconds()); err != nil {
		t.Fatal(err)
	}
}

// TestRunSweepsUntilStopped: Run sweeps on its own and returns nil when its
// context ends.
func TestRunSweepsUntilStopped(t *testing.T) {
	db := testenv.DB(t, order.Schema)
	id := ordertest.Pending(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- deadline.Sweeper{
			Store: store.New(db), Deadline: time.Millisecond, Every: 20 * time.Millisecond,
			Source: order.Name, Now: func() time.Time { return time.Now().Add(time.Hour) },
			Log: testenv.Logger(t),
		}.Run(ctx)
	}()
	testenv.Eventually(t, 10*time.Second, "the sweep cancels the order", func() bool {
		o, err := store.New(db).Order(context.Background(), id)
		return err == nil && o.Status == domain.StatusCancelling
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after the context ended", err)
	}
}

// timedOut reads choreo_orders_timed_out_total as /metrics serves it.
func timedOut(t *testing.T) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "choreo_orders_timed_out_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
