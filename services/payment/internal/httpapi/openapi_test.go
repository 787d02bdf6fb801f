package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/apitest"
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
	api := apitest.Start(t, func(log *slog.Logger, checks map[string]web.Check) http.Handler {
		return httpapi.Routes(log, nil, checks)
	})
	spec, h, notReady := api.Spec, api.Ready, api.NotReady
	t.Run("Schemas", func(t *testing.T) {
		apitest.CheckSchema(t, spec, "Account", domain.Account{CustomerID: "c-1", Balance: 100000, Currency: "JPY"})
		apitest.CheckSchema(t, spec, "Payment", domain.Payment{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", CustomerID: "c-1",
			Amount: 5000, Currency: "JPY", Status: domain.StatusDeclined,
		})
		apitest.CheckSchema(t, spec, "Problem", web.Problem{
			Type: "about:blank", Title: "Not Found", Status: 404, Detail: "account c-1 not found", Instance: "/accounts/c-1",
		})
	})

	long := strings.Repeat("x", 65)
	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		ct     string
		body   string
		want   int
	}{
		{"Healthz", h, "GET", "/healthz", "", "", 200},
		{"Ready", h, "GET", "/readyz", "", "", 200},
		{"NotReady", notReady, "GET", "/readyz", "", "", 503},
		{"OpenAPI", h, "GET", "/openapi.yaml", "", "", 200},
		{"PutAccountTooLongID", h, "PUT", "/accounts/" + long, "application/json", `{"balance":1}`, 400},
		{"PutAccountNotJSON", h, "PUT", "/accounts/c-1", "text/plain", `{"balance":1}`, 415},
		{"PutAccountTooLarge", h, "PUT", "/accounts/c-1", "application/json", `{"balance":` + strings.Repeat(" ", web.MaxBodyBytes) + `1}`, 413},
		{"PutAccountNegative", h, "PUT", "/accounts/c-1", "application/json", `{"balance":-1}`, 400},
		{"PutAccountUnknownField", h, "PUT", "/accounts/c-1", "application/json", `{"balance":1,"owner":"x"}`, 400},
		{"PutAccountBadCurrency", h, "PUT", "/accounts/c-1", "application/json", `{"balance":1,"currency":"yen"}`, 400},
		{"PutAccountAboveMaxAmount", h, "PUT", "/accounts/c-1", "application/json", `{"balance":1000000000000001}`, 400},
		{"PutAccountEscapedSlashInID", h, "PUT", "/accounts/c%2F1", "application/json", `{"balance":1}`, 400},
		{"PutAccountNULInID", h, "PUT", "/accounts/c%001", "application/json", `{"balance":1}`, 400},
		{"GetAccountInvalidUTF8InID", h, "GET", "/accounts/%ff", "", "", 400},
		{"GetPaymentSpaceInID", h, "GET", "/payments/o%201", "", "", 400},
		{"GetAccountTooLongID", h, "GET", "/accounts/" + long, "", "", 400},
		{"GetPaymentTooLongID", h, "GET", "/payments/" + long, "", "", 400},
		{"UnknownPath", h, "GET", "/refunds/o-1", "", "", 404},
		{"UnlistedMethod", h, "DELETE", "/accounts/c-1", "", "", 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			apitest.CheckResponse(t, tt.h, spec, req, tt.want)
		})
	}
}
