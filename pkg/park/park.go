// Package park sets aside the orders a consumer cannot apply an event of,
// parks their later events behind them, and lets an operator replay or
// release them.
package park

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/pg"
)

// Migrations holds the schema of parked_events as goose migrations. Each
// service applies them to its own database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Schema is the parked_events schema for pg.Migrate.
var Schema = pg.Schema{Name: "park", FS: Migrations, Dir: "migrations"}

// Entry is a message to keep aside: where it was read, what it holds, and,
// for the message that failed, why.
type Entry struct {
	// Key is what it parks, an order id. Empty: a dead letter that holds
	// nothing up.
	Key string
	// MsgKey is the Kafka key as read, whatever its bytes.
	MsgKey    []byte
	Topic     string
	Partition int32
	Offset    int64
	// Value and Headers are the message as read; headers as text (see
	// participant's dead letters for how binary ones are kept).
	Value   []byte
	Headers map[string]string
	// EventID and EventType are the envelope's, if the message decoded.
	EventID, EventType string
	// Reason is why it failed; empty for a message parked behind a failure.
	Reason string
}

// Row is a parked message as stored.
type Row struct {
	Seq        int64      `db:"seq" json:"seq"`
	Consumer   string     `db:"consumer" json:"service"`
	Key        *string    `db:"park_key" json:"key,omitempty"`
	EventID    *string    `db:"event_id" json:"event_id,omitempty"`
	EventType  *string    `db:"event_type" json:"event_type,omitempty"`
	Topic      string     `db:"topic" json:"topic"`
	Partition  int32      `db:"partition" json:"partition"`
	Offset     int64      `db:"offset" json:"offset"`
	MsgKey     []byte     `db:"msg_key" json:"-"`
	Value      []byte     `db:"value" json:"-"`
	RawHeaders string     `db:"headers" json:"-"`
	Reason     *string    `db:"reason" json:"reason,omitempty"`
	ParkedAt   time.Time  `db:"parked_at" json:"parked_at"`
	ResolvedAt *time.Time `db:"resolved_at" json:"resolved_at,omitempty"`
	Resolution *string    `db:"resolution" json:"resolution,omitempty"`
}

// Headers decodes the row's headers.
func (r Row) Headers() (map[string]string, error) {
	h := map[string]string{}
	if err := json.Unmarshal([]byte(r.RawHeaders), &h); err != nil {
		return nil, fmt.Errorf("park: headers of row %d: %w", r.Seq, err)
	}
	return h, nil
}

// Add keeps e aside for consumer within tx. A message already kept (the
// same origin, delivered again) is kept once.
func Add(ctx context.Context, tx sqlx.ExecerContext, consumer string, e Entry) error {
	headers, err := json.Marshal(e.Headers)
	if err != nil {
		return fmt.Errorf("park: headers: %w", err)
	}
	value := e.Value
	if value == nil {
		value = []byte{}
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO parked_events (consumer, park_key, event_id, event_type, topic, "partition", "offset", msg_key, value, headers, reason)
		VALUES ($1, NULLIF($2, ''), NULLIF($3, ''), NULLIF($4, ''), $5, $6, $7, $8, $9, $10, NULLIF($11, ''))
		ON CONFLICT (consumer, topic, "partition", "offset", md5(value)) DO NOTHING`,
		consumer, e.Key, e.EventID, e.EventType, e.Topic, e.Partition, e.Offset, e.MsgKey, value, string(headers), e.Reason); err != nil {
		return fmt.Errorf("park: keep %s/%d/%d of %q for %s: %w", e.Topic, e.Partition, e.Offset, e.Key, consumer, err)
	}
	return nil
}

// Parked returns which of keys are parked for consumer, as of tx: a key
// (an order) is parked while it has an unresolved row, which DeadLetter
// adds for the failed message and the runtime's parkBehind for each later
// one, until an Operator resolves them. For
// the ones that are, it waits for the key's lock (shared: many may hold
// it) and asks again, so that a key whose rows an operator is resolving
// right now is answered after that ends. The common answer, nothing
// parked, costs one indexed lookup and no lock.
func Parked(ctx context.Context, tx sqlx.ExtContext, consumer string, keys []string) (map[string]bool, error) {
	found, err := parked(ctx, tx, consumer, keys)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock_shared(`+lockID+`) FROM unnest($2::text[]) AS k`, consumer, pq.StringArray(found)); err != nil {
		return nil, fmt.Errorf("park: lock %d keys of %s: %w", len(found), consumer, err)
	}
	// Read Committed: this statement sees what a resolution that held
	// the lock committed.
	still, err := parked(ctx, tx, consumer, found)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(still))
	for _, k := range still {
		set[k] = true
	}
	return set, nil
}

// lockID is the advisory lock of key k for consumer $1.
const lockID = `hashtextextended('park/' || $1 || '/' || k, 0)`

func parked(ctx context.Context, tx sqlx.QueryerContext, consumer string, keys []string) ([]string, error) {
	var found []string
	if err := sqlx.SelectContext(ctx, tx, &found, `
		SELECT DISTINCT park_key FROM parked_events
		WHERE consumer = $1 AND park_key = ANY($2::text[]) AND resolved_at IS NULL`,
		consumer, pq.StringArray(keys)); err != nil {
		return nil, fmt.Errorf("park: which of %d keys are parked for %s: %w", len(keys), consumer, err)
	}
	return found, nil
}

// Lock takes key's lock for consumer exclusively, until tx ends: while an
// operator resolves the key's rows, no transaction parks a message behind
// them or applies one past them (see Parked).
func Lock(ctx context.Context, tx sqlx.ExecerContext, consumer, key string) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(`+lockID+`) FROM (SELECT $2::text AS k) AS l`, consumer, key); err != nil {
		return fmt.Errorf("park: lock %q of %s: %w", key, consumer, err)
	}
	return nil
}

// Filter selects rows: those of one key, one event or one row, or, all
// empty, every unresolved row of the consumer.
type Filter struct {
	Key     string
	EventID string
	Seq     int64
	// Resolved includes resolved rows too.
	Resolved bool
	// Through, if set, leaves out rows parked after row Through: an
	// operator acts on the rows they saw, not on ones parked since.
	Through int64
	// ForUpdate locks the rows until tx ends.
	ForUpdate bool
	// Limit caps the rows returned; 0: no cap.
	Limit int
	// NoValue leaves each message's value out, for a listing.
	NoValue bool
}

// Rows returns consumer's rows that f selects, in the order they were
// parked.
func Rows(ctx context.Context, q sqlx.QueryerContext, consumer string, f Filter) ([]Row, error) {
	value := "msg_key, value"
	if f.NoValue {
		value = "NULL::bytea AS msg_key, NULL::bytea AS value"
	}
	query := `
		SELECT seq, consumer, park_key, event_id, event_type, topic, "partition", "offset", ` + value + `, headers::text AS headers,
		       reason, parked_at, resolved_at, resolution
		FROM parked_events
		WHERE consumer = $1
		  AND ($2 = '' OR park_key = $2)
		  AND ($3 = '' OR event_id = $3)
		  AND ($4 = 0 OR seq = $4)
		  AND ($5 OR resolved_at IS NULL)
		  AND ($6 = 0 OR seq <= $6)
		ORDER BY seq`
	if f.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	if f.ForUpdate {
		query += " FOR UPDATE"
	}
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, query, consumer, f.Key, f.EventID, f.Seq, f.Resolved, f.Through); err != nil {
		return nil, fmt.Errorf("park: rows of %s: %w", consumer, err)
	}
	return rows, nil
}

// Resolutions of a row.
const (
	// Replayed: applied (or found a duplicate) once the cause was fixed.
	Replayed = "replayed"
	// Released: let go without being applied.
	Released = "released"
)

// Resolve marks the rows seqs resolved as how (Replayed or Released)
// within tx; a key with no unresolved row left flows again.
func Resolve(ctx context.Context, tx sqlx.ExecerContext, seqs []int64, how string) error {
	if _, err := tx.ExecContext(ctx, `
		UPDATE parked_events SET resolved_at = now(), resolution = $2
		WHERE seq = ANY($1::bigint[]) AND resolved_at IS NULL`, pq.Int64Array(seqs), how); err != nil {
		return fmt.Errorf("park: resolve %d rows as %s: %w", len(seqs), how, err)
	}
	return nil
}

// Fail records that replaying row seq failed again, and why: the row stays
// parked with the newer reason.
func Fail(ctx context.Context, db sqlx.ExecerContext, seq int64, reason string) error {
	if _, err := db.ExecContext(ctx, `UPDATE parked_events SET reason = $2 WHERE seq = $1 AND resolved_at IS NULL`, seq, reason); err != nil {
		return fmt.Errorf("park: record the failure of row %d: %w", seq, err)
	}
	return nil
}

// Counts are what is parked for a consumer, for its gauges.
type Counts struct {
	Rows int64 `db:"rows"` // unresolved rows
	Keys int64 `db:"keys"` // distinct keys among them
	// OldestSeconds is how long the oldest unresolved row has waited;
	// 0: none.
	OldestSeconds float64 `db:"oldest"`
}

// Count returns what is parked for consumer now.
func Count(ctx context.Context, q sqlx.QueryerContext, consumer string) (Counts, error) {
	var c Counts
	err := sqlx.GetContext(ctx, q, &c, `
		SELECT count(*) AS rows, count(DISTINCT park_key) AS keys,
		       coalesce(extract(epoch FROM now() - min(parked_at)), 0)::float8 AS oldest
		FROM parked_events
		WHERE consumer = $1 AND resolved_at IS NULL`, consumer)
	if err != nil {
		return Counts{}, fmt.Errorf("park: count for %s: %w", consumer, err)
	}
	return c, nil
}
