// This file holds the rows Kafka will never accept: the relay sets them
// aside as refused (too large, invalid, for an invalid or long-unknown
// topic) instead of retrying them ahead of every other row, and an operator
// lists them and, once the cause is fixed, retries them.
// TestPermanentFailuresAreRefusedAndTheRestFlows shows why.

package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
)

// refuse sets rw aside for good, with the reason, and says so loudly.
func (r *Relay) refuse(ctx context.Context, conn *sqlx.Conn, rw row, cause error) error {
	reason, _ := cleanText(cause.Error())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx,
		`UPDATE outbox SET refused_at = now(), last_error = $2 WHERE id = $1 AND sent_at IS NULL`,
		rw.ID, reason); err != nil {
		return fmt.Errorf("outbox: refuse row %d: %w", rw.ID, err)
	}
	refused.WithLabelValues(r.cfg.Name).Inc()
	var headers map[string]any
	_ = json.Unmarshal(rw.Headers, &headers) // best effort, for the log only
	eventID, _ := headers[events.HeaderEventID].(string)
	logRefused(r.log, rw.ID, rw.Topic, eventID, cause)
	return nil
}

// logRefused says loudly that row id, for topic, is refused and why: the
// built-in relay's refusal and Debezium's trigger's say it the same way.
func logRefused(log *slog.Logger, id int64, topic, eventID string, cause any) {
	log.Error("outbox row refused: Kafka will never accept it; fix the cause, then retry it (choreoctl outbox-retry)",
		"row_id", id, "topic", topic, "event_id", eventID, "err", cause)
}

// legalTopic reports whether topic follows Kafka's rule for topic names. A
// row naming any other topic can never be published, whatever the broker
// answers (brokers and fakes differ), so it is refused before it is sent.
func legalTopic(topic string) bool {
	return legalTopicName.MatchString(topic) && topic != "." && topic != ".."
}

var legalTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// RefusedRow is an outbox row the relay set aside because Kafka will never
// accept it as it is (too large, for a topic that does not exist, …).
type RefusedRow struct {
	ID        int64     `db:"id" json:"id"`
	Topic     string    `db:"topic" json:"topic"`
	Key       string    `db:"key" json:"key"`
	Bytes     int       `db:"bytes" json:"bytes"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	RefusedAt time.Time `db:"refused_at" json:"refused_at"`
	LastError string    `db:"last_error" json:"last_error"`
}

// ListRefused lists up to limit refused rows, oldest first.
func ListRefused(ctx context.Context, q sqlx.QueryerContext, limit int) ([]RefusedRow, error) {
	var rows []RefusedRow
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT id, topic, coalesce(encode(key, 'escape'), '') AS key, octet_length(value) AS bytes,
		       created_at, refused_at, coalesce(last_error, '') AS last_error
		FROM outbox WHERE refused_at IS NOT NULL AND sent_at IS NULL
		ORDER BY id
		LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("outbox: refused rows: %w", err)
	}
	return rows, nil
}

// Retry puts refused row id back in line for the relay, once what made
// Kafka refuse it is fixed (the topic created, the broker's limit raised),
// and wakes the relay. It reports whether the row was refused: retrying it
// again, or a row sent meanwhile, changes nothing. Under Debezium, which
// decodes inserts only, the row is deleted and inserted again (a new id);
// if the trigger refuses it again (still too large, or for a topic the
// connector may not write), nothing changes and the error is a
// *RefusedAgainError that says why.
func Retry(ctx context.Context, db *sqlx.DB, id int64) (retried bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("outbox: retry row %d: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	debezium, err := DebeziumPublishes(ctx, tx)
	if err != nil {
		return false, err
	}
	if debezium {
		var again struct {
			Refused   bool   `db:"refused"`
			LastError string `db:"last_error"`
		}
		err := tx.GetContext(ctx, &again, `
			WITH retried AS (
				DELETE FROM outbox WHERE id = $1 AND refused_at IS NOT NULL AND sent_at IS NULL
				RETURNING topic, key, value, headers, created_at)
			INSERT INTO outbox (topic, key, value, headers, created_at)
			SELECT topic, key, value, headers, created_at FROM retried
			RETURNING refused_at IS NOT NULL AS refused, coalesce(last_error, '') AS last_error`, id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("outbox: retry row %d: %w", id, err)
		case again.Refused:
			// Rolled back: the row keeps its id, for a retry once fixed.
			return false, &RefusedAgainError{ID: id, Reason: again.LastError}
		}
	} else {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET refused_at = NULL WHERE id = $1 AND refused_at IS NOT NULL AND sent_at IS NULL`, id)
		if err != nil {
			return false, fmt.Errorf("outbox: retry row %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
			return false, fmt.Errorf("outbox: notify: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("outbox: retry row %d: %w", id, err)
	}
	return true, nil
}

// RefusedAgainError is Retry's error when Debezium's trigger refuses the
// row it inserts again: the cause is not fixed. Reason is the trigger's.
type RefusedAgainError struct {
	ID     int64
	Reason string
}

func (e *RefusedAgainError) Error() string {
	return fmt.Sprintf("outbox: row %d refused again, left as it was: %s", e.ID, e.Reason)
}
