// Package domain holds the inventory service's decisions as pure functions
// of the current state: whether a paid order's items can be reserved, and
// what a release or a cancel must do.
package domain

import (
	"math"
	"sort"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Status is a reservation's state.
type Status string

// Reservation states. RESERVED and REJECTED are outcomes of a reserve;
// RELEASED is the end of a compensated saga.
const (
	StatusReserved Status = "RESERVED"
	StatusRejected Status = "REJECTED"
	StatusReleased Status = "RELEASED"
)

// Stock is one SKU's units: Available can be reserved by new orders,
// Reserved is held for paid orders until they ship or are released.
type Stock struct {
	SKU       string `db:"sku" json:"sku"`
	Available int64  `db:"available" json:"available"`
	Reserved  int64  `db:"reserved" json:"reserved"`
	// Version rises with every change of the row; the API sends it as the
	// ETag, not in the body.
	Version int64 `db:"version" json:"-"`
}

// CurrentVersion is the stock's version (web.Versioned: its ETag).
func (s Stock) CurrentVersion() int64 { return s.Version }

// Reservation is the record of one order's reserve. Items are the order's
// lines as requested: reserved for RESERVED, refused for REJECTED, returned
// (or none, for a tombstone) for RELEASED.
type Reservation struct {
	OrderID string `db:"order_id" json:"order_id"`
	Status  Status `db:"status" json:"status"`
	// Items are a jsonb column, which the store decodes itself.
	Items []events.Item `db:"-" json:"items"`
	// Cancelled says the order's cancel was handled (and acknowledged)
	// already; the row keeps its status, RELEASED or REJECTED.
	Cancelled bool `db:"cancelled" json:"-"`
}

// ReserveAction is what a reserve request leads to.
type ReserveAction int

// Reserve outcomes.
const (
	// ReserveSkip: the order already has a reservation record — reserved,
	// rejected, or released before the reserve arrived — so reserving now
	// would hold units for an order that is already settled.
	ReserveSkip ReserveAction = iota
	// ReserveAll: every SKU has enough units; move Needed from available to
	// reserved and emit InventoryReserved.
	ReserveAll
	// Reject: at least one SKU is short; reserve nothing (a partial
	// reservation would be a shipment nobody ordered) and emit
	// InventoryRejected with every shortage.
	Reject
)

// ReserveDecision is the outcome of DecideReserve.
type ReserveDecision struct {
	Action ReserveAction
	// Shortages lists every short SKU, sorted by SKU, when Action is Reject.
	Shortages []events.Shortage
	// Needed is the total quantity per SKU the order asks for; set unless
	// Action is ReserveSkip.
	Needed map[string]int64
}

// DecideReserve decides what to do when a paid order asks for its items.
// existing is the order's reservation record, nil if absent; stock holds the
// available units by SKU, where a missing SKU has none. Items come from a
// validated event, so every quantity is at least 1.
func DecideReserve(existing *Reservation, stock map[string]int64, items []events.Item) ReserveDecision {
	if existing != nil {
		return ReserveDecision{Action: ReserveSkip}
	}
	needed := Quantities(items)
	var shortages []events.Shortage
	for sku, n := range needed {
		if avail := stock[sku]; avail < n {
			shortages = append(shortages, events.Shortage{SKU: sku, Requested: n, Available: avail})
		}
	}
	if len(shortages) > 0 {
		sort.Slice(shortages, func(i, j int) bool { return shortages[i].SKU < shortages[j].SKU })
		return ReserveDecision{Action: Reject, Shortages: shortages, Needed: needed}
	}
	return ReserveDecision{Action: ReserveAll, Needed: needed}
}

// Quantities sums the quantities of items by SKU, since one SKU may appear
// in several order lines. A sum that would overflow saturates at
// math.MaxInt64, so absurd orders come out short instead of wrapping to a
// negative quantity that would add stock.
func Quantities(items []events.Item) map[string]int64 {
	q := make(map[string]int64, len(items))
	for _, it := range items {
		if q[it.SKU] > math.MaxInt64-it.Quantity {
			q[it.SKU] = math.MaxInt64
			continue
		}
		q[it.SKU] += it.Quantity
	}
	return q
}

// ReleaseAction is what a release request leads to.
type ReleaseAction int

// Release outcomes.
const (
	// ReleaseSkip: nothing to give back and nothing to announce — the
	// reserve was rejected (no units moved) or is already released.
	ReleaseSkip ReleaseAction = iota
	// ReleaseReturn: move the reservation's units back to available; mark
	// it RELEASED; emit InventoryReleased.
	ReleaseReturn
	// ReleaseTombstone: the release overtook the reserve. Record the order
	// as RELEASED with no items, so the late reserve becomes a no-op; emit
	// InventoryReleased so payment still refunds and the saga ends.
	ReleaseTombstone
)

// DecideRelease decides what to do when a later step failed and the
// reservation must be undone. existing is nil if the order was never
// reserved.
func DecideRelease(existing *Reservation) ReleaseAction {
	switch {
	case existing == nil:
		return ReleaseTombstone
	case existing.Status == StatusReserved:
		return ReleaseReturn
	}
	return ReleaseSkip
}

// CancelAction is what an order's cancel (OrderCancelRequested) leads to.
// Every action but CancelSkip records the cancel on the reservation row and
// acknowledges it with InventoryCancelled in the same transaction, so the
// acknowledgement always follows the release.
type CancelAction int

// Cancel outcomes.
const (
	// CancelSkip: this order's cancel was handled already (a second
	// request with a new event id); it was acknowledged then.
	CancelSkip CancelAction = iota
	// CancelReturn: the order holds units; move them back to available,
	// mark the reservation RELEASED, acknowledge with its items.
	CancelReturn
	// CancelTombstone: the cancel overtook the reserve. Record the order as
	// RELEASED with no items, so the late reserve becomes a no-op
	// (ReserveSkip); acknowledge with no items.
	CancelTombstone
	// CancelAcknowledge: nothing is held — the reserve was rejected, or a
	// compensation released it already (so the cancel never releases
	// twice); acknowledge with no items.
	CancelAcknowledge
)

// DecideCancel decides what to do when the order asks every participant to
// undo its effect. existing is nil if the order was never reserved. A
// cancel undoes the reservation as a release does (DecideRelease) but for
// two things: a cancel handled already is skipped, and where a release has
// nothing to give back, a cancel still acknowledges.
func DecideCancel(existing *Reservation) CancelAction {
	if existing != nil && existing.Cancelled {
		return CancelSkip
	}
	switch DecideRelease(existing) {
	case ReleaseTombstone:
		return CancelTombstone
	case ReleaseReturn:
		return CancelReturn
	}
	return CancelAcknowledge
}
