// Package store is the order service's PostgreSQL adapter: an order and the
// OrderCreated that starts its saga are written in one transaction, and the
// reactions lock the order's row.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
)

// Migrations holds the service's own tables.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Store creates and reads orders for the HTTP API.
type Store struct{ db *sqlx.DB }

// New returns a Store on db.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// columns are the orders columns a row is read from, in row's field order.
const columns = `id, customer_id, items, total_amount, currency, shipping_address,
	status, cancel_reason, payment_cancelled, inventory_cancelled, shipment_cancelled,
	request_hash, created_at, updated_at`

// row is an orders row as the driver returns it: the jsonb columns as raw
// bytes, decoded by order.
type row struct {
	ID              string    `db:"id"`
	CustomerID      string    `db:"customer_id"`
	Items           []byte    `db:"items"`
	TotalAmount     int64     `db:"total_amount"`
	Currency        string    `db:"currency"`
	ShippingAddress []byte    `db:"shipping_address"`
	Status          string    `db:"status"`
	CancelReason    string    `db:"cancel_reason"`
	PaymentAck      bool      `db:"payment_cancelled"`
	InventoryAck    bool      `db:"inventory_cancelled"`
	ShipmentAck     bool      `db:"shipment_cancelled"`
	RequestHash     string    `db:"request_hash"`
	CreatedAt       time.Time `db:"created_at"`
	UpdatedAt       time.Time `db:"updated_at"`
}

func (r row) order() (domain.Order, error) {
	o := domain.Order{
		ID:           r.ID,
		CustomerID:   r.CustomerID,
		TotalAmount:  r.TotalAmount,
		Currency:     r.Currency,
		Status:       domain.Status(r.Status),
		CancelReason: r.CancelReason,
		Acks:         domain.Acks{Payment: r.PaymentAck, Inventory: r.InventoryAck, Shipment: r.ShipmentAck},
		RequestHash:  r.RequestHash,
		// The driver returns the session's time zone; UTC keeps API output
		// the same whatever the database is configured with.
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
	}
	if err := json.Unmarshal(r.Items, &o.Items); err != nil {
		return o, fmt.Errorf("order %s: decode items: %w", r.ID, err)
	}
	if err := json.Unmarshal(r.ShippingAddress, &o.ShippingAddress); err != nil {
		return o, fmt.Errorf("order %s: decode shipping_address: %w", r.ID, err)
	}
	return o, nil
}

// Create stores the new order o and, in the same transaction, created (its
// OrderCreated) in the outbox. key is the client's Idempotency-Key, "" for
// none; o.ID is then domain.IdempotentOrderID(o.CustomerID, key). If the
// customer's key already belongs to an order, nothing is written, so a
// retried request never starts a second saga: that order is returned with
// replayed true if it came from the same request (equal RequestHash), else
// the error is a fault.Invalid.
func (s *Store) Create(ctx context.Context, o domain.Order, key string, created events.Envelope) (got domain.Order, replayed bool, err error) {
	if created.OrderID != o.ID || created.Type != events.TypeOrderCreated {
		return got, false, fmt.Errorf("create order %s: announcement is %s for order %q", o.ID, created.Type, created.OrderID)
	}
	items, err := json.Marshal(o.Items)
	if err != nil {
		return got, false, fmt.Errorf("create order %s: encode items: %w", o.ID, err)
	}
	addr, err := json.Marshal(o.ShippingAddress)
	if err != nil {
		return got, false, fmt.Errorf("create order %s: encode shipping_address: %w", o.ID, err)
	}

	err = pg.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		replayed = false // InTx may run this again, from the start
		var r row
		// Requests racing with one key are serialised by the unique indexes
		// on the id and on (customer_id, idempotency_key): the losers wait
		// for the winner to commit, then conflict. jsonb parameters go as
		// text: lib/pq would send []byte as bytea.
		err := tx.GetContext(ctx, &r, `
			INSERT INTO orders (id, customer_id, items, total_amount, currency, shipping_address,
			                    status, idempotency_key, request_hash)
			VALUES ($1, $2, $3::jsonb, $4, $5, $6::jsonb, $7, NULLIF($8, ''), $9)
			ON CONFLICT DO NOTHING
			RETURNING `+columns,
			o.ID, o.CustomerID, string(items), o.TotalAmount, o.Currency, string(addr),
			domain.StatusPending, key, o.RequestHash)
		switch {
		case err == nil:
			if got, err = r.order(); err != nil {
				return err
			}
			if err := participant.Emit(ctx, tx, created); err != nil {
				return fmt.Errorf("create order %s: %w", o.ID, err)
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("insert order %s: %w", o.ID, err)
		}

		// No row: the key is taken by a committed order — every unique
		// index arbitrates, since a replay conflicts on the id it derives
		// as well as on the key. This statement sees that order, since
		// each statement takes a fresh snapshot.
		if key == "" {
			return fmt.Errorf("insert order %s: the id is taken", o.ID)
		}
		err = tx.GetContext(ctx, &r, `SELECT `+columns+` FROM orders WHERE customer_id = $1 AND idempotency_key = $2`, o.CustomerID, key)
		if err != nil {
			return fmt.Errorf("read order of customer %s's idempotency key %q: %w", o.CustomerID, key, err)
		}
		if r.RequestHash != o.RequestHash {
			return fmt.Errorf("create order with idempotency key %q (taken by order %s): %w", key, r.ID,
				fault.Errorf(fault.Invalid, "Idempotency-Key was already used for a different order request; send a new key for a new order"))
		}
		got, err = r.order()
		replayed = true
		return err
	})
	if err != nil {
		return domain.Order{}, false, err
	}
	return got, replayed, nil
}

// Order returns the order with id; a fault.NotFound error if there is none.
func (s *Store) Order(ctx context.Context, id string) (domain.Order, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return domain.Order{}, fault.Errorf(fault.NotFound, "order %s", id) // not a UUID, so no order has it
	}
	r, err := pg.Get[row](ctx, s.db, "order "+id, `SELECT `+columns+` FROM orders WHERE id = $1`, uid.String())
	if err != nil {
		return domain.Order{}, err
	}
	return r.order()
}

// LockOrder returns the order locked for the rest of tx, or nil if there is
// no order with id. An id that is not a UUID is reported as absent rather
// than as an error, because an event carrying it can never be applied and
// retrying it would stall the consumer.
func LockOrder(ctx context.Context, tx sqlx.QueryerContext, id string) (*domain.Order, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, nil
	}
	var r row
	err = sqlx.GetContext(ctx, tx, &r, `SELECT `+columns+` FROM orders WHERE id = $1 FOR UPDATE`, uid.String())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock order %s: %w", id, err)
	}
	o, err := r.order()
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// SetState writes the order's state as domain.Transition decided it — its
// status, reason ("" unless cancelling or cancelled) and the cancel's
// acknowledgements — stamping it updated at.
func SetState(ctx context.Context, tx sqlx.ExecerContext, id string, s domain.State, at time.Time) error {
	res, err := tx.ExecContext(ctx, `
		UPDATE orders SET status = $2, cancel_reason = $3,
			payment_cancelled = $4, inventory_cancelled = $5, shipment_cancelled = $6, updated_at = $7
		WHERE id = $1`,
		id, s.Status, s.Reason, s.Acks.Payment, s.Acks.Inventory, s.Acks.Shipment, at)
	if err != nil {
		return fmt.Errorf("set order %s to %s: %w", id, s.Status, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("set order %s to %s: order missing", id, s.Status)
	}
	return nil
}

// SetStateIf writes the order's state to s, stamped updated at, only if
// its state is from — one statement that compares and sets under the row's
// lock, instead of LockOrder then SetState — and reports whether it did.
// false: the order is in another state, or there is no order with id
// (which need not be a UUID).
func SetStateIf(ctx context.Context, tx sqlx.ExecerContext, id string, from, s domain.State, at time.Time) (bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return false, nil
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE orders SET status = $2, cancel_reason = $3,
			payment_cancelled = $4, inventory_cancelled = $5, shipment_cancelled = $6, updated_at = $7
		WHERE id = $1 AND status = $8 AND cancel_reason = $9
			AND payment_cancelled = $10 AND inventory_cancelled = $11 AND shipment_cancelled = $12`,
		uid.String(), s.Status, s.Reason, s.Acks.Payment, s.Acks.Inventory, s.Acks.Shipment, at,
		from.Status, from.Reason, from.Acks.Payment, from.Acks.Inventory, from.Acks.Shipment)
	if err != nil {
		return false, fmt.Errorf("set order %s from %s to %s: %w", id, from.Status, s.Status, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("set order %s from %s to %s: %w", id, from.Status, s.Status, err)
	}
	return n == 1, nil
}
