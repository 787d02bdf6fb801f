package events

import (
	"fmt"
)

// TypeOrderCreated is published by the order service on TopicOrder.
const TypeOrderCreated = "OrderCreated"

// OrderCreated starts a saga. It carries everything the later steps need
// (event-carried state transfer), so no service has to call another.
type OrderCreated struct {
	CustomerID      string  `json:"customer_id"`
	Items           []Item  `json:"items"`
	TotalAmount     int64   `json:"total_amount"`
	Currency        string  `json:"currency"`
	ShippingAddress Address `json:"shipping_address"`
}

// EventType implements Payload.
func (OrderCreated) EventType() string { return TypeOrderCreated }

// Validate implements Payload. The total must be the sum of the items:
// payment charges total_amount and inventory reserves the items, so an
// order whose two disagree would take one price and ship another.
func (p OrderCreated) Validate() error {
	total := validateAmount(p.TotalAmount)
	if total != nil {
		total = fmt.Errorf("total_amount: %w", total)
	}
	items := validateItems(p.Items)
	var sum error
	if items == nil && total == nil {
		sum = validateSum(p.TotalAmount, p.Items)
	}
	return firstError(validateID("customer_id", p.CustomerID), validateSet("currency", p.Currency),
		items, total, sum, validateAddress(p.ShippingAddress))
}

// validateSum checks that total is Σ quantity × unit_price of items, whose
// fields validateItems has checked. Each step is bounded by MaxAmount
// before it is taken, so no product or sum can wrap around int64.
func validateSum(total int64, items []Item) error {
	var sum int64
	for _, it := range items {
		if it.UnitPrice != 0 && it.Quantity > (MaxAmount-sum)/it.UnitPrice {
			return fmt.Errorf("total_amount %d is not the sum of the items' quantity × unit_price, which exceeds %d", total, int64(MaxAmount))
		}
		sum += it.Quantity * it.UnitPrice
	}
	if sum != total {
		return fmt.Errorf("total_amount %d is not the sum of the items' quantity × unit_price, %d", total, sum)
	}
	return nil
}

// Event types that end a saga, published by the order service on
// TopicOrder once the order is terminal. No participant needs them to do
// its work; they make the end of a saga visible to observers (the tracker)
// as a fact rather than an inference from the last step.
const (
	TypeOrderCompleted = "OrderCompleted"
	TypeOrderCancelled = "OrderCancelled"
)

// OrderCompleted: the order is COMPLETED; every step succeeded.
type OrderCompleted struct{}

// EventType implements Payload.
func (OrderCompleted) EventType() string { return TypeOrderCompleted }

// Validate implements Payload.
func (OrderCompleted) Validate() error { return nil }

// OrderCancelled: the order is CANCELLED and every effect of its saga is
// undone. Reason is the order's cancel reason.
type OrderCancelled struct {
	Reason string `json:"reason"`
}

// EventType implements Payload.
func (OrderCancelled) EventType() string { return TypeOrderCancelled }

// Validate implements Payload.
func (p OrderCancelled) Validate() error { return validateSet("reason", p.Reason) }

// TypeOrderCancelRequested is published by the order service on TopicOrder
// when it accepts a cancel: the customer's (POST /orders/{id}/cancel) or its
// own, when the saga outlived ORDER_DEADLINE.
const TypeOrderCancelRequested = "OrderCancelRequested"

// OrderCancelRequested asks every participant to undo its effect on the
// order, whatever step the saga has reached, and to refuse the steps that
// arrive later: payment refunds, inventory releases, shipping cancels the
// shipment. Each answers with one acknowledgement on its own topic
// (PaymentCancelled, InventoryCancelled, ShipmentCancelled) in the
// transaction of its undo; the order is CANCELLED with Reason once it holds
// all three. The order service queues it in the transaction that moves the
// order to CANCELLING, and only then, so each order has at most one.
type OrderCancelRequested struct {
	// Reason is ReasonCustomerCancelled or ReasonTimeout.
	Reason string `json:"reason"`
}

// EventType implements Payload.
func (OrderCancelRequested) EventType() string { return TypeOrderCancelRequested }

// Validate implements Payload.
func (p OrderCancelRequested) Validate() error {
	return validateReason(p.Reason, ReasonCustomerCancelled, ReasonTimeout)
}
