package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
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
	keys  testenv.Tokens
	token string // an operator's, which the tracker's API needs
}

// getSaga is GET /sagas/{order} with the operator's token.
func (r running) getSaga(order string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, r.base+"/sagas/"+order, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	return http.DefaultClient.Do(req)
}

// page is the address of the tracker's page showing order, carrying the
// operator's token in the fragment, as an operator's link would.
func (r running) page(order string) string { return r.base + "/?order=" + order + "#token=" + r.token }

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
	cfg.Kafka = testenv.Kafka(t)
	cfg.GroupID = "tracker-test-" + uuid.NewString()[:8]
	testenv.StartAtEnd(t, cfg.GroupID, events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping)
	cfg.StuckEvery = 100 * time.Millisecond
	cfg.Logger = testenv.Logger(t)
	keys := testenv.Keys(t)
	cfg.Auth = keys.Auth()
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
	r := running{base: "http://" + addr, group: cfg.GroupID, keys: keys, token: keys.Operator(t)}
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
	p, err := testenv.Kafka(t).NewSyncProducer("tracker-test")
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
// at, with an empty payload: the tracker reads the envelope, and of a payload
// only its reason (withPayload gives one).
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
		res, err := r.getSaga(order)
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
	p, err := testenv.Kafka(t).NewSyncProducer("tracker-test")
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
		dom := testenv.DumpDOM(t, r.page(done), `data-loaded="true"`)
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
		dom := testenv.DumpDOM(t, r.page(stuck), `data-loaded="true"`)
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

// withPayload is e with payload as its body.
func withPayload(e events.Envelope, payload string) events.Envelope {
	e.Payload = json.RawMessage(payload)
	return e
}

// TestPageSaysWhy publishes three sagas as the services would — declined
// for too little money, compensated because shipping does not serve the
// country, cancelled by the customer — and one that completes, then acts
// on the tracker's page in headless Chromium as a person would: it reads
// why each saga ended, sees failed steps and compensations drawn unlike
// forward steps, reads how long the saga took, finds no label cut off,
// and types into the list's filter.
func TestPageSaysWhy(t *testing.T) {
	// A topic of its own, so that sagas other tests publish meanwhile on a
	// shared broker cannot push these off the page's lists.
	topic := topicKeeping(t, "86400000", "86400000")
	r := startTracker(t, func(c *tracker.Config) { tracker.ReadTopics(c, topic) })
	now := time.Now()
	at := func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
	declined, unserved, cancelled, done := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	created := `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":1,"unit_price":2500}],"total_amount":2500,"currency":"JPY","shipping_address":{"country":"BR"}}`
	publishTo(t, topic,
		withPayload(envelope(declined, "OrderCreated", "order", at(0)), created),
		withPayload(envelope(declined, "PaymentDeclined", "payment", at(10)), `{"customer_id":"c-1","amount":2500,"detail":"insufficient_funds"}`),
		withPayload(envelope(declined, "OrderCancelled", "order", at(20)), `{"reason":"insufficient_funds"}`),

		withPayload(envelope(unserved, "OrderCreated", "order", at(0)), created),
		envelope(unserved, "PaymentCompleted", "payment", at(10)),
		envelope(unserved, "InventoryReserved", "inventory", at(20)),
		withPayload(envelope(unserved, "ShipmentFailed", "shipping", at(30)), `{"country":"BR","reason":"shipping_unavailable"}`),
		withPayload(envelope(unserved, "InventoryReleased", "inventory", at(40)), `{"reason":"shipping_unavailable"}`),
		withPayload(envelope(unserved, "PaymentRefunded", "payment", at(50)), `{"amount":2500,"reason":"shipping_unavailable"}`),
		withPayload(envelope(unserved, "OrderCancelled", "order", at(60)), `{"reason":"shipping_unavailable"}`),

		withPayload(envelope(cancelled, "OrderCreated", "order", at(0)), created),
		envelope(cancelled, "PaymentCompleted", "payment", at(10)),
		envelope(cancelled, "InventoryReserved", "inventory", at(20)),
		withPayload(envelope(cancelled, "OrderCancelRequested", "order", at(30)), `{"reason":"customer_cancelled"}`),
		withPayload(envelope(cancelled, "PaymentCancelled", "payment", at(40)), `{"amount":2500}`),
		envelope(cancelled, "InventoryCancelled", "inventory", at(50)),
		envelope(cancelled, "ShipmentCancelled", "shipping", at(60)),
		withPayload(envelope(cancelled, "OrderCancelled", "order", at(1250)), `{"reason":"customer_cancelled"}`),

		envelope(done, "OrderCreated", "order", at(0)),
		envelope(done, "OrderCompleted", "order", at(30)),
	)
	for id, n := range map[string]int{declined: 3, unserved: 7, cancelled: 8, done: 2} {
		r.waitSaga(t, id, "the saga ends with its events", func(s saga) bool { return s.State != "running" && len(s.Events) == n })
	}

	// ready opens the page of order and waits until its scripts are done.
	ready := func(t *testing.T, order string) *testenv.Page {
		p := testenv.OpenPage(t, r.page(order))
		p.WaitFor("the page has drawn the saga", `document.body.dataset.loaded === "true" && document.getElementById("timeline").dataset.orderId === `+fmt.Sprintf("%q", order))
		// The token went from the address into this tab's storage.
		var hash string
		p.Eval(`location.hash`, &hash)
		if hash != "" {
			t.Errorf("the address still holds the token: %q", hash)
		}
		return p
	}
	// unclipped reports the labels whose text is wider than their box.
	unclipped := func(t *testing.T, p *testenv.Page) {
		t.Helper()
		var clipped []string
		p.Eval(`[...document.querySelectorAll("#timeline .event, #timeline .event .type, #timeline .event .reason, #timeline .lane-name, table.sagas td")]
			.filter(e => e.scrollWidth > e.clientWidth).map(e => e.className + ": " + e.textContent)`, &clipped)
		var n int
		p.Eval(`document.querySelectorAll("#timeline .event .type").length`, &n)
		if n == 0 || len(clipped) > 0 {
			t.Errorf("%d event labels drawn; cut off: %q", n, clipped)
		}
	}

	t.Run("TimelineSaysWhyAndHowLong", func(t *testing.T) {
		for _, tt := range []struct {
			order, reason string
			ms            int
			text          string
		}{
			{declined, "insufficient_funds", 20, "20 ms"},
			{unserved, "shipping_unavailable", 60, "60 ms"},
			{cancelled, "customer_cancelled", 1250, "1.25 s"},
		} {
			p := ready(t, tt.order)
			var got struct {
				Reason, Duration string
				MS               int
			}
			p.Eval(`({reason: document.getElementById("reason").textContent,
				duration: document.getElementById("duration").textContent,
				ms: Number(document.getElementById("duration").dataset.ms)})`, &got)
			if got.Reason != tt.reason || got.MS != tt.ms || got.Duration != tt.text {
				t.Errorf("saga %s shows reason %q, duration %q (%d ms); want %q, %q (%d ms)", tt.order, got.Reason, got.Duration, got.MS, tt.reason, tt.text, tt.ms)
			}
			unclipped(t, p)
		}
		p := ready(t, done)
		var hasReason bool
		p.Eval(`document.getElementById("reason") !== null`, &hasReason)
		if hasReason {
			t.Errorf("a completed saga shows a reason")
		}
	})

	t.Run("FailuresAndCompensationsAreDrawnApart", func(t *testing.T) {
		for _, order := range []string{unserved, cancelled} {
			p := ready(t, order)
			var boxes []struct{ Type, Kind, Class, Background, BorderStyle, BorderColor string }
			p.Eval(`[...document.querySelectorAll("#timeline .event")].map(e => { const s = getComputedStyle(e);
				return {type: e.dataset.type, kind: e.dataset.kind, class: e.className, background: s.backgroundColor,
					borderStyle: s.borderTopStyle, borderColor: s.borderTopColor}; })`, &boxes)
			want := map[string]string{
				"OrderCreated": "forward", "PaymentCompleted": "forward", "InventoryReserved": "forward",
				"ShipmentFailed": "failure", "InventoryReleased": "compensation", "PaymentRefunded": "compensation",
				"OrderCancelRequested": "compensation", "PaymentCancelled": "compensation", "InventoryCancelled": "compensation",
				"ShipmentCancelled": "compensation", "OrderCancelled": "outcome",
			}
			const white = "rgb(255, 255, 255)"
			for _, b := range boxes {
				if b.Kind != want[b.Type] || !strings.Contains(" "+b.Class+" ", " kind-"+b.Kind+" ") {
					t.Errorf("%s is drawn as %q (class %q), want %q", b.Type, b.Kind, b.Class, want[b.Type])
				}
				// What the eye sees: a forward step is a solid box in its
				// service's colour; a failure is white, edged in red; a
				// compensation is white with a dashed edge.
				var ok bool
				switch b.Kind {
				case "forward":
					ok = b.Background != white && b.BorderStyle == "solid"
				case "failure":
					ok = b.Background == white && b.BorderStyle == "solid" && b.BorderColor == "rgb(164, 0, 0)"
				case "compensation":
					ok = b.Background == white && b.BorderStyle == "dashed"
				default:
					ok = b.Background != white
				}
				if !ok {
					t.Errorf("%s (%s) looks like background %s, border %s %s", b.Type, b.Kind, b.Background, b.BorderStyle, b.BorderColor)
				}
			}
			if len(boxes) == 0 {
				t.Errorf("no events drawn for %s", order)
			}
		}
	})

	t.Run("ListShowsAgeOutcomeReasonAndFilters", func(t *testing.T) {
		p := ready(t, done)
		type row struct {
			ID, Age, Outcome, Reason string
			Hidden                   bool
		}
		rows := func() map[string]row {
			var rs []row
			p.Eval(`[...document.querySelectorAll("#recent-list tbody tr[data-order-id]")].map(tr => ({
				id: tr.dataset.orderId, age: tr.querySelector("td.age").textContent,
				outcome: tr.querySelector("td.outcome").textContent, reason: tr.querySelector("td.reason").textContent,
				hidden: tr.hidden || tr.offsetParent === null}))`, &rs)
			m := map[string]row{}
			for _, r := range rs {
				m[r.ID] = r
			}
			return m
		}
		want := map[string]struct{ outcome, reason string }{
			declined:  {"cancelled", "insufficient_funds"},
			unserved:  {"cancelled", "shipping_unavailable"},
			cancelled: {"cancelled", "customer_cancelled"},
			done:      {"completed", ""},
		}
		got := rows()
		for id, w := range want {
			g, ok := got[id]
			if !ok || g.Outcome != w.outcome || g.Reason != w.reason || g.Hidden || !ageRE.MatchString(g.Age) {
				t.Errorf("row of %s = %+v (listed %v), want outcome %q, reason %q, an age, shown", id, g, ok, w.outcome, w.reason)
			}
		}
		unclipped(t, p)

		p.Type("#filter", "insuff")
		p.WaitFor("the filter hides the rows it does not match", fmt.Sprintf(
			`document.querySelector('#recent-list tr[data-order-id=%q]').hidden`, done))
		got = rows()
		for id := range want {
			if wantShown := id == declined; got[id].Hidden == wantShown {
				t.Errorf("filter %q: row of %s (reason %q) hidden = %v", "insuff", id, got[id].Reason, got[id].Hidden)
			}
		}
		p.Type("#filter", "zzz") // "insuffzzz" matches nothing
		p.WaitFor("no row matches", `!document.querySelector("#recent-list tr.no-match").hidden`)
		for id, r := range rows() {
			if !r.Hidden {
				t.Errorf("filter %q: row of %s is shown", "insuffzzz", id)
			}
		}
	})
}

// ageRE is how the list writes a saga's age.
var ageRE = regexp.MustCompile(`^\d+(\.\d+)? (ms|s|min|h|d)$`)

// TestTrackerNeedsAnOperator: every order's saga is the operator's to
// read: without a token the API answers 401, with a customer's 403, and
// the page, which holds no data, loads and asks for a token.
func TestTrackerNeedsAnOperator(t *testing.T) {
	r := startTracker(t, nil)
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"ListWithoutToken", "/sagas", "", http.StatusUnauthorized},
		{"SagaWithoutToken", "/sagas/" + uuid.NewString(), "", http.StatusUnauthorized},
		{"ListWithACustomersToken", "/sagas", r.keys.Customer(t, "c-1"), http.StatusForbidden},
		{"ListWithAnExpiredToken", "/sagas", r.keys.Expired(t, "ops", true), http.StatusUnauthorized},
		{"ListWithAnOperatorsToken", "/sagas", r.token, http.StatusOK},
		{"PageWithoutToken", "/", "", http.StatusOK},
		{"ScriptWithoutToken", "/app.js", "", http.StatusOK},
		{"MetricsWithoutToken", "/metrics", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, r.base+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Fatalf("GET %s = %d, want %d", tt.path, res.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", res.Header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("PageAsksForAToken", func(t *testing.T) {
		dom := testenv.DumpDOM(t, r.base+"/", `data-loaded="true"`)
		if strings.Contains(dom, `id="token-form" hidden`) || !strings.Contains(dom, "needs a token") {
			t.Errorf("the page without a token does not ask for one:\n%s", dom)
		}
	})
}
