package eventapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// The runtime's guarantees (redelivery, concurrency, dead letters, one
// transaction) are checked by the conformance suite in order_test; these
// tests pin what the order service decides: how an order ends.

// reactions returns the order service's reactions on a database of the
// test's own.
func reactions(t *testing.T) *testenv.Reactions {
	t.Helper()
	return testenv.NewReactions(t, order.Spec, order.DefaultConfig())
}

func TestReactionsDecideHowTheOrderEnds(t *testing.T) {
	tests := []struct {
		name       string
		events     []events.Payload
		wantStatus domain.Status
		wantReason string
	}{
		{"ShipmentCompletes", []events.Payload{events.ShipmentScheduled{Country: "JP"}}, domain.StatusCompleted, ""},
		// Each decline cause lands on the order in payment's words.
		{"TooLittleMoneyCancelsWithInsufficientFunds", []events.Payload{events.PaymentDeclined{CustomerID: "c", Amount: 1, Detail: events.ReasonInsufficientFunds}}, domain.StatusCancelled, events.ReasonInsufficientFunds},
		{"UnknownCustomerCancelsWithUnknownCustomer", []events.Payload{events.PaymentDeclined{CustomerID: "c", Amount: 1, Detail: events.ReasonUnknownCustomer}}, domain.StatusCancelled, events.ReasonUnknownCustomer},
		{"OtherCurrencyCancelsWithCurrencyMismatch", []events.Payload{events.PaymentDeclined{CustomerID: "c", Amount: 1, Detail: events.ReasonCurrencyMismatch}}, domain.StatusCancelled, events.ReasonCurrencyMismatch},
		{"DeclineWithoutDetailCancelsWithPaymentDeclined", []events.Payload{events.PaymentDeclined{CustomerID: "c", Amount: 1}}, domain.StatusCancelled, events.ReasonPaymentDeclined},
		{"OutOfStockRefundCancelsWithOutOfStock", []events.Payload{events.PaymentRefunded{Amount: 1, Reason: events.ReasonOutOfStock}}, domain.StatusCancelled, events.ReasonOutOfStock},
		{"RefundCancelsWithItsReason", []events.Payload{events.PaymentRefunded{Amount: 1, Reason: events.ReasonShippingUnavailable}}, domain.StatusCancelled, events.ReasonShippingUnavailable},
		{"LateShipmentAfterCancelChangesNothing", []events.Payload{
			events.PaymentRefunded{Amount: 1, Reason: events.ReasonOutOfStock},
			events.ShipmentScheduled{Country: "JP"},
		}, domain.StatusCancelled, events.ReasonOutOfStock},
		{"CancelAfterCompletionChangesNothing", []events.Payload{
			events.ShipmentScheduled{Country: "JP"},
			events.PaymentRefunded{Amount: 1, Reason: events.ReasonOutOfStock},
		}, domain.StatusCompleted, ""},
		{"SecondCancelKeepsTheFirstReason", []events.Payload{
			events.PaymentDeclined{CustomerID: "c", Amount: 1, Detail: events.ReasonInsufficientFunds},
			events.PaymentRefunded{Amount: 1, Reason: events.ReasonOutOfStock},
		}, domain.StatusCancelled, events.ReasonInsufficientFunds},
		// The order does not track a completed payment: it stays PENDING
		// until the shipment is scheduled or the saga is compensated.
		{"PaymentCompletedIsNotOurs", []events.Payload{events.PaymentCompleted{
			CustomerID: "c", Amount: 1, Items: []events.Item{{SKU: "A", Quantity: 1}}, ShippingAddress: events.Address{Country: "JP"},
		}}, domain.StatusPending, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, id, got := deliverAll(t, ordertest.Pending, tt.events)
			if got.Status != tt.wantStatus || got.CancelReason != tt.wantReason {
				t.Fatalf("order = %s %q, want %s %q", got.Status, got.CancelReason, tt.wantStatus, tt.wantReason)
			}
			// The order topic holds the OrderCreated that started the
			// saga and, once the order is terminal, one event announcing
			// the end — never a second one.
			want := []string{events.TypeOrderCreated}
			switch tt.wantStatus {
			case domain.StatusCompleted:
				want = append(want, events.TypeOrderCompleted)
			case domain.StatusCancelled:
				want = append(want, events.TypeOrderCancelled)
			}
			checkQueued(t, r, id, want, tt.wantReason)
		})
	}
}

// TestEventsForUnknownOrdersAreAcknowledged: an event about an order this
// service never created — a UUID it does not know, or no UUID at all — is
// acknowledged, since no retry could make the order appear, and creates
// nothing.
func TestEventsForUnknownOrdersAreAcknowledged(t *testing.T) {
	r := reactions(t)
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		if err := r.Deliver(testenv.Event(t, id, events.ShipmentScheduled{Country: "JP"})); err != nil {
			t.Errorf("Handle for unknown order %q = %v, want nil (nothing a retry could fix)", id, err)
		}
	}
	var n int
	if err := r.DB.Get(&n, `SELECT count(*) FROM orders`); err != nil || n != 0 {
		t.Fatalf("orders = %d, %v; want none", n, err)
	}
}

// TestCancelEndsWhenEveryParticipantAcknowledged: a CANCELLING order is
// CANCELLED, customer_cancelled, with the third distinct acknowledgement —
// in any order, with duplicates (new event ids) — and announced once; a
// ShipmentScheduled, a decline or a compensation's refund meanwhile
// changes nothing.
func TestCancelEndsWhenEveryParticipantAcknowledged(t *testing.T) {
	pay, inv, ship := events.PaymentCancelled{CustomerID: "c", Amount: 2500}, events.InventoryCancelled{}, events.ShipmentCancelled{WasScheduled: true}
	tests := []struct {
		name       string
		events     []events.Payload
		wantStatus domain.Status
	}{
		{"AllThreeCancel", []events.Payload{pay, inv, ship}, domain.StatusCancelled},
		{"AnyOrderCancels", []events.Payload{ship, pay, inv}, domain.StatusCancelled},
		{"TwoAcksAreNotEnough", []events.Payload{ship, inv}, domain.StatusCancelling},
		{"DuplicateAcksAreNotEnough", []events.Payload{pay, pay, inv, inv}, domain.StatusCancelling},
		{"DuplicatesAfterTheEndChangeNothing", []events.Payload{inv, inv, pay, ship, pay, ship}, domain.StatusCancelled},
		{"ShipmentScheduledDoesNotComplete", []events.Payload{events.ShipmentScheduled{Country: "JP"}}, domain.StatusCancelling},
		{"ShipmentScheduledThenAcksCancel", []events.Payload{pay, events.ShipmentScheduled{Country: "JP"}, inv, ship}, domain.StatusCancelled},
		{"RefundDuringCancelLeavesItToTheAcks", []events.Payload{
			events.PaymentRefunded{Amount: 1, Reason: events.ReasonShippingUnavailable}, inv, ship,
		}, domain.StatusCancelling},
		{"DeclineDuringCancelLeavesItToTheAcks", []events.Payload{
			events.PaymentDeclined{CustomerID: "c", Amount: 1, Detail: "insufficient_funds"}, pay, inv, ship,
		}, domain.StatusCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, id, got := deliverAll(t, ordertest.Cancelling, tt.events)
			if got.Status != tt.wantStatus || got.CancelReason != events.ReasonCustomerCancelled {
				t.Fatalf("order = %s %q, want %s %q", got.Status, got.CancelReason, tt.wantStatus, events.ReasonCustomerCancelled)
			}
			want := []string{events.TypeOrderCreated, events.TypeOrderCancelRequested}
			if tt.wantStatus == domain.StatusCancelled {
				want = append(want, events.TypeOrderCancelled)
			}
			checkQueued(t, r, id, want, events.ReasonCustomerCancelled)
		})
	}
}

// TestAcksOfAnOrderNotCancellingChangeNothing: an acknowledgement for a
// PENDING or COMPLETED order (no cancel was requested) is acknowledged and
// changes nothing.
func TestAcksOfAnOrderNotCancellingChangeNothing(t *testing.T) {
	r := reactions(t)
	pendingID, completedID := ordertest.Pending(t, r.DB), ordertest.Pending(t, r.DB)
	r.MustDeliver(testenv.Event(t, completedID, events.ShipmentScheduled{Country: "JP"}))
	for id, want := range map[string]domain.Status{pendingID: domain.StatusPending, completedID: domain.StatusCompleted} {
		for _, p := range []events.Payload{events.PaymentCancelled{}, events.InventoryCancelled{}, events.ShipmentCancelled{}} {
			r.MustDeliver(testenv.Event(t, id, p))
		}
		got, err := store.New(r.DB).Order(context.Background(), id)
		if err != nil || got.Status != want {
			t.Fatalf("order = %+v, %v; want %s", got.Status, err, want)
		}
	}
}

// checkQueued fails t unless the order topic holds exactly the event
// types want for the order, oldest first, and an OrderCancelled among
// them gives reason.
func checkQueued(t *testing.T, r *testenv.Reactions, id string, want []string, reason string) {
	t.Helper()
	emitted := r.Emitted(id)
	var queued []string
	for _, e := range emitted {
		queued = append(queued, e.Type)
	}
	if !slices.Equal(queued, want) {
		t.Fatalf("order %s queued %v, want %v", id, queued, want)
	}
	for _, c := range testenv.Payloads[events.OrderCancelled](t, emitted) {
		if c.Reason != reason {
			t.Errorf("OrderCancelled reason = %q, want %q", c.Reason, reason)
		}
	}
}

// deliverAll creates an order with setup, hands the order service's
// reactions each of evs about it, in order, and returns the reactions, the
// order's id and the order as it then is.
func deliverAll(t *testing.T, setup func(testing.TB, *sqlx.DB) string, evs []events.Payload) (*testenv.Reactions, string, domain.Order) {
	t.Helper()
	r := reactions(t)
	id := setup(t, r.DB)
	for _, p := range evs {
		r.MustDeliver(testenv.Event(t, id, p))
	}
	got, err := store.New(r.DB).Order(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r, id, got
}
