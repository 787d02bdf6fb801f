// Package store is the payment service's PostgreSQL adapter. Reads used by
// the reactions lock the rows they decide on (SELECT … FOR UPDATE), so two
// charges of one customer cannot both spend the same balance. Functions the
// reactions call take the transaction as an sqlx interface, so a
// *participant.Tx and a *sqlx.Tx both fit.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
)

// Migrations holds the service's own tables.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Store reads and writes the payment tables.
type Store struct{ db *sqlx.DB }

// New returns a Store on db.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// PutAccount sets a customer's balance and its currency, creating the
// account if needed.
func (s *Store) PutAccount(ctx context.Context, customerID string, balance int64, currency string) (domain.Account, error) {
	var a domain.Account
	err := s.db.GetContext(ctx, &a, `
		INSERT INTO accounts (customer_id, balance, currency) VALUES ($1, $2, $3)
		ON CONFLICT (customer_id) DO UPDATE
		SET balance = EXCLUDED.balance, currency = EXCLUDED.currency, updated_at = now()
		RETURNING customer_id, balance, currency`, customerID, balance, currency)
	if err != nil {
		return a, fmt.Errorf("put account %s: %w", customerID, err)
	}
	return a, nil
}

// Account returns a customer's account; a fault.NotFound error if there is none.
func (s *Store) Account(ctx context.Context, customerID string) (domain.Account, error) {
	return pg.Get[domain.Account](ctx, s.db, "account "+customerID,
		`SELECT customer_id, balance, currency FROM accounts WHERE customer_id = $1`, customerID)
}

// Payment returns an order's payment; a fault.NotFound error if there is none.
func (s *Store) Payment(ctx context.Context, orderID string) (domain.Payment, error) {
	return pg.Get[domain.Payment](ctx, s.db, "payment for order "+orderID,
		`SELECT order_id, customer_id, amount, currency, status FROM payments WHERE order_id = $1`, orderID)
}

// LockPayment returns the order's payment locked for the rest of tx, or nil.
func LockPayment(ctx context.Context, tx sqlx.QueryerContext, orderID string) (*domain.Payment, error) {
	var p domain.Payment
	err := sqlx.GetContext(ctx, tx, &p, `SELECT order_id, customer_id, amount, currency, status FROM payments WHERE order_id = $1 FOR UPDATE`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock payment %s: %w", orderID, err)
	}
	return &p, nil
}

// LockAccount returns the customer's account locked for the rest of tx, or nil.
func LockAccount(ctx context.Context, tx sqlx.QueryerContext, customerID string) (*domain.Account, error) {
	var a domain.Account
	err := sqlx.GetContext(ctx, tx, &a, `SELECT customer_id, balance, currency FROM accounts WHERE customer_id = $1 FOR UPDATE`, customerID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock account %s: %w", customerID, err)
	}
	return &a, nil
}

// AddBalance adds delta (negative to debit) to a customer's balance.
func AddBalance(ctx context.Context, tx sqlx.ExecerContext, customerID string, delta int64) error {
	res, err := tx.ExecContext(ctx,
		`UPDATE accounts SET balance = balance + $2, updated_at = now() WHERE customer_id = $1`, customerID, delta)
	if err != nil {
		return fmt.Errorf("add %d to balance of %s: %w", delta, customerID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("add %d to balance of %s: account missing", delta, customerID)
	}
	return nil
}

// InsertPayment records a payment outcome for an order.
func InsertPayment(ctx context.Context, tx sqlx.ExecerContext, p domain.Payment, detail string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO payments (order_id, customer_id, amount, currency, status, detail)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		p.OrderID, p.CustomerID, p.Amount, p.Currency, p.Status, detail)
	if err != nil {
		return fmt.Errorf("insert payment %s: %w", p.OrderID, err)
	}
	return nil
}

// SetPaymentStatus moves an order's payment to status.
func SetPaymentStatus(ctx context.Context, tx sqlx.ExecerContext, orderID string, status domain.Status, detail string) error {
	_, err := tx.ExecContext(ctx,
		`UPDATE payments SET status = $2, detail = $3, updated_at = now() WHERE order_id = $1`, orderID, status, detail)
	if err != nil {
		return fmt.Errorf("set payment %s to %s: %w", orderID, status, err)
	}
	return nil
}
