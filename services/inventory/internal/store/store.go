// Package store is the inventory service's PostgreSQL adapter, whose reads
// for the reactions lock the rows they decide on, stock rows in byte order,
// so two orders cannot both reserve the last unit.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
)

// Migrations holds the service's own tables.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Store reads and writes the inventory tables.
type Store struct{ db *sqlx.DB }

// New returns a Store on db.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// stockColumns are the columns of a domain.Stock.
const stockColumns = `sku, available, reserved, version`

// Precondition is what a Put asks of the row it writes, as a PUT's
// If-Match and If-None-Match ask it (web.Precondition): to be at the
// version the caller read (IfVersion), or not to exist yet (CreateOnly).
type Precondition struct {
	IfVersion  *int64
	CreateOnly bool
}

// PutStock sets a SKU's available units. Units reserved for paid orders are
// kept: they belong to those orders.
//
// With pre.IfVersion it replaces the units of an existing SKU at that version
// only; any other version, or no SKU, is a fault.PreconditionFailed, so a
// reserve or release committed since the caller read the SKU is never
// erased. Without it, it creates the SKU (pre.CreateOnly: only that, a
// fault.PreconditionFailed if the SKU exists); an existing SKU is left as
// it is — answered unchanged if it already has these units (a retried
// create), a fault.PreconditionRequired otherwise.
func (s *Store) PutStock(ctx context.Context, sku string, available int64, pre Precondition) (domain.Stock, error) {
	if ifVersion := pre.IfVersion; ifVersion != nil {
		st, err := pg.Get[domain.Stock](ctx, s.db, "stock "+sku, `
			UPDATE stock SET available = $2, updated_at = now()
			WHERE sku = $1 AND version = $3
			RETURNING `+stockColumns, sku, available, *ifVersion)
		if !errors.Is(err, fault.NotFound) {
			return st, err
		}
		cur, err := s.Stock(ctx, sku)
		if errors.Is(err, fault.NotFound) {
			return cur, fault.Errorf(fault.PreconditionFailed, "stock %s does not exist, so it is not at version %d; PUT without If-Match creates it", sku, *ifVersion)
		}
		if err != nil {
			return cur, err
		}
		return cur, fault.Errorf(fault.PreconditionFailed, "stock %s is at version %d, not %d: it changed since it was read; read it again", sku, cur.Version, *ifVersion)
	}
	st, err := pg.Get[domain.Stock](ctx, s.db, "stock "+sku, `
		INSERT INTO stock (sku, available) VALUES ($1, $2)
		ON CONFLICT (sku) DO NOTHING
		RETURNING `+stockColumns, sku, available)
	if !errors.Is(err, fault.NotFound) {
		return st, err
	}
	cur, err := s.Stock(ctx, sku)
	switch {
	case err != nil:
		return cur, err
	case pre.CreateOnly:
		return cur, fault.Errorf(fault.PreconditionFailed, "stock %s exists (If-None-Match: *)", sku)
	case cur.Available == available:
		return cur, nil
	}
	return cur, fault.Errorf(fault.PreconditionRequired,
		"stock %s exists: send If-Match with its ETag (version %d) to replace its available units, or POST /stock/%s/restock to add to them", sku, cur.Version, sku)
}

// Restock adds quantity units to a SKU's available ones in one UPDATE, so
// it commutes with every reserve and release: none is lost, whatever runs
// at the same time. An unknown SKU is a fault.NotFound; a sum above
// events.MaxAmount, a fault.Conflict.
//
// key is the client's Idempotency-Key, "" for none: with one, the restock
// is applied once (pg.Once over restock_requests) and a retry with the
// same quantity answers the first restock's stock, replayed; the same key
// with another quantity is a fault.Invalid.
func (s *Store) Restock(ctx context.Context, sku string, quantity int64, key string) (domain.Stock, bool, error) {
	if key == "" {
		st, err := restock(ctx, s.db, sku, quantity)
		return st, false, err
	}
	return pg.Once(ctx, s.db, "restock_requests", sku, key, strconv.FormatInt(quantity, 10), func(tx *sqlx.Tx) (domain.Stock, error) {
		return restock(ctx, tx, sku, quantity)
	})
}

func restock(ctx context.Context, q sqlx.QueryerContext, sku string, quantity int64) (domain.Stock, error) {
	st, err := pg.Get[domain.Stock](ctx, q, "stock "+sku, `
		UPDATE stock SET available = available + $2, updated_at = now()
		WHERE sku = $1 AND available + $2 <= $3
		RETURNING `+stockColumns, sku, quantity, int64(events.MaxAmount))
	if !errors.Is(err, fault.NotFound) {
		return st, err
	}
	cur, err := pg.Get[domain.Stock](ctx, q, "stock "+sku, `SELECT `+stockColumns+` FROM stock WHERE sku = $1`, sku)
	if err != nil {
		return cur, err
	}
	return cur, fault.Errorf(fault.Conflict, "restock of %d would take stock %s above %d available units (it has %d)",
		quantity, sku, int64(events.MaxAmount), cur.Available)
}

// Stock returns a SKU's units; a fault.NotFound error if the SKU is unknown.
func (s *Store) Stock(ctx context.Context, sku string) (domain.Stock, error) {
	return pg.Get[domain.Stock](ctx, s.db, "stock "+sku, `SELECT `+stockColumns+` FROM stock WHERE sku = $1`, sku)
}

// Reservation returns an order's reservation; a fault.NotFound error if
// there is none.
func (s *Store) Reservation(ctx context.Context, orderID string) (domain.Reservation, error) {
	r, err := pg.Get[reservationRow](ctx, s.db, "reservation for order "+orderID,
		`SELECT order_id, status, items FROM reservations WHERE order_id = $1`, orderID)
	if err != nil {
		return domain.Reservation{}, err
	}
	return r.reservation()
}

// LockReservation returns the order's reservation locked for the rest of
// tx, or nil.
func LockReservation(ctx context.Context, tx sqlx.QueryerContext, orderID string) (*domain.Reservation, error) {
	var r reservationRow
	err := sqlx.GetContext(ctx, tx, &r, `
		SELECT order_id, status, items, cancelled_at IS NOT NULL AS cancelled
		FROM reservations WHERE order_id = $1 FOR UPDATE`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock reservation %s: %w", orderID, err)
	}
	res, err := r.reservation()
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// LockStock locks the stock rows of skus for the rest of tx and returns
// their available units by SKU; unknown SKUs are absent. Rows are locked in
// byte order (COLLATE "C", Go's sort.Strings order) whatever the column's
// collation, the one order every path that touches several stock rows
// follows (Reserve and Release lock through here before they move units),
// so two transactions touching the same SKUs queue behind each other
// instead of deadlocking.
func LockStock(ctx context.Context, tx sqlx.QueryerContext, skus []string) (map[string]int64, error) {
	var rows []domain.Stock
	if err := sqlx.SelectContext(ctx, tx, &rows, `
		SELECT sku, available, reserved FROM stock
		WHERE sku = ANY($1)
		ORDER BY sku COLLATE "C"
		FOR UPDATE`, pq.Array(skus)); err != nil {
		return nil, fmt.Errorf("lock stock %v: %w", skus, err)
	}
	avail := make(map[string]int64, len(rows))
	for _, r := range rows {
		avail[r.SKU] = r.Available
	}
	return avail, nil
}

// Reserve moves qty units of each SKU from available to reserved. Every SKU
// must exist; the CHECK on available refuses to go below zero.
func Reserve(ctx context.Context, tx sqlx.ExtContext, qty map[string]int64) error {
	return move(ctx, tx, "reserve", qty, `available = stock.available - q.n, reserved = stock.reserved + q.n`)
}

// Release moves qty units of each SKU from reserved back to available; the
// CHECK on reserved refuses to return more than is held.
func Release(ctx context.Context, tx sqlx.ExtContext, qty map[string]int64) error {
	return move(ctx, tx, "release", qty, `available = stock.available + q.n, reserved = stock.reserved - q.n`)
}

// move locks the SKUs' rows (LockStock: byte order) and then sets them,
// each SKU's quantity as q.n, in one UPDATE: a move never takes a row lock
// out of the one order, whoever called it and whatever it locked before,
// and costs two round trips however many SKUs it moves.
func move(ctx context.Context, tx sqlx.ExtContext, what string, qty map[string]int64, set string) error {
	skus := make(pq.StringArray, 0, len(qty))
	for sku := range qty {
		skus = append(skus, sku)
	}
	sort.Strings(skus)
	locked, err := LockStock(ctx, tx, skus)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n := make(pq.Int64Array, len(skus))
	for i, sku := range skus {
		if _, ok := locked[sku]; !ok {
			return fmt.Errorf("%s %d of %s: sku missing", what, qty[sku], sku)
		}
		n[i] = qty[sku]
	}
	if _, err := tx.ExecContext(ctx, `
		UPDATE stock SET `+set+`, updated_at = now()
		FROM unnest($1::text[], $2::bigint[]) AS q(sku, n)
		WHERE stock.sku = q.sku`, skus, n); err != nil {
		return fmt.Errorf("%s %v: %w", what, qty, err)
	}
	return nil
}

// InsertReservation records a reservation outcome for an order, with the
// reason detail gives it (domain.Reason); a RELEASED one (a tombstone) is
// stamped released now.
func InsertReservation(ctx context.Context, tx sqlx.ExecerContext, r domain.Reservation, detail string) error {
	items, err := encodeItems(r.Items)
	if err != nil {
		return fmt.Errorf("insert reservation %s: %w", r.OrderID, err)
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO reservations (order_id, status, items, detail, reason, released_at)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $2::text = 'RELEASED' THEN now() END)`,
		r.OrderID, r.Status, items, detail, domain.Reason(r.Status, detail))
	if err != nil {
		return fmt.Errorf("insert reservation %s: %w", r.OrderID, err)
	}
	return nil
}

// SetReservationStatus moves an order's reservation to status, with the
// reason detail gives it (domain.Reason), stamping released_at when it
// becomes RELEASED. The items stay: they record what the order held.
func SetReservationStatus(ctx context.Context, tx sqlx.ExecerContext, orderID string, status domain.Status, detail string) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE reservations SET status = $2, detail = $3, reason = $4, updated_at = now(),
			released_at = CASE WHEN $2::text = 'RELEASED' THEN coalesce(released_at, now()) END
		WHERE order_id = $1`, orderID, status, detail, domain.Reason(status, detail))
	if err != nil {
		return fmt.Errorf("set reservation %s to %s: %w", orderID, status, err)
	}
	return nil
}

// reservationRow is a reservations row as scanned: a domain.Reservation
// with its items as the raw jsonb, which reservation decodes.
type reservationRow struct {
	domain.Reservation
	Items []byte `db:"items"`
}

func (r reservationRow) reservation() (domain.Reservation, error) {
	res := r.Reservation
	var err error
	res.Items, err = decodeItems(res.OrderID, r.Items)
	return res, err
}

// decodeItems returns the order's items from their jsonb column, never
// nil, so the API shows a tombstone's items as [] rather than null.
func decodeItems(orderID string, raw []byte) ([]events.Item, error) {
	items := []events.Item{}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("reservation %s: decode items: %w", orderID, err)
	}
	if items == nil {
		items = []events.Item{}
	}
	return items, nil
}

// encodeItems returns items as JSON text for the jsonb column, "[]" for
// none, so the column never holds null.
func encodeItems(items []events.Item) (string, error) {
	if items == nil {
		items = []events.Item{}
	}
	b, err := json.Marshal(items)
	if err != nil {
		return "", fmt.Errorf("encode items: %w", err)
	}
	return string(b), nil
}

// MarkReservationCancelled records that the order's cancel was handled, so
// a second cancel request for the order changes and announces nothing.
func MarkReservationCancelled(ctx context.Context, tx sqlx.ExecerContext, orderID string) error {
	res, err := tx.ExecContext(ctx,
		`UPDATE reservations SET cancelled_at = now(), updated_at = now() WHERE order_id = $1`, orderID)
	if err != nil {
		return fmt.Errorf("mark reservation %s cancelled: %w", orderID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("mark reservation %s cancelled: reservation missing", orderID)
	}
	return nil
}

// LockForReserve locks the order's reservation and then — only if there is
// none, since a reserve of an order with a reservation is skipped whatever
// the stock — the stock rows of skus in byte order, in one statement:
// LockReservation then LockStock in one round trip. The stock CTE reads the
// reservation's, so PostgreSQL locks the reservation row first whatever
// plan it picks. It returns the reservation (nil if none) and the
// available units by SKU (unknown SKUs absent).
func LockForReserve(ctx context.Context, tx sqlx.QueryerContext, orderID string, skus []string) (*domain.Reservation, map[string]int64, error) {
	var r struct {
		reservationRow
		Has       bool           `db:"has_reservation"`
		SKUs      pq.StringArray `db:"skus"`
		Available pq.Int64Array  `db:"available"`
	}
	err := sqlx.GetContext(ctx, tx, &r, `
		WITH r AS MATERIALIZED (
			SELECT order_id, status, items, cancelled_at IS NOT NULL AS cancelled
			FROM reservations WHERE order_id = $1 FOR UPDATE),
		s AS MATERIALIZED (
			SELECT sku, available FROM stock
			WHERE sku = ANY($2) AND NOT EXISTS (SELECT FROM r)
			ORDER BY sku COLLATE "C"
			FOR UPDATE)
		SELECT r.order_id IS NOT NULL AS has_reservation,
			coalesce(r.order_id, '') AS order_id, coalesce(r.status, '') AS status,
			coalesce(r.items, '[]') AS items, coalesce(r.cancelled, false) AS cancelled,
			(SELECT coalesce(array_agg(sku), '{}') FROM s) AS skus,
			(SELECT coalesce(array_agg(available), '{}') FROM s) AS available
		FROM (VALUES (1)) AS one LEFT JOIN r ON true`, orderID, pq.Array(skus))
	if err != nil {
		return nil, nil, fmt.Errorf("lock reservation %s and stock %v: %w", orderID, skus, err)
	}
	if r.Has {
		res, err := r.reservation()
		if err != nil {
			return nil, nil, err
		}
		return &res, nil, nil
	}
	avail := make(map[string]int64, len(r.SKUs))
	for i, sku := range r.SKUs {
		avail[sku] = r.Available[i]
	}
	return nil, avail, nil
}

// ReserveAndRecord moves qty units of each SKU from available to reserved
// and records the order's reservation RESERVED with items, in one
// statement: Reserve and InsertReservation in one round trip. The caller
// holds the stock rows' locks (LockForReserve), so the UPDATE takes no new
// lock out of byte order. Every SKU must exist; the CHECK on available
// refuses to go below zero.
func ReserveAndRecord(ctx context.Context, tx sqlx.ExecerContext, orderID string, items []events.Item, qty map[string]int64) error {
	enc, err := encodeItems(items)
	if err != nil {
		return fmt.Errorf("reserve %s: %w", orderID, err)
	}
	skus := make(pq.StringArray, 0, len(qty))
	for sku := range qty {
		skus = append(skus, sku)
	}
	sort.Strings(skus)
	n := make(pq.Int64Array, len(skus))
	for i, sku := range skus {
		n[i] = qty[sku]
	}
	res, err := tx.ExecContext(ctx, `
		WITH moved AS (
			UPDATE stock SET available = stock.available - q.n, reserved = stock.reserved + q.n, updated_at = now()
			FROM unnest($2::text[], $3::bigint[]) AS q(sku, n)
			WHERE stock.sku = q.sku
			RETURNING stock.sku)
		INSERT INTO reservations (order_id, status, items, detail, reason)
		SELECT $1::text, $4::text, $5::jsonb, '', $6::text
		WHERE (SELECT count(*) FROM moved) = $7`,
		orderID, skus, n, domain.StatusReserved, enc, domain.Reason(domain.StatusReserved, ""), len(skus))
	if err != nil {
		return fmt.Errorf("reserve %v for %s: %w", qty, orderID, err)
	}
	if got, _ := res.RowsAffected(); got != 1 {
		return fmt.Errorf("reserve %v for %s: sku missing", qty, orderID)
	}
	return nil
}
