// This file holds what a valid order request is and what it costs: the
// checks of POST /orders' body, each error naming the field as the client
// wrote it. TestValidate shows them.

package domain

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Limits of an order request.
const (
	// MaxIDLen bounds customer_id and sku in bytes. They must also match
	// events.IDPattern, the other services' rule for ids in paths, so every
	// id the order service accepts can be looked up there.
	MaxIDLen = events.MaxIDLen
	// MaxItems bounds the lines of one order, and so the size of every
	// event that carries them.
	MaxItems = 100
	// MaxAddressFieldLen bounds postal_code and line1, in characters.
	MaxAddressFieldLen = 200
	// MaxIdempotencyKeyLen bounds the Idempotency-Key header.
	MaxIdempotencyKeyLen = 255
	// DefaultCurrency is used when a request names none. It is also
	// the currency of an account opened without one, and payment
	// declines an order in another currency than the account's
	// (currency_mismatch), so the default can never charge money in a
	// currency the customer does not hold.
	DefaultCurrency = "JPY"
)

// Request is a client's order as it arrives in POST /orders, before any
// checks.
type Request struct {
	CustomerID      string         `json:"customer_id"`
	Items           []events.Item  `json:"items"`
	Currency        string         `json:"currency"`
	ShippingAddress events.Address `json:"shipping_address"`
}

// Validate checks r and returns it normalised and with its total. The error
// text is meant for the client: it names the offending field.
func Validate(r Request) (Draft, error) {
	if !events.ValidID(r.CustomerID) {
		return Draft{}, fmt.Errorf("customer_id must be %s", events.IDRule)
	}
	if len(r.Items) == 0 || len(r.Items) > MaxItems {
		return Draft{}, fmt.Errorf("items must hold 1 to %d lines, got %d", MaxItems, len(r.Items))
	}
	for i, it := range r.Items {
		switch {
		case !events.ValidID(it.SKU):
			return Draft{}, fmt.Errorf("items[%d].sku must be %s", i, events.IDRule)
		case it.Quantity < 1 || it.Quantity > events.MaxAmount:
			return Draft{}, fmt.Errorf("items[%d].quantity must be 1 to %d, got %d", i, int64(events.MaxAmount), it.Quantity)
		case it.UnitPrice < 0 || it.UnitPrice > events.MaxAmount:
			return Draft{}, fmt.Errorf("items[%d].unit_price must be 0 to %d, got %d", i, int64(events.MaxAmount), it.UnitPrice)
		}
	}
	// The client's unit_price is taken as sent, which only a demo may do:
	// a real shop replaces each with its catalog's price here, before the
	// total, so OrderCreated carries prices the order service vouches for.
	// The total is capped like every amount the saga carries, so the
	// balances and stock the other services add it to stay in bigint.
	total, err := Total(r.Items)
	if err != nil {
		return Draft{}, fmt.Errorf("total exceeds %d: %w", int64(events.MaxAmount), err)
	}
	if total > events.MaxAmount {
		return Draft{}, fmt.Errorf("total exceeds %d: got %d", int64(events.MaxAmount), total)
	}

	// Codes are one rule for both: letters in either case, kept upper
	// case, as ISO writes them ("jpy" is JPY, "jp" is JP).
	currency := cmp.Or(r.Currency, DefaultCurrency)
	if !isLetters(currency, 3) {
		return Draft{}, fmt.Errorf("currency must be 3 letters (ISO 4217, e.g. JPY), got %q", r.Currency)
	}
	currency = strings.ToUpper(currency)

	addr := r.ShippingAddress
	if !isLetters(addr.Country, 2) {
		return Draft{}, fmt.Errorf("shipping_address.country must be 2 letters (ISO 3166-1 alpha-2, e.g. JP), got %q", addr.Country)
	}
	addr.Country = strings.ToUpper(addr.Country)
	if err := validateText("shipping_address.postal_code", addr.PostalCode); err != nil {
		return Draft{}, err
	}
	if err := validateText("shipping_address.line1", addr.Line1); err != nil {
		return Draft{}, err
	}

	// A private copy, so a caller reusing its slice cannot change a
	// validated draft behind our back.
	items := append([]events.Item(nil), r.Items...)
	return Draft{
		CustomerID:      r.CustomerID,
		Items:           items,
		TotalAmount:     total,
		Currency:        currency,
		ShippingAddress: addr,
	}, nil
}

// ErrTotalOverflow means an order's total does not fit in an int64.
var ErrTotalOverflow = errors.New("total overflows")

// Total returns Σ quantity × unit_price. Amounts are client input, so every
// multiplication and addition is checked: a wrapped int64 would turn a huge
// order into a cheap (or negative) one. Items must already have
// quantity >= 1 and unit_price >= 0.
func Total(items []events.Item) (int64, error) {
	var total int64
	for _, it := range items {
		if it.UnitPrice != 0 && it.Quantity > math.MaxInt64/it.UnitPrice {
			return 0, ErrTotalOverflow
		}
		line := it.Quantity * it.UnitPrice
		if total > math.MaxInt64-line {
			return 0, ErrTotalOverflow
		}
		total += line
	}
	return total, nil
}

// ValidateIdempotencyKey checks an Idempotency-Key header value: 1 to 255
// printable ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("Idempotency-Key must be 1 to %d characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("Idempotency-Key must be printable ASCII; byte %d is 0x%02x", i, c)
		}
	}
	return nil
}

// validateText checks a free-text field: at most MaxAddressFieldLen
// characters and no control character — NUL, which PostgreSQL cannot store,
// included; a line break has no place in a one-line field either.
func validateText(field, s string) error {
	if utf8.RuneCountInString(s) > MaxAddressFieldLen {
		return fmt.Errorf("%s must be at most %d characters", field, MaxAddressFieldLen)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%s must not contain control characters; found one at byte %d", field, i)
	}
	return nil
}

// isLetters reports whether s is exactly n ASCII letters, of either case.
func isLetters(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z') && !('a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
