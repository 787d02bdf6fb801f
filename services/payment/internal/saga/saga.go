// Package saga is the payment service's part in the order saga: it charges
// an order when it is created, and refunds it when a later step fails.
// Each reaction runs in one transaction with the processed_events marker
// (package idem) and the events it emits (package outbox).
package saga

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// Service is the name the payment service uses as event source and
// de-duplication scope.
const Service = "payment"

// Topics are the topics the payment service consumes.
var Topics = []string{events.TopicOrder, events.TopicInventory}

// Routes returns the payment service's reactions, by event type.
func Routes(now func() time.Time) map[string]idem.Route {
	return map[string]idem.Route{
		events.TypeOrderCreated: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.OrderCreated
			if err := e.Decode(&p); err != nil {
				return err
			}
			return charge(ctx, tx, e.OrderID, p, now())
		},
		events.TypeInventoryRejected: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.InventoryRejected
			if err := e.Decode(&p); err != nil {
				return err
			}
			return refund(ctx, tx, e.OrderID, events.ReasonOutOfStock, now())
		},
		events.TypeInventoryReleased: func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error {
			var p events.InventoryReleased
			if err := e.Decode(&p); err != nil {
				return err
			}
			return refund(ctx, tx, e.OrderID, p.Reason, now())
		},
	}
}

func charge(ctx context.Context, tx *sqlx.Tx, orderID string, o events.OrderCreated, now time.Time) error {
	existing, err := store.LockPayment(ctx, tx, orderID)
	if err != nil {
		return err
	}
	account, err := store.LockAccount(ctx, tx, o.CustomerID)
	if err != nil {
		return err
	}
	d := domain.DecideCharge(existing, account, o.TotalAmount, o.Currency)
	p := domain.Payment{OrderID: orderID, CustomerID: o.CustomerID, Amount: o.TotalAmount, Currency: o.Currency}
	switch d.Action {
	case domain.ChargeSkip:
		return nil
	case domain.ChargeDecline:
		p.Status = domain.StatusDeclined
		if err := store.InsertPayment(ctx, tx, p, d.Detail); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.PaymentDeclined{CustomerID: o.CustomerID, Amount: o.TotalAmount, Detail: d.Detail}, now)
	case domain.ChargeDebit:
		p.Status = domain.StatusCompleted
		if err := store.AddBalance(ctx, tx, o.CustomerID, -o.TotalAmount); err != nil {
			return err
		}
		if err := store.InsertPayment(ctx, tx, p, ""); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.PaymentCompleted{
			CustomerID: o.CustomerID, Amount: o.TotalAmount, Currency: o.Currency,
			Items: o.Items, ShippingAddress: o.ShippingAddress,
		}, now)
	}
	return fmt.Errorf("charge %s: unhandled decision %v", orderID, d.Action)
}

func refund(ctx context.Context, tx *sqlx.Tx, orderID, reason string, now time.Time) error {
	existing, err := store.LockPayment(ctx, tx, orderID)
	if err != nil {
		return err
	}
	switch domain.DecideRefund(existing) {
	case domain.RefundSkip:
		return nil
	case domain.RefundTombstone:
		// Nothing was charged; the row makes a late charge a no-op.
		tomb := domain.Payment{OrderID: orderID, Currency: "", Status: domain.StatusRefunded}
		if err := store.InsertPayment(ctx, tx, tomb, "refund arrived before charge: "+reason); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.PaymentRefunded{Amount: 0, Reason: reason}, now)
	case domain.RefundCredit:
		if err := store.AddBalance(ctx, tx, existing.CustomerID, existing.Amount); err != nil {
			return err
		}
		if err := store.SetPaymentStatus(ctx, tx, orderID, domain.StatusRefunded, reason); err != nil {
			return err
		}
		return emit(ctx, tx, orderID, events.PaymentRefunded{CustomerID: existing.CustomerID, Amount: existing.Amount, Reason: reason}, now)
	}
	return fmt.Errorf("refund %s: unhandled decision", orderID)
}

func emit(ctx context.Context, tx *sqlx.Tx, orderID string, p events.Payload, now time.Time) error {
	e, err := events.New(Service, orderID, p, now)
	if err != nil {
		return err
	}
	return outbox.AddEvent(ctx, tx, events.TopicPayment, e)
}
