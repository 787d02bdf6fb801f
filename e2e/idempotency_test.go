package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/payment"
)

// TestIdempotencyKey: a client retrying POST /orders with the same key gets
// the same order and starts one saga, even when the retries race.
func TestIdempotencyKey(t *testing.T) {
	t.Run("ReplayReturnsSameOrder", func(t *testing.T) {
		f := newFixture(t, 10000, 10)
		key := uuid.NewString()
		req := f.order(1, 1000, "JP")
		s1, _, o1 := postOrder(t, req, key)
		s2, h2, o2 := postOrder(t, req, key)
		assertEqual(t, "first status", s1, http.StatusCreated)
		assertEqual(t, "replay status", s2, http.StatusCreated)
		assertEqual(t, "replayed id", o2.ID, o1.ID)
		assertEqual(t, "Idempotent-Replayed", h2.Get("Idempotent-Replayed"), "true")
		ordersCreated.Add(1)
		wantOrder(t, o1.ID, "COMPLETED", "")
		assertEqual(t, "charged once", balance(t, f.customer), 9000)
	})
	t.Run("SameKeyDifferentBodyIs422", func(t *testing.T) {
		f := newFixture(t, 10000, 10)
		key := uuid.NewString()
		if s, _, _ := postOrder(t, f.order(1, 1000, "JP"), key); s != http.StatusCreated {
			t.Fatalf("first = %d", s)
		}
		ordersCreated.Add(1)
		s, h, _ := postOrder(t, f.order(2, 1000, "JP"), key)
		assertEqual(t, "status", s, http.StatusUnprocessableEntity)
		assertEqual(t, "problem+json", problemJSON(h), true)
	})
	t.Run("ConcurrentReplaysStartOneSaga", func(t *testing.T) {
		f := newFixture(t, 10000, 10)
		key := uuid.NewString()
		req := f.order(1, 1000, "JP")
		const n = 20
		ids := make(chan string, n)
		testenv.AllAtOnce(n, func() {
			s, _, o := postOrder(t, req, key)
			if s != http.StatusCreated {
				t.Errorf("racing POST = %d", s)
			}
			ids <- o.ID
		})
		close(ids)
		distinct := map[string]bool{}
		for id := range ids {
			distinct[id] = true
		}
		if len(distinct) != 1 {
			t.Fatalf("racing replays created %d orders, want 1: %v", len(distinct), distinct)
		}
		ordersCreated.Add(1)
		for id := range distinct {
			wantOrder(t, id, "COMPLETED", "")
			// order.events also carries the order's later events (its
			// OrderCompleted, published a moment after the order reads
			// COMPLETED); only the OrderCreated count says one saga.
			created := 0
			for _, m := range messagesFor(t, events.TopicOrder, id) {
				if header(m, events.HeaderEventType) == events.TypeOrderCreated {
					created++
				}
			}
			assertEqual(t, "OrderCreated events", created, 1)
		}
		assertEqual(t, "charged once", balance(t, f.customer), 9000)
		assertEqual(t, "reserved once", stock(t, f.sku).Reserved, 1)
	})
}

// TestRedeliveryChangesNothing is the seed incident: the broker delivers
// every event of a finished saga again — three more times — as it would
// after lost acks. Each consumer logs "duplicate event skipped" and no
// balance, stock or status moves.
func TestRedeliveryChangesNothing(t *testing.T) {
	tests := []struct {
		name       string
		country    string
		wantStatus string
		wantReason string
	}{
		{"CompletedSaga", "JP", "COMPLETED", ""},
		{"CompensatedSaga", "BR", "CANCELLED", "shipping_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 10000, 10)
			o := createOrder(t, f.order(2, 2500, tt.country))
			wantOrder(t, o.ID, tt.wantStatus, tt.wantReason)
			beforeBalance, beforeStock := balance(t, f.customer), stock(t, f.sku)

			var again []*sarama.ProducerMessage
			var expect []struct{ svc, id string }
			for _, topic := range []string{events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping} {
				for _, m := range messagesFor(t, topic, o.ID) {
					for range 3 {
						again = append(again, broker.Redelivery(m))
					}
					// Every consumer that acted on the event must skip it now.
					for _, svc := range reactsTo[header(m, events.HeaderEventType)] {
						expect = append(expect, struct{ svc, id string }{svc, header(m, events.HeaderEventID)})
					}
				}
			}
			if len(expect) < 4 {
				t.Fatalf("found only %d event deliveries to check for order %s", len(expect), o.ID)
			}
			dupBefore := metric(t, "payment", "choreo_events_handled_total", map[string]string{"service": "payment", "type": events.TypeOrderCreated, "outcome": "duplicate"})
			produce(t, again...)
			for _, e := range expect {
				eventually(t, 60*time.Second, func() error {
					if !services[e.svc].logContains("duplicate event skipped", e.id) {
						return fmt.Errorf("%s has not logged event %s as a duplicate", e.svc, e.id)
					}
					return nil
				})
			}
			eventually(t, 30*time.Second, func() error {
				dup := metric(t, "payment", "choreo_events_handled_total", map[string]string{"service": "payment", "type": events.TypeOrderCreated, "outcome": "duplicate"})
				if dup-dupBefore < 3 {
					return fmt.Errorf("payment counted %v duplicate OrderCreated, want at least the 3 redelivered", dup-dupBefore)
				}
				return nil
			})
			o2 := wantOrder(t, o.ID, tt.wantStatus, tt.wantReason)
			assertEqual(t, "status", o2.Status, tt.wantStatus)
			assertEqual(t, "balance", balance(t, f.customer), beforeBalance)
			assertEqual(t, "stock", stock(t, f.sku), beforeStock)
		})
	}
}

// reactsTo lists, per event type, the services with a reaction to it — the
// event-flow table of the README.
var reactsTo = map[string][]string{
	events.TypeOrderCreated:      {"payment"},
	events.TypePaymentCompleted:  {"inventory"},
	events.TypePaymentDeclined:   {"order"},
	events.TypePaymentRefunded:   {"order"},
	events.TypeInventoryReserved: {"shipping"},
	events.TypeInventoryRejected: {"payment"},
	events.TypeInventoryReleased: {"payment"},
	events.TypeShipmentScheduled: {"order"},
	events.TypeShipmentFailed:    {"inventory"},
	events.TypeOrderCompleted:    {},
	events.TypeOrderCancelled:    {},

	events.TypeOrderCancelRequested: {"payment", "inventory", "shipping"},
	events.TypePaymentCancelled:     {"order"},
	events.TypeInventoryCancelled:   {"order"},
	events.TypeShipmentCancelled:    {"order"},
}

// TestConcurrentDeliveryToIdem hands one OrderCreated to the payment
// service's real handler from many goroutines at once, each in its own
// transaction on the payment database — a redelivery racing the original.
// Exactly one debit happens.
func TestConcurrentDeliveryToIdem(t *testing.T) {
	db, err := sqlx.Open("postgres", dbURLs["payment"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := newFixture(t, 10000, 10)
	orderID := uuid.NewString()
	e, err := events.New("e2e", orderID, events.OrderCreated{
		CustomerID: f.customer, Currency: "JPY", TotalAmount: 3000,
		Items:           []events.Item{{SKU: f.sku, Quantity: 3, UnitPrice: 1000}},
		ShippingAddress: events.Address{Country: "JP"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	msg := testenv.Message(t, e)
	spec, err := payment.Spec(payment.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := spec.Handler(db, slog.New(slog.DiscardHandler))

	testenv.AllAtOnce(16, func() {
		if err := h.Handle(context.Background(), msg); err != nil {
			t.Errorf("Handle: %v", err)
		}
	})

	assertEqual(t, "balance after 16 concurrent deliveries", balance(t, f.customer), 7000)
	var processed int
	if err := db.Get(&processed, `SELECT count(*) FROM processed_events WHERE event_id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "processed_events rows", processed, 1)
	var p paymentRecord
	checkRecord(t, "payment", "/payments/"+orderID, &p, "COMPLETED", func() string { return p.Status })
	// The one PaymentCompleted flows on through the real services.
	eventually(t, 60*time.Second, func() error {
		var r reservation
		if get(t, "inventory", "/reservations/"+orderID, &r) != http.StatusOK {
			return fmt.Errorf("no reservation yet")
		}
		return nil
	})
	eventuallyMessages(t, events.TopicPayment, orderID, 1)
	atRest(t) // a second PaymentCompleted would be published by now
	assertEqual(t, "reserved once", stock(t, f.sku).Reserved, 3)
	assertEqual(t, "PaymentCompleted events", len(messagesFor(t, events.TopicPayment, orderID)), 1)
	ordersCreated.Add(1)
}

// TestCompensationOvertakesStep delivers compensations before the steps they
// undo. In this wiring each compensation is caused by its own step, so the
// overtaking needs a replay or a re-injected event, as here — but a service
// must not depend on that. The early compensation leaves a record (a
// tombstone); the late step finds it and does nothing.
func TestCompensationOvertakesStep(t *testing.T) {
	f := newFixture(t, 10000, 10)
	orderID := uuid.NewString()
	items := []events.Item{{SKU: f.sku, Quantity: 2, UnitPrice: 2500}}
	addr := events.Address{Country: "JP"}

	// ShipmentFailed before any reservation: inventory records RELEASED,
	// which makes payment record REFUNDED before any charge.
	produceEvent(t, events.TopicShipping, orderID, events.ShipmentFailed{Country: "BR", Reason: events.ReasonShippingUnavailable})
	eventually(t, 60*time.Second, func() error {
		var p paymentRecord
		if get(t, "payment", "/payments/"+orderID, &p) != http.StatusOK || p.Status != "REFUNDED" {
			return fmt.Errorf("payment tombstone not recorded yet: %+v", p)
		}
		return nil
	})
	var r reservation
	checkRecord(t, "inventory", "/reservations/"+orderID, &r, "RELEASED", func() string { return r.Status })

	// The late steps: charge and reservation must both be no-ops.
	late1 := produceEvent(t, events.TopicOrder, orderID, events.OrderCreated{
		CustomerID: f.customer, Currency: "JPY", TotalAmount: 5000, Items: items, ShippingAddress: addr})
	late2 := produceEvent(t, events.TopicPayment, orderID, events.PaymentCompleted{
		CustomerID: f.customer, Amount: 5000, Currency: "JPY", Items: items, ShippingAddress: addr})
	eventually(t, 60*time.Second, func() error {
		if !services["payment"].logContains("event applied", late1.ID) || !services["inventory"].logContains("event applied", late2.ID) {
			return fmt.Errorf("late events not processed yet")
		}
		return nil
	})
	assertEqual(t, "balance", balance(t, f.customer), 10000)
	assertEqual(t, "stock", stock(t, f.sku), stockLevel{SKU: f.sku, Available: 10, Reserved: 0})
	checkRecord(t, "inventory", "/reservations/"+orderID, &r, "RELEASED", func() string { return r.Status })
	var sh shipment
	checkRecord(t, "shipping", "/shipments/"+orderID, &sh, "", nil)
}
