package store

import (
	"context"
	"time"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
)

// recordRow is a reservations row as the API answers it.
type recordRow struct {
	reservationRow
	Reason     string     `db:"reason"`
	Detail     string     `db:"detail"`
	CreatedAt  time.Time  `db:"created_at"`
	UpdatedAt  time.Time  `db:"updated_at"`
	ReleasedAt *time.Time `db:"released_at"`
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
	res, err := r.reservation()
	if err != nil {
		return domain.ReservationRecord{}, err
	}
	// The driver returns the session's time zone; UTC keeps API output
	// the same whatever the database is configured with.
	rec := domain.ReservationRecord{
		Reservation: res, Reason: r.Reason, Detail: r.Detail,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.ReleasedAt != nil {
		at := r.ReleasedAt.UTC()
		rec.ReleasedAt = &at
	}
	return rec, nil
}
