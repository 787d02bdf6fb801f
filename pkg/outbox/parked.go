package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ParkedRow is an outbox row the relay set aside because Kafka will never
// accept it as it is (too large, for a topic that does not exist, …).
type ParkedRow struct {
	ID        int64     `db:"id" json:"id"`
	Topic     string    `db:"topic" json:"topic"`
	Key       string    `db:"key" json:"key"`
	Bytes     int       `db:"bytes" json:"bytes"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	ParkedAt  time.Time `db:"parked_at" json:"parked_at"`
	LastError string    `db:"last_error" json:"last_error"`
}

// ListParked lists up to limit parked rows, oldest first.
func ListParked(ctx context.Context, q sqlx.QueryerContext, limit int) ([]ParkedRow, error) {
	var rows []ParkedRow
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT id, topic, coalesce(encode(key, 'escape'), '') AS key, octet_length(value) AS bytes,
		       created_at, parked_at, coalesce(last_error, '') AS last_error
		FROM outbox WHERE parked_at IS NOT NULL AND sent_at IS NULL
		ORDER BY id
		LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("outbox: parked rows: %w", err)
	}
	return rows, nil
}

// Release puts parked row id back in the relay's way, once what made Kafka
// refuse it is fixed (the topic created, the broker's limit raised), and
// wakes the relay. It reports whether the row was parked: releasing it
// again, or a row sent meanwhile, changes nothing.
func Release(ctx context.Context, db *sqlx.DB, id int64) (released bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox: release row %d: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.ExecContext(ctx, `UPDATE outbox SET parked_at = NULL WHERE id = $1 AND parked_at IS NOT NULL AND sent_at IS NULL`, id)
	if err != nil {
		return false, fmt.Errorf("outbox: release row %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
		return false, fmt.Errorf("outbox: notify: %w", err)
	}
	return true, tx.Commit()
}
