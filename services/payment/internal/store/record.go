package store

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
)

// PaymentRecord returns an order's payment as the API answers it, with its
// reason (the detail the reactions recorded) and its times; a
// fault.NotFound error if there is none.
func (s *Store) PaymentRecord(ctx context.Context, orderID string) (domain.PaymentRecord, error) {
	p, err := pg.Get[domain.PaymentRecord](ctx, s.db, "payment for order "+orderID, `
		SELECT order_id, customer_id, amount, currency, status,
			detail AS reason, created_at, updated_at, refunded_at
		FROM payments WHERE order_id = $1`, orderID)
	if err != nil {
		return p, err
	}
	// The row tells a tombstone or a cancel itself; the API answers the
	// reason code alone.
	p.Reason = domain.Reason(p.Reason)
	pg.InUTC(&p.CreatedAt, &p.UpdatedAt, p.RefundedAt)
	return p, nil
}
