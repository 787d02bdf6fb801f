package domain_test

import (
	"encoding/json"
	"slices"
	"strings"
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

// TestDeriveReason: a saga says why it ended in the words of the service
// that said so, the order's announcement first; each event is "Type" or
// "Type:reason".
func TestDeriveReason(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   string
	}{
		{"CompletedHasNone", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentScheduled", "OrderCompleted"}, ""},
		{"InsufficientFunds", []string{"OrderCreated", "PaymentDeclined:insufficient_funds", "OrderCancelled:insufficient_funds"}, "insufficient_funds"},
		{"UnknownCustomer", []string{"OrderCreated", "PaymentDeclined:unknown_customer", "OrderCancelled:unknown_customer"}, "unknown_customer"},
		{"CurrencyMismatch", []string{"OrderCreated", "PaymentDeclined:currency_mismatch", "OrderCancelled:currency_mismatch"}, "currency_mismatch"},
		{"OutOfStock", []string{"OrderCreated", "PaymentCompleted", "InventoryRejected:out_of_stock", "PaymentRefunded:out_of_stock", "OrderCancelled:out_of_stock"}, "out_of_stock"},
		{"ShippingUnavailable", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentFailed:shipping_unavailable",
			"InventoryReleased:shipping_unavailable", "PaymentRefunded:shipping_unavailable", "OrderCancelled:shipping_unavailable"}, "shipping_unavailable"},
		{"CustomerCancelled", []string{"OrderCreated", "OrderCancelRequested:customer_cancelled", "PaymentCancelled", "InventoryCancelled", "ShipmentCancelled",
			"OrderCancelled:customer_cancelled"}, "customer_cancelled"},
		{"Timeout", []string{"OrderCreated", "OrderCancelRequested:timeout", "PaymentCancelled", "InventoryCancelled", "ShipmentCancelled", "OrderCancelled:timeout"}, "timeout"},
		// The order's word wins over a step's: an older order service
		// announced payment_declined whatever payment said.
		{"AnnouncementWins", []string{"OrderCreated", "PaymentDeclined:insufficient_funds", "OrderCancelled:payment_declined"}, "payment_declined"},
		{"InferredEndKeepsItsEventsReason", []string{"OrderCreated", "PaymentDeclined:unknown_customer"}, "unknown_customer"},
		{"TurningBackSaysWhyBeforeTheEnd", []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentFailed:shipping_unavailable"}, "shipping_unavailable"},
		{"CancellingSaysWhy", []string{"OrderCreated", "OrderCancelRequested:timeout", "PaymentCancelled"}, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := timeline()
			for i, s := range tt.events {
				typ, reason, _ := strings.Cut(s, ":")
				evs = append(evs, domain.Event{Type: typ, Reason: reason, At: t0.Add(time.Duration(i) * time.Second)})
			}
			if got := domain.Derive(evs).Reason; got != tt.want {
				t.Fatalf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReasonOf: the reason is read from the field each type keeps it in,
// and only when it looks like a reason code.
func TestReasonOf(t *testing.T) {
	tests := []struct {
		name, typ, payload, want string
	}{
		{"DeclineDetail", "PaymentDeclined", `{"customer_id":"c","amount":1,"detail":"insufficient_funds"}`, "insufficient_funds"},
		{"DeclineWithoutDetail", "PaymentDeclined", `{"customer_id":"c","amount":1}`, ""},
		{"DeclineFreeText", "PaymentDeclined", `{"detail":"negative amount -1"}`, ""},
		{"Rejected", "InventoryRejected", `{"reason":"out_of_stock","shortages":[]}`, "out_of_stock"},
		{"Failed", "ShipmentFailed", `{"country":"BR","reason":"shipping_unavailable"}`, "shipping_unavailable"},
		{"Refunded", "PaymentRefunded", `{"amount":1,"reason":"shipping_unavailable"}`, "shipping_unavailable"},
		{"CancelRequested", "OrderCancelRequested", `{"reason":"customer_cancelled"}`, "customer_cancelled"},
		{"Cancelled", "OrderCancelled", `{"reason":"timeout"}`, "timeout"},
		{"UnknownTypeWithAReason", "OrderTeleported", `{"reason":"beamed_up"}`, "beamed_up"},
		{"ReasonNotAString", "OrderCancelled", `{"reason":{"code":"x"}}`, ""},
		{"MarkupIsNoReason", "OrderCancelled", `{"reason":"<b>x</b>"}`, ""},
		{"NotJSON", "OrderCancelled", `not json`, ""},
		{"Completed", "OrderCompleted", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.ReasonOf(tt.typ, []byte(tt.payload)); got != tt.want {
				t.Fatalf("ReasonOf(%s, %s) = %q, want %q", tt.typ, tt.payload, got, tt.want)
			}
		})
	}
}

// TestKindOf: every type of the saga is drawn as what it is, and one this
// build does not know as other.
func TestKindOf(t *testing.T) {
	want := map[domain.Kind][]string{
		domain.Forward:      {"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentScheduled"},
		domain.Failure:      {"PaymentDeclined", "InventoryRejected", "ShipmentFailed"},
		domain.Compensation: {"InventoryReleased", "PaymentRefunded", "OrderCancelRequested", "PaymentCancelled", "InventoryCancelled", "ShipmentCancelled"},
		domain.Outcome:      {"OrderCompleted", "OrderCancelled"},
		domain.Other:        {"OrderTeleported", ""},
	}
	for kind, types := range want {
		for _, typ := range types {
			if got := domain.KindOf(typ); got != kind {
				t.Errorf("KindOf(%q) = %q, want %q", typ, got, kind)
			}
		}
	}
}

// TestEventJSONCarriesItsKind: the API sends the kind with each event.
func TestEventJSONCarriesItsKind(t *testing.T) {
	b, err := json.Marshal(domain.Event{EventID: "e", Type: "ShipmentFailed", Service: "shipping", At: t0, Reason: "shipping_unavailable"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["kind"] != "failure" || got["reason"] != "shipping_unavailable" || got["type"] != "ShipmentFailed" || got["event_id"] != "e" {
		t.Fatalf("JSON = %s", b)
	}
}
