// Package saga is the inventory service's part in the order saga: it
// reserves a paid order's items, and releases them when shipping fails.
// Each reaction runs in one transaction with the processed_events marker
// (package idem) and the events it emits (package outbox).
package saga

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// Service is the name the inventory service uses as event source and
// de-duplication scope.
const Service = "inventory"

// Topics are the topics the inventory service consumes.
var Topics = []string{events.TopicPayment, events.TopicShipping}

// Routes returns the inventory service's reactions, by event type.
func Routes(now func() time.Time) map[string]idem.Route {
	return map[string]idem.Route{
		events.TypePaymentCompleted: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.PaymentCompleted
			if err := e.Decode(&p); err != nil {
				return err
			}
			return reserve(ctx, tx, e.OrderID, p, now())
		},
		events.TypeShipmentFailed: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.ShipmentFailed
			if err := e.Decode(&p); err != nil {
				return err
			}
			return release(ctx, tx, e.OrderID, p.Reason, now())
		},
	}
}

func reserve(ctx context.Context, tx *sqlx.Tx, orderID string, p events.PaymentCompleted, now time.Time) error {
	// The reservation row first, then stock rows in SKU order: every
	// reaction locks in this order, so concurrent orders queue rather than
	// deadlock, and two reactions to one order run one after the other.
	existing, err := store.LockReservation(ctx, tx, orderID)
	if err != nil {
		return err
	}
	skus := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		skus = append(skus, it.SKU)
	}
	stock, err := store.LockStock(ctx, tx, skus)
	if err != nil {
		return err
	}
	d := domain.DecideReserve(existing, stock, p.Items)
	r := domain.Reservation{OrderID: orderID, Items: p.Items}
	switch d.Action {
	case domain.ReserveSkip:
		return nil
	case domain.Reject:
		r.Status = domain.StatusRejected
		if err := store.InsertReservation(ctx, tx, r, shortageDetail(d.Shortages)); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.InventoryRejected{Reason: events.ReasonOutOfStock, Shortages: d.Shortages}, now)
	case domain.ReserveAll:
		r.Status = domain.StatusReserved
		if err := store.Reserve(ctx, tx, d.Needed); err != nil {
			return err
		}
		if err := store.InsertReservation(ctx, tx, r, ""); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.InventoryReserved{Items: p.Items, ShippingAddress: p.ShippingAddress}, now)
	}
	return fmt.Errorf("reserve %s: unhandled decision %v", orderID, d.Action)
}

func release(ctx context.Context, tx *sqlx.Tx, orderID, reason string, now time.Time) error {
	existing, err := store.LockReservation(ctx, tx, orderID)
	if err != nil {
		return err
	}
	switch domain.DecideRelease(existing) {
	case domain.ReleaseSkip:
		return nil
	case domain.ReleaseTombstone:
		// Nothing was reserved; the row makes a late reserve a no-op.
		tomb := domain.Reservation{OrderID: orderID, Status: domain.StatusReleased}
		if err := store.InsertReservation(ctx, tx, tomb, "release arrived before reserve: "+reason); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.InventoryReleased{Reason: reason}, now)
	case domain.ReleaseReturn:
		if err := store.Release(ctx, tx, domain.Quantities(existing.Items)); err != nil {
			return err
		}
		if err := store.SetReservationStatus(ctx, tx, orderID, domain.StatusReleased, reason); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.InventoryReleased{Items: existing.Items, Reason: reason}, now)
	}
	return fmt.Errorf("release %s: unhandled decision", orderID)
}

// shortageDetail lists the shortages, already sorted by SKU, for the
// reservation's detail column, e.g. "out of stock: sku-1 requested 3
// available 1".
func shortageDetail(shortages []events.Shortage) string {
	parts := make([]string, len(shortages))
	for i, s := range shortages {
		parts[i] = fmt.Sprintf("%s requested %d available %d", s.SKU, s.Requested, s.Available)
	}
	return "out of stock: " + strings.Join(parts, "; ")
}

func emit(ctx context.Context, tx *sqlx.Tx, orderID string, p events.Payload, now time.Time) error {
	e, err := events.New(Service, orderID, p, now)
	if err != nil {
		return err
	}
	return outbox.AddEvent(ctx, tx, events.TopicInventory, e)
}
