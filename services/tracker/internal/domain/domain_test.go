package domain_test

import (
	"slices"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// timeline returns events of the given types, one second apart from t0.
func timeline(types ...string) []domain.Event {
	evs := make([]domain.Event, len(types))
	for i, typ := range types {
		evs[i] = domain.Event{Type: typ, At: t0.Add(time.Duration(i) * time.Second)}
	}
	return evs
}

func TestDerive(t *testing.T) {
	at := func(i int) *time.Time { v := t0.Add(time.Duration(i) * time.Second); return &v }
	tests := []struct {
		name   string
		events []string
		want   domain.Progress
	}{
		{"NoEventsRunsWaitingForNothingKnown", nil, domain.Progress{State: domain.Running}},
		{"CreatedWaitsForPayment", []string{"OrderCreated"}, domain.Progress{State: domain.Running, WaitingFor: "payment"}},
		{"PaidWaitsForInventory", []string{"OrderCreated", "PaymentCompleted"}, domain.Progress{State: domain.Running, WaitingFor: "inventory"}},
		{"ReservedWaitsForShipping", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved"},
			domain.Progress{State: domain.Running, WaitingFor: "shipping"}},
		{"RejectedWaitsForRefund", []string{"OrderCreated", "PaymentCompleted", "InventoryRejected"},
			domain.Progress{State: domain.Running, WaitingFor: "payment refund"}},
		{"ShipmentFailedWaitsForRelease", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentFailed"},
			domain.Progress{State: domain.Running, WaitingFor: "inventory release"}},
		{"ReleasedWaitsForRefund", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentFailed", "InventoryReleased"},
			domain.Progress{State: domain.Running, WaitingFor: "payment refund"}},
		{"OrderCompletedCompletes", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentScheduled", "OrderCompleted"},
			domain.Progress{State: domain.Completed, EndedAt: at(4)}},
		{"OrderCancelledCancels", []string{"OrderCreated", "PaymentDeclined", "OrderCancelled"},
			domain.Progress{State: domain.Cancelled, EndedAt: at(2)}},
		{"ShipmentScheduledInfersCompletedBeforeAnnouncements", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentScheduled"},
			domain.Progress{State: domain.Completed, EndedAt: at(3)}},
		{"PaymentDeclinedInfersCancelled", []string{"OrderCreated", "PaymentDeclined"},
			domain.Progress{State: domain.Cancelled, EndedAt: at(1)}},
		{"PaymentRefundedInfersCancelled", []string{"OrderCreated", "PaymentCompleted", "InventoryRejected", "PaymentRefunded"},
			domain.Progress{State: domain.Cancelled, EndedAt: at(3)}},
		{"AnnouncementWinsOverInference", []string{"OrderCreated", "PaymentCompleted", "InventoryRejected", "PaymentRefunded", "OrderCancelled"},
			domain.Progress{State: domain.Cancelled, EndedAt: at(4)}},
		{"UnknownTypeNeitherEndsNorMovesTheStep", []string{"OrderCreated", "PaymentCompleted", "OrderTeleported"},
			domain.Progress{State: domain.Running, WaitingFor: "inventory"}},
		// A cancel in progress: the order ignores the other paths' ends
		// until every participant acknowledged, so nothing is inferred.
		{"CancelRequestedWaitsForTheFirstMissingAck", []string{"OrderCreated", "PaymentCompleted", "OrderCancelRequested"},
			domain.Progress{State: domain.Running, WaitingFor: "payment cancel"}},
		{"ShipmentScheduledDuringACancelDoesNotComplete", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "OrderCancelRequested", "ShipmentScheduled", "PaymentCancelled", "InventoryCancelled"},
			domain.Progress{State: domain.Running, WaitingFor: "shipping cancel"}},
		{"AllAcksWaitForTheOrder", []string{"OrderCreated", "OrderCancelRequested", "ShipmentCancelled", "PaymentCancelled", "InventoryCancelled"},
			domain.Progress{State: domain.Running, WaitingFor: "order"}},
		{"DeclineDuringACancelDoesNotEndIt", []string{"OrderCreated", "OrderCancelRequested", "PaymentDeclined"},
			domain.Progress{State: domain.Running, WaitingFor: "payment cancel"}},
		{"OnlyUnknownTypesRunWaitingForNothingKnown", []string{"OrderTeleported"}, domain.Progress{State: domain.Running}},
		{"AnnouncedCancelAfterCancelRequestCancels", []string{"OrderCreated", "OrderCancelRequested", "PaymentDeclined", "OrderCancelled"},
			domain.Progress{State: domain.Cancelled, EndedAt: at(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.Derive(timeline(tt.events...))
			if got.State != tt.want.State || got.WaitingFor != tt.want.WaitingFor || !sameTime(got.EndedAt, tt.want.EndedAt) {
				t.Fatalf("Derive(%v) = %+v (ended %v), want %+v (ended %v)", tt.events, got, got.EndedAt, tt.want, tt.want.EndedAt)
			}
		})
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func TestSortOrdersByTimeThenTopicPartitionOffset(t *testing.T) {
	evs := []domain.Event{
		{EventID: "late", At: t0.Add(time.Second), Topic: "a.events"},
		{EventID: "same-time-offset-2", At: t0, Topic: "b.events", Partition: 0, Offset: 2},
		{EventID: "same-time-partition-1", At: t0, Topic: "b.events", Partition: 1, Offset: 0},
		{EventID: "same-time-offset-1", At: t0, Topic: "b.events", Partition: 0, Offset: 1},
		{EventID: "same-time-topic-a", At: t0, Topic: "a.events", Partition: 9, Offset: 9},
		{EventID: "early", At: t0.Add(-time.Second), Topic: "z.events"},
	}
	domain.Sort(evs)
	var got []string
	for _, e := range evs {
		got = append(got, e.EventID)
	}
	want := []string{"early", "same-time-topic-a", "same-time-offset-1", "same-time-offset-2", "same-time-partition-1", "late"}
	if !slices.Equal(got, want) {
		t.Fatalf("Sort = %v, want %v", got, want)
	}
}

func TestSummaryAt(t *testing.T) {
	const sla = 30 * time.Second
	tests := []struct {
		name  string
		state domain.State
		age   time.Duration
		want  domain.State
	}{
		{"RunningWithinSLAIsRunning", domain.Running, 10 * time.Second, domain.Running},
		{"RunningAtExactlySLAIsRunning", domain.Running, sla, domain.Running},
		{"RunningPastSLAIsStuck", domain.Running, sla + time.Millisecond, domain.Stuck},
		{"CompletedPastSLAStaysCompleted", domain.Completed, time.Hour, domain.Completed},
		{"CancelledPastSLAStaysCancelled", domain.Cancelled, time.Hour, domain.Cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := domain.Summary{State: tt.state, StartedAt: t0}
			if got := s.At(t0.Add(tt.age), sla).State; got != tt.want {
				t.Fatalf("At(+%s) = %s, want %s", tt.age, got, tt.want)
			}
		})
	}
}
