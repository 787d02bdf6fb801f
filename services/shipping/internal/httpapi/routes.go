// Package httpapi is the shipping service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the shipping service.
func Routes(log *slog.Logger, st *store.Store, checks map[string]web.Check) http.Handler {
	r := web.NewRouter(log, checks)
	r.Method(http.MethodGet, "/shipments/{order_id}", getShipment(log, st))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
