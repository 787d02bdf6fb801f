package outbox

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"
)

// Hooks for cdcwatch_test.go.

// WatchOnce sets service's Debezium gauges once, as each tick of Watch does.
func WatchOnce(ctx context.Context, db *sqlx.DB, service, connectURL string, log *slog.Logger) {
	newWatcher(db, service, connectURL, log).read(ctx)
}

// SlotGauges returns service's slot gauges by their names' last words.
func SlotGauges(service string) map[string]float64 {
	m := map[string]float64{
		"exists":    value(slotExists.WithLabelValues(service)),
		"active":    value(slotActive.WithLabelValues(service)),
		"retained":  value(slotRetained.WithLabelValues(service)),
		"lag":       value(slotLag.WithLabelValues(service)),
		"heartbeat": value(heartbeatAge.WithLabelValues(service)),
	}
	for _, s := range walStatuses {
		m["wal_status="+s] = value(slotWALStatus.WithLabelValues(service, s))
	}
	return m
}

// ConnectorGauges returns service's connector gauges: running, state=S
// and tasks=S for every state S.
func ConnectorGauges(service string) map[string]float64 {
	m := map[string]float64{"running": value(connectorRunning.WithLabelValues(service))}
	for _, s := range connectorStates {
		m["state="+s] = value(connectorStateGauge.WithLabelValues(service, s))
	}
	for _, s := range taskStates {
		m["tasks="+s] = value(connectorTasks.WithLabelValues(service, s))
	}
	return m
}

// SetConnector sets service's connector gauges to st.
func SetConnector(service string, st ConnectorState) { setConnector(service, st) }

// RefusedLook returns one look at db's refused rows as each round of Sweep
// takes it, starting now.
func RefusedLook(ctx context.Context, db *sqlx.DB, log *slog.Logger) func(service string) {
	l := newRefusedLog(ctx, db, log)
	return func(service string) { l.look(ctx, db, service) }
}
