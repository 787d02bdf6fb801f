package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/choreo-saga/choreo/pkg/tracing"
)

// The services run as processes, so their spans cannot be read from an
// in-memory exporter: the suite runs an OTLP/HTTP receiver instead, and
// every service exports to it through the standard variables
// (OTEL_EXPORTER_OTLP_ENDPOINT), exactly as in production.

// span is one span as a service exported it.
type span struct {
	service  string // the resource's service.name
	traceID  string
	spanID   string
	parentID string
	name     string
	attrs    map[string]string
}

// traceSink is an OTLP/HTTP trace receiver keeping every span it is sent.
type traceSink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

// startCollector starts the receiver; its URL is the services'
// OTEL_EXPORTER_OTLP_ENDPOINT.
func startCollector() *traceSink {
	c := &traceSink{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.export))
	return c
}

// env is what a service needs to export to c, flushing its batches often
// so a test need not wait the default 5 s.
func (c *traceSink) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// export answers POST /v1/traces as the OTLP/HTTP protocol (protobuf) says.
func (c *traceSink) export(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, span{
					service:  service,
					traceID:  hex.EncodeToString(s.GetTraceId()),
					spanID:   hex.EncodeToString(s.GetSpanId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()),
					name:     s.GetName(),
					attrs:    attrs(s.GetAttributes()),
				})
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.IntValue)
		}
	}
	return m
}

// where returns the spans keep accepts.
func (c *traceSink) where(keep func(span) bool) []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []span
	for _, s := range c.spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestOneSagaIsOneTrace: the trace context crosses every HTTP request,
// outbox row, relay publish and Kafka record, so one order's saga —
// POST /orders to COMPLETED, through four services and four databases —
// is one trace, with spans from each service that name the order.
func TestOneSagaIsOneTrace(t *testing.T) {
	f := newFixture(t, 10000, 10)
	o := createOrder(t, f.order(1, 1000, "JP"))
	wantOrder(t, o.ID, "COMPLETED", "")

	want := []string{"order", "payment", "inventory", "shipping"}
	byOrder := func(s span) bool { return s.attrs[string(tracing.AttrOrderID)] == o.ID }
	eventually(t, 30*time.Second, func() error {
		// The saga's last event, OrderCompleted, is handled by payment (not
		// routed) after COMPLETED is visible; wait for its span too.
		var services []string
		completed := false
		for _, s := range collector.where(byOrder) {
			if !slices.Contains(services, s.service) {
				services = append(services, s.service)
			}
			completed = completed || s.name == "handle OrderCompleted"
		}
		if !completed || len(services) < len(want) {
			return fmt.Errorf("spans of order %s so far from %v; OrderCompleted handled: %v", o.ID, services, completed)
		}
		return nil
	})

	spans := collector.where(byOrder)
	trace := spans[0].traceID
	services := map[string]int{}
	for _, s := range spans {
		if s.traceID != trace {
			t.Errorf("span %q of %s is in trace %s, want the saga's one trace %s", s.name, s.service, s.traceID, trace)
		}
		if s.attrs[string(tracing.AttrService)] != s.service {
			t.Errorf("span %q: choreo.service = %q, but service.name = %q", s.name, s.attrs[string(tracing.AttrService)], s.service)
		}
		if strings.HasPrefix(s.name, "handle ") && (s.attrs[string(tracing.AttrEventID)] == "" || s.attrs[string(tracing.AttrEventType)] == "") {
			t.Errorf("span %q of %s has no event id or type: %v", s.name, s.service, s.attrs)
		}
		services[s.service]++
	}
	for _, svc := range want {
		if services[svc] == 0 {
			t.Errorf("no span of %s in the saga's trace", svc)
		}
	}

	// The trace starts at the request, and every span's parent is in it
	// (once each service has exported its last batch).
	var inTrace []span
	eventually(t, 10*time.Second, func() error {
		inTrace = collector.where(func(s span) bool { return s.traceID == trace })
		ids := map[string]bool{}
		for _, s := range inTrace {
			ids[s.spanID] = true
		}
		var roots []string
		for _, s := range inTrace {
			if s.parentID == "" || !ids[s.parentID] {
				roots = append(roots, s.service+": "+s.name)
			}
		}
		if !slices.Equal(roots, []string{"order: POST /orders"}) {
			return fmt.Errorf("spans without a parent in the trace = %q, want only order's POST /orders", roots)
		}
		return nil
	})
	t.Logf("order %s: one trace %s, %d spans: %v", o.ID, trace, len(inTrace), services)
}
