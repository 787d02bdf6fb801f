// Package eventapi is the tracker's Kafka adapter: it records every message
// of the saga's topics as an event of some saga, reading the envelope and
// of the payload only a reason.
package eventapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// unreadable counts messages the tracker could not attribute to a saga and
// skipped: the participants dead-letter those, so they are in the DLQs.
var unreadable = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "choreo_tracker_unreadable_total",
	Help: "Messages the tracker skipped because no saga could be read from them, by service and topic.",
}, []string{"service", "topic"})

// ErrUnreadable is returned by Read for a message that is no event of a
// saga the tracker can record.
var ErrUnreadable = errors.New("unreadable")

// Read returns the event m carries, read from its envelope alone. It
// applies the checks every consumer applies to an envelope
// (events.DecodeEnvelope: size, JSON, a canonical UUID as id, a storable
// order id) except one: the type need not be known. It also requires what
// a timeline needs — a type, a time — and that m's key is its order id,
// which is how one order's events stay in one partition: a message keyed
// otherwise is refused by every participant, so it is no step of the
// saga. Errors wrap ErrUnreadable.
func Read(m *sarama.ConsumerMessage) (domain.Event, error) {
	e, err := events.DecodeEnvelope(m.Value)
	// DecodeEnvelope checks the type last: an unknown type means the
	// envelope passed every other check.
	if err != nil && !errors.Is(err, events.ErrUnknownType) {
		return domain.Event{}, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	switch {
	case e.Type == "" || len(e.Type) > events.MaxIDLen:
		return domain.Event{}, fmt.Errorf("%w: event %s: type must be 1 to %d bytes", ErrUnreadable, e.ID, events.MaxIDLen)
	case e.OccurredAt.IsZero():
		return domain.Event{}, fmt.Errorf("%w: event %s has no occurred_at", ErrUnreadable, e.ID)
	case string(m.Key) != e.OrderID:
		return domain.Event{}, fmt.Errorf("%w: event %s: key %q is not its order_id %q", ErrUnreadable, e.ID, m.Key, e.OrderID)
	}
	return domain.Event{
		EventID:   e.ID,
		OrderID:   e.OrderID,
		Type:      e.Type,
		Service:   e.Source,
		Topic:     m.Topic,
		Partition: m.Partition,
		Offset:    m.Offset,
		At:        e.OccurredAt.UTC(),
		Reason:    domain.ReasonOf(e.Type, e.Payload),
	}, nil
}

// Recorder stores an event once; *store.Store is one.
type Recorder interface {
	Record(ctx context.Context, e domain.Event) (store.Recorded, error)
}

var _ Recorder = (*store.Store)(nil)

// Handler returns the tracker's message handler for pkg/consumer: Read,
// then Record. An unreadable message is logged, counted and acknowledged —
// never retried, never dead-lettered: the tracker observes, and the
// participants already dead-letter such messages. A failure to record is
// returned, so the consumer retries it (the tracker lags; it loses
// nothing). ended is called once a recorded event ends its saga. A payload
// is never decoded beyond its reason, so an event type added after this
// code shows up in the timeline as it is.
func Handler(service string, rec Recorder, log *slog.Logger, ended func(store.Recorded)) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *sarama.ConsumerMessage) error {
		e, err := Read(m)
		if err != nil {
			log.Warn("message skipped", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", err)
			unreadable.WithLabelValues(service, m.Topic).Inc()
			return nil
		}
		r, err := rec.Record(ctx, e)
		if err != nil {
			return fmt.Errorf("record %s %s: %w", e.Type, e.EventID, err)
		}
		if r.Ended() && ended != nil {
			ended(r)
		}
		log.Debug("event recorded", "event_id", e.EventID, "event_type", e.Type, "order_id", e.OrderID, "new", r.New)
		return nil
	})
}

// SkipDeadLetter is the tracker's consumer.DeadLetterFunc. Handler never
// fails permanently, so it is never called; should it be, the message is
// logged and skipped, since the tracker publishes nothing — dead letters
// included.
func SkipDeadLetter(log *slog.Logger) consumer.DeadLetterFunc {
	return func(_ context.Context, m *sarama.ConsumerMessage, reason error) error {
		log.Error("message skipped", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", reason)
		return nil
	}
}
