package payment_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// TestConformance runs the runtime's guarantees against the payment
// service, once for each reaction path that changes its state: an order
// that is charged, one declined for want of funds, a charge refunded on
// InventoryRejected and on InventoryReleased, and a release that overtook
// the charge and leaves a tombstone; and the order's cancel, after the
// charge (credited back) and before it (a tombstone).
func TestConformance(t *testing.T) {
	testenv.Conformance(t, payment.Spec, payment.DefaultConfig(), accountAndPayment, []participanttest.Case{
		{Name: "OrderCreatedDebits", Setup: created(10000), Emits: []string{events.TypePaymentCompleted}},
		{Name: "OrderCreatedInsufficientFundsDeclines", Setup: created(amount - 1), Emits: []string{events.TypePaymentDeclined}},
		{Name: "InventoryRejectedRefundsTheCharge", Setup: charged(rejected), Emits: []string{events.TypePaymentRefunded}},
		{Name: "InventoryReleasedRefundsTheCharge", Setup: charged(released), Emits: []string{events.TypePaymentRefunded}},
		{Name: "InventoryReleasedBeforeChargeLeavesTombstone", Setup: uncharged(released), Emits: []string{events.TypePaymentRefunded}},
		{Name: "OrderCancelRequestedCreditsTheCharge", Setup: charged(testenv.CancelRequested), Emits: []string{events.TypePaymentCancelled}},
		{Name: "OrderCancelRequestedBeforeChargeLeavesTombstone", Setup: uncharged(testenv.CancelRequested), Emits: []string{events.TypePaymentCancelled}},
	})
}

// amount is what every case's order costs.
const amount = 2500

// created returns a Setup that opens the order's customer's account with
// balance and returns the OrderCreated for amount, not delivered: it
// debits when balance ≥ amount and is declined otherwise.
func created(balance int64) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		orderID := uuid.NewString()
		account(t, db, orderID, balance)
		return order(t, orderID)
	}
}

// charged returns a Setup that charges a fresh order as the OrderCreated
// reaction would (balance debited, a COMPLETED payment; its
// PaymentCompleted would be long published) and returns the compensation
// built by compensate, not delivered.
func charged(compensate func(*testing.T, string) events.Envelope) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		orderID := uuid.NewString()
		account(t, db, orderID, 10000)
		p := domain.Payment{OrderID: orderID, CustomerID: customerOf(orderID), Amount: amount, Currency: "JPY", Status: domain.StatusCompleted}
		testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
			if err := store.AddBalance(ctx, tx, p.CustomerID, -p.Amount); err != nil {
				return err
			}
			return store.InsertPayment(ctx, tx, p, "")
		})
		return compensate(t, orderID)
	}
}

// uncharged returns a Setup whose compensation, built by compensate,
// arrives before the order's OrderCreated: the refund overtakes the charge.
func uncharged(compensate func(*testing.T, string) events.Envelope) func(*testing.T, *sqlx.DB) events.Envelope {
	return func(t *testing.T, db *sqlx.DB) events.Envelope {
		orderID := uuid.NewString()
		account(t, db, orderID, 10000) // so that State has an account to read
		return compensate(t, orderID)
	}
}

// account opens the account of the order's customer with balance in JPY.
func account(t *testing.T, db *sqlx.DB, orderID string, balance int64) {
	t.Helper()
	if _, err := store.New(db).PutAccount(context.Background(), customerOf(orderID), balance, "JPY", store.Precondition{CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
}

func order(t *testing.T, orderID string) events.Envelope {
	return testenv.Event(t, orderID, events.OrderCreated{
		CustomerID:      customerOf(orderID),
		Items:           []events.Item{{SKU: "sku-1", Quantity: 2, UnitPrice: amount / 2}},
		TotalAmount:     amount,
		Currency:        "JPY",
		ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
	})
}

func rejected(t *testing.T, orderID string) events.Envelope {
	return testenv.Event(t, orderID, events.InventoryRejected{
		Reason: events.ReasonOutOfStock, Shortages: []events.Shortage{{SKU: "sku-1", Requested: 2, Available: 0}},
	})
}

func released(t *testing.T, orderID string) events.Envelope {
	return testenv.Event(t, orderID, events.InventoryReleased{
		Items:  []events.Item{{SKU: "sku-1", Quantity: 2, UnitPrice: amount / 2}},
		Reason: events.ReasonShippingUnavailable,
	})
}

// customerOf is the customer of a case's order: one per order, so that
// cases sharing a database (the concurrency check sets up twice) never
// share a balance, and State finds it from the order id alone.
func customerOf(orderID string) string { return "c-" + orderID[:13] }

// state is what the payment reactions change for one order, without ids
// or timestamps.
type state struct {
	Balance  int64
	Status   domain.Status // "" while the order has no payment record
	Charged  bool          // whether the record names the customer (a tombstone does not)
	Amount   int64
	Currency string
	Detail   string
}

// accountAndPayment reads the balance of the order's customer and the
// order's payment record.
func accountAndPayment(t *testing.T, db *sqlx.DB, e events.Envelope) any {
	t.Helper()
	ctx := context.Background()
	st := store.New(db)
	a, err := st.Account(ctx, customerOf(e.OrderID))
	if err != nil {
		t.Fatal(err)
	}
	s := state{Balance: a.Balance}
	p, err := st.Payment(ctx, e.OrderID)
	if !testenv.Found(t, err) {
		return s
	}
	if err := db.GetContext(ctx, &s.Detail, `SELECT detail FROM payments WHERE order_id = $1`, e.OrderID); err != nil {
		t.Fatal(err)
	}
	s.Status, s.Charged, s.Amount, s.Currency = p.Status, p.CustomerID != "", p.Amount, p.Currency
	return s
}
