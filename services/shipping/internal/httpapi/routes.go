// Package httpapi is the shipping service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the shipping service, over the store in
// db: participant.Spec's API. Reading a shipment, with its address, needs
// the operator role.
func Routes(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
	st := store.New(db)
	r := web.NewRouter(log, checks)
	r.Method(http.MethodGet, "/shipments/{order_id}", bearer.RequireOperator(log)(web.Get(log, "order_id", st.Shipment)))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
