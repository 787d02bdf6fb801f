// Package httpapi is the payment service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the payment service.
func Routes(log *slog.Logger, st *store.Store, checks map[string]web.Check) http.Handler {
	r := web.NewRouter(log, checks)
	r.Method(http.MethodPut, "/accounts/{customer_id}", putAccount(log, st))
	r.Method(http.MethodGet, "/accounts/{customer_id}", getAccount(log, st))
	r.Method(http.MethodGet, "/payments/{order_id}", getPayment(log, st))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
