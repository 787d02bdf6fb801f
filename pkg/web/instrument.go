package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/tracing"
)

// HTTP metrics, labelled by the route pattern chi matched (e.g.
// /orders/{id}), never the raw path, so an id does not make a series.
var (
	httpRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_http_requests_total",
		Help: "HTTP requests answered, by service, method, route pattern and status code.",
	}, []string{"service", "method", "route", "code"})
	httpSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "choreo_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by service, method and route pattern.",
		Buckets: prometheus.DefBuckets,
	}, []string{"service", "method", "route"})
)

// unmatchedRoute labels requests no route matched (404, 405), so that
// scanners probing random paths add one series, not one per path.
const unmatchedRoute = "unmatched"

// Instrument wraps a service's API, the handler its httpapi builds on
// NewRouter, with one span and one set of metrics per request, under the
// service's name; its routes stay unaware of it. A span continues the
// caller's trace if the request carries a W3C traceparent, and reaches
// every handler through the request's context, and from there, via
// outbox.Add, the events the request causes. Probes and scrapes are counted
// but get no span. Middleware in mw runs around h, inside the span, before
// routing: a request it refuses (bearer.Authenticate's 401) is counted as
// unmatched, as a scanner's is.
func Instrument(service string, h http.Handler, mw ...func(http.Handler) http.Handler) http.Handler {
	routes, _ := h.(chi.Routes)
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	carrier := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := carrier.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		span := trace.SpanFromContext(ctx) // probes and scrapes: no span of their own
		if !isProbe(r.URL.Path) {
			ctx, span = tracing.Tracer().Start(ctx, r.Method,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					tracing.AttrService.String(service),
					attribute.String("http.request.method", r.Method),
					attribute.String("url.path", r.URL.Path),
				))
			defer span.End()
		}

		// The route pattern is known only once chi has routed the request,
		// deep inside h: a chi.Mux that finds a RouteContext in the
		// request's context uses it instead of a pooled one, so after h
		// returns the pattern is still there to read.
		rctx := chi.NewRouteContext()
		rctx.Routes = routes // middleware such as GetHead match against it
		ctx = context.WithValue(ctx, chi.RouteCtxKey, rctx)
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		h.ServeHTTP(ww, r.WithContext(ctx))

		status := ww.Status()
		if status == 0 {
			status = http.StatusOK // the handler wrote nothing
		}
		route := rctx.RoutePattern()
		if route == "" {
			route = unmatchedRoute
		}
		code := strconv.Itoa(status)
		httpRequests.WithLabelValues(service, r.Method, route, code).Inc()
		httpSeconds.WithLabelValues(service, r.Method, route).Observe(time.Since(start).Seconds())

		if isProbe(r.URL.Path) {
			return
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status),
		)
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// isProbe reports whether path is one that orchestrators and Prometheus
// call every few seconds: it is counted, but traced only by the caller.
func isProbe(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}
