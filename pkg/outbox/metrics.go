// This file holds the relay's metrics, labelled by its Name. The ones to
// alert on: the oldest unsent row's age (it grows while Kafka is
// unreachable), and refused rows above zero, since each waits for a human.

package outbox

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_published_total",
		Help: "Outbox rows published to Kafka and marked sent.",
	}, []string{"service"})
	publishFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_publish_failures_total",
		Help: "Relay rounds that failed and will be retried.",
	}, []string{"service"})
	refused = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_refused_total",
		Help: "Outbox rows this process refused: Kafka will never accept them, so they are set aside instead of retried.",
	}, []string{"service"})
	// refusedRows is counted from the table, so it survives restarts and
	// falls when an operator retries a row; the counter above does neither.
	refusedRows = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_refused_rows",
		Help: "Outbox rows refused and not yet retried by an operator, counted from the table.",
	}, []string{"service"})
	oldestUnsent = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_oldest_unsent_seconds",
		Help: "Age of the oldest outbox row neither published nor refused, 0 when none waits.",
	}, []string{"service"})
	leaderGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_leader",
		Help: "1 while this instance's relay holds the leader lock and publishes, 0 while it stands by.",
	}, []string{"service"})
	// publishSeconds times one batch from the send to Kafka's answer
	// (acks=all: every in-sync replica has it), failed batches included.
	publishSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "choreo_outbox_publish_duration_seconds",
		Help:    "Time to publish one batch of outbox rows to Kafka (acks=all), one observation per batch.",
		Buckets: prometheus.DefBuckets,
	}, []string{"service"})
)
