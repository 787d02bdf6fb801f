package events

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
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

// Cancel reasons: why a saga ended with the order cancelled, in the words of
// the participant that ended it. They travel in the failing and compensating
// events so the order service can record them.
const (
	// Payment's reasons, carried in PaymentDeclined.Detail.
	ReasonInsufficientFunds = "insufficient_funds"
	ReasonUnknownCustomer   = "unknown_customer"
	ReasonCurrencyMismatch  = "currency_mismatch"
	// ReasonPaymentDeclined: a PaymentDeclined whose detail is none of
	// payment's reasons above — from a producer older or newer than this
	// code — so the order still ends with a reason that is true.
	ReasonPaymentDeclined     = "payment_declined"
	ReasonOutOfStock          = "out_of_stock"
	ReasonShippingUnavailable = "shipping_unavailable"
	// ReasonCustomerCancelled: the customer cancelled the order
	// (POST /orders/{id}/cancel) and every effect was undone.
	ReasonCustomerCancelled = "customer_cancelled"
	// ReasonTimeout: the saga did not end within the order service's
	// deadline (ORDER_DEADLINE), which cancelled it as a customer would.
	ReasonTimeout = "timeout"
)

// MaxIDLen bounds an id an event carries (order_id, customer_id, sku) in
// bytes, the same limit the services' HTTP APIs apply.
const MaxIDLen = 64

// IDPattern is the one rule for the ids clients choose and send — customer
// ids, SKUs, order ids in paths: 1 to MaxIDLen characters from the URL's
// unreserved set plus ':' and '@'. Such an id needs no escaping in a path,
// so the id a client stores under PUT /accounts/{id} is the one every
// service later looks up; it holds no control character or NUL, which
// PostgreSQL text cannot store; and chi, which matches the raw escaped
// path, never sees a '%' it would pass on undecoded. The OpenAPI documents
// state it as the ids' pattern. (Decode is more lenient with ids already in
// flight: it refuses only what cannot be stored, see validateID.)
const IDPattern = `^[A-Za-z0-9._~:@-]{1,64}$`

var idRE = regexp.MustCompile(IDPattern)

// ValidID reports whether id matches IDPattern.
func ValidID(id string) bool { return idRE.MatchString(id) }

// IDRule describes IDPattern for error details.
const IDRule = "1 to 64 characters from A-Z a-z 0-9 . _ ~ : @ -"

func validateItems(items []Item) error {
	if len(items) == 0 {
		return errors.New("items is empty")
	}
	for i, it := range items {
		if err := validateID(fmt.Sprintf("items[%d].sku", i), it.SKU); err != nil {
			return err
		}
		if it.Quantity < 1 || it.Quantity > MaxAmount {
			return fmt.Errorf("items[%d].quantity %d is not in 1..%d", i, it.Quantity, int64(MaxAmount))
		}
		if it.UnitPrice < 0 || it.UnitPrice > MaxAmount {
			return fmt.Errorf("items[%d].unit_price %d is not in 0..%d", i, it.UnitPrice, int64(MaxAmount))
		}
	}
	return nil
}

// validateID checks an id: 1 to MaxIDLen bytes without control characters,
// so it can be stored, logged and used as a Kafka key as is.
func validateID(field, id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%s must be 1 to %d bytes, got %d", field, MaxIDLen, len(id))
	}
	if hasControl(id) {
		return fmt.Errorf("%s %q contains a control character", field, id)
	}
	return nil
}

// hasControl reports whether s holds a control character (C0, DEL or C1),
// NUL included.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

func validateAddress(a Address) error {
	if len(a.Country) != 2 {
		return fmt.Errorf("shipping_address.country %q is not a two-letter code", a.Country)
	}
	return nil
}

func validateAmount(amount int64) error {
	if amount < 0 || amount > MaxAmount {
		return fmt.Errorf("amount %d is not in 0..%d", amount, int64(MaxAmount))
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

// firstError returns the first of errs that is not nil: a payload's rules,
// each checked, in the order its Validate lists them, and the first one
// broken reported.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// validateSet fails when a required string field is empty.
func validateSet(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return nil
}

// validateOptionalID is validateID for an id a tombstone's event leaves
// out: empty, it is valid.
func validateOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return validateID(field, id)
}
