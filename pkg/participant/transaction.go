package participant

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// transact is the consumer's transaction. For the routed deliveries of one
// partition, in offset order, it begins one database transaction, applies
// them (parkBehind → mark → react → outbox, see apply) and commits: all of
// it, or none of it.
//
// The consumer marks the offset only after transact returned nil, so a
// crash before the commit redelivers the events and one after it makes
// the redelivery a duplicate. A batch of one event is a batch.
func (b *batcher) transact(ctx context.Context, ds []*delivery) error {
	ctx, cancel := context.WithTimeout(ctx, TxTimeout)
	defer cancel()
	sqlTx, err := b.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback() //nolint:errcheck // a no-op after Commit

	if err := b.spec.apply(ctx, sqlTx, ds, b.now(), b.react); err != nil {
		return err
	}

	// 5. commit
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	failpoint.Hit(failpoint.AfterCommit) // the chaos suite's crash before the offset mark
	return nil
}

// apply is the only place the steps of applying an event are written; the
// consumer (transact) and the operator's replay both run it inside their
// transaction. A reaction that fails permanently is returned as a
// *leftOut, and the caller rolls everything back.
func (s Spec) apply(ctx context.Context, tx *sqlx.Tx, ds []*delivery, at time.Time, react Handler) error {
	for _, d := range ds {
		d.Outcome, d.Tx = "", nil // from an earlier attempt, rolled back
	}

	// 1. parkBehind
	// The events of a parked order are parked behind it, not applied. A
	// replay is how an operator resolves the order: it is not parked.
	var consumed []*Delivery
	for _, d := range ds {
		if !d.replay {
			consumed = append(consumed, d.Delivery)
		}
	}
	if _, err := parkBehind(ctx, tx, s.Name, consumed); err != nil {
		return err
	}
	ds = slices.DeleteFunc(slices.Clone(ds), func(d *delivery) bool { return d.Outcome != "" })

	// 2. mark
	// Each event's id goes into processed_events, where the primary key
	// decides: a duplicate stops here and changes nothing.
	ids := make([]string, len(ds))
	origins := make([]idem.Origin, len(ds))
	for i, d := range ds {
		ids[i], origins[i] = d.Event.ID, origin(d.Msg)
	}
	first, err := idem.MarkAll(ctx, tx, s.Name, ids, origins)
	if err != nil {
		return err
	}

	// 3. react
	// Each first-seen event's reaction changes the service's tables and
	// queues the events it emits.
	var emitted outbox.Pending
	for _, d := range ds {
		if !first[d.Event.ID] {
			d.Log.Info("duplicate event skipped")
			d.Outcome = "duplicate"
			continue
		}
		delete(first, d.Event.ID) // a second copy in this batch is a duplicate
		d.Tx = &Tx{ExtContext: tx, Log: d.Log, source: s.Name, produces: s.Produces, orderID: d.Event.OrderID, now: at, outbox: &emitted}
		// What the reaction emits carries the delivery's trace.
		if err := react(trace.ContextWithSpan(ctx, d.span), d.Delivery); err != nil {
			if consumer.IsPermanent(err) {
				return &leftOut{d: d, err: err}
			}
			return err
		}
	}

	// 4. outbox
	// What the reactions emitted goes into the outbox, in one statement.
	return emitted.Insert(ctx, tx)
}

// TxTimeout bounds one delivery's transaction: past it, the context ends,
// database/sql rolls the transaction back and the message is retried. A
// process that freezes mid-transaction cannot honour it; the server ends
// that session instead (pg.SessionDefaults).
const TxTimeout = 30 * time.Second

// origin is where m was read, as a processed_events mark keeps it.
func origin(m *sarama.ConsumerMessage) idem.Origin {
	return idem.Origin{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
}

// delivery is a Delivery of a batch with its own span and context.
type delivery struct {
	*Delivery
	ctx    context.Context
	span   trace.Span
	failed error // permanent: left out of the batch, to be dead-lettered
	replay bool  // an operator's replay of a parked row: not parked behind
}

// leftOut is the error apply returns when a reaction failed permanently:
// the delivery that failed, and why.
type leftOut struct {
	d   *delivery
	err error
}

func (e *leftOut) Error() string { return e.err.Error() }
func (e *leftOut) Unwrap() error { return e.err }
