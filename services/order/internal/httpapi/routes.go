// Package httpapi is the order service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the order service. The events it emits
// name service as their source and are stamped by now.
func Routes(log *slog.Logger, st *store.Store, service string, now func() time.Time, checks map[string]web.Check) http.Handler {
	r := web.NewRouter(log, checks)
	r.Method(http.MethodPost, "/orders", createOrder(log, st, service, now))
	r.Method(http.MethodGet, "/orders/{id}", getOrder(log, st))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
