package eventapi_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// The runtime's guarantees (redelivery, concurrency, dead letters, one
// transaction) are checked by the conformance suite in shipping_test; these
// tests pin what the shipping service decides and emits.

func handler(t *testing.T) (*sqlx.DB, consumer.Handler) {
	t.Helper()
	cfg := shipping.DefaultConfig()
	cfg.ServedCountries = "JP,US"
	spec, err := shipping.Spec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.DB(t, shipping.Schema)
	return db, spec.Handler(db, testenv.Logger(t))
}

func reserved(t *testing.T, orderID, country string) events.Envelope {
	return testenv.Event(t, orderID, events.InventoryReserved{
		Items:           []events.Item{{SKU: "sku-1", Quantity: 2, UnitPrice: 1500}},
		ShippingAddress: events.Address{Country: country, PostalCode: "100-0001"},
	})
}

func TestReservedDecidesTheShipment(t *testing.T) {
	tests := []struct {
		name    string
		country string
		want    domain.Shipment
		emitted events.Payload
	}{
		{"ServedCountryIsScheduledUpperCased", "jp",
			domain.Shipment{Status: domain.StatusScheduled, Country: "JP"},
			events.ShipmentScheduled{Country: "JP"}},
		{"UnservedCountryFailsWithReason", "BR",
			domain.Shipment{Status: domain.StatusFailed, Country: "BR", Reason: events.ReasonShippingUnavailable},
			events.ShipmentFailed{Country: "BR", Reason: events.ReasonShippingUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, h := handler(t)
			orderID := uuid.NewString()
			if err := h.Handle(context.Background(), testenv.Message(t, reserved(t, orderID, tt.country))); err != nil {
				t.Fatal(err)
			}
			got, err := store.New(db).Shipment(context.Background(), orderID)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.OrderID = orderID
			if got != tt.want {
				t.Errorf("shipment = %+v, want %+v", got, tt.want)
			}
			emitted := testenv.Emitted(t, db, orderID, events.TopicShipping, shipping.Name)
			if len(emitted) != 1 {
				t.Fatalf("%d events emitted, want 1", len(emitted))
			}
			_, p, err := events.Decode(mustEncode(t, emitted[0]))
			if err != nil || p != tt.emitted {
				t.Errorf("emitted %+v (%v), want %+v", p, err, tt.emitted)
			}
		})
	}
}

// TestSecondReservationIsSkipped: a second InventoryReserved for the same
// order — a new event id, so de-duplication lets it through — finds the
// shipment decided and changes nothing, even towards another country.
func TestSecondReservationIsSkipped(t *testing.T) {
	db, h := handler(t)
	orderID := uuid.NewString()
	for _, country := range []string{"US", "BR"} {
		if err := h.Handle(context.Background(), testenv.Message(t, reserved(t, orderID, country))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.New(db).Shipment(context.Background(), orderID)
	if err != nil || got.Status != domain.StatusScheduled || got.Country != "US" {
		t.Fatalf("shipment = %+v, %v; want SCHEDULED to US", got, err)
	}
	if n := len(testenv.Emitted(t, db, orderID, events.TopicShipping, shipping.Name)); n != 1 {
		t.Fatalf("%d events emitted, want 1", n)
	}
}

func mustEncode(t *testing.T, e events.Envelope) []byte {
	t.Helper()
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
