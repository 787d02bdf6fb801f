package domain

import "time"

// PaymentRecord is a Payment as GET /payments/{order_id} answers it: with
// why it is DECLINED or REFUNDED and when it was recorded, changed and
// refunded. The reactions decide on a Payment and never need these.
type PaymentRecord struct {
	Payment
	// Reason is a Decline… detail for a DECLINED payment, the saga's
	// events.Reason… for a REFUNDED one, "" for a COMPLETED one.
	Reason    string    `db:"reason" json:"reason"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
	// RefundedAt is nil unless the payment is REFUNDED.
	RefundedAt *time.Time `db:"refunded_at" json:"refunded_at,omitempty"`
}
