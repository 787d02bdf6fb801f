package domain

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Limits of a page of GET /orders.
const (
	// DefaultListLimit is the page size when the request names none.
	DefaultListLimit = 20
	// MaxListLimit bounds the page size, and so the work of one request.
	MaxListLimit = 100
)

// Statuses are the states an order can be in, in the order they are
// documented; GET /orders?status= accepts exactly these.
var Statuses = []Status{StatusPending, StatusCancelling, StatusCompleted, StatusCancelled}

// ListQuery is a validated GET /orders request: which orders, how many,
// and from where. Orders are listed newest first — created_at descending,
// then id descending to order those created in the same microsecond.
type ListQuery struct {
	// CustomerID keeps only this customer's orders; "" keeps all.
	CustomerID string
	// Status keeps only orders in this state; "" keeps all.
	Status Status
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
	// After is the key of the previous page's last order; nil for the
	// first page.
	After *Cursor
}

// listParams are the query parameters of GET /orders.
var listParams = []string{"customer_id", "status", "limit", "cursor"}

// ParseListQuery validates the query parameters of GET /orders. Every
// parameter is optional and may appear once; an unknown one is refused
// rather than ignored, so a misspelt filter does not silently list every
// order. The error text is meant for the client: it names the parameter.
func ParseListQuery(params map[string][]string) (ListQuery, error) {
	q := ListQuery{Limit: DefaultListLimit}
	for name, vals := range params {
		if !slices.Contains(listParams, name) {
			return q, fmt.Errorf("unknown query parameter %q; GET /orders takes customer_id, status, limit and cursor", name)
		}
		if len(vals) != 1 {
			return q, fmt.Errorf("%s must be given at most once, got %d", name, len(vals))
		}
	}
	one := func(name string) (string, bool) {
		v, ok := params[name]
		if !ok {
			return "", false
		}
		return v[0], true
	}
	if v, ok := one("customer_id"); ok {
		if !events.ValidID(v) {
			return q, fmt.Errorf("customer_id must be %s", events.IDRule)
		}
		q.CustomerID = v
	}
	if v, ok := one("status"); ok {
		if !slices.Contains(Statuses, Status(v)) {
			return q, fmt.Errorf("status must be PENDING, CANCELLING, COMPLETED or CANCELLED, got %q", v)
		}
		q.Status = Status(v)
	}
	if v, ok := one("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return q, fmt.Errorf("limit must be an integer from 1 to %d, got %q", MaxListLimit, v)
		}
		q.Limit = n
	}
	if v, ok := one("cursor"); ok {
		c, err := DecodeCursor(v)
		if err != nil {
			return q, fmt.Errorf("cursor is not one a page of GET /orders gave: %w", err)
		}
		q.After = &c
	}
	return q, nil
}

// Cursor is the sort key of an order in a listing: the next page starts
// right after the order with this key, so an order created meanwhile does
// not shift the pages (as an OFFSET would) and the database seeks to it
// through an index instead of counting rows.
type Cursor struct {
	CreatedAt time.Time `json:"created_at"`
	ID        string    `json:"id"`
}

// CursorOf returns o's key.
func CursorOf(o Order) Cursor { return Cursor{CreatedAt: o.CreatedAt, ID: o.ID} }

// Encode returns c as the opaque next_cursor clients send back: URL-safe
// base64, without padding, of its JSON. Clients must not build or read it;
// its content may change.
func (c Cursor) Encode() string {
	// A struct of a time and a string always marshals.
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("domain: marshal cursor: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Cursor decoding failures.
var errCursor = errors.New("malformed")

// DecodeCursor reverses Encode. Anything Encode cannot have written —
// other base64, other JSON, a missing or zero time, an id that is not a
// UUID — is an error.
func DecodeCursor(s string) (Cursor, error) {
	var c Cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, fmt.Errorf("%w: not base64url", errCursor)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Cursor{}, fmt.Errorf("%w: not a cursor", errCursor)
	}
	if dec.More() {
		return Cursor{}, fmt.Errorf("%w: data after the cursor", errCursor)
	}
	if c.CreatedAt.IsZero() {
		return Cursor{}, fmt.Errorf("%w: no created_at", errCursor)
	}
	id, err := uuid.Parse(c.ID)
	if err != nil || id.String() != c.ID {
		return Cursor{}, fmt.Errorf("%w: id is not a UUID", errCursor)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// Page is one page of GET /orders.
type Page struct {
	// Orders are newest first; never null, [] when none match.
	Orders []Order `json:"orders"`
	// NextCursor fetches the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// NewPage returns the page of limit orders from orders, which holds up to
// limit+1 orders in listing order: the one past limit only tells that
// another page follows, and is left to it.
func NewPage(orders []Order, limit int) Page {
	if orders == nil {
		orders = []Order{}
	}
	if len(orders) <= limit {
		return Page{Orders: orders}
	}
	orders = orders[:limit]
	return Page{Orders: orders, NextCursor: CursorOf(orders[limit-1]).Encode()}
}
