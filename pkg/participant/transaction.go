package participant

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// transact is the consumer's transaction, and the only place its steps are
// written. For the routed deliveries of one partition, in offset order, in
// one database transaction:
//
//  1. hold: the events of a parked order are kept aside, not applied;
//  2. mark: each event's id goes into processed_events, where the primary
//     key decides: a duplicate stops here and changes nothing;
//  3. react: each first-seen event's reaction changes the service's tables;
//  4. outbox: the events the reactions emitted are inserted into the outbox;
//  5. commit: all of it, or none of it.
//
// The consumer marks the offset only after transact returned nil, so a
// crash before the commit redelivers the events and one after it makes
// the redelivery a duplicate. A batch of one event is a batch. A reaction
// that fails permanently is returned as a *leftOut and everything is
// rolled back; applyOrSplit then applies the events before it again.
func (b *batcher) transact(ctx context.Context, ds []*delivery) error {
	ctx, cancel := context.WithTimeout(ctx, TxTimeout)
	defer cancel()
	sqlTx, err := b.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, d := range ds {
		d.Outcome, d.Tx = "", nil // from an earlier attempt, rolled back
	}

	// 1. hold
	plain := make([]*Delivery, len(ds))
	for i, d := range ds {
		plain[i] = d.Delivery
	}
	if _, err := hold(ctx, sqlTx, b.spec.Name, plain); err != nil {
		return err
	}
	ds = slices.DeleteFunc(slices.Clone(ds), func(d *delivery) bool { return d.Outcome != "" })

	// 2. mark
	ids := make([]string, len(ds))
	origins := make([]idem.Origin, len(ds))
	for i, d := range ds {
		ids[i], origins[i] = d.Event.ID, origin(d.Msg)
	}
	first, err := idem.MarkAll(ctx, sqlTx, b.spec.Name, ids, origins)
	if err != nil {
		return err
	}

	// 3. react
	at := b.now()
	var emitted outbox.Pending
	for _, d := range ds {
		if !first[d.Event.ID] {
			d.Log.Info("duplicate event skipped")
			d.Outcome = "duplicate"
			continue
		}
		delete(first, d.Event.ID) // a second copy in this batch is a duplicate
		d.Tx = &Tx{ExtContext: sqlTx, Log: d.Log, source: b.spec.Name, produces: b.spec.Produces, orderID: d.Event.OrderID, now: at, outbox: &emitted}
		// What the reaction emits carries the delivery's trace.
		if err := b.react(trace.ContextWithSpan(ctx, d.span), d.Delivery); err != nil {
			if consumer.IsPermanent(err) {
				return &leftOut{d: d, err: err}
			}
			return err
		}
	}

	// 4. outbox
	if err := emitted.Flush(ctx, sqlTx); err != nil {
		return err
	}
	// 5. commit
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	failpoint.Hit(failpoint.AfterCommit) // the chaos suite's crash before the offset mark
	return nil
}
