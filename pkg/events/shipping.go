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

// TypeShipmentCancelled is shipping's acknowledgement of an
// OrderCancelRequested, on TopicShipping.
const TypeShipmentCancelled = "ShipmentCancelled"

// ShipmentCancelled: the order has no scheduled shipment and never will —
// a SCHEDULED one was cancelled (WasScheduled, in the same transaction),
// or there was none (failed, or not decided yet, which leaves a tombstone
// that makes the late InventoryReserved a no-op). The order service counts
// it towards the cancel.
type ShipmentCancelled struct {
	// WasScheduled says a scheduled shipment was cancelled.
	WasScheduled bool `json:"was_scheduled"`
}

// EventType implements Payload.
func (ShipmentCancelled) EventType() string { return TypeShipmentCancelled }

// Validate implements Payload.
func (ShipmentCancelled) Validate() error { return nil }
