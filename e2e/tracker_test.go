package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
)

// trackerSLA is the tracker's TRACKER_SAGA_SLA in this suite.
const trackerSLA = 5 * time.Second

// trackedSaga is the tracker's GET /sagas/{order_id}.
type trackedSaga struct {
	OrderID    string     `json:"order_id"`
	State      string     `json:"state"`
	WaitingFor string     `json:"waiting_for"`
	Reason     string     `json:"reason"`
	EndedAt    *time.Time `json:"ended_at"`
	Events     []struct {
		Type    string `json:"type"`
		Service string `json:"service"`
		Topic   string `json:"topic"`
		EventID string `json:"event_id"`
		Reason  string `json:"reason"`
		Kind    string `json:"kind"`
	} `json:"events"`
}

// waitTracked polls the tracker until the saga of id satisfies cond.
func waitTracked(t *testing.T, id, what string, cond func(trackedSaga) bool) trackedSaga {
	t.Helper()
	var s trackedSaga
	eventually(t, 60*time.Second, func() error {
		s = trackedSaga{}
		if status := get(t, "tracker", "/sagas/"+id, &s); status != http.StatusOK {
			return fmt.Errorf("GET /sagas/%s = %d", id, status)
		}
		if !cond(s) {
			return fmt.Errorf("saga %s is %s waiting for %q with %d events; want %s", id, s.State, s.WaitingFor, len(s.Events), what)
		}
		return nil
	})
	return s
}

// publishedEvents returns the ids of the events the four services queued
// in their outboxes for order id, and so published: the saga as its
// participants hold it.
func publishedEvents(t *testing.T, id string) []string {
	t.Helper()
	var ids []string
	for _, svc := range []string{"order", "payment", "inventory", "shipping"} {
		db, err := sqlx.Open("postgres", dbURLs[svc])
		if err != nil {
			t.Fatal(err)
		}
		var values [][]byte
		err = db.SelectContext(context.Background(), &values,
			`SELECT value FROM outbox WHERE key = $1 AND topic = $2 ORDER BY id`, []byte(id), svc+".events")
		db.Close()
		if err != nil {
			t.Fatalf("%s outbox: %v", svc, err)
		}
		for _, v := range values {
			e, err := events.DecodeEnvelope(v)
			if err != nil {
				t.Fatalf("%s outbox row of %s: %v", svc, id, err)
			}
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestTrackerFollowsCompletedSaga runs an order to COMPLETED and checks
// the tracker: completed, and its timeline is exactly the events the four
// services published for the order — every one, each once — starting with
// OrderCreated and ending with OrderCompleted.
func TestTrackerFollowsCompletedSaga(t *testing.T) {
	f := newFixture(t, 10000, 10)
	o := createOrder(t, f.order(2, 1000, "JP"))
	wantOrder(t, o.ID, "COMPLETED", "")

	// The tracker reads the four topics apart, so OrderCompleted may be
	// recorded before ShipmentScheduled: wait for all five.
	s := waitTracked(t, o.ID, "completed, with its five events", func(s trackedSaga) bool {
		return s.State == "completed" && len(s.Events) >= 5
	})
	var tracked []string
	for _, e := range s.Events {
		tracked = append(tracked, e.EventID)
	}
	slices.Sort(tracked)
	if published := publishedEvents(t, o.ID); !slices.Equal(tracked, published) {
		t.Fatalf("tracker timeline %v, want the published events %v", tracked, published)
	}
	wantTypes := []string{events.TypeOrderCreated, events.TypePaymentCompleted, events.TypeInventoryReserved,
		events.TypeShipmentScheduled, events.TypeOrderCompleted}
	var types []string
	for _, e := range s.Events {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("timeline types %v, want %v", types, wantTypes)
	}
	if s.EndedAt == nil || s.WaitingFor != "" {
		t.Fatalf("completed saga ended_at %v, waiting_for %q; want an end and no step", s.EndedAt, s.WaitingFor)
	}

	// The page, in a real browser, draws that same saga: its state, a lane
	// per service, and every event with its id in its service's lane.
	dom := testenv.DumpDOM(t, services["tracker"].baseURL+"/?order="+o.ID+"#token="+operatorToken, `data-loaded="true"`)
	want := []string{`data-order-id="` + o.ID + `"`, `data-state="completed"`}
	for _, e := range s.Events {
		want = append(want, `data-event-id="`+e.EventID+`" data-type="`+e.Type+`" data-service="`+e.Service+`"`)
	}
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("the tracker page does not show %s", w)
		}
	}
}

// TestTrackerSaysWhy: for each way payment declines, the tracker shows the
// saga cancelled for the reason the order now answers, and the decline as a
// failed step carrying payment's word.
func TestTrackerSaysWhy(t *testing.T) {
	for _, tt := range []struct {
		name, reason string
		change       func(*orderRequest)
	}{
		{"InsufficientFunds", "insufficient_funds", func(r *orderRequest) { r.Items[0].UnitPrice = 100000 }},
		{"UnknownCustomer", "unknown_customer", func(r *orderRequest) { r.CustomerID = newID("nobody") }},
		{"CurrencyMismatch", "currency_mismatch", func(r *orderRequest) { r.Currency = "USD" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 10000, 10)
			req := f.order(1, 1000, "JP")
			tt.change(&req)
			o := createOrder(t, req)
			wantOrder(t, o.ID, "CANCELLED", tt.reason)
			// The tracker reads payment's and order's topics apart, so the
			// decline may be recorded after the cancel: wait for both.
			s := waitTracked(t, o.ID, "cancelled, with its PaymentDeclined and OrderCancelled", func(s trackedSaga) bool {
				var declined, cancelled bool
				for _, e := range s.Events {
					declined = declined || e.Type == events.TypePaymentDeclined
					cancelled = cancelled || e.Type == events.TypeOrderCancelled
				}
				return s.State == "cancelled" && declined && cancelled
			})
			if s.Reason != tt.reason {
				t.Fatalf("tracker reason = %q, want %q", s.Reason, tt.reason)
			}
			declined := false
			for _, e := range s.Events {
				if e.Type == events.TypePaymentDeclined {
					declined = e.Kind == "failure" && e.Reason == tt.reason
				}
			}
			if !declined {
				t.Fatalf("timeline %+v: want a PaymentDeclined of kind failure with reason %q", s.Events, tt.reason)
			}
		})
	}
}

// TestTrackerReportsStuckSaga publishes an OrderCreated that payment can
// never process (no items): payment dead-letters it and the saga goes no
// further. The tracker, which reads the envelope (no reason here), records it, and once
// the SLA has passed reports the saga stuck, waiting for payment — in the
// saga, in the stuck list and in the stuck-saga gauge.
func TestTrackerReportsStuckSaga(t *testing.T) {
	id := newID("stuck")
	value := fmt.Sprintf(`{"id":%q,"type":"OrderCreated","version":1,"order_id":%q,"source":"order","occurred_at":%q,"payload":{"customer_id":"c","items":[],"total_amount":1,"currency":"JPY","shipping_address":{"country":"JP"}}}`,
		uuid.NewString(), id, time.Now().UTC().Format(time.RFC3339Nano))
	produce(t, &sarama.ProducerMessage{Topic: events.TopicOrder, Key: sarama.StringEncoder(id), Value: sarama.StringEncoder(value)})

	eventuallyMessages(t, events.DeadLetterTopic("payment"), id, 1)
	atRest(t) // a second dead letter would be published by now
	if got := messagesFor(t, events.DeadLetterTopic("payment"), id); len(got) != 1 {
		t.Fatalf("payment.dlq holds %d messages keyed %s, want 1", len(got), id)
	}
	s := waitTracked(t, id, "stuck waiting for payment", func(s trackedSaga) bool { return s.State == "stuck" })
	if s.WaitingFor != "payment" || len(s.Events) != 1 || s.Events[0].Type != events.TypeOrderCreated {
		t.Fatalf("saga = %+v, want one OrderCreated, waiting for payment", s)
	}

	// The stuck list holds it, paged with the cursor it hands out.
	found := false
	path := "/sagas?state=stuck&limit=10"
	for page := 0; !found && path != ""; page++ {
		var p struct {
			Sagas []struct {
				OrderID string `json:"order_id"`
				State   string `json:"state"`
			} `json:"sagas"`
			NextCursor string `json:"next_cursor"`
		}
		if status := get(t, "tracker", path, &p); status != http.StatusOK || page > 100 {
			t.Fatalf("GET %s = %d (page %d)", path, status, page)
		}
		for _, s := range p.Sagas {
			if s.State != "stuck" {
				t.Fatalf("stuck list holds %s in state %s", s.OrderID, s.State)
			}
			found = found || s.OrderID == id
		}
		path = ""
		if p.NextCursor != "" {
			path = "/sagas?state=stuck&limit=10&cursor=" + url.QueryEscape(p.NextCursor)
		}
	}
	if !found {
		t.Fatalf("GET /sagas?state=stuck does not list %s", id)
	}
	eventually(t, 30*time.Second, func() error {
		if n := metric(t, "tracker", "choreo_sagas_stuck", map[string]string{"service": "tracker"}); n < 1 {
			return fmt.Errorf("choreo_sagas_stuck = %v, want at least 1", n)
		}
		return nil
	})
}
