package participant

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// MaxBatch caps the events applied in one transaction. A bigger batch
// shares one commit among more events, but holds its row locks longer and,
// when a reaction fails permanently, has more to apply again without it;
// past a few dozen the commit is no longer what costs.
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

// BatchHandler returns the service's consumer handler: the events of one
// partition that are ready (a batch, of one on a quiet system) go through
// the chain alone, another service's event acknowledged there, and the
// routed ones into one transaction (transact); then the consumer marks the
// last offset. A permanent failure ends the batch: what came before it is
// committed, and it is returned to be dead-lettered, which parks its order,
// so the messages after it, handed over again, are parked behind it. A
// database error rolls the batch back to be retried; a deadlock makes it
// apply one event per transaction (applyOrSplit).
func (s Spec) BatchHandler(db *sqlx.DB, log *slog.Logger) consumer.BatchHandler {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	front, react := s.stages(log)
	return &batcher{spec: s, db: db, now: now, turn: make(chan struct{}, 1), front: front, react: react}
}

// stages returns the two halves of a delivery: front, the chain up to the
// transaction (see chain), and react, the reaction transact runs inside it.
func (s Spec) stages(log *slog.Logger) (front, react Handler) {
	routed := func(context.Context, *Delivery) error { return nil }
	var mw []Middleware
	for _, st := range s.chain(log) {
		mw = append(mw, st.mw)
	}
	return Chain(routed, mw...), Classify(React)
}

// step is a named step of the chain, so a test can hold the docs to it.
type step struct {
	name string
	mw   Middleware
}

// chain is every message's way to the transaction, in order.
func (s Spec) chain(log *slog.Logger) []step {
	return []step{
		{"Decode", Decode(log.With("consumer", s.Name))},
		{"Guard", Guard},
		{"Route", Route(s.Reactions)},
		{"DecodePayload", DecodePayload},
	}
}

type batcher struct {
	spec  Spec
	db    *sqlx.DB
	now   func() time.Time
	front Handler // up to the transaction
	react Handler // inside it
	// turn lets one batch transaction of this instance run at a time. A
	// batch holds every event's row locks until it commits, so batches of
	// other partitions running at once would wait on each other's hot
	// rows and deadlock whenever two take them in opposite orders (each
	// deadlock costing PostgreSQL's deadlock_timeout, 1s). Taking turns,
	// the batches queue instead, and grow while they wait, so the fsync
	// of each commit is shared by more events. Instances of one service
	// still run side by side; applyOrSplit resolves their rare conflicts.
	turn chan struct{}
}

// HandleBatch implements consumer.BatchHandler.
func (b *batcher) HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (failed *consumer.Failure, err error) {
	start := time.Now()
	all := make([]*delivery, 0, len(msgs))
	// Every delivery is timed and traced as when handled alone: its span
	// is the child of its message's context, its reaction runs in it.
	// Deliveries after a failure are not handled in this batch.
	defer func() {
		for _, d := range all {
			derr := err
			if d.failed != nil {
				derr = d.failed
			}
			if derr == nil && d.Outcome == "" {
				d.span.End() // handed over again: counted then
				continue
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
		err := b.front(d.ctx, d.Delivery)
		if consumer.IsPermanent(err) {
			if d.reaction.react != nil { // routed: its order parks
				err = park.ParksOrder(err)
			}
			d.failed = err
			failed = &consumer.Failure{Msg: m, Err: err}
			break
		}
		if err != nil {
			return nil, err
		}
		if d.Outcome == "" { // routed: not acknowledged yet
			todo = append(todo, d)
		}
	}
	if len(todo) > 0 {
		f, err := b.applyOrSplit(ctx, todo)
		if err != nil {
			return nil, err
		}
		if f != nil {
			failed = f // before front's failure, if any: todo ends there
		}
	}
	if failed != nil {
		// The batch ends at the failure: what follows it is handed over
		// again, and counted then.
		i := slices.IndexFunc(all, func(d *delivery) bool { return d.Msg == failed.Msg })
		for _, d := range all[i+1:] {
			d.Outcome, d.failed = "", nil
		}
	}
	batchSize.WithLabelValues(b.spec.Name).Observe(float64(len(msgs)))
	return failed, nil
}

// applyOrSplit applies ds in one transaction. If a reaction fails
// permanently, the deliveries before it are applied without it and the
// failure is returned: the batch ends there. If PostgreSQL aborted the
// transaction for a deadlock or a serialization failure, the events are
// applied again one transaction per event, in order: each reaction locks
// its rows in one global order (stock rows by SKU), but a batch holds every
// event's locks until it commits, so two instances' batches can take the
// same rows in opposite orders; one event cannot.
func (b *batcher) applyOrSplit(ctx context.Context, ds []*delivery) (*consumer.Failure, error) {
	err := b.inTurn(ctx, ds)
	var lo *leftOut
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &lo):
		lo.d.failed = lo.err
		if k := slices.Index(ds, lo.d); k > 0 {
			if f, err := b.applyOrSplit(ctx, ds[:k]); err != nil || f != nil {
				return f, err // an earlier event fails now: the batch ends there
			}
		}
		return &consumer.Failure{Msg: lo.d.Msg, Err: park.ParksOrder(lo.err)}, nil
	case len(ds) > 1 && pg.LockConflict(err):
		batchSplits.WithLabelValues(b.spec.Name).Inc()
		ds[0].Log.Warn("batch aborted by a lock conflict; applying its events one per transaction", "events", len(ds), "err", err)
		for _, d := range ds {
			if f, err := b.applyOrSplit(ctx, []*delivery{d}); err != nil || f != nil {
				return f, err
			}
		}
		return nil, nil
	default:
		return nil, err
	}
}

// inTurn runs transact once this instance's other batch transaction, if
// any, has committed (see batcher.turn).
func (b *batcher) inTurn(ctx context.Context, ds []*delivery) error {
	select {
	case b.turn <- struct{}{}:
		defer func() { <-b.turn }()
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.transact(ctx, ds)
}
