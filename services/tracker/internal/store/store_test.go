package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/services/tracker"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

const sla = 30 * time.Second

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// clock is a settable clock for the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)  { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func newClock(t time.Time) *clock { return &clock{now: t} }
func newStore(t *testing.T, c *clock) *store.Store {
	t.Helper()
	return store.New(testenv.DB(t, tracker.Schema), sla, c.Now)
}

// event returns an event of order of type typ that occurred at at, at
// offset off of its service's topic.
func event(order, typ string, at time.Time, off int64) domain.Event {
	topic := map[string]string{
		"OrderCreated": events.TopicOrder, "OrderCompleted": events.TopicOrder, "OrderCancelled": events.TopicOrder,
		"PaymentCompleted": events.TopicPayment, "InventoryReserved": events.TopicInventory, "ShipmentScheduled": events.TopicShipping,
	}[typ]
	if topic == "" {
		topic = events.TopicOrder
	}
	return domain.Event{EventID: uuid.NewString(), OrderID: order, Type: typ, Service: topic[:len(topic)-len(".events")],
		Topic: topic, Partition: 1, Offset: off, At: at}
}

func mustRecord(t *testing.T, st *store.Store, e domain.Event) store.Recorded {
	t.Helper()
	r, err := st.Record(context.Background(), e)
	if err != nil {
		t.Fatalf("Record(%s %s): %v", e.Type, e.EventID, err)
	}
	return r
}

func mustSaga(t *testing.T, st *store.Store, order string) domain.Saga {
	t.Helper()
	s, err := st.Saga(context.Background(), order)
	if err != nil {
		t.Fatalf("Saga(%s): %v", order, err)
	}
	return s
}

func types(s domain.Saga) []string {
	var ts []string
	for _, e := range s.Events {
		ts = append(ts, e.Type)
	}
	return ts
}

func TestRecordIgnoresDuplicateEventID(t *testing.T) {
	st := newStore(t, newClock(t0))
	order := uuid.NewString()
	created := event(order, "OrderCreated", t0, 1)
	if r := mustRecord(t, st, created); !r.New {
		t.Fatal("first Record reported a duplicate")
	}
	again := created
	again.Offset, again.Partition = 99, 2 // re-published: same id, elsewhere in Kafka
	if r := mustRecord(t, st, again); r.New {
		t.Fatal("Record of the same event id reported it new")
	}
	s := mustSaga(t, st, order)
	if len(s.Events) != 1 || s.EventCount != 1 || s.Events[0].Offset != 1 {
		t.Fatalf("timeline = %+v (count %d), want the first copy only", s.Events, s.EventCount)
	}
}

// TestRecordOfAnIDStoredUnderAnotherOrderStartsNoSaga: an event id the
// tracker stored for one order, read again under another (a producer's
// bug), is a duplicate, and leaves no empty saga of the other order —
// running for ever, and never forgotten.
func TestRecordOfAnIDStoredUnderAnotherOrderStartsNoSaga(t *testing.T) {
	st := newStore(t, newClock(t0))
	order, other := uuid.NewString(), uuid.NewString()
	created := event(order, "OrderCreated", t0, 1)
	mustRecord(t, st, created)
	stray := created
	stray.OrderID = other
	if r := mustRecord(t, st, stray); r.New {
		t.Fatal("Record of the same event id under another order reported it new")
	}
	if _, err := st.Saga(context.Background(), other); !errors.Is(err, fault.NotFound) {
		t.Errorf("Saga(%s) = %v; want NotFound: no saga of an event stored under another order", other, err)
	}
	if s := mustSaga(t, st, order); len(s.Events) != 1 {
		t.Errorf("the first order's timeline = %+v, want its one event", s.Events)
	}
}

func TestRecordConcurrentDuplicatesStoreOnce(t *testing.T) {
	st := newStore(t, newClock(t0))
	order := uuid.NewString()
	e := event(order, "OrderCreated", t0, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	news := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mustRecord(t, st, e)
			mu.Lock()
			defer mu.Unlock()
			if r.New {
				news++
			}
		}()
	}
	wg.Wait()
	if news != 1 {
		t.Fatalf("%d of 8 concurrent Records reported the event new, want 1", news)
	}
	if s := mustSaga(t, st, order); len(s.Events) != 1 {
		t.Fatalf("timeline has %d events, want 1", len(s.Events))
	}
}

func TestOutOfOrderArrivalsAreOrderedByOccurredAt(t *testing.T) {
	st := newStore(t, newClock(t0.Add(time.Second)))
	order := uuid.NewString()
	created := event(order, "OrderCreated", t0, 1)
	paid := event(order, "PaymentCompleted", t0.Add(10*time.Millisecond), 5)
	reserved := event(order, "InventoryReserved", t0.Add(20*time.Millisecond), 7)
	scheduled := event(order, "ShipmentScheduled", t0.Add(30*time.Millisecond), 3)
	completed := event(order, "OrderCompleted", t0.Add(40*time.Millisecond), 2)
	// Arrival order: the end first, the start last.
	for _, e := range []domain.Event{completed, reserved, scheduled, paid} {
		mustRecord(t, st, e)
	}
	if s := mustSaga(t, st, order); !s.StartedAt.Equal(paid.At) {
		t.Fatalf("started_at before OrderCreated arrived = %s, want the earliest seen, %s", s.StartedAt, paid.At)
	}
	mustRecord(t, st, created)

	s := mustSaga(t, st, order)
	want := []string{"OrderCreated", "PaymentCompleted", "InventoryReserved", "ShipmentScheduled", "OrderCompleted"}
	if got := types(s); !slices.Equal(got, want) {
		t.Fatalf("timeline = %v, want %v", got, want)
	}
	if s.State != domain.Completed || !s.StartedAt.Equal(t0) || s.EndedAt == nil || !s.EndedAt.Equal(completed.At) || s.WaitingFor != "" {
		t.Fatalf("saga = %s started %s ended %v waiting %q, want completed from %s to %s", s.State, s.StartedAt, s.EndedAt, s.WaitingFor, t0, completed.At)
	}
}

func TestRecordReportsTheEventThatEndsTheSaga(t *testing.T) {
	st := newStore(t, newClock(t0))
	order := uuid.NewString()
	steps := []struct {
		typ       string
		wantEnded bool
	}{
		{"OrderCreated", false},
		{"PaymentCompleted", false},
		{"InventoryReserved", false},
		{"ShipmentScheduled", true}, // inferred end
		{"OrderCompleted", false},   // already ended: not a second end
	}
	for i, step := range steps {
		r := mustRecord(t, st, event(order, step.typ, t0.Add(time.Duration(i)*time.Millisecond), int64(i)))
		if r.Ended() != step.wantEnded {
			t.Fatalf("%s: Ended() = %v, want %v", step.typ, r.Ended(), step.wantEnded)
		}
	}
}

func TestStuckAfterSLA(t *testing.T) {
	c := newClock(t0)
	st := newStore(t, c)
	order := uuid.NewString()
	mustRecord(t, st, event(order, "OrderCreated", t0, 1))
	mustRecord(t, st, event(order, "PaymentCompleted", t0.Add(time.Second), 2))

	tests := []struct {
		name      string
		now       time.Time
		wantState domain.State
		wantStuck int
	}{
		{"WithinSLAIsRunning", t0.Add(sla - time.Second), domain.Running, 0},
		{"AtSLAIsRunning", t0.Add(sla), domain.Running, 0},
		{"PastSLAFromTheFirstEventIsStuck", t0.Add(sla + time.Millisecond), domain.Stuck, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Set(tt.now)
			s := mustSaga(t, st, order)
			if s.State != tt.wantState || s.WaitingFor != "inventory" {
				t.Fatalf("saga = %s waiting for %q, want %s waiting for inventory", s.State, s.WaitingFor, tt.wantState)
			}
			n, err := st.CountStuck(context.Background())
			if err != nil || n != tt.wantStuck {
				t.Fatalf("CountStuck = %d, %v; want %d", n, err, tt.wantStuck)
			}
		})
	}
	t.Run("EndedIsNeverStuck", func(t *testing.T) {
		mustRecord(t, st, event(order, "OrderCancelled", t0.Add(time.Hour), 3))
		c.Set(t0.Add(2 * time.Hour))
		if s := mustSaga(t, st, order); s.State != domain.Cancelled {
			t.Fatalf("state = %s, want cancelled", s.State)
		}
	})
}

func TestSagaOfUnknownOrderIsNotFound(t *testing.T) {
	st := newStore(t, newClock(t0))
	if _, err := st.Saga(context.Background(), uuid.NewString()); !errors.Is(err, fault.NotFound) {
		t.Fatalf("Saga(unknown) error = %v, want fault.NotFound", err)
	}
}

func TestSagasPagesNewestFirstByCursor(t *testing.T) {
	c := newClock(t0.Add(time.Hour))
	st := newStore(t, c)
	// Seven sagas: four started long ago (past the SLA; the oldest then
	// completes), three within the SLA, two of which share a start, to
	// page through a tie.
	now := c.Now()
	starts := []time.Time{
		t0, t0.Add(time.Minute), t0.Add(2 * time.Minute), t0.Add(3 * time.Minute),
		now.Add(-20 * time.Second), now.Add(-10 * time.Second), now.Add(-10 * time.Second),
	}
	var orders []string
	for i, at := range starts {
		order := uuid.NewString()
		orders = append(orders, order)
		mustRecord(t, st, event(order, "OrderCreated", at, int64(i)))
	}
	mustRecord(t, st, event(orders[0], "OrderCompleted", t0.Add(time.Second), 99))

	list := func(f store.Filter) (ids []string, states []domain.State) {
		t.Helper()
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("more than 10 pages")
			}
			p, err := st.Sagas(context.Background(), f)
			if err != nil {
				t.Fatalf("Sagas(%+v): %v", f, err)
			}
			if len(p.Sagas) > f.Limit {
				t.Fatalf("page of %d, limit %d", len(p.Sagas), f.Limit)
			}
			for _, s := range p.Sagas {
				ids = append(ids, s.OrderID)
				states = append(states, s.State)
			}
			if p.Next.IsZero() {
				return ids, states
			}
			next, err := store.ParseCursor(p.Next.String())
			if err != nil {
				t.Fatalf("ParseCursor(%q): %v", p.Next.String(), err)
			}
			f.After = next
		}
	}
	t.Run("AllNewestFirstAcrossPages", func(t *testing.T) {
		ids, _ := list(store.Filter{Limit: 2})
		if len(ids) != 7 {
			t.Fatalf("listed %d sagas, want 7: %v", len(ids), ids)
		}
		one, _ := list(store.Filter{Limit: 100})
		if !slices.Equal(ids, one) {
			t.Fatalf("paged list %v differs from one page %v", ids, one)
		}
		if ids[6] != orders[0] {
			t.Fatalf("oldest last: got %s, want %s", ids[6], orders[0])
		}
	})
	for _, tt := range []struct {
		state domain.State
		want  []string
	}{
		{domain.Stuck, []string{orders[3], orders[2], orders[1]}},
		{domain.Completed, []string{orders[0]}},
		{domain.Cancelled, nil},
	} {
		t.Run("Only"+string(tt.state), func(t *testing.T) {
			ids, states := list(store.Filter{State: tt.state, Limit: 1})
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ids = %v, want %v", ids, tt.want)
			}
			for _, s := range states {
				if s != tt.state {
					t.Fatalf("listed a %s saga under %s", s, tt.state)
				}
			}
		})
	}
	t.Run("OnlyRunning", func(t *testing.T) {
		ids, _ := list(store.Filter{State: domain.Running, Limit: 2})
		if len(ids) != 3 {
			t.Fatalf("running = %v, want the 3 within the SLA", ids)
		}
	})
}

func TestParseCursorRefusesWhatItDidNotIssue(t *testing.T) {
	for _, s := range []string{"x", "!!!", "djI6MTox", "djE6YWJjOmlk", "djE6MTIz"} { // v2:1:1, v1:abc:id, v1:123
		if _, err := store.ParseCursor(s); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) error = %v, want ErrBadCursor", s, err)
		}
	}
}

// TestRecordKeepsWhySagasEnd: each event's reason is stored with it, and
// the saga's reason — the order's announced one, else the latest any event
// gave — is kept on the saga row the lists read.
func TestRecordKeepsWhySagasEnd(t *testing.T) {
	st := newStore(t, newClock(t0.Add(time.Second)))
	declined, turning, done := uuid.NewString(), uuid.NewString(), uuid.NewString()
	with := func(e domain.Event, reason string) domain.Event { e.Reason = reason; return e }
	mustRecord(t, st, event(declined, "OrderCreated", t0, 0))
	mustRecord(t, st, with(event(declined, "PaymentDeclined", t0.Add(time.Millisecond), 1), "insufficient_funds"))
	mustRecord(t, st, with(event(declined, "OrderCancelled", t0.Add(2*time.Millisecond), 2), "insufficient_funds"))
	mustRecord(t, st, event(turning, "OrderCreated", t0, 3))
	mustRecord(t, st, with(event(turning, "InventoryRejected", t0.Add(time.Millisecond), 4), "out_of_stock"))
	mustRecord(t, st, event(done, "OrderCreated", t0, 5))
	mustRecord(t, st, event(done, "OrderCompleted", t0.Add(time.Millisecond), 6))

	s := mustSaga(t, st, declined)
	if s.State != domain.Cancelled || s.Reason != "insufficient_funds" || len(s.Events) != 3 ||
		s.Events[0].Reason != "" || s.Events[1].Reason != "insufficient_funds" || s.Events[2].Reason != "insufficient_funds" {
		t.Fatalf("declined saga = %+v", s)
	}
	page, err := st.Sagas(context.Background(), store.Filter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]domain.Summary{}
	for _, s := range page.Sagas {
		got[s.OrderID] = s
	}
	want := map[string]struct {
		state  domain.State
		reason string
	}{
		declined: {domain.Cancelled, "insufficient_funds"},
		turning:  {domain.Running, "out_of_stock"}, // the refund is still to come
		done:     {domain.Completed, ""},
	}
	for id, w := range want {
		if got[id].State != w.state || got[id].Reason != w.reason {
			t.Errorf("listed %s = %s %q, want %s %q", id, got[id].State, got[id].Reason, w.state, w.reason)
		}
	}
}
