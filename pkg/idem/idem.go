// Package idem makes a Kafka consumer idempotent: it runs a handler at most
// once per (consumer, event id), however often the broker delivers the event.
//
// The mechanism is a row in processed_events, inserted in the same database
// transaction as the handler's business change. The table's primary key, not
// a SELECT-then-INSERT check, decides who wins: of two transactions inserting
// the same key, the second blocks until the first ends and then either sees a
// conflict (the first committed) or proceeds (the first rolled back). A check
// followed by an insert would let both pass the check and apply the effect
// twice; TestCheckThenActRaces shows it, TestOnceConcurrent shows the fix.
//
// The package never opens or commits a transaction of its own for Once: the
// caller owns the transaction, so the marker and the effect commit or roll
// back together.
package idem

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/pg"
)

// Migrations holds the schema of processed_events as goose migrations. Each
// service applies them to its own database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Execer is the part of *sqlx.Tx that Once needs.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Once records eventID as processed by consumer and, if it was not recorded
// before, runs fn. Both happen in tx, which the caller commits. It reports
// whether fn ran; false means the event is a duplicate and should be
// acknowledged without further work. An error from fn is returned as is and
// the caller must roll back, which also forgets the marker.
func Once(ctx context.Context, tx Execer, consumer, eventID string, fn func() error) (ran bool, err error) {
	res, err := tx.ExecContext(ctx,
		`INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		consumer, eventID)
	if err != nil {
		return false, fmt.Errorf("idem: record event %s for %s: %w", eventID, consumer, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("idem: rows affected: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	if err := fn(); err != nil {
		return false, err
	}
	return true, nil
}

// Handle is Once in a transaction of its own: it begins a transaction on db,
// runs fn through Once and commits. Use it from a consumer whose whole
// handling of one event is a single unit of work. It reports whether fn ran.
func Handle(ctx context.Context, db *sqlx.DB, consumer, eventID string, fn func(tx *sqlx.Tx) error) (ran bool, err error) {
	err = pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		ran, err = Once(ctx, tx, consumer, eventID, func() error { return fn(tx) })
		return err
	})
	if err != nil {
		return false, err
	}
	return ran, nil
}

// Schema is the processed_events schema for pg.Migrate.
var Schema = pg.Schema{Name: "idem", FS: Migrations, Dir: "migrations"}
