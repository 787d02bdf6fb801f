// Package httpapi is the shipping service's HTTP adapter.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// Routes is the whole HTTP API of the shipping service.
func Routes(log *slog.Logger, st *store.Store, checks map[string]web.Check) http.Handler {
	r := web.NewRouter(log, checks)
	r.Method(http.MethodGet, "/shipments/{order_id}", getShipment(log, st))
	return r
}
