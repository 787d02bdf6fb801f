// Package httpapi is the inventory service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the inventory service, over the store in
// db: participant.Spec's API. Every route needs the operator role: stock
// is the shop's, and a customer learns what it can sell from its
// catalog.
func Routes(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
	st := store.New(db)
	r := web.NewRouter(log, checks)
	operator := bearer.RequireOperator(log)
	r.Method(http.MethodPut, "/stock/{sku}", operator(web.Put(log, "sku", putStock(st))))
	r.Method(http.MethodPost, "/stock/{sku}/restock", operator(web.AddAmount(log, "sku", "quantity", st.Restock)))
	r.Method(http.MethodGet, "/stock/{sku}", operator(web.Get(log, "sku", st.Stock)))
	r.Method(http.MethodGet, "/reservations/{order_id}", operator(web.Get(log, "order_id", st.ReservationRecord)))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
