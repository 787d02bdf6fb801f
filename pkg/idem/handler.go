package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
)

// Route applies one event type. It runs inside the transaction that also
// records the event as processed, and must make every change through tx —
// including outbox.AddEvent for the events it emits.
type Route func(ctx context.Context, tx *sqlx.Tx, e events.Envelope) error

// Handler is a consumer.Handler that turns Kafka messages into idempotent
// domain changes: it decodes the envelope, picks the Route for its type, and
// runs it through Handle, so a redelivered event is skipped and acknowledged.
//
// Permanent failures, sent to the dead-letter topic: undecodable messages,
// unknown event types, a Kafka key other than the envelope's order_id (the
// key is what keeps one order's events in order), an event type on a topic
// other than the one its producer writes to, an invalid payload, and a
// PostgreSQL data exception (SQLSTATE class 22: a value the database cannot
// store or compute, which no retry changes). Known event types without a
// Route belong to other services and are acknowledged without effect.
type Handler struct {
	DB       *sqlx.DB
	Consumer string // the de-duplication scope, normally the service name
	Routes   map[string]Route
	Logger   *slog.Logger
}

var _ consumer.Handler = (*Handler)(nil)

// handled counts events by consumer, type and outcome: "applied",
// "duplicate" (skipped: already processed) or "not_routed" (another
// service's event). A rising duplicate rate is the redelivery this package
// absorbs.
var handled = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "choreo_events_handled_total",
	Help: "Events handled by the idempotent consumer, by consumer, event type and outcome.",
}, []string{"consumer", "type", "outcome"})

// Handle implements consumer.Handler.
func (h *Handler) Handle(ctx context.Context, m *sarama.ConsumerMessage) error {
	e, err := events.Decode(m.Value)
	if err != nil {
		return consumer.Permanent(fmt.Errorf("decode %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err))
	}
	if string(m.Key) != e.OrderID {
		return consumer.Permanent(fmt.Errorf("event %s at %s/%d/%d: key %q is not its order_id %q, so its order's events may be out of order",
			e.ID, m.Topic, m.Partition, m.Offset, m.Key, e.OrderID))
	}
	if topic, _ := events.TopicOf(e.Type); m.Topic != topic {
		return consumer.Permanent(fmt.Errorf("event %s at %s/%d/%d: %s belongs on %s, not %s",
			e.ID, m.Topic, m.Partition, m.Offset, e.Type, topic, m.Topic))
	}
	log := h.Logger.With("event_id", e.ID, "event_type", e.Type, "order_id", e.OrderID, "consumer", h.Consumer)
	route, ok := h.Routes[e.Type]
	if !ok {
		log.Debug("event not for this service; acknowledged")
		handled.WithLabelValues(h.Consumer, e.Type, "not_routed").Inc()
		return nil
	}
	ran, err := Handle(ctx, h.DB, h.Consumer, e.ID, func(tx *sqlx.Tx) error {
		return route(ctx, tx, e)
	})
	if err != nil {
		if errors.Is(err, events.ErrInvalid) || isDataException(err) {
			return consumer.Permanent(fmt.Errorf("handle %s %s: %w", e.Type, e.ID, err))
		}
		return fmt.Errorf("handle %s %s: %w", e.Type, e.ID, err)
	}
	if !ran {
		log.Info("duplicate event skipped")
		handled.WithLabelValues(h.Consumer, e.Type, "duplicate").Inc()
		return nil
	}
	log.Info("event applied")
	handled.WithLabelValues(h.Consumer, e.Type, "applied").Inc()
	return nil
}

// isDataException reports whether err is a PostgreSQL data exception
// (SQLSTATE class 22): a value out of range, an invalid text
// representation, a character the encoding cannot hold. It depends on the
// event's data alone, so retrying would fail forever. Events should never
// get this far — events.Decode rejects what is known to cause one — so it
// is a backstop, not the validation.
func isDataException(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && len(pqErr.Code) >= 2 && pqErr.Code.Class() == pqerror.ClassDataException
}
