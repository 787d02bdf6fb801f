package web

import (
	"log/slog"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// NewRouter returns a chi router with what every service's API shares:
// request ids, panic recovery, problem responses for unknown routes, and
// GET /healthz and /readyz. Each service adds its own routes in its
// routes.go.
func NewRouter(log *slog.Logger, checks map[string]Check) *chi.Mux {
	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	r.Use(Recover(log))
	r.NotFound(NotFound(log))
	r.MethodNotAllowed(MethodNotAllowed(log))
	r.Method("GET", "/healthz", Healthz())
	r.Method("GET", "/readyz", Readyz(log, checks))
	return r
}
