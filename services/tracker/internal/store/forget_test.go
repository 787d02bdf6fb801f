package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/tracker"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// window is what the tests forget beyond: an ended saga unseen for longer
// goes.
const window = time.Hour

// sagaOf returns the events of a saga of order: OrderCreated, then end
// (an event type that ends it, or "" for a saga still running).
func sagaOf(order, end string) []domain.Event {
	ev := func(typ, source string, offset int64) domain.Event {
		return domain.Event{EventID: uuid.NewString(), OrderID: order, Type: typ, Service: source,
			Topic: "order.events", Offset: offset, At: t0.Add(time.Duration(offset) * time.Second)}
	}
	evs := []domain.Event{ev("OrderCreated", "order", 0), ev("PaymentCompleted", "payment", 1)}
	switch end {
	case "OrderCompleted":
		evs = append(evs, ev(end, "order", 2))
	case "PaymentDeclined":
		evs = evs[:1:1]
		evs = append(evs, ev(end, "payment", 1))
	}
	return evs
}

// lastSeen sets when the tracker last saw an event of order's saga: ago,
// by the database's clock.
func lastSeen(t *testing.T, db *sqlx.DB, order string, ago time.Duration) {
	t.Helper()
	if _, err := db.Exec(`UPDATE sagas SET updated_at = now() - make_interval(secs => $2) WHERE order_id = $1`, order, ago.Seconds()); err != nil {
		t.Fatal(err)
	}
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
	tests := []struct {
		name     string
		end      string        // the event that ends the saga; "" runs it still
		unseen   time.Duration // since the tracker last saw an event of it
		seeAgain bool          // a duplicate of its first event is recorded last
		wantKept int           // events of the saga kept; 0: forgotten
	}{
		{name: "CompletedAndUnseenLongerIsForgotten", end: "OrderCompleted", unseen: window + time.Minute},
		{name: "CancelledAndUnseenLongerIsForgotten", end: "PaymentDeclined", unseen: 3 * window},
		{name: "RunningIsKeptHoweverLongUnseen", unseen: 100 * window, wantKept: 2},
		{name: "EndedButSeenWithinTheWindowIsKept", end: "OrderCompleted", unseen: window - time.Minute, wantKept: 3},
		{name: "ADuplicateSeenLateKeepsIt", end: "OrderCompleted", unseen: 3 * window, seeAgain: true, wantKept: 3},
	}
	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, newClock(t0).Now)
	orders := make([]string, len(tests))
	for i, tt := range tests {
		orders[i] = testenv.ID("forget")
		evs := sagaOf(orders[i], tt.end)
		for _, e := range evs {
			mustRecord(t, st, e)
		}
		lastSeen(t, db, orders[i], tt.unseen)
		if tt.seeAgain {
			if r := mustRecord(t, st, evs[0]); r.New {
				t.Fatalf("the copy of %s was recorded anew", evs[0].EventID)
			}
		}
	}
	ctx := context.Background()
	n, err := st.Forget(ctx, window, 100)
	if err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if n != 2 {
		t.Errorf("Forget forgot %d sagas, want 2", n)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sagas, evs := rows(t, db, orders[i])
			switch {
			case tt.wantKept > 0 && (sagas != 1 || evs != tt.wantKept):
				t.Errorf("%d saga rows and %d events, want it kept whole: 1 and %d", sagas, evs, tt.wantKept)
			case tt.wantKept == 0 && (sagas != 0 || evs != 0):
				t.Errorf("%d saga rows and %d events, want it forgotten: 0 and 0", sagas, evs)
			}
		})
	}
	t.Run("ASecondCallForgetsNothingMore", func(t *testing.T) {
		if n, err := st.Forget(ctx, window, 100); err != nil || n != 0 {
			t.Errorf("second Forget = %d, %v; want 0, nil", n, err)
		}
	})
}

func TestForgetRespectsLimit(t *testing.T) {
	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, newClock(t0).Now)
	const sagas = 5
	for range sagas {
		order := testenv.ID("limit")
		for _, e := range sagaOf(order, "OrderCompleted") {
			mustRecord(t, st, e)
		}
		lastSeen(t, db, order, 2*window)
	}
	ctx := context.Background()
	var got []int64
	for range 4 {
		n, err := st.Forget(ctx, window, 2)
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
	if want := []int64{2, 2, 1, 0}; !slices.Equal(got, want) || left != 0 || evs != 0 {
		t.Errorf("calls forgot %v sagas, leaving %d sagas and %d events; want %v, leaving none", got, left, evs, want)
	}
}

// TestForgetKeepsASagaBeingRecorded: an event of a saga due to be
// forgotten is being recorded, its transaction open, when Forget runs.
// Forget waits for it and keeps the saga, whole with the new event — it
// does not delete the saga under the event and leave the event to start a
// partial one.
func TestForgetKeepsASagaBeingRecorded(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, newClock(t0).Now)
	order := testenv.ID("race")
	evs := sagaOf(order, "OrderCompleted")
	for _, e := range evs {
		mustRecord(t, st, e)
	}
	lastSeen(t, db, order, 2*window)

	tx := db.MustBegin()
	defer tx.Rollback()
	late := domain.Event{EventID: uuid.NewString(), OrderID: order, Type: "ShipmentScheduled", Service: "shipping",
		Topic: "shipping.events", At: t0.Add(time.Minute)}
	if _, err := store.RecordIn(ctx, tx, late); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	forgot := make(chan result, 1)
	go func() {
		n, err := st.Forget(ctx, window, 100)
		forgot <- result{n, err}
	}()
	testenv.Eventually(t, 10*time.Second, "Forget waits for the saga's lock", func() bool {
		var waiting bool
		err := db.Get(&waiting, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM sagas%')`)
		return err == nil && waiting
	})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-forgot; r.err != nil || r.n != 0 {
		t.Errorf("Forget = %d, %v; want 0, nil: the saga was seen just now", r.n, r.err)
	}
	if sagas, n := rows(t, db, order); sagas != 1 || n != len(evs)+1 {
		t.Errorf("%d saga rows and %d events, want the saga whole with the late event: 1 and %d", sagas, n, len(evs)+1)
	}
}
