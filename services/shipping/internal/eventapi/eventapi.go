// Package eventapi is the shipping service's reactions to the events it
// consumes: it schedules an order's shipment once its items are reserved,
// or fails it when the country is not served, and cancels it with the
// order.
package eventapi

import (
	"context"
	"fmt"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// Reactions returns the shipping service's reactions. served holds the
// upper-case country codes it delivers to. The other inventory events
// (rejected, released) concern payment; the runtime acknowledges them.
func Reactions(served map[string]bool) []participant.Reaction {
	return []participant.Reaction{
		participant.On(ship(served)),
		participant.On(cancel),
	}
}

// cancel undoes the order's shipment, whatever the saga's step, and
// acknowledges with ShipmentCancelled in the same transaction. The order
// accepted the cancel before anything here could complete it, so a
// SCHEDULED shipment is cancelled: the cancel wins.
func cancel(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.OrderCancelRequested) error {
	existing, err := store.LockShipment(ctx, tx, e.OrderID)
	if err != nil {
		return err
	}
	switch d := domain.DecideCancel(existing); d {
	case domain.CancelSkip:
		tx.Log.Info("order cancel already handled")
		return nil
	case domain.CancelTombstone:
		// Nothing decided yet; the row makes the late reservation a no-op.
		tomb := domain.Shipment{OrderID: e.OrderID, Status: domain.StatusCancelled, Reason: p.Reason, Cancelled: true}
		if err := store.InsertShipment(ctx, tx, tomb); err != nil {
			return err
		}
		return tx.Emit(ctx, events.ShipmentCancelled{})
	case domain.CancelScheduled, domain.CancelAcknowledge:
		if err := store.CancelShipment(ctx, tx, e.OrderID, p.Reason); err != nil {
			return err
		}
		return tx.Emit(ctx, events.ShipmentCancelled{WasScheduled: d == domain.CancelScheduled})
	}
	return fmt.Errorf("cancel %s: unhandled decision", e.OrderID)
}

// ship returns the reaction that schedules an order's shipment when its
// items are reserved, or fails it when served does not hold the country.
// It decides first as if the order had no shipment — the common case — and
// records that only if it has none (store.InsertShipmentIfNone: one
// statement, the primary key deciding as the lock would). An order that has
// one is locked and decided on as it is.
func ship(served map[string]bool) func(context.Context, *participant.Tx, events.Envelope, events.InventoryReserved) error {
	return func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReserved) error {
		country := p.ShippingAddress.Country
		if d := domain.DecideShipment(nil, served, country); d.Action != domain.Skip {
			sh, emit, err := shipment(e.OrderID, d)
			if err != nil {
				return err
			}
			inserted, err := store.InsertShipmentIfNone(ctx, tx, sh)
			if err != nil {
				return err
			}
			if inserted {
				return tx.Emit(ctx, emit)
			}
		}
		existing, err := store.LockShipment(ctx, tx, e.OrderID)
		if err != nil {
			return err
		}
		d := domain.DecideShipment(existing, served, country)
		if d.Action == domain.Skip {
			return nil
		}
		// Gone since the insert conflicted: only a hand-made delete gets here.
		sh, emit, err := shipment(e.OrderID, d)
		if err != nil {
			return err
		}
		if err := store.InsertShipment(ctx, tx, sh); err != nil {
			return err
		}
		return tx.Emit(ctx, emit)
	}
}

// shipment is the record and the event of decision d about the order.
func shipment(orderID string, d domain.Decision) (domain.Shipment, events.Payload, error) {
	sh := domain.Shipment{OrderID: orderID, Country: d.Country, Reason: d.Reason}
	switch d.Action {
	case domain.Schedule:
		sh.Status = domain.StatusScheduled
		return sh, events.ShipmentScheduled{Country: d.Country}, nil
	case domain.Fail:
		sh.Status = domain.StatusFailed
		return sh, events.ShipmentFailed{Country: d.Country, Reason: d.Reason}, nil
	}
	return sh, nil, fmt.Errorf("ship %s: unhandled decision %v", orderID, d.Action)
}
