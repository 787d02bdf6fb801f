package participant

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// A Reaction is what a service does when one type of event arrives. Build
// it with On; a Spec lists a service's reactions.
type Reaction struct {
	eventType string
	react     func(ctx context.Context, tx *Tx, e events.Envelope, p events.Payload) error
}

// EventType is the type of event the reaction handles.
func (r Reaction) EventType() string { return r.eventType }

// On declares the reaction fn to events whose payload is a P. The runtime
// decodes and validates the payload before fn runs, and runs fn in the
// transaction that marks the event processed: fn changes everything
// through tx, and a redelivered event never reaches it. An error rolls back
// and retries the message, unless it wraps events.ErrInvalid or is a
// PostgreSQL data exception, which no retry fixes: then it is dead-lettered.
//
//	participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.PaymentCompleted) error {
//		return tx.Emit(ctx, events.InventoryReserved{…})
//	})
func On[P events.Payload](fn func(ctx context.Context, tx *Tx, e events.Envelope, p P) error) Reaction {
	var zero P
	return Reaction{
		eventType: zero.EventType(),
		react: func(ctx context.Context, tx *Tx, e events.Envelope, p events.Payload) error {
			typed, ok := p.(P)
			if !ok {
				return fmt.Errorf("%w: %s carries a %T, want %T", events.ErrInvalid, e.Type, p, zero)
			}
			return fn(ctx, tx, e, typed)
		},
	}
}

// Tx is the transaction one event is handled in: the statements of
// sqlx.ExtContext for the service's own tables, plus Emit for the events
// its reaction produces. It has no Commit or Rollback: the runtime ends the
// transaction, and a reaction fails it by returning an error.
type Tx struct {
	sqlx.ExtContext
	// Log carries the event's ids (event_id, event_type, order_id).
	Log *slog.Logger

	source   string // the service, as the events it emits name it
	produces string // the only topic it may emit to
	orderID  string // the saga the handled event belongs to
	now      time.Time
	// outbox collects what the transaction's reactions emit, for the
	// runtime to store with one statement before it commits.
	outbox *outbox.Pending
}

// Now is the time the runtime started handling the event: every timestamp
// a reaction writes, and every event it emits, carries it.
func (tx *Tx) Now() time.Time { return tx.now }

// Emit queues p, about the same order as the event being handled, in the
// outbox within tx: it is published after, and only if, tx commits. The
// topic follows from p's type; a service emits only to its own topic. The
// runtime writes everything a transaction emits with one statement, as it
// commits.
func (tx *Tx) Emit(ctx context.Context, p events.Payload) error {
	e, err := events.New(tx.source, tx.orderID, p, tx.now)
	if err != nil {
		return err
	}
	if topic, _ := events.TopicOf(e.Type); topic != tx.produces {
		return fmt.Errorf("emit %s: the %s service produces to %s, not %s", e.Type, tx.source, tx.produces, topic)
	}
	m, err := message(e)
	if err != nil {
		return err
	}
	return tx.outbox.Queue(ctx, m)
}

// Emit stores the event e in the outbox within tx, on the topic its type
// is produced to, keyed by its order id so that all of one order's events
// share a partition and keep their order. Reactions use Tx.Emit; Emit is
// for an API handler that starts a saga (the order service's POST
// /orders) in a transaction of its own.
func Emit(ctx context.Context, tx outbox.Execer, e events.Envelope) error {
	m, err := message(e)
	if err != nil {
		return err
	}
	return outbox.Add(ctx, tx, m)
}

// message is e as the outbox keeps it, on the topic its type is produced
// to.
func message(e events.Envelope) (outbox.Message, error) {
	topic, ok := events.TopicOf(e.Type)
	if !ok {
		return outbox.Message{}, fmt.Errorf("emit %s: %w: %q", e.ID, events.ErrUnknownType, e.Type)
	}
	return outbox.EventMessage(topic, e)
}
