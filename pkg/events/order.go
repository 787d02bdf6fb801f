package events

import (
	"errors"
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

// Validate implements Payload.
func (p OrderCreated) Validate() error {
	if err := validateID("customer_id", p.CustomerID); err != nil {
		return err
	}
	if p.Currency == "" {
		return errors.New("currency is empty")
	}
	if err := validateItems(p.Items); err != nil {
		return err
	}
	if err := validateAmount(p.TotalAmount); err != nil {
		return fmt.Errorf("total_amount: %w", err)
	}
	return validateAddress(p.ShippingAddress)
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
func (p OrderCancelled) Validate() error {
	if p.Reason == "" {
		return errors.New("reason is empty")
	}
	return nil
}
