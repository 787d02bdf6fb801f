package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/workload"
)

func TestParseSweep(t *testing.T) {
	tests := []struct {
		in   string
		want []float64
		ok   bool
	}{
		{"50:200:50", []float64{50, 100, 150, 200}, true},
		{"10:10:5", []float64{10}, true},
		{"50:200", nil, false},
		{"200:50:50", nil, false},
		{"a:200:50", nil, false},
		{"50:200:0", nil, false},
	}
	for _, tt := range tests {
		got, err := parseSweep(tt.in)
		if (err == nil) != tt.ok || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("parseSweep(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestBestIsTheHighestRateSustained(t *testing.T) {
	step := func(rate, tput, p99 float64, unfinished int) StepResult {
		return StepResult{OfferedRate: rate, Throughput: tput, Saga: Latency{P99: p99}, Unfinished: unfinished}
	}
	steps := []StepResult{
		step(100, 100, 200, 0),
		step(200, 199, 900, 0),
		step(300, 250, 800, 0),  // fell behind
		step(400, 400, 1500, 0), // too slow
		step(500, 500, 300, 3),  // lost track of sagas
	}
	if got := best(steps, 1000); got != 200 {
		t.Fatalf("best = %v, want 200", got)
	}
	if got := best(steps[2:], 1000); got != 0 {
		t.Fatalf("best of unsustained steps = %v, want 0", got)
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	steps := []StepResult{
		{OfferedRate: 50, Throughput: 50, Saga: Latency{P50: 20, P99: 80}},
		{OfferedRate: 100, Throughput: 98, Saga: Latency{P50: 30, P99: 400}},
		{OfferedRate: 150, Throughput: 120, Saga: Latency{P50: 900, P99: 4000}},
	}
	var b bytes.Buffer
	if err := chart(&b, "sweep <test> & more", steps, 1000); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&b)
	polylines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
			for _, a := range se.Attr {
				if a.Name.Local == "points" && len(strings.Fields(a.Value)) != len(steps) {
					t.Errorf("polyline has %d points, want one per step (%d)", len(strings.Fields(a.Value)), len(steps))
				}
			}
		}
	}
	if polylines != 3 {
		t.Fatalf("%d polylines, want 3 (throughput, p50, p99)", polylines)
	}
}

// fakeOrders is an order API whose sagas end after a few polls, the way
// their kind says — or, for one planted order, the wrong way. It stands in
// for the system so the loader's own logic is tested; the system itself is
// tested against real Kafka and PostgreSQL elsewhere. Like the services,
// it answers 401 to a request without the token of its caller: the
// operator's for the setup, the order's customer's for orders.
type fakeOrders struct {
	world  workload.World
	tokens workload.Tokens
	wrong  string // the Idempotency-Key of an order to end wrongly
	never  string // the Idempotency-Key of an order that never ends

	mu     sync.Mutex
	orders map[string]*fakeOrder
	puts   int
}

type fakeOrder struct {
	order
	customer string
	polls    int
	end      order
}

// as reports whether r carries token, answering 401 if not.
func as(w http.ResponseWriter, r *http.Request, token string) bool {
	if token == "" || r.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, "not the caller's token", http.StatusUnauthorized)
		return false
	}
	return true
}

func (f *fakeOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPut:
		if r.Header.Get("If-None-Match") != "*" {
			http.Error(w, "want create-only", http.StatusPreconditionRequired)
			return
		}
		if !as(w, r, f.tokens.Operator) {
			return
		}
		f.puts++
	case r.Method == http.MethodPost && r.URL.Path == "/orders":
		var body struct {
			Customer string                   `json:"customer_id"`
			Items    []workload.Item          `json:"items"`
			Address  struct{ Country string } `json:"shipping_address"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !as(w, r, f.tokens.Customer(body.Customer)) {
			return
		}
		now := time.Now().UTC()
		o := &fakeOrder{order: order{ID: fmt.Sprintf("o-%d", len(f.orders)), Status: "PENDING", CreatedAt: now, UpdatedAt: now}, customer: body.Customer}
		o.end = o.order
		o.end.Status, o.end.UpdatedAt = "COMPLETED", now.Add(40*time.Millisecond)
		empty := false
		for _, it := range body.Items {
			empty = empty || f.world.Stock[it.SKU] == 0
		}
		switch {
		case f.world.Balance[body.Customer] == workload.PoorBalance:
			o.end.Status, o.end.CancelReason = "CANCELLED", "insufficient_funds"
		case empty:
			o.end.Status, o.end.CancelReason = "CANCELLED", "out_of_stock"
		case body.Address.Country == "BR" || body.Address.Country == "AU" || body.Address.Country == "IN":
			o.end.Status, o.end.CancelReason = "CANCELLED", "shipping_unavailable"
		}
		if r.Header.Get("Idempotency-Key") == f.wrong {
			o.end.Status, o.end.CancelReason = "CANCELLED", "out_of_stock"
		}
		if r.Header.Get("Idempotency-Key") == f.never {
			o.end = o.order
		}
		f.orders[o.ID] = o
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(o.order)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/"):
		o := f.orders[strings.TrimPrefix(r.URL.Path, "/orders/")]
		if o == nil {
			http.NotFound(w, r)
			return
		}
		if !as(w, r, f.tokens.Customer(o.customer)) {
			return
		}
		if o.polls++; o.polls >= 2 {
			o.order = o.end
		}
		_ = json.NewEncoder(w).Encode(o.order)
	default:
		http.NotFound(w, r)
	}
}

// newTokens signs the tokens of w's callers with a key of the test's own.
func newTokens(t *testing.T, w workload.World) workload.Tokens {
	t.Helper()
	key, err := devkey.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := workload.NewTokens(key, "load", w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func TestLoaderCountsEverySagaAndChecksItsOutcome(t *testing.T) {
	world := workload.NewWorld("t", 10, 10)
	planned := workload.Plan(1, "t", 1, world, workload.DefaultMix)
	tokens := newTokens(t, world)
	f := &fakeOrders{world: world, tokens: tokens, orders: map[string]*fakeOrder{}, wrong: planned[0].Key}
	if planned[0].Kind.Outcome() == "CANCELLED/out_of_stock" {
		t.Fatal("the planted wrong outcome must differ from the first order's kind; pick another seed")
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	a := newAPI(srv.URL, srv.URL, srv.URL, tokens)
	if err := a.setup(context.Background(), world); err != nil {
		t.Fatal(err)
	}
	if f.puts != len(world.Balance)+len(world.Stock) {
		t.Fatalf("setup made %d PUTs, want %d", f.puts, len(world.Balance)+len(world.Stock))
	}

	tests := []struct {
		name string
		step Step
	}{
		{"OpenLoop", Step{Open: true, Rate: 200, Duration: 500 * time.Millisecond, Drain: 5 * time.Second}},
		{"ClosedLoop", Step{Clients: 4, Duration: 500 * time.Millisecond, Drain: 5 * time.Second}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Loader{api: a, planner: workload.NewPlanner(1, "t", world, workload.DefaultMix), log: io.Discard, polls: make(chan struct{}, 8)}
			r := l.Run(context.Background(), tt.step)
			if r.Sent == 0 || r.Completed+r.Cancelled != r.Sent || r.Refused != 0 || r.Unfinished != 0 {
				t.Fatalf("result %+v: want every order sent to end", r)
			}
			if tt.step.Open && (r.Sent < 90 || r.Sent > 101) {
				t.Errorf("open loop at 200/s for 0.5s sent %d, want about 100", r.Sent)
			}
			// The first order of the seed-1 plan was planted to end wrong.
			if i == 0 && r.Unexpected != 1 {
				t.Errorf("unexpected = %d, want the 1 planted (examples %v)", r.Unexpected, r.Examples)
			}
			if r.Saga.P50 < 39 || r.Saga.P50 > 41 {
				t.Errorf("saga p50 = %vms, want the fake's 40ms from the order's timestamps, not the polling", r.Saga.P50)
			}
		})
	}
}

// TestAStuckSampledSagaDoesNotFailTheOthers: the open loop follows one
// saga in twenty live; one that never ends must count as the one
// unfinished saga, not delay the settling of every other until the drain
// has run out.
func TestAStuckSampledSagaDoesNotFailTheOthers(t *testing.T) {
	world := workload.NewWorld("s", 10, 10)
	planned := workload.Plan(1, "s", 1, world, workload.Mix{})
	tokens := newTokens(t, world)
	f := &fakeOrders{world: world, tokens: tokens, orders: map[string]*fakeOrder{}, never: planned[0].Key} // the first: followed live
	srv := httptest.NewServer(f)
	defer srv.Close()
	l := &Loader{api: newAPI(srv.URL, srv.URL, srv.URL, tokens), planner: workload.NewPlanner(1, "s", world, workload.Mix{}), log: io.Discard, polls: make(chan struct{}, 8)}
	r := l.Run(context.Background(), Step{Open: true, Rate: 200, Duration: 500 * time.Millisecond, Drain: 2 * time.Second})
	if r.Unfinished != 1 || r.Completed != r.Sent-1 {
		t.Fatalf("sent %d, completed %d, unfinished %d; want all but the stuck one completed", r.Sent, r.Completed, r.Unfinished)
	}
}

// TestSetupLineMatchesTheFlags: -customers 500 -skus 200 sets up 500 and
// 200, and says apart from them the ones a compensating order needs.
func TestSetupLineMatchesTheFlags(t *testing.T) {
	got := setupLine(workload.NewWorld("load-1", 500, 200), "load-1")
	want := "[load] setting up 500 customers and 200 SKUs, plus 50 customers who cannot pay and 20 SKUs out of stock for the orders built to compensate (load-1)"
	if got != want {
		t.Errorf("setup line =\n%s\nwant\n%s", got, want)
	}
}

// TestProgressReadsTrue: while an open loop sends, the line scales the one
// order in sampleEvery it follows to everything sent and says it is an
// estimate; once all is sent, and in a closed loop, the counts are exact.
func TestProgressReadsTrue(t *testing.T) {
	stats := func(sent, refused, ended, sampledPlaced, sampledEnded int, settled bool) *Stats {
		s := newStats()
		s.sent, s.refused, s.completed = sent, refused, ended
		s.sampledPlaced, s.sampledEnded, s.settled = sampledPlaced, sampledEnded, settled
		_ = s.saga.RecordValue(15000)
		return s
	}
	tests := []struct {
		name string
		s    *Stats
		open bool
		want string
	}{
		// 50/s for 10 s: 25 of 500 followed, 24 of them ended.
		{"OpenLoopScalesItsSample", stats(500, 0, 24, 25, 24, false), true,
			"[load]    10s sent 500 (50/s), refused 0; ended ~480 (~48/s), not yet ~20, estimated from the 1 in 20 followed live (24 of 25 ended); saga p50 15ms p99 15ms"},
		{"RefusedAreNotEstimated", stats(500, 100, 20, 20, 20, false), true,
			"[load]    10s sent 500 (50/s), refused 100; ended ~400 (~40/s), not yet ~0, estimated from the 1 in 20 followed live (20 of 20 ended); saga p50 15ms p99 15ms"},
		{"NothingSampledYet", stats(10, 0, 0, 0, 0, false), true,
			"[load]    10s sent 10 (1/s), refused 0; none followed yet"},
		{"SettlingIsExact", stats(500, 0, 470, 25, 25, true), true,
			"[load]    10s all 500 sent, refused 0; now checking each: ended 470, not yet 30; saga p50 15ms p99 15ms"},
		{"ClosedLoopIsExact", stats(500, 0, 490, 0, 0, false), false,
			"[load]    10s sent 500, refused 0; ended 490 (49/s), not yet 10; saga p50 15ms p99 15ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.progress(10*time.Second, tt.open); got != tt.want {
				t.Errorf("progress =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
