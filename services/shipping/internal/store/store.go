// Package store is the shipping service's PostgreSQL adapter. The read used
// by the reactions locks the row it decides on (SELECT … FOR UPDATE), so a
// decision and the record it leads to cannot interleave with another.
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
	err := sqlx.GetContext(ctx, tx, &sh, `SELECT order_id, status, country, reason FROM shipments WHERE order_id = $1 FOR UPDATE`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock shipment %s: %w", orderID, err)
	}
	return &sh, nil
}

// InsertShipment records an order's shipping outcome. A second insert for
// the same order fails on the primary key, which rolls back the racing
// transaction; its redelivery then finds the row and skips.
func InsertShipment(ctx context.Context, tx sqlx.ExecerContext, sh domain.Shipment) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO shipments (order_id, status, country, reason)
		VALUES ($1, $2, $3, $4)`,
		sh.OrderID, sh.Status, sh.Country, sh.Reason)
	if err != nil {
		return fmt.Errorf("insert shipment %s: %w", sh.OrderID, err)
	}
	return nil
}
