// Package httpapi is the inventory service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the inventory service.
func Routes(log *slog.Logger, st *store.Store, checks map[string]web.Check) http.Handler {
	r := web.NewRouter(log, checks)
	r.Method(http.MethodPut, "/stock/{sku}", putStock(log, st))
	r.Method(http.MethodGet, "/stock/{sku}", getStock(log, st))
	r.Method(http.MethodGet, "/reservations/{order_id}", getReservation(log, st))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
