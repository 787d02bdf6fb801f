package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/httpapi"
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
		apitest.CheckSchema(t, spec, "Stock", domain.Stock{SKU: "SKU-1", Available: 118, Reserved: 2})
		apitest.CheckSchema(t, spec, "Reservation", domain.Reservation{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Status: domain.StatusReserved,
			Items: []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
		})
		// The store never hands out nil items, so a tombstone shows [].
		apitest.CheckSchema(t, spec, "Reservation", domain.Reservation{
			OrderID: "9c8b7a65-4321-4fed-8cba-0123456789ab", Status: domain.StatusReleased, Items: []events.Item{},
		})
		apitest.CheckSchema(t, spec, "Problem", web.Problem{
			Type: "about:blank", Title: "Not Found", Status: 404, Detail: "stock SKU-1 not found", Instance: "/stock/SKU-1",
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
		{"PutStockTooLongSKU", h, "PUT", "/stock/" + long, "application/json", `{"available":1}`, 400},
		{"PutStockNotJSON", h, "PUT", "/stock/SKU-1", "text/plain", `{"available":1}`, 415},
		{"PutStockTooLarge", h, "PUT", "/stock/SKU-1", "application/json", `{"available":` + strings.Repeat(" ", web.MaxBodyBytes) + `1}`, 413},
		{"PutStockMissing", h, "PUT", "/stock/SKU-1", "application/json", `{}`, 400},
		{"PutStockNegative", h, "PUT", "/stock/SKU-1", "application/json", `{"available":-1}`, 400},
		{"PutStockReserved", h, "PUT", "/stock/SKU-1", "application/json", `{"available":1,"reserved":0}`, 400},
		{"PutStockAboveMaxAmount", h, "PUT", "/stock/SKU-1", "application/json", `{"available":1000000000000001}`, 400},
		{"PutStockEscapedSlashInSKU", h, "PUT", "/stock/SKU%2F1", "application/json", `{"available":1}`, 400},
		{"PutStockNULInSKU", h, "PUT", "/stock/SKU%001", "application/json", `{"available":1}`, 400},
		{"GetReservationInvalidUTF8InID", h, "GET", "/reservations/%ff", "", "", 400},
		{"GetStockTooLongSKU", h, "GET", "/stock/" + long, "", "", 400},
		{"GetReservationTooLongID", h, "GET", "/reservations/" + long, "", "", 400},
		{"UnknownPath", h, "GET", "/stock", "", "", 404},
		{"UnlistedMethod", h, "DELETE", "/reservations/o-1", "", "", 405},
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
