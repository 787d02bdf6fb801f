// Package saga is the order service's part in the order saga: it starts a
// saga with OrderCreated, and records how the saga ended — COMPLETED when
// the shipment is scheduled, CANCELLED with a reason when payment was
// declined or the last compensation (the refund) is done. Each reaction runs
// in one transaction with the processed_events marker (package idem).
package saga

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Service is the name the order service uses as event source and
// de-duplication scope.
const Service = "order"

// Topics are the topics the order service consumes.
var Topics = []string{events.TopicPayment, events.TopicShipping}

// Started returns the OrderCreated event that starts o's saga, to be stored
// in the outbox with o (store.Store.Create).
func Started(o domain.Order, now time.Time) (events.Envelope, error) {
	return events.New(Service, o.ID, o.Created(), now)
}

// Routes returns the order service's reactions, by event type. They emit
// nothing: the order service only records the saga's outcome.
// PaymentCompleted, ShipmentFailed and the inventory events have no route;
// they are steps the order does not track.
func Routes(log *slog.Logger) map[string]idem.Route {
	return map[string]idem.Route{
		events.TypeShipmentScheduled: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.ShipmentScheduled
			if err := e.Decode(&p); err != nil {
				return err
			}
			return apply(ctx, tx, log, e, domain.Event{Type: e.Type})
		},
		events.TypePaymentDeclined: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.PaymentDeclined
			if err := e.Decode(&p); err != nil {
				return err
			}
			return apply(ctx, tx, log, e, domain.Event{Type: e.Type})
		},
		events.TypePaymentRefunded: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.PaymentRefunded
			if err := e.Decode(&p); err != nil {
				return err
			}
			return apply(ctx, tx, log, e, domain.Event{Type: e.Type, Reason: p.Reason})
		},
	}
}

// apply moves the order of e as domain.Transition decides, with the order
// row locked so that concurrent events about one order cannot both decide
// from the same status.
func apply(ctx context.Context, tx *sqlx.Tx, log *slog.Logger, e events.Envelope, ev domain.Event) error {
	log = log.With("order_id", e.OrderID, "event_id", e.ID, "event_type", e.Type)
	o, err := store.LockOrder(ctx, tx, e.OrderID)
	if err != nil {
		return err
	}
	if o == nil {
		// Every saga starts from an order this service committed, so an
		// unknown id is not a race that a retry could win: it is someone
		// else's event. Acknowledge it rather than block the partition.
		log.Warn("event for unknown order ignored")
		return nil
	}
	next, reason, changed := domain.Transition(o.Status, ev)
	if !changed {
		log.Info("order is final; event changes nothing", "status", o.Status)
		return nil
	}
	if err := store.SetStatus(ctx, tx, o.ID, next, reason); err != nil {
		return err
	}
	log.Info("order status changed", "from", o.Status, "to", next, "cancel_reason", reason)
	return nil
}
