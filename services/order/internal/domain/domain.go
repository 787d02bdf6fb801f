// Package domain holds the order service's rules as pure functions: what a
// valid order request is, what it costs, and how an order's status moves as
// the saga reports back.
package domain

import (
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Status is an order's state.
type Status string

// Order states. An order is PENDING while its saga runs and ends COMPLETED
// or CANCELLED; both ends are terminal. CANCELLING is an order whose cancel
// was accepted (the customer's, or the deadline's) while the participants
// undo their effects; it ends CANCELLED once all three have acknowledged.
const (
	StatusPending    Status = "PENDING"
	StatusCancelling Status = "CANCELLING"
	StatusCompleted  Status = "COMPLETED"
	StatusCancelled  Status = "CANCELLED"
)

// Terminal reports whether s is an end of the saga: nothing moves the
// order any more.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusCancelled }

// Draft is a Request that passed Validate: normalised (default currency,
// upper-case currency and country) and priced.
type Draft struct {
	CustomerID      string         `json:"customer_id"`
	Items           []events.Item  `json:"items"`
	TotalAmount     int64          `json:"total_amount"`
	Currency        string         `json:"currency"`
	ShippingAddress events.Address `json:"shipping_address"`
}

// Order is an order as stored and as returned by the API.
type Order struct {
	ID              string         `json:"id"`
	CustomerID      string         `json:"customer_id"`
	Items           []events.Item  `json:"items"`
	TotalAmount     int64          `json:"total_amount"`
	Currency        string         `json:"currency"`
	ShippingAddress events.Address `json:"shipping_address"`
	Status          Status         `json:"status"`
	// CancelReason is empty unless Status is CANCELLING (the reason the
	// cancel was requested for) or CANCELLED; then it is one of the
	// events.Reason… constants.
	CancelReason string `json:"cancel_reason"`
	// Acks are the participants' acknowledgements of a cancel that the
	// order holds; see Transition.
	Acks      Acks      `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// RequestHash is Draft.Hash of the request that created the order.
	RequestHash string `json:"-"`
}

// NewOrder returns the PENDING order id for d. Its times are set when it is
// stored.
func NewOrder(id string, d Draft) Order {
	return Order{
		ID:              id,
		CustomerID:      d.CustomerID,
		Items:           d.Items,
		TotalAmount:     d.TotalAmount,
		Currency:        d.Currency,
		ShippingAddress: d.ShippingAddress,
		Status:          StatusPending,
		RequestHash:     d.Hash(),
	}
}

// Created returns the OrderCreated payload that starts o's saga. It carries
// everything the later steps need, so no service has to call back.
func (o Order) Created() events.OrderCreated {
	return events.OrderCreated{
		CustomerID:      o.CustomerID,
		Items:           o.Items,
		TotalAmount:     o.TotalAmount,
		Currency:        o.Currency,
		ShippingAddress: o.ShippingAddress,
	}
}

// State is what the saga's events move: an order's status, its cancel
// reason and the acknowledgements of its cancel.
type State struct {
	Status Status
	Reason string
	Acks   Acks
}

// State returns o's State.
func (o Order) State() State { return State{Status: o.Status, Reason: o.CancelReason, Acks: o.Acks} }

// Acks records which participants have acknowledged an order's cancel: each
// emits its acknowledgement in the transaction that undid its effect
// (payment's refund, inventory's release, shipping's cancelled shipment),
// so an ack held here means that effect is gone for good.
type Acks struct {
	Payment   bool
	Inventory bool
	Shipment  bool
}

// All reports whether every participant has acknowledged.
func (a Acks) All() bool { return a.Payment && a.Inventory && a.Shipment }

// Event is what the saga reports about an order: an event type and, for
// PaymentRefunded, the cancel reason it carries, for PaymentDeclined, its
// detail.
type Event struct {
	Type   string
	Reason string
}

// DeclineReason is the cancel reason of a PaymentDeclined with detail:
// payment's own word, so the order says why (insufficient_funds, not just
// declined). A detail the order API does not name — from a payment release
// older or newer than this code — reads payment_declined, which is true.
func DeclineReason(detail string) string {
	switch detail {
	case events.ReasonInsufficientFunds, events.ReasonUnknownCustomer, events.ReasonCurrencyMismatch:
		return detail
	}
	return events.ReasonPaymentDeclined
}

// Transition decides how an order in state s reacts to ev; changed is false
// when nothing is to be written, and next is then s. A PENDING order ends
// on its own: COMPLETED on ShipmentScheduled, CANCELLED on PaymentDeclined
// or PaymentRefunded. A CANCELLING order moves only on the three
// acknowledgements of its cancel, in any order, each counted once, and the
// third makes it CANCELLED with the cancel's reason. COMPLETED and
// CANCELLED are terminal: whatever arrives later changes nothing.
func Transition(s State, ev Event) (next State, changed bool) {
	switch s.Status {
	case StatusPending:
		switch ev.Type {
		case events.TypeShipmentScheduled:
			return State{Status: StatusCompleted}, true
		case events.TypePaymentDeclined:
			return State{Status: StatusCancelled, Reason: DeclineReason(ev.Reason)}, true
		case events.TypePaymentRefunded:
			return State{Status: StatusCancelled, Reason: ev.Reason}, true
		}
	case StatusCancelling:
		// Nothing but an acknowledgement: a ShipmentScheduled must not
		// complete an order whose cancel was accepted (shipping cancels
		// that shipment and acknowledges), and a decline or a
		// compensation's refund overlapping the cancel is acknowledged all
		// the same, so the cancel alone decides how the order ends.
		next = s
		switch ev.Type {
		case events.TypePaymentCancelled:
			next.Acks.Payment = true
		case events.TypeInventoryCancelled:
			next.Acks.Inventory = true
		case events.TypeShipmentCancelled:
			next.Acks.Shipment = true
		}
		if next.Acks == s.Acks {
			return s, false
		}
		if next.Acks.All() {
			next.Status = StatusCancelled
		}
		return next, true
	}
	return s, false
}

// CancelDecision is what a request to cancel an order leads to.
type CancelDecision int

// Cancel decisions.
const (
	// CancelRefused: the order is COMPLETED or CANCELLED; its saga has
	// ended and can no longer be undone.
	CancelRefused CancelDecision = iota
	// CancelAccepted: the order is PENDING. It becomes CANCELLING with the
	// reason, and OrderCancelRequested is emitted with the change.
	CancelAccepted
	// CancelAlreadyRequested: the order is CANCELLING already. Nothing is
	// written or emitted; the request is answered as the first was, so a
	// client may retry it. The first request's reason stays.
	CancelAlreadyRequested
)

// DecideCancel decides a request to cancel an order in status current, the
// customer's or the deadline's. A PENDING order can still be undone, since
// the order completes only when its shipment is scheduled, and that
// completion and this decision are taken under the same row lock: whichever
// comes first wins, and a cancel that wins makes shipping cancel the
// shipment.
func DecideCancel(current Status) CancelDecision {
	switch current {
	case StatusPending:
		return CancelAccepted
	case StatusCancelling:
		return CancelAlreadyRequested
	}
	return CancelRefused
}

// Ended returns the event that announces an order's terminal status:
// OrderCompleted, or OrderCancelled with the cancel reason.
func Ended(status Status, reason string) events.Payload {
	if status == StatusCompleted {
		return events.OrderCompleted{}
	}
	return events.OrderCancelled{Reason: reason}
}
