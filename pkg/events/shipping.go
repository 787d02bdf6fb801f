package events

// Event types published by the shipping service on TopicShipping.
const (
	TypeShipmentScheduled = "ShipmentScheduled"
	TypeShipmentFailed    = "ShipmentFailed"
)

// ShipmentScheduled: the last forward step. The order service completes the
// order.
type ShipmentScheduled struct {
	Country string `json:"country"`
}

// EventType implements Payload.
func (ShipmentScheduled) EventType() string { return TypeShipmentScheduled }

// Validate implements Payload.
func (p ShipmentScheduled) Validate() error {
	return validateAddress(Address{Country: p.Country})
}

// ShipmentFailed: the destination is not served. Inventory reacts by
// releasing the reservation, which in turn makes payment refund.
type ShipmentFailed struct {
	Country string `json:"country"`
	Reason  string `json:"reason"` // always ReasonShippingUnavailable
}

// EventType implements Payload.
func (ShipmentFailed) EventType() string { return TypeShipmentFailed }

// Validate implements Payload.
func (p ShipmentFailed) Validate() error {
	return validateReason(p.Reason, ReasonShippingUnavailable)
}
