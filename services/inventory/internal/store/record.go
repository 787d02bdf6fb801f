package store

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
)

// recordRow is a reservations row as the API answers it: a
// domain.ReservationRecord with its items as the raw jsonb.
type recordRow struct {
	domain.ReservationRecord
	Items []byte `db:"items"`
}

// ReservationRecord returns an order's reservation as the API answers it,
// with its reason, detail and times; a fault.NotFound error if there is
// none.
func (s *Store) ReservationRecord(ctx context.Context, orderID string) (domain.ReservationRecord, error) {
	r, err := pg.Get[recordRow](ctx, s.db, "reservation for order "+orderID, `
		SELECT order_id, status, items, reason, detail, created_at, updated_at, released_at
		FROM reservations WHERE order_id = $1`, orderID)
	if err != nil {
		return domain.ReservationRecord{}, err
	}
	rec := r.ReservationRecord
	if rec.Items, err = decodeItems(orderID, r.Items); err != nil {
		return domain.ReservationRecord{}, err
	}
	pg.InUTC(&rec.CreatedAt, &rec.UpdatedAt, rec.ReleasedAt)
	return rec, nil
}
