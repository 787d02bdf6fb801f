package shipping_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestConformance runs the runtime's guarantees against the shipping
// service: a reservation to a served country schedules the shipment, one to
// another country fails it.
func TestConformance(t *testing.T) {
	spec, err := shipping.Spec(shipping.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	participanttest.Run(t, participanttest.Suite{
		Spec: spec,
		DB:   func(t *testing.T) *sqlx.DB { return testenv.DB(t, shipping.Schema) },
		Cases: []participanttest.Case{
			{Name: "ReservedForServedCountrySchedules", Setup: reserved("jp"), State: shipment, Emits: []string{events.TypeShipmentScheduled}},
			{Name: "ReservedForUnservedCountryFails", Setup: reserved("BR"), State: shipment, Emits: []string{events.TypeShipmentFailed}},
		},
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

// shipment is the order's shipment without its id, or the zero Shipment.
func shipment(t *testing.T, db *sqlx.DB, e events.Envelope) any {
	t.Helper()
	sh, err := store.New(db).Shipment(context.Background(), e.OrderID)
	if errors.Is(err, fault.NotFound) {
		return domain.Shipment{}
	}
	if err != nil {
		t.Fatal(err)
	}
	sh.OrderID = ""
	return sh
}
