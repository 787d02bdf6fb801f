// Package eventapi is the payment service's reactions to the events it
// consumes: it charges an order when it is created, refunds it when a later
// step fails, and undoes the charge when the order is cancelled.
package eventapi

import (
	"context"
	"fmt"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// Reactions returns the payment service's reactions. The other event on the
// topics they listen to, InventoryReserved, concerns shipping; the runtime
// acknowledges it.
func Reactions() []participant.Reaction {
	return []participant.Reaction{
		participant.On(charge),
		// Either of inventory's outcomes but a reservation undoes the
		// charge, for the reason the event carries.
		participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryRejected) error {
			return refund(ctx, tx, e.OrderID, p.Reason)
		}),
		participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReleased) error {
			return refund(ctx, tx, e.OrderID, p.Reason)
		}),
		participant.On(cancel),
	}
}

// charge locks the order's payment, then the customer's account (always in
// that order, in one statement), and debits or declines.
func charge(ctx context.Context, tx *participant.Tx, e events.Envelope, o events.OrderCreated) error {
	existing, account, err := store.LockCharge(ctx, tx, e.OrderID, o.CustomerID)
	if err != nil {
		return err
	}
	d := domain.DecideCharge(existing, account, o.TotalAmount, o.Currency)
	p := domain.Payment{OrderID: e.OrderID, CustomerID: o.CustomerID, Amount: o.TotalAmount, Currency: o.Currency}
	switch d.Action {
	case domain.ChargeSkip:
		return nil
	case domain.ChargeDecline:
		p.Status = domain.StatusDeclined
		if err := store.InsertPayment(ctx, tx, p, d.Detail); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentDeclined{CustomerID: o.CustomerID, Amount: o.TotalAmount, Detail: d.Detail})
	case domain.ChargeDebit:
		if err := store.Debit(ctx, tx, p); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentCompleted{
			CustomerID: o.CustomerID, Amount: o.TotalAmount, Currency: o.Currency,
			Items: o.Items, ShippingAddress: o.ShippingAddress,
		})
	}
	return fmt.Errorf("charge %s: unhandled decision %v", e.OrderID, d.Action)
}

// refund locks the order's payment, then the charged customer's account
// (the order charge locks in, so that a refund, a cancel and a charge of
// one order run one after the other), and credits the amount in the currency it
// was charged in — never in another (domain.RefundRefuse).
func refund(ctx context.Context, tx *participant.Tx, orderID, reason string) error {
	existing, account, err := store.LockPaymentAccount(ctx, tx, orderID)
	if err != nil {
		return err
	}
	switch domain.DecideRefund(existing, account) {
	case domain.RefundSkip:
		return nil
	case domain.RefundTombstone:
		if err := store.InsertTombstone(ctx, tx, orderID, domain.NoteRefundBeforeCharge+reason, store.Compensation); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentRefunded{Amount: 0, Reason: reason})
	case domain.RefundCredit:
		if err := store.CreditBack(ctx, tx, *existing, reason, store.Compensation); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentRefunded{CustomerID: existing.CustomerID, Amount: existing.Amount, Reason: reason})
	case domain.RefundRefuse:
		return refused("refund", existing, account)
	}
	return fmt.Errorf("refund %s: unhandled decision", orderID)
}

// cancel undoes the order's payment whatever the saga's step, and
// acknowledges with PaymentCancelled in the same transaction. It locks as
// refund does (the payment, then the charged account), so a cancel and a
// compensation's refund of one order run one after the other, and the
// second finds REFUNDED: the money goes back once.
func cancel(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.OrderCancelRequested) error {
	existing, account, err := store.LockPaymentAccount(ctx, tx, e.OrderID)
	if err != nil {
		return err
	}
	switch domain.DecideCancel(existing, account) {
	case domain.CancelSkip:
		tx.Log.Info("order cancel already handled")
		return nil
	case domain.CancelTombstone:
		if err := store.InsertTombstone(ctx, tx, e.OrderID, domain.NoteCancelBeforeCharge+p.Reason, store.Cancellation); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentCancelled{Amount: 0})
	case domain.CancelAcknowledge:
		// Declined, or refunded by a compensation: nothing to give back.
		if err := store.MarkPaymentCancelled(ctx, tx, e.OrderID); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentCancelled{CustomerID: existing.CustomerID, Amount: 0})
	case domain.CancelCredit:
		if err := store.CreditBack(ctx, tx, *existing, domain.NoteCancelled+p.Reason, store.Cancellation); err != nil {
			return err
		}
		return tx.Emit(ctx, events.PaymentCancelled{CustomerID: existing.CustomerID, Amount: existing.Amount})
	case domain.CancelRefuse:
		return refused("cancel", existing, account)
	}
	return fmt.Errorf("cancel %s: unhandled decision", e.OrderID)
}

// refused is the permanent error of a refund or cancel that would credit
// another currency than the one charged: a human settles it.
func refused(op string, p *domain.Payment, account *domain.Account) error {
	held := "no account"
	if account != nil {
		held = "an account in " + account.Currency
	}
	return consumer.Permanent(fmt.Errorf("%s %s: %d %s was charged to %s, who now has %s: not credited in another currency; settle it by hand",
		op, p.OrderID, p.Amount, p.Currency, p.CustomerID, held))
}
