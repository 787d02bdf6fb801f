// Package store is the payment service's PostgreSQL adapter, whose reads
// for the reactions lock the rows they decide on, so two charges of one
// customer cannot both spend the same balance.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
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

// accountColumns are the columns of a domain.Account.
const accountColumns = `customer_id, balance, currency, version`

// DefaultCurrency is the currency of an account opened without one.
const DefaultCurrency = "JPY"

// Precondition is what a Put asks of the row it writes, as a PUT's
// If-Match and If-None-Match ask it (web.Precondition): to be at the
// version the caller read (IfVersion), or not to exist yet (CreateOnly).
type Precondition struct {
	IfVersion  *int64
	CreateOnly bool
}

// PutAccount sets a customer's balance. currency is the account's: "" means
// its own, or DefaultCurrency for a new account; it never changes (a
// fault.Conflict), so a refund credits the currency charged. With
// pre.IfVersion it replaces the balance at that version only, else a
// fault.PreconditionFailed, so a debit or refund committed since the caller
// read the account is never erased. Without it, it opens the account
// (pre.CreateOnly: only that, a fault.PreconditionFailed if it exists); an
// existing one is answered unchanged if it has this balance (a retried
// create), a fault.PreconditionRequired otherwise.
func (s *Store) PutAccount(ctx context.Context, customerID string, balance int64, currency string, pre Precondition) (domain.Account, error) {
	if ifVersion := pre.IfVersion; ifVersion != nil {
		a, err := pg.Get[domain.Account](ctx, s.db, "account "+customerID, `
			UPDATE accounts SET balance = $2, updated_at = now()
			WHERE customer_id = $1 AND version = $3 AND ($4 = '' OR currency = $4)
			RETURNING `+accountColumns, customerID, balance, *ifVersion, currency)
		if !errors.Is(err, fault.NotFound) {
			return a, err
		}
		cur, err := s.Account(ctx, customerID)
		switch {
		case errors.Is(err, fault.NotFound):
			return cur, fault.Errorf(fault.PreconditionFailed, "account %s does not exist, so it is not at version %d; PUT without If-Match opens it", customerID, *ifVersion)
		case err != nil:
			return cur, err
		case cur.Version != *ifVersion:
			return cur, fault.Errorf(fault.PreconditionFailed, "account %s is at version %d, not %d: it changed since it was read; read it again", customerID, cur.Version, *ifVersion)
		}
		return cur, currencyFixed(cur, currency)
	}
	open := currency
	if open == "" {
		open = DefaultCurrency
	}
	a, err := pg.Get[domain.Account](ctx, s.db, "account "+customerID, `
		INSERT INTO accounts (customer_id, balance, currency) VALUES ($1, $2, $3)
		ON CONFLICT (customer_id) DO NOTHING
		RETURNING `+accountColumns, customerID, balance, open)
	if !errors.Is(err, fault.NotFound) {
		return a, err
	}
	cur, err := s.Account(ctx, customerID)
	switch {
	case err != nil:
		return cur, err
	case pre.CreateOnly:
		return cur, fault.Errorf(fault.PreconditionFailed, "account %s exists (If-None-Match: *)", customerID)
	case currency != "" && currency != cur.Currency:
		return cur, currencyFixed(cur, currency)
	case cur.Balance == balance:
		return cur, nil
	}
	return cur, fault.Errorf(fault.PreconditionRequired,
		"account %s exists: send If-Match with its ETag (version %d) to replace its balance, or POST /accounts/%s/deposits to add to it", customerID, cur.Version, customerID)
}

// currencyFixed is the refusal of a change of a's currency to currency.
func currencyFixed(a domain.Account, currency string) error {
	return fault.Errorf(fault.Conflict, "account %s holds %s; its currency cannot change to %s (refunds credit the currency charged): open another account", a.CustomerID, a.Currency, currency)
}

// Deposit adds amount to a customer's balance in one UPDATE, so it
// commutes with every debit and refund: none is lost, whatever runs at the
// same time. An unknown account is a fault.NotFound; a balance above
// events.MaxAmount, a fault.Conflict.
//
// key is the client's Idempotency-Key, "" for none: with one, the deposit
// is applied once (pg.Once over deposit_requests) and a retry with the
// same amount answers the first deposit's account, replayed; the same key
// with another amount is a fault.Invalid.
func (s *Store) Deposit(ctx context.Context, customerID string, amount int64, key string) (domain.Account, bool, error) {
	if key == "" {
		a, err := deposit(ctx, s.db, customerID, amount)
		return a, false, err
	}
	return pg.Once(ctx, s.db, "deposit_requests", customerID, key, strconv.FormatInt(amount, 10), func(tx *sqlx.Tx) (domain.Account, error) {
		return deposit(ctx, tx, customerID, amount)
	})
}

func deposit(ctx context.Context, q sqlx.QueryerContext, customerID string, amount int64) (domain.Account, error) {
	a, err := pg.Get[domain.Account](ctx, q, "account "+customerID, `
		UPDATE accounts SET balance = balance + $2, updated_at = now()
		WHERE customer_id = $1 AND balance + $2 <= $3
		RETURNING `+accountColumns, customerID, amount, int64(events.MaxAmount))
	if !errors.Is(err, fault.NotFound) {
		return a, err
	}
	cur, err := pg.Get[domain.Account](ctx, q, "account "+customerID, `SELECT `+accountColumns+` FROM accounts WHERE customer_id = $1`, customerID)
	if err != nil {
		return cur, err
	}
	return cur, fault.Errorf(fault.Conflict, "deposit of %d would take account %s above a balance of %d (it has %d)",
		amount, customerID, int64(events.MaxAmount), cur.Balance)
}

// Account returns a customer's account; a fault.NotFound error if there is none.
func (s *Store) Account(ctx context.Context, customerID string) (domain.Account, error) {
	return pg.Get[domain.Account](ctx, s.db, "account "+customerID,
		`SELECT `+accountColumns+` FROM accounts WHERE customer_id = $1`, customerID)
}

// Payment returns an order's payment; a fault.NotFound error if there is none.
func (s *Store) Payment(ctx context.Context, orderID string) (domain.Payment, error) {
	return pg.Get[domain.Payment](ctx, s.db, "payment for order "+orderID,
		`SELECT order_id, customer_id, amount, currency, status FROM payments WHERE order_id = $1`, orderID)
}

// LockPayment returns the order's payment locked for the rest of tx, or nil.
func LockPayment(ctx context.Context, tx sqlx.QueryerContext, orderID string) (*domain.Payment, error) {
	var p domain.Payment
	err := sqlx.GetContext(ctx, tx, &p, `
		SELECT order_id, customer_id, amount, currency, status, cancelled_at IS NOT NULL AS cancelled
		FROM payments WHERE order_id = $1 FOR UPDATE`, orderID)
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
	err := sqlx.GetContext(ctx, tx, &a, `SELECT `+accountColumns+` FROM accounts WHERE customer_id = $1 FOR UPDATE`, customerID)
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

// InsertPayment records a payment outcome for an order; detail is why
// (the reason the API answers) for a DECLINED or REFUNDED payment. A
// REFUNDED one (a tombstone) is stamped refunded now.
func InsertPayment(ctx context.Context, tx sqlx.ExecerContext, p domain.Payment, detail string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO payments (order_id, customer_id, amount, currency, status, detail, refunded_at)
		VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $5::text = 'REFUNDED' THEN now() END)`,
		p.OrderID, p.CustomerID, p.Amount, p.Currency, p.Status, detail)
	if err != nil {
		return fmt.Errorf("insert payment %s: %w", p.OrderID, err)
	}
	return nil
}

// SetPaymentStatus moves an order's payment to status, for detail (the
// reason the API answers), stamping refunded_at when it becomes REFUNDED.
func SetPaymentStatus(ctx context.Context, tx sqlx.ExecerContext, orderID string, status domain.Status, detail string) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE payments SET status = $2, detail = $3, updated_at = now(),
			refunded_at = CASE WHEN $2::text = 'REFUNDED' THEN coalesce(refunded_at, now()) END
		WHERE order_id = $1`, orderID, status, detail)
	if err != nil {
		return fmt.Errorf("set payment %s to %s: %w", orderID, status, err)
	}
	return nil
}

// MarkPaymentCancelled records that the order's cancel was handled, so a
// second cancel request for the order changes and announces nothing.
func MarkPaymentCancelled(ctx context.Context, tx sqlx.ExecerContext, orderID string) error {
	res, err := tx.ExecContext(ctx,
		`UPDATE payments SET cancelled_at = now(), updated_at = now() WHERE order_id = $1`, orderID)
	if err != nil {
		return fmt.Errorf("mark payment %s cancelled: %w", orderID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("mark payment %s cancelled: payment missing", orderID)
	}
	return nil
}

// lockedQuery locks an order's payment and then an account — the order
// every reaction locks them in — in one statement, one round trip instead
// of two. The account CTE reads the payment CTE, so PostgreSQL locks the
// payment row (if any) before it looks for the account, whatever order it
// joins them in. %s is the account's customer_id; a payment's columns are
// p_*, an account's a_*, and absent rows read as has_* false.
const lockedQuery = `
	WITH p AS MATERIALIZED (
		SELECT order_id, customer_id, amount, currency, status, cancelled_at IS NOT NULL AS cancelled
		FROM payments WHERE order_id = $1 FOR UPDATE),
	a AS MATERIALIZED (
		SELECT ` + accountColumns + ` FROM accounts WHERE customer_id = %s FOR UPDATE)
	SELECT p.order_id IS NOT NULL AS has_payment,
		coalesce(p.order_id, '') AS p_order_id, coalesce(p.customer_id, '') AS p_customer_id,
		coalesce(p.amount, 0) AS p_amount, coalesce(p.currency, '') AS p_currency,
		coalesce(p.status, '') AS p_status, coalesce(p.cancelled, false) AS p_cancelled,
		a.customer_id IS NOT NULL AS has_account,
		coalesce(a.customer_id, '') AS a_customer_id, coalesce(a.balance, 0) AS a_balance,
		coalesce(a.currency, '') AS a_currency, coalesce(a.version, 0) AS a_version
	FROM (VALUES (1)) AS one LEFT JOIN p ON true LEFT JOIN a ON true`

// lockedRow is a row of lockedQuery.
type lockedRow struct {
	HasPayment bool          `db:"has_payment"`
	OrderID    string        `db:"p_order_id"`
	CustomerID string        `db:"p_customer_id"`
	Amount     int64         `db:"p_amount"`
	Currency   string        `db:"p_currency"`
	Status     domain.Status `db:"p_status"`
	Cancelled  bool          `db:"p_cancelled"`
	HasAccount bool          `db:"has_account"`
	AccountID  string        `db:"a_customer_id"`
	Balance    int64         `db:"a_balance"`
	AccountCur string        `db:"a_currency"`
	Version    int64         `db:"a_version"`
}

func lockBoth(ctx context.Context, tx sqlx.QueryerContext, what, account string, args ...any) (*domain.Payment, *domain.Account, error) {
	var r lockedRow
	if err := sqlx.GetContext(ctx, tx, &r, fmt.Sprintf(lockedQuery, account), args...); err != nil {
		return nil, nil, fmt.Errorf("lock %s: %w", what, err)
	}
	var p *domain.Payment
	var a *domain.Account
	if r.HasPayment {
		p = &domain.Payment{OrderID: r.OrderID, CustomerID: r.CustomerID, Amount: r.Amount, Currency: r.Currency, Status: r.Status, Cancelled: r.Cancelled}
	}
	if r.HasAccount {
		a = &domain.Account{CustomerID: r.AccountID, Balance: r.Balance, Currency: r.AccountCur, Version: r.Version}
	}
	return p, a, nil
}

// LockCharge locks, for a charge of the order to customerID, the order's
// payment and then — only if there is none, since a charge of an order
// with a payment is skipped whatever the balance — the customer's account,
// and returns each, nil if absent: LockPayment then LockAccount in one
// round trip.
func LockCharge(ctx context.Context, tx sqlx.QueryerContext, orderID, customerID string) (*domain.Payment, *domain.Account, error) {
	return lockBoth(ctx, tx, "payment "+orderID+" and account "+customerID,
		`$2 AND NOT EXISTS (SELECT FROM p)`, orderID, customerID)
}

// LockPaymentAccount locks the order's payment and then, if there is one,
// the charged customer's account, and returns each, nil if absent:
// LockPayment then LockAccount of its customer in one round trip.
func LockPaymentAccount(ctx context.Context, tx sqlx.QueryerContext, orderID string) (*domain.Payment, *domain.Account, error) {
	return lockBoth(ctx, tx, "payment "+orderID+" and its account", `(SELECT customer_id FROM p)`, orderID)
}

// Debit takes p.Amount from p.CustomerID's balance and records p
// COMPLETED, in one statement: AddBalance and InsertPayment in one round
// trip. The account must exist (locked by LockCharge).
func Debit(ctx context.Context, tx sqlx.ExecerContext, p domain.Payment) error {
	res, err := tx.ExecContext(ctx, `
		WITH debit AS (
			UPDATE accounts SET balance = balance - $3, updated_at = now()
			WHERE customer_id = $2 RETURNING customer_id)
		INSERT INTO payments (order_id, customer_id, amount, currency, status)
		SELECT $1::text, customer_id, $3::bigint, $4::text, $5::text FROM debit`,
		p.OrderID, p.CustomerID, p.Amount, p.Currency, domain.StatusCompleted)
	if err != nil {
		return fmt.Errorf("debit %d from %s for order %s: %w", p.Amount, p.CustomerID, p.OrderID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("debit %d from %s for order %s: account missing", p.Amount, p.CustomerID, p.OrderID)
	}
	return nil
}

// Undo is why a payment is given back.
type Undo int

const (
	// Compensation: a later step of the saga failed.
	Compensation Undo = iota + 1
	// Cancellation: the order was cancelled, which stamps cancelled_at too.
	Cancellation
)

// CreditBack returns p.Amount to p.CustomerID's balance and moves the
// payment to REFUNDED for detail (stamping refunded_at, and cancelled_at
// too for a Cancellation), in one statement: AddBalance and
// SetPaymentStatus (and MarkPaymentCancelled) in one round trip. The
// account must exist.
func CreditBack(ctx context.Context, tx sqlx.ExecerContext, p domain.Payment, detail string, why Undo) error {
	res, err := tx.ExecContext(ctx, `
		WITH credit AS (
			UPDATE accounts SET balance = balance + $3, updated_at = now()
			WHERE customer_id = $2 RETURNING customer_id)
		UPDATE payments SET status = $4, detail = $5, updated_at = now(),
			refunded_at = coalesce(refunded_at, now()),
			cancelled_at = CASE WHEN $6::boolean THEN now() ELSE cancelled_at END
		WHERE order_id = $1 AND EXISTS (SELECT FROM credit)`,
		p.OrderID, p.CustomerID, p.Amount, domain.StatusRefunded, detail, why == Cancellation)
	if err != nil {
		return fmt.Errorf("credit %d back to %s for order %s: %w", p.Amount, p.CustomerID, p.OrderID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("credit %d back to %s for order %s: account or payment missing", p.Amount, p.CustomerID, p.OrderID)
	}
	return nil
}

// InsertTombstone records that nothing was charged for the order and
// nothing ever will be: a REFUNDED payment with no amount, for detail,
// stamped cancelled too for a Cancellation — InsertPayment (and
// MarkPaymentCancelled) in one statement.
func InsertTombstone(ctx context.Context, tx sqlx.ExecerContext, orderID, detail string, why Undo) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO payments (order_id, customer_id, amount, currency, status, detail, refunded_at, cancelled_at)
		VALUES ($1, '', 0, '', $2, $3, now(), CASE WHEN $4::boolean THEN now() END)`,
		orderID, domain.StatusRefunded, detail, why == Cancellation)
	if err != nil {
		return fmt.Errorf("insert payment tombstone %s: %w", orderID, err)
	}
	return nil
}
