package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/tracing"
	"github.com/choreo-saga/choreo/pkg/web"
)

// instrumented is a service's API as participant.Run serves it: routes on
// NewRouter, wrapped by Instrument.
func instrumented(service string) http.Handler {
	r := web.NewRouter(slog.New(slog.DiscardHandler), nil)
	r.Get("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	r.Post("/orders", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	return web.Instrument(service, r)
}

// TestInstrumentLabelsTheRoutePattern: requests are counted and timed by
// the route pattern chi matched, never the raw path, and unmatched paths
// share one label.
func TestInstrumentLabelsTheRoutePattern(t *testing.T) {
	tests := []struct {
		name, method, path, route string
		code                      int
	}{
		{"PatternNotPath", http.MethodGet, "/orders/" + uuid.NewString(), "/orders/{id}", http.StatusOK},
		{"Post", http.MethodPost, "/orders", "/orders", http.StatusCreated},
		{"HeadAnsweredByGet", http.MethodHead, "/orders/1", "/orders/{id}", http.StatusOK},
		{"NotFoundIsUnmatched", http.MethodGet, "/" + uuid.NewString(), "unmatched", http.StatusNotFound},
		{"Probe", http.MethodGet, "/healthz", "/healthz", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			service := "web-" + uuid.NewString()[:8]
			rec := httptest.NewRecorder()
			instrumented(service).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.code {
				t.Fatalf("status = %d, want %d", rec.Code, tt.code)
			}
			if got := web.Requests(service, tt.method, tt.route, strconv.Itoa(tt.code)); got != 1 {
				t.Errorf("choreo_http_requests_total{route=%q,code=%d} = %v, want 1", tt.route, tt.code, got)
			}
			if got := web.Timed(service, tt.method, tt.route); got != 1 {
				t.Errorf("choreo_http_request_duration_seconds{route=%q} count = %d, want 1", tt.route, got)
			}
		})
	}
}

// TestInstrumentContinuesTheCallersTrace: the request's span is a server
// span named by method and route, the child of the caller's traceparent,
// and handlers see it in the request's context; probes get none.
func TestInstrumentContinuesTheCallersTrace(t *testing.T) {
	spans, tracer := testenv.Spans(t)

	var inHandler trace.SpanContext
	r := web.NewRouter(slog.New(slog.DiscardHandler), nil)
	r.Get("/orders/{id}", func(w http.ResponseWriter, req *http.Request) {
		inHandler = trace.SpanContextFromContext(req.Context())
	})
	ctx, caller := tracer.Start(context.Background(), "client")
	req := httptest.NewRequest(http.MethodGet, "/orders/42", nil)
	headers := map[string]string{}
	tracing.Inject(ctx, headers)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	h := web.Instrument("svc", r)
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil))
	caller.End()
	if n := len(spans.Ended()); n != 2 {
		t.Errorf("%d spans ended, want 2: the caller's and the request's, none for the probe", n)
	}

	var server sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			server = s
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	if server.Name() != "GET /orders/{id}" {
		t.Errorf("span name = %q, want %q", server.Name(), "GET /orders/{id}")
	}
	if server.Parent().SpanID() != caller.SpanContext().SpanID() || server.SpanContext().TraceID() != caller.SpanContext().TraceID() {
		t.Errorf("server span's parent = %v, want the caller's %v", server.Parent(), caller.SpanContext())
	}
	if inHandler.SpanID() != server.SpanContext().SpanID() {
		t.Errorf("the handler sees span %v, want the server span %v", inHandler.SpanID(), server.SpanContext().SpanID())
	}
}
