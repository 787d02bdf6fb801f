package domain

import (
	"strings"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Notes that precede the saga's reason in a RELEASED reservation's detail,
// telling people more than the reason code: a release or a cancel that
// overtook its reserve (a tombstone), or a cancel that returned the units.
const (
	NoteReleaseBeforeReserve = "release arrived before reserve: "
	NoteCancelBeforeReserve  = "cancelled before reserve: "
	NoteCancelled            = "cancelled: "
)

// Reason returns the reason code of a reservation in status whose reaction
// recorded detail: out_of_stock for REJECTED — DecideReserve rejects for
// shortages only, and the detail lists them —, the saga's reason for
// RELEASED (the detail, without its note), "" for RESERVED.
func Reason(status Status, detail string) string {
	switch status {
	case StatusRejected:
		return events.ReasonOutOfStock
	case StatusReleased:
		for _, note := range []string{NoteReleaseBeforeReserve, NoteCancelBeforeReserve, NoteCancelled} {
			if r, ok := strings.CutPrefix(detail, note); ok {
				return r
			}
		}
		return detail
	}
	return ""
}

// ReservationRecord is a Reservation as GET /reservations/{order_id}
// answers it: with why it is REJECTED or RELEASED and when it was
// recorded, changed and released. The reactions decide on a Reservation
// and never need these.
type ReservationRecord struct {
	Reservation
	// Reason is Reason(Status, Detail).
	Reason string `db:"reason" json:"reason"`
	// Detail is the reaction's note for people: the shortages of a
	// REJECTED reservation, the reason of a RELEASED one.
	Detail    string    `db:"detail" json:"detail"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
	// ReleasedAt is nil unless the reservation is RELEASED.
	ReleasedAt *time.Time `db:"released_at" json:"released_at,omitempty"`
}
