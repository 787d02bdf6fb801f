// This file holds the log of the rows Debezium's trigger refuses, as the
// built-in relay logs the rows it refuses (refused.go). The trigger stamps
// refused_at with its transaction's start, so a look "since the last one"
// by time would miss a row whose transaction began before that look and
// committed after it; rows are found by transaction id instead.
// TestEveryRefusedRowIsLoggedOnce shows why.

package outbox

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"
)

// refusedLogBatch bounds the rows logged in one look; the gauge counts
// them all.
const refusedLogBatch = 100

// refusedLog remembers where the last look stood: every transaction still
// running then has an id at or above xmin, and of those, the rows already
// logged.
type refusedLog struct {
	xmin   string // xid8; empty until a look succeeds
	logged map[int64]bool
	log    *slog.Logger
}

// newRefusedLog starts the log at now: rows refused before it were logged
// by whoever ran then (the hand-over logs those it moved), and the gauge
// counts them. If it cannot tell when now is, the first look does.
func newRefusedLog(ctx context.Context, db *sqlx.DB, log *slog.Logger) *refusedLog {
	l := &refusedLog{logged: map[int64]bool{}, log: log}
	if m, err := newMark(ctx, db); err == nil {
		l.xmin = m.Xmin
	}
	return l
}

// look sets the refused rows' gauge of service and logs, once each, the
// rows refused by transactions that had not ended at the last look.
func (l *refusedLog) look(ctx context.Context, db *sqlx.DB, service string) {
	var count int64
	if err := db.GetContext(ctx, &count, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND refused_at IS NOT NULL`); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("could not count the refused outbox rows", "err", err)
		}
		return
	}
	refusedRows.WithLabelValues(service).Set(float64(count))
	// The mark comes first: a transaction the query below cannot see
	// had not ended, so its id is at or above the next look's xmin.
	next, err := newMark(ctx, db)
	if err != nil {
		return
	}
	if l.xmin == "" {
		l.xmin = next.Xmin
		return
	}
	var rows []struct {
		ID        int64  `db:"id"`
		Topic     string `db:"topic"`
		EventID   string `db:"event_id"`
		LastError string `db:"last_error"`
		Recent    bool   `db:"recent"`
	}
	if err := db.SelectContext(ctx, &rows, `
		SELECT id, topic, coalesce(event_id, '') AS event_id, coalesce(last_error, '') AS last_error,
		       txid >= $2::xid8 AS recent
		FROM outbox WHERE sent_at IS NULL AND refused_at IS NOT NULL AND txid >= $1::xid8
		ORDER BY id LIMIT $3`, l.xmin, next.Xmin, refusedLogBatch); err != nil {
		return
	}
	logged := map[int64]bool{}
	for _, rw := range rows {
		if rw.Recent {
			// The next look asks for this transaction again.
			logged[rw.ID] = true
		}
		if l.logged[rw.ID] {
			continue
		}
		logRefused(l.log, rw.ID, rw.Topic, rw.EventID, rw.LastError)
	}
	if len(rows) == refusedLogBatch {
		l.log.Error("more outbox rows refused than logged here: list them with choreoctl outbox-refused", "logged", refusedLogBatch, "refused", count)
	}
	l.xmin, l.logged = next.Xmin, logged
}
