package web

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRouter returns a chi router with what every service's API shares:
// request ids, an access log line per request, panic recovery, problem responses for unknown routes, and
// GET /healthz, /readyz and /metrics (Prometheus: events handled, retries,
// dead letters, outbox backlog). Each service adds its own routes in its
// routes.go.
func NewRouter(log *slog.Logger, checks map[string]Check) *chi.Mux {
	r := chi.NewRouter()
	r.Use(requestID)
	r.Use(echoRequestID) // so a client can quote it, and find the log line
	r.Use(AccessLog(log))
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

// requestID adopts the client's X-Request-Id if validRequestID allows it and
// otherwise makes one (middleware.RequestID), so a client cannot put a
// megabyte or a forged log line into every line its request logs.
func requestID(next http.Handler) http.Handler {
	generate := middleware.RequestID(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(middleware.RequestIDHeader); id != "" && !validRequestID(id) {
			r.Header.Del(middleware.RequestIDHeader)
		}
		generate.ServeHTTP(w, r)
	})
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

// AccessLog logs one line per request once it is answered: method, path,
// the route it matched, status, bytes, duration and the request id that
// the X-Request-Id header returned to the client. The lines are at
// DEBUG: under load they are hundreds a second and would bury what the
// consumers say, and a failed request is logged at ERROR by Respond
// anyway, with the same request id.
func AccessLog(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			if !log.Enabled(r.Context(), slog.LevelDebug) {
				return
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // the handler wrote nothing
			}
			log.DebugContext(r.Context(), "http request",
				"method", r.Method,
				"path", r.URL.Path,
				"route", chi.RouteContext(r.Context()).RoutePattern(),
				"status", status,
				"bytes", ww.BytesWritten(),
				"duration_ms", float64(time.Since(start).Microseconds())/1000,
				"request_id", middleware.GetReqID(r.Context()))
		})
	}
}

// Pprof returns the Go runtime's profiling endpoints under /debug/pprof/,
// for a listener of their own (Config.PprofAddr), e.g.
//
//	go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=20
func Pprof() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
