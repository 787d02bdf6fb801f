// Package events defines the messages the saga's services exchange over
// Kafka: the envelope, one payload type per event, the topic each producer
// writes to, and the decoding a consumer applies before it trusts a
// message.
package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Topics, one per producing service. A service writes only to its own topic.
const (
	TopicOrder     = "order.events"
	TopicPayment   = "payment.events"
	TopicInventory = "inventory.events"
	TopicShipping  = "shipping.events"
)

// DeadLetterTopic returns the topic where a service parks messages it can
// never process, e.g. "payment.dlq".
func DeadLetterTopic(service string) string { return service + ".dlq" }

// Kafka header names set on every event message, so tools can route or
// inspect a message without decoding its value.
const (
	HeaderEventID   = "event_id"
	HeaderEventType = "event_type"
)

// MaxMessageBytes bounds an encoded envelope. Anything larger is rejected by
// Decode as poison rather than buffered.
const MaxMessageBytes = 1 << 20

// MaxAmount bounds every amount, price and quantity an event carries, in the
// currency's smallest unit (1e15 is ¥1,000 trillion, or $10 trillion in
// cents). Far below math.MaxInt64, it leaves room for the sums and products
// the services compute in PostgreSQL's bigint — a balance plus a refund,
// available plus reserved — so no such arithmetic can overflow.
const MaxAmount = 1_000_000_000_000_000

// TopicOf returns the topic on which eventType is produced, and whether the
// type is known. A consumer uses it to reject an event that arrived on
// another service's topic: each service writes only its own.
func TopicOf(eventType string) (string, bool) {
	switch eventType {
	case TypeOrderCreated, TypeOrderCompleted, TypeOrderCancelled, TypeOrderCancelRequested:
		return TopicOrder, true
	case TypePaymentCompleted, TypePaymentDeclined, TypePaymentRefunded, TypePaymentCancelled:
		return TopicPayment, true
	case TypeInventoryReserved, TypeInventoryRejected, TypeInventoryReleased, TypeInventoryCancelled:
		return TopicInventory, true
	case TypeShipmentScheduled, TypeShipmentFailed, TypeShipmentCancelled:
		return TopicShipping, true
	}
	return "", false
}

// Envelope is the wire format of every event: identity and type for
// routing and de-duplication, and the typed payload as raw JSON.
type Envelope struct {
	// ID is unique per event: a UUID in canonical form (lower case,
	// hyphenated). Consumers de-duplicate on it.
	ID string `json:"id"`
	// Type names the payload type, e.g. "PaymentCompleted".
	Type string `json:"type"`
	// Version is the version of Type's payload schema the payload follows
	// (see CurrentVersion). 0, absent from producers that predate it,
	// means 1.
	Version int `json:"version"`
	// OrderID is the saga's correlation id and the Kafka message key.
	OrderID string `json:"order_id"`
	// Source is the service that produced the event.
	Source string `json:"source"`
	// OccurredAt is when the producing transaction ran.
	OccurredAt time.Time `json:"occurred_at"`
	// Payload is the event-specific body; see the Payload types.
	Payload json.RawMessage `json:"payload"`
}

// Payload is implemented by every event body.
type Payload interface {
	// EventType is the Envelope.Type under which the payload travels.
	EventType() string
	// Validate reports whether the payload is complete and consistent.
	Validate() error
}

// Errors returned by Decode and Envelope.Decode. All of them mean the
// message can never be processed by this code, however often it is
// retried. ErrUnsupportedVersion is the one a newer release of the
// consumer can fix: its dead letters are for replay after the upgrade.
var (
	ErrMalformed          = errors.New("malformed event")
	ErrUnknownType        = errors.New("unknown event type")
	ErrInvalid            = errors.New("invalid event payload")
	ErrUnsupportedVersion = errors.New("unsupported event version")
)

// New wraps p in an Envelope with a fresh event id, stamped with the
// current version of p's type.
func New(source, orderID string, p Payload, now time.Time) (Envelope, error) {
	if err := p.Validate(); err != nil {
		return Envelope{}, fmt.Errorf("new %s: %w", p.EventType(), err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return Envelope{}, fmt.Errorf("marshal %s: %w", p.EventType(), err)
	}
	return Envelope{
		ID:         uuid.NewString(),
		Type:       p.EventType(),
		Version:    CurrentVersion(p.EventType()),
		OrderID:    orderID,
		Source:     source,
		OccurredAt: now.UTC(),
		Payload:    raw,
	}, nil
}

// Encode returns the envelope's wire form.
func (e Envelope) Encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return b, nil
}

// Decode parses a message value into its Envelope and its typed payload (a
// value, never a pointer): the one place a consumer decodes a message.
// Errors wrap ErrMalformed, ErrUnknownType, ErrUnsupportedVersion or
// ErrInvalid. It is a tolerant reader: unknown fields are ignored, an older
// payload version is upcast to the current one and a newer one refused
// (docs/event-evolution.md). It also rejects what PostgreSQL would refuse
// to store (an id that is not a canonical UUID, a NUL, a bad order_id), so
// such a message is dead-lettered here rather than failing every retry.
func Decode(value []byte) (Envelope, Payload, error) {
	e, err := DecodeEnvelope(value)
	if err != nil {
		return e, nil, err
	}
	return e.Typed()
}

// DecodeEnvelope is the first half of Decode: it checks the message and its
// envelope — size, NUL, JSON, a canonical event id, the order id, a known
// type — and leaves the payload alone. A consumer that routes on the type
// first decodes only the payloads it reacts to (Typed), so a payload version
// it does not know yet, of an event it ignores, never holds it up.
func DecodeEnvelope(value []byte) (Envelope, error) {
	var e Envelope
	if len(value) > MaxMessageBytes {
		return e, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(value), MaxMessageBytes)
	}
	if hasNUL(value) {
		return e, fmt.Errorf("%w: contains a NUL character (\\u0000), which PostgreSQL text and jsonb cannot store", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return e, fmt.Errorf("%w: data after the envelope", ErrMalformed)
	}
	// uuid.Parse also takes urn:uuid:…, {…}, upper case and the 32-digit
	// form; only the canonical one is stored and compared as is.
	if u, err := uuid.Parse(e.ID); err != nil || u.String() != e.ID {
		return e, fmt.Errorf("%w: id %q is not a UUID in canonical form (lower-case, hyphenated)", ErrMalformed, e.ID)
	}
	if err := validateID("order_id", e.OrderID); err != nil {
		return e, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, known := TopicOf(e.Type); !known {
		return e, fmt.Errorf("%w: %q", ErrUnknownType, e.Type)
	}
	return e, nil
}

// Typed is the second half of Decode: it brings the payload of an older
// version to the current shape (refusing a newer one) and decodes and
// validates it as the type e.Type names. It returns the envelope at the
// current version with the upcast payload, and the typed payload.
func (e Envelope) Typed() (Envelope, Payload, error) {
	e, err := e.current()
	if err != nil {
		return e, nil, err
	}
	p, err := e.typedPayload()
	if err != nil {
		return e, nil, err
	}
	return e, p, nil
}

// hasNUL reports whether the JSON text b holds a NUL character: raw (which
// the JSON decoder rejects anyway) or as the escape \u0000, which it would
// decode into a string PostgreSQL cannot store. An escaped backslash is
// skipped whole, so `\\u0000` (a backslash, then "u0000") is no NUL.
func hasNUL(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case 0:
			return true
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' && i+6 <= len(b) && bytes.Equal(b[i+2:i+6], []byte("0000")) {
				return true
			}
			i++ // skip the escaped character, so \\ cannot start an escape
		}
	}
	return false
}

// Decode unmarshals the payload into p, whose EventType must match, and
// validates it, reading it as the package-level Decode does (unknown
// fields ignored, older versions upcast). Errors wrap ErrInvalid,
// ErrUnsupportedVersion or, for a negative version, ErrMalformed.
// Consumers get their payload from the package-level Decode; this is for
// tools and tests holding an Envelope.
func (e Envelope) Decode(p Payload) error {
	if p.EventType() != e.Type {
		return fmt.Errorf("%w: event %s is %s, not %s", ErrInvalid, e.ID, e.Type, p.EventType())
	}
	e, err := e.current()
	if err != nil {
		return err
	}
	if err := e.unmarshal(p); err != nil {
		return err
	}
	return e.validate(p)
}

// unmarshal decodes the payload into into, ignoring fields it does not
// know (a tolerant reader) but refusing wrong JSON types and anything
// after the payload's value.
func (e Envelope) unmarshal(into any) error {
	if err := json.Unmarshal(e.Payload, into); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, e.Type, err)
	}
	return nil
}

func (e Envelope) validate(p Payload) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, e.Type, err)
	}
	return nil
}

// typedPayload decodes and validates the payload as the type e.Type names.
func (e Envelope) typedPayload() (Payload, error) {
	switch e.Type {
	case TypeOrderCreated:
		return decodeAs[OrderCreated](e)
	case TypeOrderCompleted:
		return decodeAs[OrderCompleted](e)
	case TypeOrderCancelled:
		return decodeAs[OrderCancelled](e)
	case TypeOrderCancelRequested:
		return decodeAs[OrderCancelRequested](e)
	case TypePaymentCancelled:
		return decodeAs[PaymentCancelled](e)
	case TypeInventoryCancelled:
		return decodeAs[InventoryCancelled](e)
	case TypeShipmentCancelled:
		return decodeAs[ShipmentCancelled](e)
	case TypePaymentCompleted:
		return decodeAs[PaymentCompleted](e)
	case TypePaymentDeclined:
		return decodeAs[PaymentDeclined](e)
	case TypePaymentRefunded:
		return decodeAs[PaymentRefunded](e)
	case TypeInventoryReserved:
		return decodeAs[InventoryReserved](e)
	case TypeInventoryRejected:
		return decodeAs[InventoryRejected](e)
	case TypeInventoryReleased:
		return decodeAs[InventoryReleased](e)
	case TypeShipmentScheduled:
		return decodeAs[ShipmentScheduled](e)
	case TypeShipmentFailed:
		return decodeAs[ShipmentFailed](e)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownType, e.Type)
}

// decodeAs decodes e's payload as a P value and validates it.
func decodeAs[P Payload](e Envelope) (Payload, error) {
	var p P
	if err := e.unmarshal(&p); err != nil {
		return nil, err
	}
	if err := e.validate(p); err != nil {
		return nil, err
	}
	return p, nil
}
