// Package httpapi is the order service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// API is the order service's HTTP API. The events it emits name Service
// as their source and are stamped by Now.
type API struct {
	Service string
	Now     func() time.Time
}

// Routes is the whole HTTP API of the order service, over the store in db:
// participant.Spec's API.
func (a API) Routes(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
	st := store.New(db)
	r := web.NewRouter(log, checks)
	r.Method(http.MethodPost, "/orders", createOrder(log, st, a.Service, a.Now))
	r.Method(http.MethodGet, "/orders", listOrders(log, st))
	r.Method(http.MethodGet, "/orders/{id}", getOrder(log, st))
	r.Method(http.MethodPost, "/orders/{id}/cancel", cancelOrder(log, st, a.Service, a.Now))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
