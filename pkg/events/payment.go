package events

// Event types published by the payment service on TopicPayment.
const (
	TypePaymentCompleted = "PaymentCompleted"
	TypePaymentDeclined  = "PaymentDeclined"
	TypePaymentRefunded  = "PaymentRefunded"
)

// PaymentCompleted: the customer's balance was debited. Inventory reacts by
// reserving the items.
type PaymentCompleted struct {
	CustomerID      string  `json:"customer_id"`
	Amount          int64   `json:"amount"`
	Currency        string  `json:"currency"`
	Items           []Item  `json:"items"`
	ShippingAddress Address `json:"shipping_address"`
}

// EventType implements Payload.
func (PaymentCompleted) EventType() string { return TypePaymentCompleted }

// Validate implements Payload.
func (p PaymentCompleted) Validate() error {
	return firstError(validateID("customer_id", p.CustomerID), validateAmount(p.Amount),
		validateItems(p.Items), validateAddress(p.ShippingAddress))
}

// PaymentDeclined: the balance was too low or the customer unknown. Nothing
// was debited; the order service cancels the order.
type PaymentDeclined struct {
	CustomerID string `json:"customer_id"`
	Amount     int64  `json:"amount"`
	// Detail says why: ReasonInsufficientFunds, ReasonUnknownCustomer or
	// ReasonCurrencyMismatch. The order takes it as its cancel reason. It
	// stays optional (a tolerant reader, docs/event-evolution.md): a
	// decline without a detail it knows cancels with ReasonPaymentDeclined.
	Detail string `json:"detail"`
}

// EventType implements Payload.
func (PaymentDeclined) EventType() string { return TypePaymentDeclined }

// Validate implements Payload.
func (p PaymentDeclined) Validate() error {
	return firstError(validateID("customer_id", p.CustomerID), validateAmount(p.Amount))
}

// PaymentRefunded: a compensation. The debit was returned to the balance (or
// there was none to return, when the refund overtook the payment). It is the
// last compensation of a failed saga, so the order service cancels the order
// with Reason.
type PaymentRefunded struct {
	CustomerID string `json:"customer_id,omitempty"`
	Amount     int64  `json:"amount"`
	// Reason is the saga's cancel reason: ReasonOutOfStock or
	// ReasonShippingUnavailable.
	Reason string `json:"reason"`
}

// EventType implements Payload.
func (PaymentRefunded) EventType() string { return TypePaymentRefunded }

// Validate implements Payload.
func (p PaymentRefunded) Validate() error {
	return firstError(validateOptionalID("customer_id", p.CustomerID), validateAmount(p.Amount),
		validateReason(p.Reason, ReasonOutOfStock, ReasonShippingUnavailable))
}

// TypePaymentCancelled is payment's acknowledgement of an
// OrderCancelRequested, on TopicPayment.
const TypePaymentCancelled = "PaymentCancelled"

// PaymentCancelled: the order's payment is undone and no later charge can
// happen — the debit was credited back (Amount, in the same transaction),
// or there was none to give back (Amount 0: declined, already refunded by
// a compensation, or not charged yet, which leaves a tombstone that makes
// the late charge a no-op). The order service counts it towards the
// cancel.
type PaymentCancelled struct {
	CustomerID string `json:"customer_id,omitempty"`
	// Amount is what this cancel credited back; 0 when nothing was.
	Amount int64 `json:"amount"`
}

// EventType implements Payload.
func (PaymentCancelled) EventType() string { return TypePaymentCancelled }

// Validate implements Payload.
func (p PaymentCancelled) Validate() error {
	return firstError(validateOptionalID("customer_id", p.CustomerID), validateAmount(p.Amount))
}
