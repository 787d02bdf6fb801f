package testenv

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
)

// Reactions is one test's view of a service's reactions: a database of the
// test's own with the service's schema, and the handler Run wires to Kafka
// (Spec.Handler), fed messages as the consumer group would. Each service's
// eventapi tests pin what the service decides and emits through it, so the
// delivering and the reading of the outbox are written once.
type Reactions struct {
	DB      *sqlx.DB
	Handler consumer.Handler
	t       testing.TB
	spec    participant.Spec
}

// NewReactions builds the spec that spec builds from cfg, as Conformance
// does, on a fresh DB with the spec's own schema.
func NewReactions[C any](t testing.TB, spec func(C) (participant.Spec, error), cfg C) *Reactions {
	t.Helper()
	s, err := spec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := DB(t, s.Schema)
	return &Reactions{DB: db, Handler: s.Handler(db, Logger(t)), t: t, spec: s}
}

// Event wraps p in a fresh envelope for orderID (Event).
func (r *Reactions) Event(orderID string, p events.Payload) events.Envelope {
	r.t.Helper()
	return Event(r.t, orderID, p)
}

// Deliver hands e to the handler as the consumer group would, from the
// topic its producer writes to (Message), and returns what the handler
// returned.
func (r *Reactions) Deliver(e events.Envelope) error {
	return r.Handler.Handle(context.Background(), Message(r.t, e))
}

// MustDeliver delivers e, failing the test on error.
func (r *Reactions) MustDeliver(e events.Envelope) {
	r.t.Helper()
	if err := r.Deliver(e); err != nil {
		r.t.Fatalf("deliver %s: %v", e.Type, err)
	}
}

// DeliverAll delivers every envelope from a goroutine of its own, released
// together (AllSucceed), and fails the test on any error: how a test makes
// events of one order race as partitions would.
func (r *Reactions) DeliverAll(envs ...events.Envelope) {
	r.t.Helper()
	fns := make([]func() error, len(envs))
	for i, e := range envs {
		fns[i] = func() error { return r.Deliver(e) }
	}
	AllSucceed(r.t, fns...)
}

// Emitted returns the events the service queued in its outbox for orderID,
// oldest first, failing the test unless each is on the topic the service
// produces to and from the service (Emitted).
func (r *Reactions) Emitted(orderID string) []events.Envelope {
	r.t.Helper()
	return Emitted(r.t, r.DB, orderID, r.spec.Produces, r.spec.Name)
}

// Processed reports how many times the service recorded eventID as
// applied: 1 for an event applied once, 0 for one refused or held.
func (r *Reactions) Processed(eventID string) int {
	r.t.Helper()
	var n int
	if err := r.DB.Get(&n, `SELECT count(*) FROM processed_events WHERE consumer = $1 AND event_id = $2`,
		r.spec.Name, eventID); err != nil {
		r.t.Fatal(err)
	}
	return n
}
