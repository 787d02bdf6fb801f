package domain

import (
	"strings"
	"time"
)

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

// Notes that precede the saga's reason in a REFUNDED payment's detail,
// telling people more than the reason code: a refund or a cancel that
// overtook its charge (a tombstone), or a cancel that credited it back.
const (
	NoteRefundBeforeCharge = "refund arrived before charge: "
	NoteCancelBeforeCharge = "cancelled before charge: "
	NoteCancelled          = "cancelled: "
)

// Reason returns the reason code a payment's detail holds: the detail
// without its note, if it has one.
func Reason(detail string) string {
	for _, note := range []string{NoteRefundBeforeCharge, NoteCancelBeforeCharge, NoteCancelled} {
		if r, ok := strings.CutPrefix(detail, note); ok {
			return r
		}
	}
	return detail
}
