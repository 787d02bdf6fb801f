package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/tracker"
)

// TestConfigValidate checks the runtime's settings, the SLA and the
// retention.
func TestConfigValidate(t *testing.T) {
	runtime := func(c *tracker.Config) *participant.Config { return &c.Config }
	testenv.CheckServiceConfig(t, tracker.DefaultConfig(), runtime, []testenv.ConfigCase[tracker.Config]{
		{Name: "ZeroSLAFails", Change: func(c *tracker.Config) { c.SagaSLA = 0 }, WantVar: "TRACKER_SAGA_SLA"},
		{Name: "NegativeSLAFails", Change: func(c *tracker.Config) { c.SagaSLA = -time.Second }, WantVar: "TRACKER_SAGA_SLA"},
		{Name: "ZeroRetentionFails", Change: func(c *tracker.Config) { c.Retention = 0 }, WantVar: "TRACKER_RETENTION"},
		{Name: "NegativeRetentionFails", Change: func(c *tracker.Config) { c.Retention = -time.Hour }, WantVar: "TRACKER_RETENTION"},
	})
}

// running is a tracker run in-process on real Kafka and PostgreSQL.
type running struct {
	base  string
	group string // the tracker's consumer group
}

// startTracker runs the tracker with a consumer group and a database of
// the test's own, changed by change if not nil, and waits until it is
// ready. It reads the saga's topics from their end.
func startTracker(t *testing.T, change func(*tracker.Config)) running {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := tracker.DefaultConfig()
	cfg.HTTPAddr = addr
	cfg.DatabaseURL = testenv.OwnDatabase(t)
	cfg.KafkaBrokers = testenv.Brokers(t)
	cfg.GroupID = "tracker-test-" + uuid.NewString()[:8]
	testenv.StartAtEnd(t, cfg.GroupID, events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping)
	cfg.StuckEvery = 100 * time.Millisecond
	cfg.Logger = testenv.Logger(t)
	if change != nil {
		change(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tracker.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tracker.Run: %v", err)
		}
	})
	r := running{base: "http://" + addr, group: cfg.GroupID}
	testenv.Eventually(t, 60*time.Second, "the tracker is ready", func() bool {
		res, err := http.Get(r.base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return r
}

// publish sends each envelope to its topic keyed by its order id, as the
// outbox relay does, and returns their event ids.
func publish(t *testing.T, envs ...events.Envelope) []string {
	t.Helper()
	p, err := broker.NewSyncProducer(testenv.Brokers(t), "tracker-test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ids []string
	for _, e := range envs {
		value, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		topic, ok := events.TopicOf(e.Type)
		if !ok {
			topic = events.TopicOrder // a type this build does not know, e.g. a newer order service's
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(e.OrderID), Value: sarama.ByteEncoder(value)}); err != nil {
			t.Fatalf("publish %s: %v", e.Type, err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// envelope is an event of order of type typ from source that occurred at
// at, with an empty payload: the tracker reads envelopes only.
func envelope(order, typ, source string, at time.Time) events.Envelope {
	return events.Envelope{ID: uuid.NewString(), Type: typ, Version: 1, OrderID: order, Source: source,
		OccurredAt: at.UTC(), Payload: json.RawMessage(`{}`)}
}

type saga struct {
	OrderID    string `json:"order_id"`
	State      string `json:"state"`
	WaitingFor string `json:"waiting_for"`
	Events     []struct {
		Type    string `json:"type"`
		Service string `json:"service"`
		EventID string `json:"event_id"`
	} `json:"events"`
}

// waitSaga polls GET /sagas/{order} until cond holds for it.
func (r running) waitSaga(t *testing.T, order, what string, cond func(saga) bool) saga {
	t.Helper()
	var s saga
	testenv.Eventually(t, 60*time.Second, what, func() bool {
		res, err := http.Get(r.base + "/sagas/" + order)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return false
		}
		s = saga{}
		return json.NewDecoder(res.Body).Decode(&s) == nil && cond(s)
	})
	return s
}

// TestTrackerFollowsPublishedSagas publishes two sagas' events to the real
// topics — one that completes, with a duplicate, a poison message and an
// event type this build does not know in between, and one that never gets
// past payment — and checks what the running tracker shows: over its API,
// in its metrics, and on its page in headless Chromium.
func TestTrackerFollowsPublishedSagas(t *testing.T) {
	r := startTracker(t, nil)
	now := time.Now()
	done, stuck := uuid.NewString(), uuid.NewString()
	at := func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
	saga1 := []events.Envelope{
		envelope(done, "OrderCreated", "order", at(0)),
		envelope(done, "PaymentCompleted", "payment", at(10)),
		envelope(done, "OrderNoteAdded", "order", at(15)), // unknown to this build
		envelope(done, "InventoryReserved", "inventory", at(20)),
		envelope(done, "ShipmentScheduled", "shipping", at(30)),
		envelope(done, "OrderCompleted", "order", at(40)),
	}
	// Published out of order and with a duplicate; a poison message first.
	poison := &sarama.ProducerMessage{Topic: events.TopicOrder, Key: sarama.StringEncoder(done), Value: sarama.StringEncoder("not json")}
	p, err := broker.NewSyncProducer(testenv.Brokers(t), "tracker-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.SendMessage(poison); err != nil {
		t.Fatal(err)
	}
	p.Close()
	publish(t, saga1[5], saga1[0], saga1[1], saga1[1], saga1[2], saga1[3], saga1[4])
	stuckID := publish(t, envelope(stuck, "OrderCreated", "order", now.Add(-time.Minute)))

	r.waitSaga(t, done, "the saga completes with its six events", func(s saga) bool {
		return s.State == "completed" && len(s.Events) >= 6
	})
	// Exactly six only once the tracker has read everything published:
	// the duplicate may come after the other five.
	testenv.Consumed(t, time.Minute, r.group, events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping)
	s := r.waitSaga(t, done, "the saga is still complete", func(s saga) bool { return s.State == "completed" })
	if len(s.Events) != 6 {
		t.Fatalf("the saga has %d events, want 6 (the duplicate recorded once)", len(s.Events))
	}
	for i, e := range s.Events {
		if e.EventID != saga1[i].ID || e.Type != saga1[i].Type || e.Service != saga1[i].Source {
			t.Fatalf("event %d = %+v, want %s %s from %s", i, e, saga1[i].Type, saga1[i].ID, saga1[i].Source)
		}
	}
	st := r.waitSaga(t, stuck, "the other saga is stuck", func(s saga) bool { return s.State == "stuck" })
	if st.WaitingFor != "payment" || len(st.Events) != 1 || st.Events[0].EventID != stuckID[0] {
		t.Fatalf("stuck saga = %+v, want one OrderCreated, waiting for payment", st)
	}

	t.Run("Metrics", func(t *testing.T) {
		testenv.Eventually(t, 10*time.Second, "the metrics show the stuck saga and the completed one's duration", func() bool {
			m := get(t, r.base+"/metrics")
			return metricAtLeast(m, `choreo_sagas_stuck{service="tracker"}`, 1) &&
				metricAtLeast(m, `choreo_saga_duration_seconds_count{outcome="completed",service="tracker"}`, 1) &&
				metricAtLeast(m, `choreo_tracker_unreadable_total{service="tracker",topic="order.events"}`, 1)
		})
	})
	t.Run("PageDrawsTheTimeline", func(t *testing.T) {
		dom := testenv.DumpDOM(t, r.base+"/?order="+done, `data-loaded="true"`)
		want := []string{`id="timeline" data-order-id="` + done + `"`, `data-state="completed"`}
		for _, lane := range []string{"order", "payment", "inventory", "shipping"} {
			want = append(want, `data-lane="`+lane+`"`)
		}
		for _, e := range saga1 {
			want = append(want, `data-event-id="`+e.ID+`" data-type="`+e.Type+`" data-service="`+e.Source+`"`)
		}
		want = append(want, `data-order-id="`+stuck+`"`) // in the lists
		for _, w := range want {
			if !strings.Contains(dom, w) {
				t.Errorf("the page does not show %s", w)
			}
		}
		// The boxes are in time order, left to right.
		last := -1
		for _, e := range saga1 {
			i := strings.Index(dom, `data-event-id="`+e.ID+`"`)
			if i < last {
				t.Errorf("%s is drawn before the event that precedes it", e.Type)
			}
			last = i
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})
	t.Run("PageShowsWhatAStuckSagaWaitsFor", func(t *testing.T) {
		dom := testenv.DumpDOM(t, r.base+"/?order="+stuck, `data-loaded="true"`)
		for _, w := range []string{`data-order-id="` + stuck + `"`, `data-state="stuck"`, `<span id="waiting-for">payment</span>`} {
			if !strings.Contains(dom, w) {
				t.Errorf("the page does not show %s\nDOM:\n%s", w, dom)
			}
		}
	})
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// metricAtLeast reports whether the exposition text has sample with a
// value of at least min.
func metricAtLeast(text, sample string, min float64) bool {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil && f >= min {
				return true
			}
		}
	}
	return false
}
