package store

import (
	"context"
	"regexp"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
)

// tombstoneNote precedes the reason in the detail of a refund that
// overtook its charge (eventapi's RefundTombstone). The row itself — amount
// 0, no customer — tells a tombstone, so the reason is answered without it.
const tombstoneNote = "refund arrived before charge: "

// PaymentRecord returns an order's payment as the API answers it, with its
// reason (the detail the reactions recorded) and its times; a
// fault.NotFound error if there is none.
func (s *Store) PaymentRecord(ctx context.Context, orderID string) (domain.PaymentRecord, error) {
	p, err := pg.Get[domain.PaymentRecord](ctx, s.db, "payment for order "+orderID, `
		SELECT order_id, customer_id, amount, currency, status,
			regexp_replace(detail, $2, '') AS reason, created_at, updated_at, refunded_at
		FROM payments WHERE order_id = $1`, orderID, "^"+regexp.QuoteMeta(tombstoneNote))
	if err != nil {
		return p, err
	}
	// The driver returns the session's time zone; UTC keeps API output
	// the same whatever the database is configured with.
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	if p.RefundedAt != nil {
		at := p.RefundedAt.UTC()
		p.RefundedAt = &at
	}
	return p, nil
}
