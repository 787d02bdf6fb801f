// Package saga is the shipping service's part in the order saga: once an
// order's items are reserved it schedules the shipment, or fails it when the
// destination is not served, which starts the compensations. Each reaction
// runs in one transaction with the processed_events marker (package idem)
// and the event it emits (package outbox).
package saga

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// Service is the name the shipping service uses as event source and
// de-duplication scope.
const Service = "shipping"

// Topics are the topics the shipping service consumes.
var Topics = []string{events.TopicInventory}

// Routes returns the shipping service's reactions, by event type. served
// holds the upper-case country codes the service delivers to. The other
// inventory events (rejected, released) have no route: they concern payment,
// and idem.Handler acknowledges them without effect.
func Routes(now func() time.Time, served map[string]bool) map[string]idem.Route {
	return map[string]idem.Route{
		events.TypeInventoryReserved: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.InventoryReserved
			if err := e.Decode(&p); err != nil {
				return err
			}
			return ship(ctx, tx, e.OrderID, p.ShippingAddress.Country, served, now())
		},
	}
}

func ship(ctx context.Context, tx *sqlx.Tx, orderID, country string, served map[string]bool, now time.Time) error {
	existing, err := store.LockShipment(ctx, tx, orderID)
	if err != nil {
		return err
	}
	d := domain.DecideShipment(existing, served, country)
	sh := domain.Shipment{OrderID: orderID, Country: d.Country, Reason: d.Reason}
	switch d.Action {
	case domain.Skip:
		return nil
	case domain.Schedule:
		sh.Status = domain.StatusScheduled
		if err := store.InsertShipment(ctx, tx, sh); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.ShipmentScheduled{Country: d.Country}, now)
	case domain.Fail:
		sh.Status = domain.StatusFailed
		if err := store.InsertShipment(ctx, tx, sh); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.ShipmentFailed{Country: d.Country, Reason: d.Reason}, now)
	}
	return fmt.Errorf("ship %s: unhandled decision %v", orderID, d.Action)
}

func emit(ctx context.Context, tx *sqlx.Tx, orderID string, p events.Payload, now time.Time) error {
	e, err := events.New(Service, orderID, p, now)
	if err != nil {
		return err
	}
	return outbox.AddEvent(ctx, tx, events.TopicShipping, e)
}
