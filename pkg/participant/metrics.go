// This file holds the consumer's metrics, counted per delivery that ended
// and timed per attempt. TestHandlerMetricsByOutcome shows them.

package participant

import (
	"time"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Handler metrics, labelled by service, event type and outcome (see
// Delivery.Outcome). A rising duplicate rate is the redelivery the
// runtime absorbs.
var (
	handled = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_events_handled_total",
		Help: "Events handled by the idempotent consumer, by service, event type and outcome.",
	}, []string{"service", "type", "outcome"})
	handleSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "choreo_event_handle_duration_seconds",
		Help:    "Time to handle one delivery of an event, transaction included, by service, event type and outcome (failed attempts as retry or dead_letter).",
		Buckets: prometheus.DefBuckets,
	}, []string{"service", "type", "outcome"})
)

// Outcomes of a failed attempt, for the latency histogram only: the
// counter counts deliveries that ended, and the consumer counts retries
// and dead letters itself.
const (
	outcomeRetry      = "retry"
	outcomeDeadLetter = "dead_letter"
)

// record counts a delivery that ended (applied, duplicate, not routed) and
// times it, or times a failed attempt as retry or dead_letter.
func record(service string, d *Delivery, err error, took time.Duration) {
	outcome := d.Outcome
	switch {
	case consumer.IsPermanent(err):
		outcome = outcomeDeadLetter
	case err != nil:
		outcome = outcomeRetry
	case outcome != "":
		handled.WithLabelValues(service, d.Event.Type, outcome).Inc()
	}
	if outcome != "" {
		handleSeconds.WithLabelValues(service, knownType(d.Event.Type), outcome).Observe(took.Seconds())
	}
}

// knownType is t if it is an event type this code knows, else "unknown":
// a poison message must not add a series per made-up type.
func knownType(t string) string {
	if _, ok := events.TopicOf(t); ok {
		return t
	}
	return "unknown"
}
