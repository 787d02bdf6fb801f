package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/tracker"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// at is where an event was read: a partition of a topic and an offset.
type at struct {
	topic     string
	partition int32
	offset    int64
}

// sagaAt returns the events of a saga of order that starts at start with
// OrderCreated read at created, then PaymentCompleted read at paid, and —
// if end is set — ends with OrderCompleted read at end an hour later.
func sagaAt(order string, start time.Time, created, paid at, end *at) []domain.Event {
	ev := func(typ, source string, when time.Time, a at) domain.Event {
		return domain.Event{EventID: uuid.NewString(), OrderID: order, Type: typ, Service: source,
			Topic: a.topic, Partition: a.partition, Offset: a.offset, At: when}
	}
	evs := []domain.Event{
		ev("OrderCreated", "order", start, created),
		ev("PaymentCompleted", "payment", start.Add(time.Second), paid),
	}
	if end != nil {
		evs = append(evs, ev("OrderCompleted", "order", start.Add(time.Hour), *end))
	}
	return evs
}

// rows returns how many rows of order the sagas and tracked_events tables
// hold.
func rows(t *testing.T, db *sqlx.DB, order string) (sagas, evs int) {
	t.Helper()
	if err := db.Get(&sagas, `SELECT count(*) FROM sagas WHERE order_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&evs, `SELECT count(*) FROM tracked_events WHERE order_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	return sagas, evs
}

func TestForget(t *testing.T) {
	ord := func(p int32, off int64) at { return at{events.TopicOrder, p, off} }
	pay := func(p int32, off int64) at { return at{events.TopicPayment, p, off} }
	// Kafka still holds order.events/0 from offset 100 and payment.events/0
	// from 50; of order.events/1 the earliest offset is unknown.
	earliest := map[store.TopicPartition]int64{{events.TopicOrder, 0}: 100, {events.TopicPayment, 0}: 50}
	now := t0.Add(48 * time.Hour)
	endedBefore := now.Add(-24 * time.Hour)
	longAgo, recently := t0, now.Add(-2*time.Hour) // sagas that started then end an hour later

	tests := []struct {
		name       string
		events     []domain.Event
		wantKept   bool
		wantEvents int // of a kept saga
	}{
		{name: "EndedLongAgoWithEveryEventBelowEarliestIsForgotten",
			events: sagaAt("forgotten", longAgo, ord(0, 10), pay(0, 20), &at{events.TopicOrder, 0, 99})},
		{name: "AnEventAtEarliestKeepsTheSaga", wantKept: true, wantEvents: 3,
			events: sagaAt("at-earliest", longAgo, ord(0, 11), pay(0, 21), &at{events.TopicOrder, 0, 100})},
		{name: "AnEventAboveEarliestKeepsTheSaga", wantKept: true, wantEvents: 3,
			events: sagaAt("above-earliest", longAgo, ord(0, 12), pay(0, 70), &at{events.TopicOrder, 0, 30})},
		{name: "RunningSagaIsKept", wantKept: true, wantEvents: 2,
			events: sagaAt("running", longAgo, ord(0, 13), pay(0, 22), nil)},
		{name: "EndedWithinTheWindowIsKept", wantKept: true, wantEvents: 3,
			events: sagaAt("recent", recently, ord(0, 14), pay(0, 23), &at{events.TopicOrder, 0, 40})},
		{name: "AnEventOfAPartitionWithoutEarliestKeepsTheSaga", wantKept: true, wantEvents: 3,
			events: sagaAt("unknown-partition", longAgo, ord(1, 0), pay(0, 24), &at{events.TopicOrder, 1, 1})},
		{name: "AnEventOfAnotherTopicKeepsTheSaga", wantKept: true, wantEvents: 3,
			events: sagaAt("other-topic", longAgo, ord(0, 15), at{"other.events", 0, 0}, &at{events.TopicOrder, 0, 41})},
	}

	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, newClock(now).Now)
	for _, tt := range tests {
		for _, e := range tt.events {
			mustRecord(t, st, e)
		}
	}
	ctx := context.Background()
	n, err := st.Forget(ctx, earliest, endedBefore, 100)
	if err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if n != 1 {
		t.Errorf("Forget forgot %d sagas, want 1", n)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			order := tt.events[0].OrderID
			sagas, evs := rows(t, db, order)
			switch {
			case tt.wantKept && (sagas != 1 || evs != tt.wantEvents):
				t.Errorf("saga %s: %d saga rows and %d events, want it kept whole: 1 and %d", order, sagas, evs, tt.wantEvents)
			case !tt.wantKept && (sagas != 0 || evs != 0):
				t.Errorf("saga %s: %d saga rows and %d events, want it forgotten: 0 and 0", order, sagas, evs)
			}
		})
	}

	t.Run("ASecondCallForgetsNothingMore", func(t *testing.T) {
		n, err := st.Forget(ctx, earliest, endedBefore, 100)
		if err != nil || n != 0 {
			t.Errorf("second Forget = %d, %v; want 0, nil", n, err)
		}
	})
	t.Run("NoKnownEarliestOffsetForgetsNothing", func(t *testing.T) {
		n, err := st.Forget(ctx, nil, now, 100)
		if err != nil || n != 0 {
			t.Errorf("Forget without earliest offsets = %d, %v; want 0, nil", n, err)
		}
	})
}

func TestForgetRespectsLimit(t *testing.T) {
	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, newClock(t0).Now)
	const sagas = 5
	for i := range int64(sagas) {
		// Each saga in partitions of its own: no saga is found twice.
		p := int32(i)
		for _, e := range sagaAt(testenv.ID("limit"), t0, at{events.TopicOrder, p, 0}, at{events.TopicPayment, p, 0}, &at{events.TopicOrder, p, 1}) {
			mustRecord(t, st, e)
		}
	}
	earliest := map[store.TopicPartition]int64{}
	for p := range int32(sagas) {
		earliest[store.TopicPartition{Topic: events.TopicOrder, Partition: p}] = 10
		earliest[store.TopicPartition{Topic: events.TopicPayment, Partition: p}] = 10
	}
	ctx := context.Background()
	var got []int64
	for range sagas {
		n, err := st.Forget(ctx, earliest, t0.Add(24*time.Hour), 2)
		if err != nil {
			t.Fatalf("Forget: %v", err)
		}
		got = append(got, n)
	}
	var left, evs int
	if err := db.Get(&left, `SELECT count(*) FROM sagas`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&evs, `SELECT count(*) FROM tracked_events`); err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 2, 1, 0, 0}; !slices.Equal(got, want) || left != 0 || evs != 0 {
		t.Errorf("calls forgot %v sagas, leaving %d sagas and %d events; want %v, leaving none", got, left, evs, want)
	}
}
