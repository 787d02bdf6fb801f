package participant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
)

// A Delivery is one Kafka message on its way to the transaction: each step
// of the chain (Decode, Guard, Route, DecodePayload) fills in what it
// learns, and transact (transaction.go) applies it.
type Delivery struct {
	Msg     *sarama.ConsumerMessage
	Event   events.Envelope // set by Decode
	Payload events.Payload  // set by DecodePayload, for routed events only
	Log     *slog.Logger    // set by Decode: carries the event's ids
	Tx      *Tx             // set by transact, for the reaction
	// Outcome is how the message ended: "applied", "duplicate" (already
	// processed: skipped), "not_routed" (another service's event) or
	// "parked" (behind its parked order).
	Outcome string

	reaction Reaction // set by Route
}

// Handler handles one delivery. Like consumer.Handler it returns nil once
// the message's effects are durable, a consumer.Permanent error if the
// message can never be processed, and any other error to be retried.
type Handler func(ctx context.Context, d *Delivery) error

// Middleware wraps a Handler with one concern: decoding, guarding,
// routing, decoding the payload, classifying a reaction's errors.
type Middleware func(Handler) Handler

// Chain returns h wrapped in mw, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Decode parses the message's envelope (events.DecodeEnvelope); a message
// that does not parse is permanent. The payload waits for DecodePayload.
func Decode(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, d *Delivery) error {
			m := d.Msg
			e, err := events.DecodeEnvelope(m.Value)
			if err != nil {
				return consumer.Permanent(fmt.Errorf("decode %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err))
			}
			d.Event = e
			d.Log = log.With("event_id", e.ID, "event_type", e.Type, "order_id", e.OrderID)
			return next(ctx, d)
		}
	}
}

// Guard refuses, as permanent, an event whose Kafka key is not its order
// id (the key is what keeps one order's events in order) or that arrived
// on a topic other than the one its producer writes to.
func Guard(next Handler) Handler {
	return func(ctx context.Context, d *Delivery) error {
		m, e := d.Msg, d.Event
		if string(m.Key) != e.OrderID {
			return consumer.Permanent(fmt.Errorf("event %s at %s/%d/%d: key %q is not its order_id %q, so its order's events may be out of order",
				e.ID, m.Topic, m.Partition, m.Offset, m.Key, e.OrderID))
		}
		if topic, _ := events.TopicOf(e.Type); m.Topic != topic {
			return consumer.Permanent(fmt.Errorf("event %s at %s/%d/%d: %s belongs on %s, not %s",
				e.ID, m.Topic, m.Partition, m.Offset, e.Type, topic, m.Topic))
		}
		return next(ctx, d)
	}
}

// DecodePayload decodes and validates the payload of a routed event as its
// type, upcasting an older version (events.Envelope.Typed); one that does
// not is permanent. Events the service ignores never get here, so a newer
// payload version of one of them cannot hold up its partition.
func DecodePayload(next Handler) Handler {
	return func(ctx context.Context, d *Delivery) error {
		e, p, err := d.Event.Typed()
		if err != nil {
			m := d.Msg
			return consumer.Permanent(fmt.Errorf("decode %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err))
		}
		d.Event, d.Payload = e, p
		return next(ctx, d)
	}
}

// Route picks the reaction for the event's type. Known types without one
// belong to other services and are acknowledged without effect. Two
// reactions to one type are a programming error: Route panics at once
// rather than silently drop one (Spec.Validate reports it as an error).
func Route(reactions []Reaction) Middleware {
	byType := make(map[string]Reaction, len(reactions))
	for _, r := range reactions {
		if _, dup := byType[r.eventType]; dup {
			panic("participant: two reactions to " + r.eventType)
		}
		byType[r.eventType] = r
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, d *Delivery) error {
			r, ok := byType[d.Event.Type]
			if !ok {
				d.Log.Debug("event not for this service; acknowledged")
				d.Outcome = "not_routed"
				return nil
			}
			d.reaction = r
			return next(ctx, d)
		}
	}
}

// Classify marks as permanent the errors no retry can fix: an invalid
// event (events.ErrInvalid) and a PostgreSQL data exception (SQLSTATE
// class 22: a value the database cannot store or compute). Everything else
// — a database or broker away, a deadlock — is retried.
func Classify(next Handler) Handler {
	return func(ctx context.Context, d *Delivery) error {
		err := next(ctx, d)
		if err == nil || consumer.IsPermanent(err) {
			return err
		}
		err = fmt.Errorf("handle %s %s: %w", d.Event.Type, d.Event.ID, err)
		if errors.Is(err, events.ErrInvalid) || isDataException(err) {
			return consumer.Permanent(err)
		}
		return err
	}
}

// React runs the routed reaction; it is the end of the chain.
func React(ctx context.Context, d *Delivery) error {
	if err := d.reaction.react(ctx, d.Tx, d.Event, d.Payload); err != nil {
		return err
	}
	// DEBUG: one line per event under load would bury the duplicates
	// and failures that are worth reading; the metric counts them.
	d.Log.Debug("event applied")
	d.Outcome = "applied"
	return nil
}

// isDataException reports whether err is a PostgreSQL data exception
// (SQLSTATE class 22): a value out of range, an invalid text
// representation, a character the encoding cannot hold. It depends on the
// event's data alone, so retrying would fail forever. events.Decode
// rejects what is known to cause one, so this is a backstop.
func isDataException(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && len(pqErr.Code) >= 2 && pqErr.Code.Class() == pqerror.ClassDataException
}
