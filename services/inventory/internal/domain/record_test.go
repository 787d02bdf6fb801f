package domain_test

import (
	"testing"

	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
)

func TestReason(t *testing.T) {
	tests := []struct {
		name   string
		status domain.Status
		detail string
		want   string
	}{
		{"Reserved", domain.StatusReserved, "", ""},
		{"RejectedIsOutOfStock", domain.StatusRejected, "out of stock: SKU-1 requested 3 available 1", "out_of_stock"},
		{"RejectedWithoutDetail", domain.StatusRejected, "", "out_of_stock"},
		{"ReleasedCarriesTheSagaReason", domain.StatusReleased, "shipping_unavailable", "shipping_unavailable"},
		{"TombstoneWithoutItsNote", domain.StatusReleased, "release arrived before reserve: shipping_unavailable", "shipping_unavailable"},
		{"CancelTombstoneWithoutItsNote", domain.StatusReleased, domain.NoteCancelBeforeReserve + "customer_cancelled", "customer_cancelled"},
		{"CancelReturnWithoutItsNote", domain.StatusReleased, domain.NoteCancelled + "timeout", "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.Reason(tt.status, tt.detail); got != tt.want {
				t.Fatalf("Reason(%s, %q) = %q, want %q", tt.status, tt.detail, got, tt.want)
			}
		})
	}
}
