package participant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/idem"
)

// MaxBatch caps the events applied in one transaction. Each event runs
// under a savepoint, which is a subtransaction once it writes; PostgreSQL
// keeps 64 of them per transaction in shared memory
// (PGPROC_MAX_CACHED_SUBXIDS) and past that every other session's
// visibility checks slow down, so batches stay well below.
const MaxBatch = 48

// batchSplits counts batches that a lock conflict made apply one event per
// transaction (see applyOrSplit); a steady rate means hot rows shared
// across partitions, where smaller batches may serve better.
var batchSplits = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "choreo_consumer_batch_splits_total",
	Help: "Batches aborted by a deadlock or serialization failure and applied again one event per transaction, by service.",
}, []string{"service"})

// batchSize shows how full batches are: near 1 on a quiet system, near
// the cap when the consumer has a backlog.
var batchSize = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "choreo_consumer_batch_size",
	Help:    "Events handled per batch (one transaction), by service.",
	Buckets: []float64{1, 2, 4, 8, 16, 32, 48},
}, []string{"service"})

// BatchHandler returns the service's handler for batches: the events of
// one partition that are ready, applied in one transaction — the same
// chain as Handler, split at the transaction:
//
//  1. each message goes through Decode, Guard, Route and DecodePayload
//     alone; a message they refuse is a failure to dead-letter, another
//     service's event is acknowledged;
//  2. one transaction marks the routed events processed with one
//     statement (idem.MarkAll: the primary key still decides), skips the
//     duplicates, and runs each first-seen event's reaction, in offset
//     order, under a savepoint: a reaction that fails permanently is
//     rolled back to its savepoint and unmarked — only that event is
//     dead-lettered — while one that fails otherwise (a deadlock, the
//     database away) rolls the whole batch back to be retried;
//  3. one commit, after which the consumer dead-letters the failures and
//     marks the last offset.
//
// Per-order ordering holds: a batch is one partition's messages in order,
// and two events of one order in a batch apply one after the other, the
// second seeing the first's changes.
func (s Spec) BatchHandler(db *sqlx.DB, log *slog.Logger) consumer.BatchHandler {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	routed := func(context.Context, *Delivery) error { return nil }
	return &batcher{
		spec: s, db: db, now: now,
		front: Chain(routed, Decode(log.With("consumer", s.Name)), Guard, Route(s.Reactions), DecodePayload),
		react: Classify(React),
	}
}

type batcher struct {
	spec  Spec
	db    *sqlx.DB
	now   func() time.Time
	front Handler // up to the transaction
	react Handler // inside it
}

// HandleBatch implements consumer.BatchHandler.
func (b *batcher) HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (failed []consumer.Failure, err error) {
	start := time.Now()
	all := make([]*delivery, 0, len(msgs))
	// Every delivery is timed and traced as when handled alone: its span
	// is the child of its message's context, its reaction runs in it.
	defer func() {
		for _, d := range all {
			derr := err
			if d.failed != nil {
				derr = d.failed
			}
			record(b.spec.Name, d.Delivery, derr, time.Since(start))
			endSpan(d.span, d.Delivery, derr)
		}
	}()
	var todo []*delivery
	for _, m := range msgs {
		d := &delivery{Delivery: &Delivery{Msg: m}}
		d.ctx, d.span = startSpan(ctx, b.spec.Name, m)
		all = append(all, d)
		switch err := b.front(d.ctx, d.Delivery); {
		case consumer.IsPermanent(err):
			d.failed = err
			failed = append(failed, consumer.Failure{Msg: m, Err: err})
		case err != nil:
			return nil, err
		case d.Outcome == "": // routed: not acknowledged yet
			todo = append(todo, d)
		}
	}
	if len(todo) > 0 {
		left, err := b.applyOrSplit(ctx, todo)
		if err != nil {
			return nil, err
		}
		failed = append(failed, left...)
	}
	batchSize.WithLabelValues(b.spec.Name).Observe(float64(len(msgs)))
	return failed, nil
}

// delivery is a Delivery of a batch with its own span and context.
type delivery struct {
	*Delivery
	ctx    context.Context
	span   trace.Span
	failed error // permanent: left out of the batch, to be dead-lettered
}

// applyOrSplit applies ds in one transaction; if PostgreSQL aborted it for
// a deadlock or a serialization failure, it applies them again one
// transaction per event, in order. Each reaction locks its own rows in one
// global order (e.g. stock rows by SKU), but a batch holds every event's
// locks until it commits, so two batches on other partitions can take the
// same rows in opposite orders; one event per transaction cannot, so the
// retry makes progress instead of deadlocking again.
func (b *batcher) applyOrSplit(ctx context.Context, ds []*delivery) ([]consumer.Failure, error) {
	failed, err := b.apply(ctx, ds)
	if err == nil || len(ds) == 1 || !lockConflict(err) {
		return failed, err
	}
	batchSplits.WithLabelValues(b.spec.Name).Inc()
	ds[0].Log.Warn("batch aborted by a lock conflict; applying its events one per transaction", "events", len(ds), "err", err)
	failed = nil
	for _, d := range ds {
		d.Outcome, d.failed, d.Tx = "", nil, nil
		left, err := b.apply(ctx, []*delivery{d})
		if err != nil {
			return nil, err
		}
		failed = append(failed, left...)
	}
	return failed, nil
}

// lockConflict reports whether err is PostgreSQL's deadlock (40P01) or
// serialization failure (40001).
func lockConflict(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && (pqErr.Code == "40P01" || pqErr.Code == "40001")
}

// apply runs the routed deliveries in one transaction (step 2 above) and
// returns those whose reaction failed permanently.
func (b *batcher) apply(ctx context.Context, ds []*delivery) ([]consumer.Failure, error) {
	ctx, cancel := context.WithTimeout(ctx, TxTimeout)
	defer cancel()
	sqlTx, err := b.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback() //nolint:errcheck // a no-op after Commit

	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.Event.ID
	}
	first, err := idem.MarkAll(ctx, sqlTx, b.spec.Name, ids)
	if err != nil {
		return nil, err
	}
	var failed []consumer.Failure
	at := b.now()
	for _, d := range ds {
		if !first[d.Event.ID] {
			d.Log.Info("duplicate event skipped")
			d.Outcome = "duplicate"
			continue
		}
		delete(first, d.Event.ID) // a second copy in this batch is a duplicate
		if _, err := sqlTx.ExecContext(ctx, `SAVEPOINT delivery`); err != nil {
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		d.Tx = &Tx{ExtContext: sqlTx, Log: d.Log, source: b.spec.Name, produces: b.spec.Produces, orderID: d.Event.OrderID, now: at}
		// The transaction's deadline, the delivery's span: what the
		// reaction emits carries its trace.
		err := b.react(trace.ContextWithSpan(ctx, d.span), d.Delivery)
		switch {
		case err == nil:
			_, err = sqlTx.ExecContext(ctx, `RELEASE SAVEPOINT delivery`)
		case consumer.IsPermanent(err):
			d.failed = err
			failed = append(failed, consumer.Failure{Msg: d.Msg, Err: err})
			err = b.leaveOut(ctx, sqlTx, d.Delivery)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	failpoint.Hit(failpoint.AfterCommit) // the chaos suite's crash before the offset mark
	return failed, nil
}

// leaveOut undoes a permanently failed reaction's changes and its mark,
// keeping the rest of the batch.
func (b *batcher) leaveOut(ctx context.Context, tx *sqlx.Tx, d *Delivery) error {
	for _, q := range []string{`ROLLBACK TO SAVEPOINT delivery`, `RELEASE SAVEPOINT delivery`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	d.Outcome = ""
	return idem.Unmark(ctx, tx, b.spec.Name, d.Event.ID)
}
