package store

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Forget deletes at most limit ended sagas, each with all its events in
// the same statement, that Kafka can no longer bring back: every one of
// the saga's events lies below the earliest offset of its partition (no
// replay and no reset of the group's offsets can deliver any of them
// again, so no part of the saga can reappear on its own), and the saga
// ended before endedBefore. A running saga is never forgotten, nor one
// with an event of a partition earliest does not name. It returns how
// many sagas it forgot; fewer than limit does not mean none are left, as
// candidates are gathered per partition and a saga may be found twice:
// call it again until it returns 0.
//
// It finds candidates from the events below each partition's earliest
// offset (tracked_events_origin), not from the ended sagas: once a saga is
// forgotten its events are gone, so each call reads little more than the
// sagas it forgets and those kept on purpose (running, ended within the
// window, or with an event Kafka still holds).
//
// A saga whose row changed since the statement's snapshot — an event
// recorded meanwhile — is kept for a later call. Errors are the
// database's, wrapped.
func (s *Store) Forget(ctx context.Context, earliest map[TopicPartition]int64, endedBefore time.Time, limit int) (int64, error) {
	if len(earliest) == 0 || limit <= 0 {
		return 0, nil
	}
	topics := make(pq.StringArray, 0, len(earliest))
	partitions := make(pq.Int32Array, 0, len(earliest))
	offsets := make(pq.Int64Array, 0, len(earliest))
	for tp, off := range earliest {
		topics = append(topics, tp.Topic)
		partitions = append(partitions, tp.Partition)
		offsets = append(offsets, off)
	}
	// The recheck of event_count in the DELETE runs against the row's
	// newest version if a concurrent Record updated it: such a saga is
	// skipped, and its events stay with it.
	var n int64
	err := s.db.GetContext(ctx, &n, `
		WITH earliest AS (
			SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[]) AS e(topic, partition, earliest)
		), doomed AS (
			SELECT DISTINCT c.order_id, c.event_count FROM earliest e CROSS JOIN LATERAL (
				SELECT s.order_id, s.event_count
				FROM tracked_events t JOIN sagas s ON s.order_id = t.order_id
				WHERE t.topic = e.topic AND t.partition = e.partition AND t."offset" < e.earliest
				  AND s.state <> 'running' AND s.ended_at < $4
				  AND NOT EXISTS (
					SELECT 1 FROM tracked_events o
					LEFT JOIN earliest oe ON oe.topic = o.topic AND oe.partition = o.partition
					WHERE o.order_id = s.order_id AND (oe.earliest IS NULL OR o."offset" >= oe.earliest))
				ORDER BY t."offset" LIMIT $5) c
			LIMIT $5
		), gone AS (
			DELETE FROM sagas s USING doomed d
			WHERE s.order_id = d.order_id AND s.event_count = d.event_count AND s.state <> 'running'
			RETURNING s.order_id
		), events AS (
			DELETE FROM tracked_events t USING gone g WHERE t.order_id = g.order_id
		)
		SELECT count(*) FROM gone`,
		topics, partitions, offsets, endedBefore, limit)
	if err != nil {
		return 0, fmt.Errorf("forget sagas ended before %s: %w", endedBefore.Format(time.RFC3339), err)
	}
	return n, nil
}
