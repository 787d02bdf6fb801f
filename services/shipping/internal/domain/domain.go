// Package domain holds the shipping service's decision as a pure function:
// whether an order whose items are reserved can be shipped. It takes the
// current state and returns what to change, so every rule is tested without
// a database or a broker.
package domain

import (
	"strings"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Status is a shipment's state.
type Status string

// Shipment states. SCHEDULED ends the saga's forward path; FAILED starts its
// compensations.
const (
	StatusScheduled Status = "SCHEDULED"
	StatusFailed    Status = "FAILED"
)

// Shipment is the record of one order's shipping outcome.
type Shipment struct {
	OrderID string `db:"order_id" json:"order_id"`
	Status  Status `db:"status" json:"status"`
	Country string `db:"country" json:"country"`
	// Reason says why a shipment failed; empty when scheduled.
	Reason string `db:"reason" json:"reason"`
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
