// Package ordertest makes the orders the order service's tests start from,
// the way POST /orders and POST /orders/{id}/cancel make them.
package ordertest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Draft returns a valid draft of quantity units of SKU-1 for a customer
// unique to this test run, shipped to Japan.
func Draft(t testing.TB, quantity int64) domain.Draft {
	t.Helper()
	d, err := domain.Validate(domain.Request{
		CustomerID:      "c-" + uuid.NewString()[:8],
		Items:           []events.Item{{SKU: "SKU-1", Quantity: quantity, UnitPrice: 2500}},
		ShippingAddress: events.Address{Country: "jp", PostalCode: "100-0001"},
	})
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	return d
}

// New returns a new order for d, with a fresh id, and its OrderCreated
// envelope, as the HTTP handler builds them; nothing is stored.
func New(t testing.TB, d domain.Draft) (domain.Order, events.Envelope) {
	t.Helper()
	o := domain.NewOrder(uuid.NewString(), d)
	e, err := events.New(order.Name, o.ID, o.Created(), time.Now())
	if err != nil {
		t.Fatalf("new event: %v", err)
	}
	return o, e
}

// Pending creates a PENDING order of one unit in db as POST /orders does
// and returns its id.
func Pending(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	o, created := New(t, Draft(t, 1))
	if _, _, err := store.New(db).Create(context.Background(), o, "", created); err != nil {
		t.Fatalf("create order: %v", err)
	}
	return o.ID
}

// Cancelling creates a PENDING order and cancels it for the customer as
// POST /orders/{id}/cancel does, and returns its id.
func Cancelling(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	id := Pending(t, db)
	if _, err := store.New(db).Cancel(context.Background(), id, events.ReasonCustomerCancelled, order.Name, time.Now()); err != nil {
		t.Fatalf("cancel order: %v", err)
	}
	return id
}

// WantTimedOut fails t unless every order in ids is CANCELLING for the
// reason timeout: what a deadline sweep leaves behind.
func WantTimedOut(t testing.TB, st *store.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		o, err := st.Order(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != domain.StatusCancelling || o.CancelReason != events.ReasonTimeout {
			t.Errorf("order %s = %s %q, want CANCELLING timeout", id, o.Status, o.CancelReason)
		}
	}
}
