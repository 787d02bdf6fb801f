package domain_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
)

func TestDecideReserve(t *testing.T) {
	item := func(sku string, q int64) events.Item { return events.Item{SKU: sku, Quantity: q, UnitPrice: 100} }
	tests := []struct {
		name      string
		existing  *domain.Reservation
		stock     map[string]int64
		items     []events.Item
		want      domain.ReserveAction
		shortages []events.Shortage
		needed    map[string]int64
	}{
		{
			name:   "EnoughStockReservesAll",
			stock:  map[string]int64{"a": 5, "b": 1},
			items:  []events.Item{item("a", 2), item("b", 1)},
			want:   domain.ReserveAll,
			needed: map[string]int64{"a": 2, "b": 1},
		},
		{
			name:   "ExactStockReservesAll",
			stock:  map[string]int64{"a": 3},
			items:  []events.Item{item("a", 3)},
			want:   domain.ReserveAll,
			needed: map[string]int64{"a": 3},
		},
		{
			name:   "DuplicateSkuLinesAreSummed",
			stock:  map[string]int64{"a": 4},
			items:  []events.Item{item("a", 2), item("a", 2)},
			want:   domain.ReserveAll,
			needed: map[string]int64{"a": 4},
		},
		{
			name:      "DuplicateSkuLinesTogetherShort",
			stock:     map[string]int64{"a": 3},
			items:     []events.Item{item("a", 2), item("a", 2)},
			want:      domain.Reject,
			shortages: []events.Shortage{{SKU: "a", Requested: 4, Available: 3}},
			needed:    map[string]int64{"a": 4},
		},
		{
			name:      "UnknownSkuIsShort",
			stock:     map[string]int64{"a": 10},
			items:     []events.Item{item("a", 1), item("ghost", 1)},
			want:      domain.Reject,
			shortages: []events.Shortage{{SKU: "ghost", Requested: 1, Available: 0}},
			needed:    map[string]int64{"a": 1, "ghost": 1},
		},
		{
			name:  "EveryShortageIsReportedSortedBySku",
			stock: map[string]int64{"a": 0, "b": 9, "c": 1},
			items: []events.Item{item("c", 2), item("b", 1), item("a", 1)},
			want:  domain.Reject,
			shortages: []events.Shortage{
				{SKU: "a", Requested: 1, Available: 0},
				{SKU: "c", Requested: 2, Available: 1},
			},
			needed: map[string]int64{"a": 1, "b": 1, "c": 2},
		},
		{
			name:      "OverflowingQuantitiesAreShort",
			stock:     map[string]int64{"a": math.MaxInt64 - 1},
			items:     []events.Item{item("a", math.MaxInt64-1), item("a", 2)},
			want:      domain.Reject,
			shortages: []events.Shortage{{SKU: "a", Requested: math.MaxInt64, Available: math.MaxInt64 - 1}},
			needed:    map[string]int64{"a": math.MaxInt64},
		},
		{
			name:     "AlreadyReservedSkips",
			existing: &domain.Reservation{Status: domain.StatusReserved},
			stock:    map[string]int64{"a": 10},
			items:    []events.Item{item("a", 1)},
			want:     domain.ReserveSkip,
		},
		{
			name:     "AlreadyRejectedSkips",
			existing: &domain.Reservation{Status: domain.StatusRejected},
			stock:    map[string]int64{"a": 10},
			items:    []events.Item{item("a", 1)},
			want:     domain.ReserveSkip,
		},
		{
			name:     "ReleaseArrivedFirstSkips",
			existing: &domain.Reservation{Status: domain.StatusReleased},
			stock:    map[string]int64{"a": 10},
			items:    []events.Item{item("a", 1)},
			want:     domain.ReserveSkip,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.DecideReserve(tt.existing, tt.stock, tt.items)
			if got.Action != tt.want {
				t.Fatalf("Action = %v, want %v (decision %+v)", got.Action, tt.want, got)
			}
			if !reflect.DeepEqual(got.Shortages, tt.shortages) {
				t.Errorf("Shortages = %+v, want %+v", got.Shortages, tt.shortages)
			}
			if !reflect.DeepEqual(got.Needed, tt.needed) {
				t.Errorf("Needed = %v, want %v", got.Needed, tt.needed)
			}
		})
	}
}

// decision is one case of a compensation's decision table: the order's
// reservation record (nil: none) and the action wanted.
type decision[A comparable] struct {
	name     string
	existing *domain.Reservation
	want     A
}

// checkDecisions runs a decision table against decide, DecideRelease or
// DecideCancel, each case a subtest.
func checkDecisions[A comparable](t *testing.T, decide func(*domain.Reservation) A, tests []decision[A]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.existing); got != tt.want {
				t.Fatalf("decision = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecideRelease(t *testing.T) {
	checkDecisions(t, domain.DecideRelease, []decision[domain.ReleaseAction]{
		{"ReservedIsReturned", &domain.Reservation{Status: domain.StatusReserved, Items: []events.Item{{SKU: "a", Quantity: 1}}}, domain.ReleaseReturn},
		{"SecondReleaseIsNoop", &domain.Reservation{Status: domain.StatusReleased}, domain.ReleaseSkip},
		{"RejectedHasNothingToRelease", &domain.Reservation{Status: domain.StatusRejected}, domain.ReleaseSkip},
		{"ReleaseBeforeReserveLeavesTombstone", nil, domain.ReleaseTombstone},
	})
}

func TestDecideCancel(t *testing.T) {
	held := []events.Item{{SKU: "a", Quantity: 1}}
	checkDecisions(t, domain.DecideCancel, []decision[domain.CancelAction]{
		{"ReservedIsReturned", &domain.Reservation{Status: domain.StatusReserved, Items: held}, domain.CancelReturn},
		{"CancelBeforeReserveLeavesTombstone", nil, domain.CancelTombstone},
		{"RejectedIsOnlyAcknowledged", &domain.Reservation{Status: domain.StatusRejected, Items: held}, domain.CancelAcknowledge},
		// A compensation released it first: the cancel must not release again.
		{"ReleasedByCompensationIsOnlyAcknowledged", &domain.Reservation{Status: domain.StatusReleased, Items: held}, domain.CancelAcknowledge},
		{"SecondCancelSkips", &domain.Reservation{Status: domain.StatusReleased, Items: held, Cancelled: true}, domain.CancelSkip},
		{"SecondCancelOfTombstoneSkips", &domain.Reservation{Status: domain.StatusReleased, Cancelled: true}, domain.CancelSkip},
	})
}

// TestCancelledReservationRefusesLateSteps: after a cancel, whatever it
// found, the late reserve is skipped and a compensation's release too.
func TestCancelledReservationRefusesLateSteps(t *testing.T) {
	items := []events.Item{{SKU: "a", Quantity: 1}}
	for _, r := range []*domain.Reservation{
		{Status: domain.StatusReleased, Cancelled: true},               // tombstone
		{Status: domain.StatusReleased, Items: items, Cancelled: true}, // released by the cancel
	} {
		if d := domain.DecideReserve(r, map[string]int64{"a": 10}, items); d.Action != domain.ReserveSkip {
			t.Errorf("reserve after cancel of %+v = %v, want ReserveSkip", r, d.Action)
		}
		if got := domain.DecideRelease(r); got != domain.ReleaseSkip {
			t.Errorf("release after cancel of %+v = %v, want ReleaseSkip", r, got)
		}
	}
}
