// Package idem is the idempotent consumer's primitive: Mark tells, within
// the caller's transaction, whether an event is seen for the first time.
package idem

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/pg"
)

// Migrations holds the schema of processed_events as goose migrations. Each
// service applies them to its own database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Execer is the part of *sqlx.Tx that Mark needs.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Origin is where an event was read: its topic, partition and offset.
// A mark keeps it, so that retention (Prune) can tell when Kafka can no
// longer deliver the event again.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Mark records, within tx, that consumer processed eventID, read at
// origin, and reports whether it is the first to do so. false means a
// duplicate: the caller acknowledges the event and changes nothing. The
// caller commits tx with its business change, or rolls both back — which
// also forgets the mark, so a failed attempt is retried.
//
// A second transaction marking the same event blocks on the primary key
// until the first ends, then sees the conflict (the first committed) or
// proceeds (it rolled back): concurrent deliveries apply once. A check
// before an insert would let both pass (TestCheckThenActRaces).
func Mark(ctx context.Context, tx Execer, consumer, eventID string, origin Origin) (first bool, err error) {
	res, err := tx.ExecContext(ctx,
		`INSERT INTO processed_events (consumer, event_id, topic, kafka_partition, kafka_offset)
		 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		consumer, eventID, origin.Topic, origin.Partition, origin.Offset)
	if err != nil {
		return false, fmt.Errorf("idem: mark event %s for %s: %w", eventID, consumer, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("idem: rows affected: %w", err)
	}
	return n == 1, nil
}

// Schema is the processed_events schema for pg.Migrate.
var Schema = pg.Schema{Name: "idem", FS: Migrations, Dir: "migrations"}

// MarkAll is Mark for several events in one statement: it records, within
// tx, that consumer processed each of eventIDs (read at the origin of the
// same index) and returns those marked now — the first time; the rest are
// duplicates. An id given twice is marked once (its second copy is a
// duplicate). Concurrent transactions marking the same ids block and then
// conflict as with Mark.
func MarkAll(ctx context.Context, tx sqlx.QueryerContext, consumer string, eventIDs []string, origins []Origin) (map[string]bool, error) {
	if len(origins) != len(eventIDs) {
		return nil, fmt.Errorf("idem: %d event ids but %d origins", len(eventIDs), len(origins))
	}
	topics := make(pq.StringArray, len(origins))
	partitions := make(pq.Int32Array, len(origins))
	offsets := make(pq.Int64Array, len(origins))
	for i, o := range origins {
		topics[i], partitions[i], offsets[i] = o.Topic, o.Partition, o.Offset
	}
	var marked []string
	if err := sqlx.SelectContext(ctx, tx, &marked,
		`INSERT INTO processed_events (consumer, event_id, topic, kafka_partition, kafka_offset)
		 SELECT $1, id, topic, part, off
		 FROM unnest($2::uuid[], $3::text[], $4::int[], $5::bigint[]) AS m(id, topic, part, off)
		 ON CONFLICT DO NOTHING
		 RETURNING event_id`, consumer, pq.StringArray(eventIDs), topics, partitions, offsets); err != nil {
		return nil, fmt.Errorf("idem: mark %d events for %s: %w", len(eventIDs), consumer, err)
	}
	first := make(map[string]bool, len(marked))
	for _, id := range marked {
		first[id] = true
	}
	return first, nil
}

// Processed returns which of eventIDs consumer has marked, as of q. It
// reads; it decides nothing a concurrent Mark could change — the runtime
// asks it only for events it will not apply now (those of a parked order),
// to tell a copy of an applied event from one still to apply.
func Processed(ctx context.Context, q sqlx.QueryerContext, consumer string, eventIDs []string) (map[string]bool, error) {
	var marked []string
	if err := sqlx.SelectContext(ctx, q, &marked,
		`SELECT event_id FROM processed_events WHERE consumer = $1 AND event_id = ANY($2::uuid[])`,
		consumer, pq.StringArray(eventIDs)); err != nil {
		return nil, fmt.Errorf("idem: which of %d events %s processed: %w", len(eventIDs), consumer, err)
	}
	seen := make(map[string]bool, len(marked))
	for _, id := range marked {
		seen[id] = true
	}
	return seen, nil
}

// Prune deletes, at most limit at a time, consumer's marks of events read
// from topic's partition below offset below — the consumer group's
// committed offset, so the group will not read them again — and processed
// more than olderThan ago — the topic's retention, so a reset of the
// group's offsets cannot bring them back either. Those are the marks no
// delivery can ever test again; every other mark stays, so a redelivery
// is still recognised. It returns how many it deleted.
func Prune(ctx context.Context, db sqlx.ExecerContext, consumer, topic string, partition int32, below int64, olderThan time.Duration, limit int) (int64, error) {
	res, err := db.ExecContext(ctx, `
		DELETE FROM processed_events WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM processed_events
			WHERE consumer = $1 AND topic = $2 AND kafka_partition = $3 AND kafka_offset < $4
			  AND processed_at < now() - make_interval(secs => $5)
			ORDER BY kafka_offset LIMIT $6))`,
		consumer, topic, partition, below, olderThan.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("idem: prune %s %s/%d below %d: %w", consumer, topic, partition, below, err)
	}
	return res.RowsAffected()
}
