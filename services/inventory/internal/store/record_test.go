package store_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// TestReservationRecord reads each kind of reservation back as the API
// answers it: a rejection's out_of_stock with its shortages, a release's
// saga reason, a tombstone's reason without its note, and when each was
// recorded, changed and released.
func TestReservationRecord(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	ctx := context.Background()
	items := []events.Item{{SKU: "SKU-1", Quantity: 3, UnitPrice: 100}}
	shortage := "out of stock: SKU-1 requested 3 available 1"
	tests := []struct {
		name       string
		r          domain.Reservation
		detail     string
		release    string // a reason to release it with, afterwards
		wantReason string
		wantDetail string
	}{
		{"Reserved", domain.Reservation{Status: domain.StatusReserved, Items: items}, "", "", "", ""},
		{"RejectedOutOfStock", domain.Reservation{Status: domain.StatusRejected, Items: items}, shortage, "", "out_of_stock", shortage},
		{"Released", domain.Reservation{Status: domain.StatusReserved, Items: items}, "", events.ReasonShippingUnavailable, "shipping_unavailable", "shipping_unavailable"},
		{"Tombstone", domain.Reservation{Status: domain.StatusReleased, Items: []events.Item{}}, domain.NoteReleaseBeforeReserve + events.ReasonShippingUnavailable, "",
			"shipping_unavailable", "release arrived before reserve: shipping_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.OrderID = testenv.ID("ord")
			testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.InsertReservation(ctx, tx, tt.r, tt.detail) })
			if tt.release != "" {
				testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
					return store.SetReservationStatus(ctx, tx, tt.r.OrderID, domain.StatusReleased, tt.release)
				})
			}
			got, err := st.ReservationRecord(ctx, tt.r.OrderID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != tt.wantReason || got.Detail != tt.wantDetail || got.OrderID != tt.r.OrderID || len(got.Items) != len(tt.r.Items) {
				t.Fatalf("ReservationRecord = %+v, want reason %q, detail %q", got, tt.wantReason, tt.wantDetail)
			}
			testenv.WantRecordTimes(t, got.CreatedAt, got.UpdatedAt, got.ReleasedAt, got.Status == domain.StatusReleased, tt.release != "")
		})
	}
}
