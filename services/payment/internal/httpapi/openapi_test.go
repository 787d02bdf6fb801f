package httpapi_test

import (
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
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
	})

	api.Check(t, apitest.PutRequests("PutAccount", "/accounts/", "c-1", "balance"))
	api.Check(t, apitest.PostRequests("Deposit", "/accounts/", "c-1", "/deposits", "amount"))
	api.Check(t, apitest.GetRequests("GetAccount", "/accounts/"))
	api.Check(t, apitest.GetRequests("GetPayment", "/payments/"))
	api.Check(t, []apitest.Request{
		{Name: "PutAccountUnknownField", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":1,"owner":"x"}`, Want: 400},
		{Name: "PutAccountBadCurrency", Method: "PUT", Path: "/accounts/c-1", Body: `{"balance":1,"currency":"US$"}`, Want: 400},
		{Name: "DepositUnknownField", Method: "POST", Path: "/accounts/c-1/deposits", Body: `{"amount":1,"currency":"USD"}`, Want: 400},
		{Name: "UnknownPath", Method: "GET", Path: "/refunds/o-1", Want: 404},
		{Name: "UnlistedMethod", Method: "DELETE", Path: "/accounts/c-1", Want: 405},
	})
}
