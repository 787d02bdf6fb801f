package deadline_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/deadline"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestSweepCancelsOrdersPastTheDeadline moves an injected clock: orders are
// left alone until the deadline has passed, then every PENDING one is
// cancelled with reason timeout — over several batches — and counted.
func TestSweepCancelsOrdersPastTheDeadline(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, order.Schema)
	st := store.New(db)
	var ids []string
	for range 5 {
		ids = append(ids, ordertest.Pending(t, db))
	}
	now := time.Now()
	s := deadline.Sweeper{
		Store: st, Deadline: time.Minute, Every: time.Second, Batch: 2,
		Source: order.Name, Now: func() time.Time { return now },
		Log: testenv.Logger(t),
	}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep before the deadline = %d, %v; want 0", n, err)
	}
	before := timedOut(t)
	now = now.Add(time.Minute + time.Second)
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
