// Package deadline is the order service's saga deadline: a sweep that
// cancels every order still PENDING a deadline after it was created,
// exactly as a customer's cancel would, with reason timeout.
package deadline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/tick"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// timedOut counts the orders the sweep cancelled. A rise means sagas stall
// somewhere; the services' retries, dead letters and parked outbox rows
// say where.
var timedOut = promauto.NewCounter(prometheus.CounterOpts{
	Name: "choreo_orders_timed_out_total",
	Help: "Orders cancelled with reason timeout because their saga outlived ORDER_DEADLINE.",
})

// Sweeper cancels the orders whose saga outlived Deadline, so that a saga
// stuck behind a service that is down, a parked event or a dead letter
// ends instead of holding the customer's money and stock for ever; the
// steps that arrive afterwards find the participants' tombstones. Every
// instance sweeps: the sweep locks the orders it cancels with FOR UPDATE
// SKIP LOCKED, under the same row lock as every other change of the order,
// so a deadline never overrides an order that ended meanwhile.
type Sweeper struct {
	Store *store.Store
	// Deadline is how long an order may stay PENDING.
	Deadline time.Duration
	// Every is the pause between sweeps.
	Every time.Duration
	// Batch bounds the orders one transaction cancels; a sweep runs
	// batches until one comes back short. 0 means 100.
	Batch int
	// Source names the service in the events the sweep emits.
	Source string
	// Now stamps the cancel requests; nil means time.Now. The deadline is
	// measured on the database's clock, which stamped created_at.
	Now func() time.Time
	Log *slog.Logger
}

// Run sweeps every s.Every until ctx ends, then returns nil. A failed sweep
// is logged and tried again at the next tick: the database may be away for
// a moment, and nothing is lost by waiting.
func (s Sweeper) Run(ctx context.Context) error {
	if s.Every <= 0 || s.Deadline <= 0 {
		return fmt.Errorf("deadline: Every %s and Deadline %s must be positive", s.Every, s.Deadline)
	}
	return tick.Every(ctx, s.Every, func(ctx context.Context) {
		if _, err := s.Sweep(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log().Error("deadline sweep failed", "err", err)
		}
	})
}

// Sweep cancels, with reason timeout, every order PENDING for longer than
// Deadline by the database's clock, a batch per transaction, and returns
// how many it cancelled.
func (s Sweeper) Sweep(ctx context.Context) (int, error) {
	batch := s.Batch
	if batch <= 0 {
		batch = 100
	}
	total := 0
	for {
		ids, err := s.Store.TimeOut(ctx, s.Deadline, batch, s.Source, s.now())
		if err != nil {
			return total, fmt.Errorf("deadline sweep: %w", err)
		}
		for _, id := range ids {
			s.log().Info("order timed out; cancel requested", "order_id", id, "deadline", s.Deadline.String())
		}
		timedOut.Add(float64(len(ids)))
		total += len(ids)
		if len(ids) < batch {
			return total, nil
		}
	}
}

func (s Sweeper) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s Sweeper) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}
