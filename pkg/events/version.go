package events

import (
	"encoding/json"
	"fmt"
)

// Upcaster turns a payload of one version of its event type into the next
// version: the payload of a v1 event into v2, say. It works on the raw JSON,
// so an old shape never needs a Go type of its own.
type Upcaster func(payload json.RawMessage) (json.RawMessage, error)

// upcasters holds each event type's upcaster chain: upcasters[t][i] turns a
// version i+1 payload of type t into version i+2. A type's current version
// is one more than the length of its chain, so versions are never skipped
// or reused. No type has a second version yet; when one changes shape
// (see docs/event-evolution.md), its upcaster from the old version is
// appended here, e.g.
//
//	TypeOrderCreated: {orderCreatedV1ToV2}, // v2 renamed amount to total_amount
var upcasters = map[string][]Upcaster{}

// CurrentVersion returns the version of eventType's payload schema that
// this code produces and its reactions read: New stamps it on every
// envelope, and Decode upcasts older versions to it.
func CurrentVersion(eventType string) int {
	return len(upcasters[eventType]) + 1
}

// current returns e at its type's current version: older payloads are
// passed through the upcaster chain, a missing version (0, from producers
// that predate versioning) counts as 1, and a version newer than this code
// knows is refused, since its fields may mean what this code cannot tell.
func (e Envelope) current() (Envelope, error) {
	want := CurrentVersion(e.Type)
	if e.Version == 0 {
		e.Version = 1
	}
	switch {
	case e.Version < 0:
		return e, fmt.Errorf("%w: version %d is not positive", ErrMalformed, e.Version)
	case e.Version > want:
		return e, fmt.Errorf("%w: %s version %d is newer than version %d, the newest this consumer reads; upgrade the consumer, then replay the event",
			ErrUnsupportedVersion, e.Type, e.Version, want)
	}
	for ; e.Version < want; e.Version++ {
		up, err := upcasters[e.Type][e.Version-1](e.Payload)
		if err != nil {
			return e, fmt.Errorf("%w: %s: upcast version %d to %d: %v", ErrInvalid, e.Type, e.Version, e.Version+1, err)
		}
		e.Payload = up
	}
	return e, nil
}
