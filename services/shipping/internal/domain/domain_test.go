package domain_test

import (
	"testing"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
)

func TestDecideShipment(t *testing.T) {
	served := map[string]bool{"JP": true, "US": true}
	tests := []struct {
		name     string
		existing *domain.Shipment
		served   map[string]bool
		country  string
		want     domain.Decision
	}{
		{"ServedCountrySchedules", nil, served, "JP", domain.Decision{Action: domain.Schedule, Country: "JP"}},
		{"LowerCaseServedCountrySchedules", nil, served, "us", domain.Decision{Action: domain.Schedule, Country: "US"}},
		{"UnservedCountryFails", nil, served, "BR", domain.Decision{Action: domain.Fail, Country: "BR", Reason: events.ReasonShippingUnavailable}},
		{"LowerCaseUnservedCountryFails", nil, served, "br", domain.Decision{Action: domain.Fail, Country: "BR", Reason: events.ReasonShippingUnavailable}},
		{"NothingServedFails", nil, nil, "JP", domain.Decision{Action: domain.Fail, Country: "JP", Reason: events.ReasonShippingUnavailable}},
		{"AlreadyScheduledSkips", &domain.Shipment{Status: domain.StatusScheduled, Country: "JP"}, served, "JP", domain.Decision{Action: domain.Skip, Country: "JP"}},
		{"AlreadyFailedSkips", &domain.Shipment{Status: domain.StatusFailed, Country: "BR"}, served, "BR", domain.Decision{Action: domain.Skip, Country: "BR"}},
		{"AlreadyFailedSkipsEvenIfNowServed", &domain.Shipment{Status: domain.StatusFailed, Country: "BR"}, map[string]bool{"BR": true}, "BR", domain.Decision{Action: domain.Skip, Country: "BR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.DecideShipment(tt.existing, tt.served, tt.country); got != tt.want {
				t.Fatalf("DecideShipment = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideCancel(t *testing.T) {
	tests := []struct {
		name     string
		existing *domain.Shipment
		want     domain.CancelAction
	}{
		{"ScheduledIsCancelled", &domain.Shipment{Status: domain.StatusScheduled, Country: "JP"}, domain.CancelScheduled},
		{"CancelBeforeReservationLeavesTombstone", nil, domain.CancelTombstone},
		{"FailedIsOnlyAcknowledged", &domain.Shipment{Status: domain.StatusFailed, Country: "BR", Reason: events.ReasonShippingUnavailable}, domain.CancelAcknowledge},
		{"SecondCancelSkips", &domain.Shipment{Status: domain.StatusCancelled, Cancelled: true}, domain.CancelSkip},
		{"SecondCancelOfFailedSkips", &domain.Shipment{Status: domain.StatusFailed, Country: "BR", Cancelled: true}, domain.CancelSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.DecideCancel(tt.existing); got != tt.want {
				t.Fatalf("DecideCancel = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTombstoneRefusesLateReservation: a reservation that arrives after the
// cancel's tombstone schedules nothing, even to a served country.
func TestTombstoneRefusesLateReservation(t *testing.T) {
	tomb := &domain.Shipment{Status: domain.StatusCancelled, Reason: events.ReasonCustomerCancelled, Cancelled: true}
	if d := domain.DecideShipment(tomb, map[string]bool{"JP": true}, "JP"); d.Action != domain.Skip {
		t.Fatalf("DecideShipment after the cancel = %+v, want Skip", d)
	}
}
