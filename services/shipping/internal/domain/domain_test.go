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
