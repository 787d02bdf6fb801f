package tracker

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// Metrics. The duration is observed once per saga, when the event that
// ends it is recorded, as the time between its first and its last event by
// their producers' clocks. The stuck gauge is recomputed from the database,
// not counted: a stuck saga that ends leaves it by itself, and a restart
// does not reset it. Forgotten sagas are counted as they are deleted
// (store.Forget).
var (
	sagaDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "choreo_saga_duration_seconds",
		Help:    "Time from a saga's first event to the event that ended it, by service and outcome (completed, cancelled).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"service", "outcome"})
	sagasStuck = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_sagas_stuck",
		Help: "Sagas not ended within the SLA (TRACKER_SAGA_SLA) of their first event, by service.",
	}, []string{"service"})
	forgottenSagas = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_tracker_forgotten_sagas_total",
		Help: "Ended sagas deleted with their events, unseen for longer than Kafka keeps an event plus TRACKER_RETENTION, by service.",
	}, []string{"service"})
)

// observeEnd records the duration of a saga that just ended.
func observeEnd(r store.Recorded) {
	if r.EndedAt == nil {
		return
	}
	sagaDuration.WithLabelValues(Name, string(r.After)).Observe(r.EndedAt.Sub(r.StartedAt).Seconds())
}

// watchStuck sets the stuck gauge from the database now and every interval
// until ctx ends. A failed count is logged and leaves the last value.
func watchStuck(ctx context.Context, st *store.Store, every time.Duration, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := st.CountStuck(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("count stuck sagas", "err", err)
		} else if err == nil {
			sagasStuck.WithLabelValues(Name).Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
