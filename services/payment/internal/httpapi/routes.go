// Package httpapi is the payment service's HTTP adapter.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// spec is this service's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// Routes is the whole HTTP API of the payment service, over the store in
// db: participant.Spec's API. Money is the operator's: setting a balance,
// depositing, reading a payment need the operator role; a customer may
// read their own account only.
func Routes(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
	st := store.New(db)
	r := web.NewRouter(log, checks)
	operator, owner := bearer.RequireOperator(log), bearer.OwnerOrOperator(log, "customer_id")
	r.Method(http.MethodPut, "/accounts/{customer_id}", operator(web.Put(log, "customer_id", putAccount(st))))
	r.Method(http.MethodPost, "/accounts/{customer_id}/deposits", operator(web.AddAmount(log, "customer_id", "amount", st.Deposit)))
	r.Method(http.MethodGet, "/accounts/{customer_id}", owner(web.Get(log, "customer_id", st.Account)))
	r.Method(http.MethodGet, "/payments/{order_id}", operator(web.Get(log, "order_id", st.PaymentRecord)))
	r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
	return r
}
