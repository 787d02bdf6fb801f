package shipping_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// TestConformance runs the runtime's guarantees against the shipping
// service: a reservation to a served country schedules the shipment, one to
// another country fails it; the order's cancel cancels a scheduled
// shipment, or leaves a tombstone when it comes first.
func TestConformance(t *testing.T) {
	testenv.Conformance(t, shipping.Spec, shipping.DefaultConfig(), shipment, []participanttest.Case{
		{Name: "ReservedForServedCountrySchedules", Setup: reserved("jp"), Emits: []string{events.TypeShipmentScheduled}},
		{Name: "ReservedForUnservedCountryFails", Setup: reserved("BR"), Emits: []string{events.TypeShipmentFailed}},
		{Name: "OrderCancelRequestedCancelsTheScheduledShipment", Setup: scheduledThenCancelled, Emits: []string{events.TypeShipmentCancelled}},
		{Name: "OrderCancelRequestedBeforeReservationLeavesTombstone", Setup: cancelled, Emits: []string{events.TypeShipmentCancelled}},
	})
}

// reserved returns a Setup delivering InventoryReserved for a fresh order
// bound for country; the shipping service needs nothing else in place.
func reserved(country string) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, _ *sqlx.DB) events.Envelope {
		return testenv.Event(t, uuid.NewString(), events.InventoryReserved{
			Items:           []events.Item{{SKU: "sku-1", Quantity: 2, UnitPrice: 1500}},
			ShippingAddress: events.Address{Country: country, PostalCode: "100-0001"},
		})
	}
}

// scheduledThenCancelled records a fresh order's shipment SCHEDULED, as
// InventoryReserved would, and returns the order's cancel request.
func scheduledThenCancelled(t *testing.T, db *sqlx.DB) events.Envelope {
	orderID := uuid.NewString()
	sh := domain.Shipment{OrderID: orderID, Status: domain.StatusScheduled, Country: "JP"}
	if err := store.InsertShipment(context.Background(), db, sh); err != nil {
		t.Fatal(err)
	}
	return testenv.CancelRequested(t, orderID)
}

// cancelled returns the cancel request of an order shipping has not heard
// of: it overtakes the reservation.
func cancelled(t *testing.T, _ *sqlx.DB) events.Envelope {
	return testenv.Event(t, uuid.NewString(), events.OrderCancelRequested{Reason: events.ReasonTimeout})
}

// shipment is the order's shipment without its id, or the zero Shipment.
func shipment(t *testing.T, db *sqlx.DB, e events.Envelope) any {
	t.Helper()
	sh, err := store.New(db).Shipment(context.Background(), e.OrderID)
	if !testenv.Found(t, err) {
		return domain.Shipment{}
	}
	sh.OrderID = ""
	return sh
}
