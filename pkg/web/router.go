package web

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRouter returns a chi router with what every service's API shares:
// request ids, panic recovery, problem responses for unknown routes, and
// GET /healthz, /readyz and /metrics (Prometheus: events handled, retries,
// dead letters, outbox backlog). Each service adds its own routes in its
// routes.go.
func NewRouter(log *slog.Logger, checks map[string]Check) *chi.Mux {
	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	r.Use(echoRequestID)      // so a client can quote it, and find the log line
	r.Use(middleware.GetHead) // HEAD is answered by the GET route
	r.Use(Recover(log))
	r.NotFound(NotFound(log))
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", strings.Join(allowed(r, req.URL.Path), ", "))
		MethodNotAllowed(log)(w, req)
	})
	r.Method("GET", "/healthz", Healthz())
	r.Method("GET", "/readyz", Readyz(log, checks))
	r.Method("GET", "/metrics", promhttp.Handler())
	return r
}

// allowed lists the methods r routes for path, for the Allow header that
// RFC 9110 requires on a 405.
func allowed(r *chi.Mux, path string) []string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			methods = append(methods, m)
			if m == http.MethodGet {
				methods = append(methods, http.MethodHead) // see GetHead
			}
		}
	}
	return methods
}

// echoRequestID returns the request's id in the X-Request-Id header; the
// service's error logs carry the same id.
func echoRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := middleware.GetReqID(r.Context()); id != "" {
			w.Header().Set(middleware.RequestIDHeader, id)
		}
		next.ServeHTTP(w, r)
	})
}
