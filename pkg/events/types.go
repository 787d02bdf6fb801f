package events

import (
	"errors"
	"fmt"
)

// Item is one order line. Amounts are integers in the currency's smallest
// unit (yen for JPY, cents for USD) so money is never a float.
type Item struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unit_price"`
}

// Address is where a shipment goes.
type Address struct {
	Country    string `json:"country"` // ISO 3166-1 alpha-2, upper case
	PostalCode string `json:"postal_code,omitempty"`
	Line1      string `json:"line1,omitempty"`
}

// Cancel reasons: why a saga ended with the order cancelled. They travel in
// the compensating events so the order service can record them.
const (
	ReasonPaymentDeclined     = "payment_declined"
	ReasonOutOfStock          = "out_of_stock"
	ReasonShippingUnavailable = "shipping_unavailable"
)

func validateItems(items []Item) error {
	if len(items) == 0 {
		return errors.New("items is empty")
	}
	for i, it := range items {
		if it.SKU == "" {
			return fmt.Errorf("items[%d].sku is empty", i)
		}
		if it.Quantity < 1 {
			return fmt.Errorf("items[%d].quantity %d < 1", i, it.Quantity)
		}
		if it.UnitPrice < 0 {
			return fmt.Errorf("items[%d].unit_price %d < 0", i, it.UnitPrice)
		}
	}
	return nil
}

func validateAddress(a Address) error {
	if len(a.Country) != 2 {
		return fmt.Errorf("shipping_address.country %q is not a two-letter code", a.Country)
	}
	return nil
}

func validateAmount(amount int64) error {
	if amount < 0 {
		return fmt.Errorf("amount %d < 0", amount)
	}
	return nil
}

func validateReason(reason string, allowed ...string) error {
	for _, a := range allowed {
		if reason == a {
			return nil
		}
	}
	return fmt.Errorf("reason %q is not one of %v", reason, allowed)
}
