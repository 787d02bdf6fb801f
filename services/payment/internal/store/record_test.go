package store_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// TestPaymentRecord reads each kind of payment back as the API answers it:
// a decline's detail, a refund's saga reason and a tombstone's reason
// without the note its detail carries, and when each was recorded,
// changed and refunded.
func TestPaymentRecord(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	tests := []struct {
		name       string
		p          domain.Payment
		detail     string
		refund     string // a reason to refund it with, afterwards
		wantReason string
	}{
		{"Completed", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "JPY", Status: domain.StatusCompleted}, "", "", ""},
		{"InsufficientFunds", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "JPY", Status: domain.StatusDeclined}, domain.DeclineInsufficientFunds, "", "insufficient_funds"},
		{"UnknownCustomer", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "JPY", Status: domain.StatusDeclined}, domain.DeclineUnknownCustomer, "", "unknown_customer"},
		{"CurrencyMismatch", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "USD", Status: domain.StatusDeclined}, domain.DeclineCurrencyMismatch, "", "currency_mismatch"},
		{"RefundedOutOfStock", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "JPY", Status: domain.StatusCompleted}, "", events.ReasonOutOfStock, "out_of_stock"},
		{"RefundedShippingUnavailable", domain.Payment{CustomerID: "c-1", Amount: 1, Currency: "JPY", Status: domain.StatusCompleted}, "", events.ReasonShippingUnavailable, "shipping_unavailable"},
		{"Tombstone", domain.Payment{Status: domain.StatusRefunded}, "refund arrived before charge: " + events.ReasonShippingUnavailable, "", "shipping_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.OrderID = testenv.ID("ord")
			testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, tt.p, tt.detail) })
			created, err := st.PaymentRecord(ctx, tt.p.OrderID)
			if err != nil {
				t.Fatal(err)
			}
			if tt.refund != "" {
				testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
					return store.SetPaymentStatus(ctx, tx, tt.p.OrderID, domain.StatusRefunded, tt.refund)
				})
			}
			got, err := st.PaymentRecord(ctx, tt.p.OrderID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.p
			if tt.refund != "" {
				want.Status = domain.StatusRefunded
			}
			if got.Payment != want || got.Reason != tt.wantReason {
				t.Fatalf("PaymentRecord = %+v, want %+v with reason %q", got, want, tt.wantReason)
			}
			if !got.CreatedAt.Equal(created.CreatedAt) {
				t.Fatalf("created_at %v, was %v when inserted", got.CreatedAt, created.CreatedAt)
			}
			testenv.WantRecordTimes(t, got.CreatedAt, got.UpdatedAt, got.RefundedAt, got.Status == domain.StatusRefunded, tt.refund != "")
		})
	}
}
