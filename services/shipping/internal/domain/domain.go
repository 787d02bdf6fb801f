// Package domain holds the shipping service's decisions as pure functions
// of the current state: whether an order whose items are reserved can be
// shipped, and what its cancel does to its shipment.
package domain

import (
	"strings"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Status is a shipment's state.
type Status string

// Shipment states. SCHEDULED ends the saga's forward path; FAILED starts its
// compensations; CANCELLED is a shipment the order's cancel undid (or a
// tombstone, when the cancel came before the reservation).
const (
	StatusScheduled Status = "SCHEDULED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
)

// Shipment is the record of one order's shipping outcome.
type Shipment struct {
	OrderID string `db:"order_id" json:"order_id"`
	Status  Status `db:"status" json:"status"`
	Country string `db:"country" json:"country"`
	// Reason says why a shipment failed or was cancelled (the order's
	// cancel reason); empty when scheduled.
	Reason string `db:"reason" json:"reason"`
	// Cancelled says the order's cancel was handled (and acknowledged)
	// already; a FAILED shipment keeps its status.
	Cancelled bool `db:"cancelled" json:"-"`
}

// Action is what a reservation leads to.
type Action int

// Shipment outcomes.
const (
	// Skip: the order already has a shipment record, scheduled or failed,
	// so deciding again would announce the outcome a second time.
	Skip Action = iota
	// Schedule: record the shipment as SCHEDULED; emit ShipmentScheduled.
	Schedule
	// Fail: record the shipment as FAILED; emit ShipmentFailed, which
	// starts the compensations.
	Fail
)

// Decision is the outcome of DecideShipment.
type Decision struct {
	Action Action
	// Country is the destination in upper case, as recorded and announced.
	Country string
	// Reason says why a shipment fails; empty unless Action is Fail.
	Reason string
}

// DecideShipment decides what to do when an order's items are reserved.
// existing is the order's shipment record, nil if absent; served holds the
// upper-case country codes the service delivers to. The country is compared
// upper-cased because ISO codes are case-insensitive and producers differ.
func DecideShipment(existing *Shipment, served map[string]bool, country string) Decision {
	country = strings.ToUpper(strings.TrimSpace(country))
	switch {
	case existing != nil:
		return Decision{Action: Skip, Country: existing.Country}
	case served[country]:
		return Decision{Action: Schedule, Country: country}
	}
	return Decision{Action: Fail, Country: country, Reason: events.ReasonShippingUnavailable}
}

// CancelAction is what an order's cancel (OrderCancelRequested) leads to.
// Every action but CancelSkip records the cancel and acknowledges it with
// ShipmentCancelled in the same transaction.
type CancelAction int

// Cancel outcomes.
const (
	// CancelSkip: this order's cancel was handled already (a second
	// request with a new event id); it was acknowledged then.
	CancelSkip CancelAction = iota
	// CancelScheduled: the shipment is SCHEDULED; it becomes CANCELLED —
	// the order's cancel was accepted, so it wins over the shipment.
	CancelScheduled
	// CancelTombstone: the cancel overtook the reservation. Record a
	// CANCELLED shipment, so the late InventoryReserved becomes a no-op
	// (Skip) and nothing is ever scheduled.
	CancelTombstone
	// CancelAcknowledge: the shipment FAILED, so nothing is to be undone.
	CancelAcknowledge
)

// DecideCancel decides what to do with an order's shipment when the order
// is cancelled. existing is nil if shipping has not decided on the order.
func DecideCancel(existing *Shipment) CancelAction {
	switch {
	case existing == nil:
		return CancelTombstone
	case existing.Cancelled:
		return CancelSkip
	case existing.Status == StatusScheduled:
		return CancelScheduled
	}
	return CancelAcknowledge
}
