package eventapi_test

import (
	"context"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

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

// reactions returns the shipping service's reactions, serving JP and US,
// on a database of the test's own.
func reactions(t *testing.T) *testenv.Reactions {
	t.Helper()
	cfg := shipping.DefaultConfig()
	cfg.ServedCountries = "JP,US"
	return testenv.NewReactions(t, shipping.Spec, cfg)
}

// wantShipment fails the test unless the order's shipment is want, but
// for the order id, which is the order's.
func wantShipment(t *testing.T, r *testenv.Reactions, orderID string, want domain.Shipment) {
	t.Helper()
	got, err := store.New(r.DB).Shipment(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	want.OrderID = orderID
	if got != want {
		t.Fatalf("shipment = %+v, want %+v", got, want)
	}
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
			r := reactions(t)
			orderID := uuid.NewString()
			r.MustDeliver(reserved(t, orderID, tt.country))
			wantShipment(t, r, orderID, tt.want)
			emitted := r.Emitted(orderID)
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
	r := reactions(t)
	orderID := uuid.NewString()
	for _, country := range []string{"US", "BR"} {
		r.MustDeliver(reserved(t, orderID, country))
	}
	got, err := store.New(r.DB).Shipment(context.Background(), orderID)
	if err != nil || got.Status != domain.StatusScheduled || got.Country != "US" {
		t.Fatalf("shipment = %+v, %v; want SCHEDULED to US", got, err)
	}
	if n := len(r.Emitted(orderID)); n != 1 {
		t.Fatalf("%d events emitted, want 1", n)
	}
}

// TestConcurrentReservationsScheduleOnce delivers many different
// InventoryReserved events (distinct event ids, so de-duplication lets each
// through) for one order at the same moment, retrying what is not
// permanent as the consumer does. No shipment row exists to lock yet, so
// the primary key of shipments decides: one insert wins, the others fail
// with a unique violation, and their retries find the shipment and skip —
// one shipment, one event.
func TestConcurrentReservationsScheduleOnce(t *testing.T) {
	r := reactions(t)
	orderID := uuid.NewString()
	const n = 16
	msgs := make([]*sarama.ConsumerMessage, n)
	for i := range msgs {
		msgs[i] = testenv.Message(t, reserved(t, orderID, "JP"))
	}
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() {
			<-start
			for attempt := 0; attempt < 10; attempt++ {
				errs[i] = r.Handler.Handle(context.Background(), m)
				if errs[i] == nil || consumer.IsPermanent(errs[i]) {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	var shipments int
	if err := r.DB.Get(&shipments, `SELECT count(*) FROM shipments WHERE order_id = $1`, orderID); err != nil {
		t.Fatal(err)
	}
	if shipments != 1 {
		t.Errorf("%d shipments, want 1", shipments)
	}
	if got, err := store.New(r.DB).Shipment(context.Background(), orderID); err != nil || got.Status != domain.StatusScheduled {
		t.Errorf("shipment = %+v, %v; want SCHEDULED", got, err)
	}
	if emitted := r.Emitted(orderID); len(emitted) != 1 || emitted[0].Type != events.TypeShipmentScheduled {
		t.Errorf("emitted %v, want one ShipmentScheduled", emitted)
	}
	var marked int
	if err := r.DB.Get(&marked, `SELECT count(*) FROM processed_events WHERE consumer = $1`, shipping.Name); err != nil {
		t.Fatal(err)
	}
	if marked != n {
		t.Errorf("%d events marked processed, want all %d", marked, n)
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

// TestCancel: the order's cancel cancels a SCHEDULED shipment, leaves a
// FAILED one as it is, and leaves a tombstone when it comes first, so the
// reservation arriving after it — shipping was down during the cancel —
// schedules nothing; each order is acknowledged once, even for a second
// cancel request.
func TestCancel(t *testing.T) {
	tests := []struct {
		name          string
		before, after []string // countries of InventoryReserved before and after the cancel
		want          domain.Shipment
		wasScheduled  bool
	}{
		{"ScheduledIsCancelled", []string{"JP"}, nil,
			domain.Shipment{Status: domain.StatusCancelled, Country: "JP", Reason: events.ReasonCustomerCancelled}, true},
		{"FailedStaysFailed", []string{"BR"}, nil,
			domain.Shipment{Status: domain.StatusFailed, Country: "BR", Reason: events.ReasonShippingUnavailable}, false},
		{"LateReservationSchedulesNothing", nil, []string{"JP"},
			domain.Shipment{Status: domain.StatusCancelled, Reason: events.ReasonCustomerCancelled}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reactions(t)
			orderID := uuid.NewString()
			for _, c := range tt.before {
				r.MustDeliver(reserved(t, orderID, c))
			}
			r.MustDeliver(testenv.CancelRequested(t, orderID))
			r.MustDeliver(testenv.CancelRequested(t, orderID)) // a second request, a new event id
			for _, c := range tt.after {
				r.MustDeliver(reserved(t, orderID, c))
			}
			wantShipment(t, r, orderID, tt.want)
			emitted := r.Emitted(orderID)
			if len(tt.before) == 0 && len(testenv.Payloads[events.ShipmentScheduled](t, emitted)) > 0 {
				t.Fatal("a shipment was scheduled after the cancel")
			}
			acks := testenv.Payloads[events.ShipmentCancelled](t, emitted)
			if len(acks) != 1 || acks[0].WasScheduled != tt.wasScheduled {
				t.Fatalf("ShipmentCancelled = %+v, want one with was_scheduled %v", acks, tt.wasScheduled)
			}
		})
	}
}
