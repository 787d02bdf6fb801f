package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/httpapi"
)

// TestOpenAPI keeps openapi.yaml honest: valid OpenAPI, the routes Routes
// serves and no others, the bodies the handlers write, and the document
// served at GET /openapi.yaml. Only answers given before the store is
// reached are served here, so the store is nil; the bodies of answers that
// need it are checked through the domain types the handlers encode.
func TestOpenAPI(t *testing.T) {
	api := apitest.Start(t, httpapi.Routes)
	spec := api.Spec
	t.Run("Schemas", func(t *testing.T) {
		apitest.CheckSchema(t, spec, "Account", domain.Account{CustomerID: "c-1", Balance: 100000, Currency: "JPY"})
		at := time.Date(2026, 11, 25, 9, 30, 0, 131520000, time.UTC)
		apitest.CheckSchema(t, spec, "Payment", domain.PaymentRecord{Payment: domain.Payment{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", CustomerID: "c-1",
			Amount: 5000, Currency: "JPY", Status: domain.StatusDeclined,
		}, Reason: domain.DeclineCurrencyMismatch, CreatedAt: at, UpdatedAt: at})
		apitest.CheckSchema(t, spec, "Payment", domain.PaymentRecord{Payment: domain.Payment{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Status: domain.StatusRefunded,
		}, Reason: events.ReasonShippingUnavailable, CreatedAt: at, UpdatedAt: at, RefundedAt: &at})
		apitest.CheckSchema(t, spec, "Problem", web.Problem{
			Type: "about:blank", Title: "Not Found", Status: 404, Detail: "account c-1 not found", Instance: "/accounts/c-1",
		})
	})

	long := strings.Repeat("x", 65)
	api.Check(t, []apitest.Request{
		{Name: "PutAccountTooLongID", Method: "PUT", Path: "/accounts/" + long, Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountNotJSON", Method: "PUT", Path: "/accounts/c-1", Header: http.Header{"Content-Type": {"text/plain"}}, Body: `{"balance":1}`, Want: 415},
		{Name: "PutAccountTooLarge", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":` + strings.Repeat(" ", web.MaxBodyBytes) + `1}`, Want: 413},
		{Name: "PutAccountNegative", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":-1}`, Want: 400},
		{Name: "PutAccountUnknownField", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":1,"owner":"x"}`, Want: 400},
		{Name: "PutAccountBadCurrency", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":1,"currency":"yen"}`, Want: 400},
		{Name: "PutAccountAboveMaxAmount", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":1000000000000001}`, Want: 400},
		{Name: "PutAccountEscapedSlashInID", Method: "PUT", Path: "/accounts/c%2F1", Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountNULInID", Method: "PUT", Path: "/accounts/c%001", Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountWeakIfMatch", Method: "PUT", Path: "/accounts/c-1", Header: http.Header{"If-Match": {`W/"3"`}}, Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountIfMatchStar", Method: "PUT", Path: "/accounts/c-1", Header: http.Header{"If-Match": {"*"}}, Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountIfNoneMatchTag", Method: "PUT", Path: "/accounts/c-1", Header: http.Header{"If-None-Match": {`"3"`}}, Body: `{"balance":1}`, Want: 400},
		{Name: "PutAccountBothConditions", Method: "PUT", Path: "/accounts/c-1", Header: http.Header{"If-Match": {`"3"`}, "If-None-Match": {"*"}}, Body: `{"balance":1}`, Want: 400},
		{Name: "DepositMissing", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{}`, Want: 400},
		{Name: "DepositZero", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":0}`, Want: 400},
		{Name: "DepositNegative", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":-5}`, Want: 400},
		{Name: "DepositAboveMaxAmount", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":1000000000000001}`, Want: 400},
		{Name: "DepositUnknownField", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":1,"currency":"USD"}`, Want: 400},
		{Name: "DepositNotJSON", Method: "POST", Path: "/accounts/c-1/deposits", Header: http.Header{"Content-Type": {"text/plain"}}, Body: `{"amount":1}`, Want: 415},
		{Name: "DepositTooLarge", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":` + strings.Repeat(" ", web.MaxBodyBytes) + `1}`, Want: 413},
		{Name: "DepositTooLongID", Method: "POST", Path: "/accounts/" + long + "/deposits", Body: `{"amount":1}`, Want: 400},
		{Name: "DepositUnlistedMethod", Method: "GET", Path: "/accounts/c-1/deposits", Want: 405},
		{Name: "GetAccountInvalidUTF8InID", Method: "GET", Path: "/accounts/%ff", Want: 400},
		{Name: "GetPaymentSpaceInID", Method: "GET", Path: "/payments/o%201", Want: 400},
		{Name: "GetAccountTooLongID", Method: "GET", Path: "/accounts/" + long, Want: 400},
		{Name: "GetPaymentTooLongID", Method: "GET", Path: "/payments/" + long, Want: 400},
		{Name: "UnknownPath", Method: "GET", Path: "/refunds/o-1", Want: 404},
		{Name: "UnlistedMethod", Method: "DELETE", Path: "/accounts/c-1", Want: 405},
	})
}
