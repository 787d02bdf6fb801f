package store

import (
	"context"
	"fmt"
	"time"
)

// Forget deletes at most limit ended sagas, each with all its events in the
// same statement, that the tracker last saw more than window ago: no event
// of theirs, a duplicate included, was recorded since (updated_at, by the
// database's clock). A running saga is never forgotten. It returns how many
// sagas it forgot; fewer than limit means none is left. The caller picks
// window longer than Kafka may keep any event (see the tracker's
// forgetter), so no replay can bring part of a forgotten saga back.
func (s *Store) Forget(ctx context.Context, window time.Duration, limit int) (int64, error) {
	// A saga that Record is recording an event of holds its row's lock; the
	// DELETE waits for it and, rechecking its conditions on the row as
	// Record left it, keeps the saga. Candidates come from the
	// sagas_forgettable index in the order they were last seen, so a call
	// reads about what it deletes.
	var n int64
	err := s.db.GetContext(ctx, &n, `
		WITH gone AS (
			DELETE FROM sagas
			WHERE order_id = ANY(ARRAY(
				SELECT order_id FROM sagas
				WHERE state <> 'running' AND updated_at < now() - make_interval(secs => $1)
				ORDER BY updated_at LIMIT $2))
			  AND state <> 'running' AND updated_at < now() - make_interval(secs => $1)
			RETURNING order_id
		), events AS (
			DELETE FROM tracked_events WHERE order_id = ANY(ARRAY(SELECT order_id FROM gone))
		)
		SELECT count(*) FROM gone`,
		window.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("forget sagas last seen over %s ago: %w", window, err)
	}
	return n, nil
}
