// Package store is the shipping service's PostgreSQL adapter, whose read
// for the reactions locks the row it decides on.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
)

// Migrations holds the service's own tables.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Store reads the shipping tables for the HTTP API.
type Store struct{ db *sqlx.DB }

// New returns a Store on db.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// Shipment returns an order's shipment; a fault.NotFound error if there is none.
func (s *Store) Shipment(ctx context.Context, orderID string) (domain.Shipment, error) {
	return pg.Get[domain.Shipment](ctx, s.db, "shipment for order "+orderID,
		`SELECT order_id, status, country, reason FROM shipments WHERE order_id = $1`, orderID)
}

// LockShipment returns the order's shipment locked for the rest of tx, or nil.
func LockShipment(ctx context.Context, tx sqlx.QueryerContext, orderID string) (*domain.Shipment, error) {
	var sh domain.Shipment
	err := sqlx.GetContext(ctx, tx, &sh, `
		SELECT order_id, status, country, reason, cancelled_at IS NOT NULL AS cancelled
		FROM shipments WHERE order_id = $1 FOR UPDATE`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock shipment %s: %w", orderID, err)
	}
	return &sh, nil
}

// InsertShipment records an order's shipping outcome, or with sh.Cancelled
// the tombstone of a cancel that came first. A second insert for the same
// order fails on the primary key, which rolls back the racing transaction;
// its redelivery then finds the row and skips.
func InsertShipment(ctx context.Context, tx sqlx.ExecerContext, sh domain.Shipment) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO shipments (order_id, status, country, reason, cancelled_at)
		VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)`,
		sh.OrderID, sh.Status, sh.Country, sh.Reason, sh.Cancelled)
	if err != nil {
		return fmt.Errorf("insert shipment %s: %w", sh.OrderID, err)
	}
	return nil
}

// InsertShipmentIfNone records sh as InsertShipment does, but only if the
// order has no shipment yet, and reports whether it did: the primary key
// decides, as a lock would — an insert of the same order by a transaction
// still running waits for it, then conflicts (false) or proceeds. One
// statement where LockShipment then InsertShipment were two.
func InsertShipmentIfNone(ctx context.Context, tx sqlx.ExecerContext, sh domain.Shipment) (bool, error) {
	res, err := tx.ExecContext(ctx, `
		INSERT INTO shipments (order_id, status, country, reason, cancelled_at)
		VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)
		ON CONFLICT (order_id) DO NOTHING`,
		sh.OrderID, sh.Status, sh.Country, sh.Reason, sh.Cancelled)
	if err != nil {
		return false, fmt.Errorf("insert shipment %s: %w", sh.OrderID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert shipment %s: %w", sh.OrderID, err)
	}
	return n == 1, nil
}

// CancelShipment records that the order's cancel was handled: a SCHEDULED
// shipment becomes CANCELLED with reason (the order's cancel reason), a
// FAILED one keeps its status and reason. A second cancel request for the
// order finds cancelled_at set and changes nothing.
func CancelShipment(ctx context.Context, tx sqlx.ExecerContext, orderID, reason string) error {
	res, err := tx.ExecContext(ctx, `
		UPDATE shipments SET
			status = CASE WHEN status = 'SCHEDULED' THEN 'CANCELLED' ELSE status END,
			reason = CASE WHEN status = 'SCHEDULED' THEN $2 ELSE reason END,
			cancelled_at = now(), updated_at = now()
		WHERE order_id = $1`, orderID, reason)
	if err != nil {
		return fmt.Errorf("cancel shipment %s: %w", orderID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("cancel shipment %s: shipment missing", orderID)
	}
	return nil
}
