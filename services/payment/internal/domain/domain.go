// Package domain holds the payment service's decisions as pure functions of
// the current state: whether an order can be charged, and what a refund or
// a cancel must do.
package domain

import (
	"fmt"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Status is a payment's state.
type Status string

// Payment states. COMPLETED and DECLINED are outcomes of a charge; REFUNDED
// is the end of a compensated saga.
const (
	StatusCompleted Status = "COMPLETED"
	StatusDeclined  Status = "DECLINED"
	StatusRefunded  Status = "REFUNDED"
)

// Decline details, carried in PaymentDeclined and, from there, the order's
// cancel reason: the event vocabulary's words, so the order reads them.
const (
	DeclineInsufficientFunds = events.ReasonInsufficientFunds
	DeclineUnknownCustomer   = events.ReasonUnknownCustomer
	DeclineCurrencyMismatch  = events.ReasonCurrencyMismatch
)

// Payment is the record of one order's charge.
type Payment struct {
	OrderID    string `db:"order_id" json:"order_id"`
	CustomerID string `db:"customer_id" json:"customer_id"`
	Amount     int64  `db:"amount" json:"amount"`
	Currency   string `db:"currency" json:"currency"`
	Status     Status `db:"status" json:"status"`
	// Cancelled says the order's cancel was handled (and acknowledged)
	// already; the row keeps its status, REFUNDED or DECLINED.
	Cancelled bool `db:"cancelled" json:"-"`
}

// Account is a customer's balance, in the currency's smallest unit.
type Account struct {
	CustomerID string `db:"customer_id" json:"customer_id"`
	Balance    int64  `db:"balance" json:"balance"`
	// Currency is the ISO 4217 code the balance is held in. It never
	// changes once the account exists, so a refund credits the currency
	// the order was charged in.
	Currency string `db:"currency" json:"currency"`
	// Version rises with every change of the row; the API sends it as the
	// ETag, not in the body.
	Version int64 `db:"version" json:"-"`
}

// CurrentVersion is the account's version (web.Versioned: its ETag).
func (a Account) CurrentVersion() int64 { return a.Version }

// ChargeAction is what a charge request leads to.
type ChargeAction int

// Charge outcomes.
const (
	// ChargeSkip: the order already has a payment record — charged,
	// declined, or refunded before the charge arrived — so a charge now
	// would be a second one.
	ChargeSkip ChargeAction = iota
	// ChargeDebit: take Amount from the balance; emit PaymentCompleted.
	ChargeDebit
	// ChargeDecline: record the decline; emit PaymentDeclined.
	ChargeDecline
)

// ChargeDecision is the outcome of DecideCharge.
type ChargeDecision struct {
	Action ChargeAction
	// Detail says why a charge is declined.
	Detail string
}

// DecideCharge decides what to do when an order asks to be paid amount in
// currency. existing is the order's payment record and account the
// customer's, each nil if absent.
func DecideCharge(existing *Payment, account *Account, amount int64, currency string) ChargeDecision {
	switch {
	case existing != nil:
		return ChargeDecision{Action: ChargeSkip}
	case account == nil:
		return ChargeDecision{Action: ChargeDecline, Detail: DeclineUnknownCustomer}
	case account.Currency != currency:
		return ChargeDecision{Action: ChargeDecline, Detail: DeclineCurrencyMismatch}
	case amount < 0:
		return ChargeDecision{Action: ChargeDecline, Detail: fmt.Sprintf("negative amount %d", amount)}
	case account.Balance < amount:
		return ChargeDecision{Action: ChargeDecline, Detail: DeclineInsufficientFunds}
	}
	return ChargeDecision{Action: ChargeDebit}
}

// RefundAction is what a refund request leads to.
type RefundAction int

// Refund outcomes.
const (
	// RefundSkip: nothing to give back and nothing to announce — the
	// payment was declined (no money moved) or is already refunded.
	RefundSkip RefundAction = iota
	// RefundCredit: return the payment's amount to the balance; mark it
	// REFUNDED; emit PaymentRefunded.
	RefundCredit
	// RefundTombstone: the refund overtook the charge. Record the order as
	// REFUNDED with nothing charged, so the late charge becomes a no-op;
	// emit PaymentRefunded so the saga still ends.
	RefundTombstone
	// RefundRefuse: the payment is to be credited, but the account it was
	// charged to is gone or holds another currency than the one charged —
	// impossible through the API (an account's currency never changes),
	// so only a hand-made change of the database gets here. Crediting
	// the amount in another unit would create or destroy money: nothing
	// is written, and the event is refused as permanent (dead-lettered)
	// for an operator to settle.
	RefundRefuse
)

// DecideRefund decides what to do when a later step failed and the
// payment must be undone. existing is nil if the order was never charged;
// account is the charged customer's account, nil if there is none.
func DecideRefund(existing *Payment, account *Account) RefundAction {
	switch {
	case existing == nil:
		return RefundTombstone
	case existing.Status != StatusCompleted:
		return RefundSkip
	case account == nil || account.Currency != existing.Currency:
		return RefundRefuse
	}
	return RefundCredit
}

// CancelAction is what an order's cancel (OrderCancelRequested) leads to.
// Every action but CancelSkip and CancelRefuse records the cancel on the
// payment row and acknowledges it with PaymentCancelled in the same
// transaction, so the acknowledgement always follows the undo.
type CancelAction int

// Cancel outcomes.
const (
	// CancelSkip: this order's cancel was handled already (a second
	// request with a new event id); it was acknowledged then, so nothing
	// is written and nothing emitted.
	CancelSkip CancelAction = iota
	// CancelCredit: the order was charged; return the amount to the
	// balance, mark the payment REFUNDED, acknowledge with the amount.
	CancelCredit
	// CancelTombstone: the cancel overtook the charge. Record the order as
	// REFUNDED with nothing charged, so the late charge becomes a no-op
	// (ChargeSkip); acknowledge with amount 0.
	CancelTombstone
	// CancelAcknowledge: nothing is left to undo — the payment was
	// declined, or a compensation refunded it already (so the cancel never
	// refunds twice); acknowledge with amount 0.
	CancelAcknowledge
	// CancelRefuse: the charge is to be credited, but the account is gone
	// or holds another currency (only a hand-made change gets here, as for
	// RefundRefuse): refused as permanent, for an operator to settle.
	CancelRefuse
)

// DecideCancel decides what to do when the order asks every participant to
// undo its effect. existing is the order's payment, nil if it was never
// charged; account is the charged customer's account, nil if absent. A
// cancel undoes the payment as a refund does (DecideRefund) but for two
// things: a cancel handled already is skipped, and where a refund has
// nothing to give back, a cancel still acknowledges.
func DecideCancel(existing *Payment, account *Account) CancelAction {
	if existing != nil && existing.Cancelled {
		return CancelSkip
	}
	switch DecideRefund(existing, account) {
	case RefundTombstone:
		return CancelTombstone
	case RefundSkip:
		return CancelAcknowledge
	case RefundRefuse:
		return CancelRefuse
	}
	return CancelCredit
}
