// Package domain holds the order service's rules as pure functions: what a
// valid order request is, what it costs, and how an order's status moves as
// the saga reports back.
package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// Draft is a Request that passed Validate: normalised (default currency,
// upper-case currency and country) and priced.
type Draft struct {
	CustomerID      string         `json:"customer_id"`
	Items           []events.Item  `json:"items"`
	TotalAmount     int64          `json:"total_amount"`
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

// Hash identifies the request a Draft came from, for Idempotency-Key
// replays: the SHA-256, in hex, of the draft's JSON. It is taken after
// decoding and normalising, so the same order sent with other whitespace,
// another field order, "jp" and "jpy" instead of "JP" and "JPY", or an
// omitted default currency hashes the same, while any change of content
// does not.
func (d Draft) Hash() string {
	// Marshalling a struct of strings, ints and slices cannot fail, and
	// encoding/json writes struct fields in declaration order.
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("domain: marshal draft: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
	// reason, and OrderCancelRequested is queued with the change.
	CancelAccepted
	// CancelAlreadyRequested: the order is CANCELLING already. Nothing is
	// written or queued; the request is answered as the first was, so a
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
