// Package eventapi is the order service's reactions to the events it
// consumes: they record how an order's saga ended, COMPLETED or CANCELLED
// with a reason, and publish that end.
package eventapi

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Reactions returns the order service's reactions. PaymentCompleted,
// ShipmentFailed and the inventory events have none: they are steps the
// order does not track, and the runtime acknowledges them.
func Reactions() []participant.Reaction {
	return []participant.Reaction{
		participant.On(transition[events.ShipmentScheduled]),
		participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.PaymentDeclined) error {
			return apply(ctx, tx, e.OrderID, domain.Event{Type: e.Type, Reason: p.Detail})
		}),
		participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.PaymentRefunded) error {
			return apply(ctx, tx, e.OrderID, domain.Event{Type: e.Type, Reason: p.Reason})
		}),
		// The acknowledgements of a cancel: each says one participant's
		// effect is undone for good.
		participant.On(transition[events.PaymentCancelled]),
		participant.On(transition[events.InventoryCancelled]),
		participant.On(transition[events.ShipmentCancelled]),
	}
}

// transition applies an event whose type alone moves the order: nothing
// in its payload is kept.
func transition[P events.Payload](ctx context.Context, tx *participant.Tx, e events.Envelope, _ P) error {
	return apply(ctx, tx, e.OrderID, domain.Event{Type: e.Type})
}

// apply moves the order as domain.Transition decides, from a state that
// concurrent events about one order cannot both decide from: the order
// row is locked, or compared and set in one statement.
//
// Most events end a saga still PENDING, so the transition from PENDING is
// tried first, as one statement that writes only if the order is still in
// that state (store.SetStateIf); an order in another state is locked and
// decided on as it is. Either way the decision is domain.Transition's.
func apply(ctx context.Context, tx *participant.Tx, orderID string, ev domain.Event) error {
	pending := domain.State{Status: domain.StatusPending}
	if next, changed := domain.Transition(pending, ev); changed {
		set, err := store.SetStateIf(ctx, tx, orderID, pending, next, tx.Now())
		if err != nil {
			return err
		}
		if set {
			return announce(ctx, tx, pending, next)
		}
	}
	o, err := store.LockOrder(ctx, tx, orderID)
	if err != nil {
		return err
	}
	if o == nil {
		// Every saga starts from an order this service committed, so an
		// unknown id is not a race that a retry could win: it is someone
		// else's event. Acknowledge it rather than block the partition.
		tx.Log.Warn("event for unknown order ignored")
		return nil
	}
	next, changed := domain.Transition(o.State(), ev)
	if !changed {
		tx.Log.Info("event changes nothing", "status", o.Status)
		return nil
	}
	if err := store.SetState(ctx, tx, o.ID, next, tx.Now()); err != nil {
		return err
	}
	return announce(ctx, tx, o.State(), next)
}

// announce announces the order's move from prev to next, written in tx.
func announce(ctx context.Context, tx *participant.Tx, prev, next domain.State) error {
	if next.Status == prev.Status {
		tx.Log.Info("cancel acknowledged", "status", prev.Status, "acks", next.Acks)
		return nil
	}
	// The end of the saga is published with the change that makes it so,
	// for whoever watches sagas end (the tracker); no participant needs it.
	if err := tx.Emit(ctx, domain.Ended(next.Status, next.Reason)); err != nil {
		return err
	}
	// DEBUG, as "event applied" is: one line per saga at INFO would bury
	// the exceptions under load.
	tx.Log.Debug("order status changed", "from", prev.Status, "to", next.Status, "cancel_reason", next.Reason)
	return nil
}
