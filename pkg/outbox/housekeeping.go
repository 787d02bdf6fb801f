// This file holds the relay's housekeeping: the backlog gauges and the
// deletion of sent rows past Retention. TestCleanupRunsDespiteBacklog and
// TestBacklogGaugeGrowsWhileKafkaFails show why each runs on its own timer.

package outbox

import (
	"context"
	"time"
)

// gaugeEvery is how often the backlog gauges are refreshed.
const gaugeEvery = time.Second

// housekeep keeps the backlog gauges (oldest unsent age, refused rows)
// current and, while this relay leads, deletes sent rows past Retention,
// each on its own clock, so that neither an outage (no successful round)
// nor a steady backlog (no idle round) stops them.
func (r *Relay) housekeep(ctx context.Context) {
	// Each timer is armed again as it fires, like a ticker.
	gauge := r.cfg.Clock.NewTimer(gaugeEvery)
	cleanup := r.cfg.Clock.NewTimer(r.cfg.PollInterval * 30)
	defer func() {
		gauge.Stop()
		cleanup.Stop()
	}()
	r.updateGauge(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-gauge.C():
			gauge = r.cfg.Clock.NewTimer(gaugeEvery)
			r.updateGauge(ctx)
		case <-cleanup.C():
			cleanup = r.cfg.Clock.NewTimer(r.cfg.PollInterval * 30)
			if !r.leading.Load() {
				continue
			}
			if err := r.cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cleanup of sent rows failed", "err", err)
			}
		}
	}
}

// updateGauge reads the backlog gauges from the table in one statement.
func (r *Relay) updateGauge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var got struct {
		Age     float64 `db:"age"`
		Refused int64   `db:"refused"`
	}
	// Each count reads a partial index of its own (outbox_publishable,
	// outbox_refused), never the sent rows kept for Retention.
	err := r.cfg.DB.GetContext(ctx, &got, `
		SELECT coalesce(extract(epoch FROM now() - (
		           SELECT min(created_at) FROM outbox WHERE sent_at IS NULL AND refused_at IS NULL)), 0)::float8 AS age,
		       (SELECT count(*) FROM outbox WHERE sent_at IS NULL AND refused_at IS NOT NULL) AS refused`)
	if err != nil {
		if ctx.Err() == nil {
			// Warn: a gauge left at its last value would hide the very
			// backlog its alert is for.
			r.log.Warn("backlog gauges not updated", "err", err)
		}
		return
	}
	oldestUnsent.WithLabelValues(r.cfg.Name).Set(got.Age)
	refusedRows.WithLabelValues(r.cfg.Name).Set(float64(got.Refused))
}

func (r *Relay) cleanup(ctx context.Context) error {
	// A few thousand rows at a time: a backlog of sent rows (after an
	// outage, or a Retention just shortened) never becomes one long
	// DELETE that holds back vacuum and every relay's xmin horizon. The
	// oldest first, by the sent_at index, then each by its id: ORDER BY and
	// = ANY(ARRAY(…)) keep both on an index even in a generic plan (see
	// pg.StatementCacheSize), made without the cutoff's value, where IN
	// (…) would hash-join a scan of the whole table.
	for {
		res, err := r.cfg.DB.ExecContext(ctx, `
			DELETE FROM outbox WHERE id = ANY(ARRAY(
				SELECT id FROM outbox WHERE sent_at < now() - make_interval(secs => $1)
				ORDER BY sent_at LIMIT $2))`,
			r.cfg.Retention.Seconds(), cleanupBatch)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n < cleanupBatch {
			return nil
		}
	}
}

// cleanupBatch bounds one DELETE of sent rows.
const cleanupBatch = 5000
