package inventory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// TestConformance runs the runtime's guarantees against the inventory
// service, once for each reaction path that changes its state: a payment
// that reserves the items, one rejected for want of stock, a failed
// shipment that releases a reservation, and one that overtook the
// reservation and leaves a tombstone; and the order's cancel, after the
// reserve (released) and before it (a tombstone).
func TestConformance(t *testing.T) {
	testenv.Conformance(t, inventory.Spec, inventory.DefaultConfig(), stockAndReservation, []participanttest.Case{
		{Name: "PaymentCompletedReserves", Setup: paid(5), Emits: []string{events.TypeInventoryReserved}},
		{Name: "PaymentCompletedOutOfStockIsRejected", Setup: paid(1), Emits: []string{events.TypeInventoryRejected}},
		{Name: "ShipmentFailedReleasesTheReservation", Setup: afterReserve(shipmentFailed), Emits: []string{events.TypeInventoryReleased}},
		{Name: "ShipmentFailedBeforeReserveLeavesTombstone", Setup: beforeReserve(shipmentFailed), Emits: []string{events.TypeInventoryReleased}},
		{Name: "OrderCancelRequestedReleasesTheReservation", Setup: afterReserve(testenv.CancelRequested), Emits: []string{events.TypeInventoryCancelled}},
		{Name: "OrderCancelRequestedBeforeReserveLeavesTombstone", Setup: beforeReserve(testenv.CancelRequested), Emits: []string{events.TypeInventoryCancelled}},
	})
}

// quantity is what every case's order asks for of its one SKU.
const quantity = 2

// state is what the inventory reactions change for one order of one SKU,
// without ids or timestamps.
type state struct {
	Available, Reserved int64
	Status              domain.Status // "" while the order has no reservation record
	Items               int           // the reservation's order lines
}

// paid returns a Setup that stocks a fresh SKU with available units and
// delivers PaymentCompleted for quantity of them: it reserves when
// available ≥ quantity and is rejected otherwise.
func paid(available int64) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		return payment(t, db, uuid.NewString(), available)
	}
}

// beforeReserve returns a Setup whose undo, built by undo, arrives for an
// order whose payment has not reached inventory: it overtakes the reserve.
func beforeReserve(undo func(*testing.T, string) events.Envelope) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		orderID := uuid.NewString()
		payment(t, db, orderID, 5) // stock the SKU so State has one to read
		return undo(t, orderID)
	}
}

// afterReserve returns a Setup that holds a fresh order's items as its
// reserve would (units moved, a RESERVED record; its InventoryReserved, if
// any, would be long published) and returns the undo built by undo, not
// delivered.
func afterReserve(undo func(*testing.T, string) events.Envelope) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		orderID := uuid.NewString()
		var p events.PaymentCompleted
		testenv.Payload(t, payment(t, db, orderID, 5), &p)
		r := domain.Reservation{OrderID: orderID, Status: domain.StatusReserved, Items: p.Items}
		testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
			if err := store.Reserve(ctx, tx, domain.Quantities(r.Items)); err != nil {
				return err
			}
			return store.InsertReservation(ctx, tx, r, "")
		})
		return undo(t, orderID)
	}
}

// payment stocks a SKU named after orderID with available units and
// returns a PaymentCompleted for quantity of them, not delivered.
func payment(t *testing.T, db *sqlx.DB, orderID string, available int64) events.Envelope {
	t.Helper()
	if _, err := store.New(db).PutStock(context.Background(), skuOf(orderID), available, store.Precondition{CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	return testenv.Event(t, orderID, events.PaymentCompleted{
		CustomerID: "c-1", Amount: 3000, Currency: "JPY",
		Items:           []events.Item{{SKU: skuOf(orderID), Quantity: quantity, UnitPrice: 1500}},
		ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
	})
}

func shipmentFailed(t *testing.T, orderID string) events.Envelope {
	return testenv.Event(t, orderID, events.ShipmentFailed{Country: "AQ", Reason: events.ReasonShippingUnavailable})
}

// skuOf is the SKU a case's order asks for: one per order, so that cases
// sharing a database (the concurrency check sets up twice) never share
// stock.
func skuOf(orderID string) string { return "sku-" + orderID[:13] }

// stockAndReservation reads the order's SKU and its reservation record.
func stockAndReservation(t *testing.T, db *sqlx.DB, e events.Envelope) any {
	t.Helper()
	ctx := context.Background()
	st := store.New(db)
	stock, err := st.Stock(ctx, skuOf(e.OrderID))
	if err != nil {
		t.Fatal(err)
	}
	s := state{Available: stock.Available, Reserved: stock.Reserved}
	if r, err := st.Reservation(ctx, e.OrderID); testenv.Found(t, err) {
		s.Status, s.Items = r.Status, len(r.Items)
	}
	return s
}
