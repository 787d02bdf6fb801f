package events

// Event types published by the inventory service on TopicInventory.
const (
	TypeInventoryReserved = "InventoryReserved"
	TypeInventoryRejected = "InventoryRejected"
	TypeInventoryReleased = "InventoryReleased"
)

// InventoryReserved: every item was moved from available to reserved.
// Shipping reacts by scheduling the shipment.
type InventoryReserved struct {
	Items           []Item  `json:"items"`
	ShippingAddress Address `json:"shipping_address"`
}

// EventType implements Payload.
func (InventoryReserved) EventType() string { return TypeInventoryReserved }

// Validate implements Payload.
func (p InventoryReserved) Validate() error {
	return firstError(validateItems(p.Items), validateAddress(p.ShippingAddress))
}

// Shortage names an item inventory could not reserve.
type Shortage struct {
	SKU       string `json:"sku"`
	Requested int64  `json:"requested"`
	Available int64  `json:"available"`
}

// InventoryRejected: at least one item was short, and nothing was reserved.
// Payment reacts by refunding.
type InventoryRejected struct {
	Reason    string     `json:"reason"` // always ReasonOutOfStock
	Shortages []Shortage `json:"shortages"`
}

// EventType implements Payload.
func (InventoryRejected) EventType() string { return TypeInventoryRejected }

// Validate implements Payload.
func (p InventoryRejected) Validate() error {
	return validateReason(p.Reason, ReasonOutOfStock)
}

// InventoryReleased: a compensation. Reserved units went back to available
// (or there were none, when the release overtook the reservation). Payment
// reacts by refunding.
type InventoryReleased struct {
	Items  []Item `json:"items,omitempty"`
	Reason string `json:"reason"` // the saga's cancel reason
}

// EventType implements Payload.
func (InventoryReleased) EventType() string { return TypeInventoryReleased }

// Validate implements Payload.
func (p InventoryReleased) Validate() error {
	return firstError(validateSet("reason", p.Reason), validateReason(p.Reason, ReasonShippingUnavailable))
}

// TypeInventoryCancelled is inventory's acknowledgement of an
// OrderCancelRequested, on TopicInventory.
const TypeInventoryCancelled = "InventoryCancelled"

// InventoryCancelled: the order holds no units and never will — its
// reservation was released (Items, back to available in the same
// transaction), or there was nothing to release (no Items: rejected,
// already released, or not reserved yet, which leaves a tombstone that
// makes the late reserve a no-op). The order service counts it towards the
// cancel.
type InventoryCancelled struct {
	// Items are the lines this cancel returned to stock; none when nothing
	// was held.
	Items []Item `json:"items,omitempty"`
}

// EventType implements Payload.
func (InventoryCancelled) EventType() string { return TypeInventoryCancelled }

// Validate implements Payload.
func (p InventoryCancelled) Validate() error {
	if len(p.Items) == 0 {
		return nil
	}
	return validateItems(p.Items)
}
