package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// TestConformance runs the runtime's guarantees against the order service:
// a scheduled shipment completes a PENDING order, a declined payment and a
// refund cancel it, each acknowledgement of a cancel is counted and the
// third cancels the CANCELLING order, and each end is announced
// (OrderCompleted, OrderCancelled).
func TestConformance(t *testing.T) {
	testenv.Conformance(t, order.Spec, order.DefaultConfig(), outcome, []participanttest.Case{
		{Name: "ShipmentScheduledCompletes", Setup: pendingThen(events.ShipmentScheduled{Country: "JP"}), Emits: []string{events.TypeOrderCompleted}},
		{Name: "PaymentDeclinedCancels", Setup: pendingThen(events.PaymentDeclined{CustomerID: "c-1", Amount: 2500, Detail: "insufficient_funds"}), Emits: []string{events.TypeOrderCancelled}},
		{Name: "PaymentRefundedCancelsWithItsReason", Setup: pendingThen(events.PaymentRefunded{Amount: 2500, Reason: events.ReasonShippingUnavailable}), Emits: []string{events.TypeOrderCancelled}},
		{Name: "PaymentCancelledIsCounted", Setup: cancellingThen(domain.Acks{}, events.PaymentCancelled{CustomerID: "c-1", Amount: 2500})},
		{Name: "InventoryCancelledIsCounted", Setup: cancellingThen(domain.Acks{Payment: true}, events.InventoryCancelled{})},
		{Name: "ThirdAckCancels", Setup: cancellingThen(domain.Acks{Payment: true, Inventory: true}, events.ShipmentCancelled{WasScheduled: true}), Emits: []string{events.TypeOrderCancelled}},
	})
}

// pendingThen returns a Setup that creates a PENDING order as POST /orders
// does and returns p, about that order, to deliver.
func pendingThen(p events.Payload) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		t.Helper()
		return testenv.Event(t, ordertest.Pending(t, db), p)
	}
}

// cancellingThen returns a Setup that creates an order, cancels it as POST
// /orders/{id}/cancel does, records acks as already held, and returns p,
// about that order, to deliver.
func cancellingThen(acks domain.Acks, p events.Payload) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		t.Helper()
		e := pendingThen(p)(t, db)
		ctx := context.Background()
		o, err := store.New(db).Cancel(ctx, e.OrderID, events.ReasonCustomerCancelled, order.Name, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		s := o.State()
		s.Acks = acks
		testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.SetState(ctx, tx, o.ID, s, time.Now()) })
		return e
	}
}

// outcome is the order's status, cancel reason and cancel acks: what the
// reactions change.
func outcome(t *testing.T, db *sqlx.DB, e events.Envelope) any {
	t.Helper()
	o, err := store.New(db).Order(context.Background(), e.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		Status domain.Status
		Reason string
		Acks   domain.Acks
	}{o.Status, o.CancelReason, o.Acks}
}
