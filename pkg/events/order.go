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
