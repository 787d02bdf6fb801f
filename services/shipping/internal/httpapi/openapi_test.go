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
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/httpapi"
)

// TestOpenAPI keeps openapi.yaml honest: valid OpenAPI, the routes Routes
// serves and no others, the bodies the handlers write, and the document
// served at GET /openapi.yaml. Only answers given before the store is
// reached are served here, so the store is nil; TestGetShipment serves the
// rest against PostgreSQL, and the bodies are checked here through the
// domain type the handler encodes.
func TestOpenAPI(t *testing.T) {
	api := apitest.Start(t, func(log *slog.Logger, checks map[string]web.Check) http.Handler {
		return httpapi.Routes(log, nil, checks)
	})
	spec, h, notReady := api.Spec, api.Ready, api.NotReady
	t.Run("Schemas", func(t *testing.T) {
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Status: domain.StatusScheduled, Country: "JP",
		})
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "7b2e4d10-5c3a-4f6e-8d21-9e0a1b2c3d4e", Status: domain.StatusFailed, Country: "BR",
			Reason: events.ReasonShippingUnavailable,
		})
		apitest.CheckSchema(t, spec, "Problem", web.Problem{
			Type: "about:blank", Title: "Not Found", Status: 404, Detail: "shipment for order o-1 not found", Instance: "/shipments/o-1",
		})
	})

	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		want   int
	}{
		{"Healthz", h, "GET", "/healthz", 200},
		{"Ready", h, "GET", "/readyz", 200},
		{"NotReady", notReady, "GET", "/readyz", 503},
		{"OpenAPI", h, "GET", "/openapi.yaml", 200},
		{"GetShipmentTooLongID", h, "GET", "/shipments/" + strings.Repeat("x", 65), 400},
		{"GetShipmentEscapedSlashInID", h, "GET", "/shipments/o%2F1", 400},
		{"GetShipmentNULInID", h, "GET", "/shipments/o%001", 400},
		{"UnknownPath", h, "GET", "/shipments", 404},
		{"UnlistedMethod", h, "POST", "/shipments/o-1", 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apitest.CheckResponse(t, tt.h, spec, httptest.NewRequest(tt.method, tt.path, nil), tt.want)
		})
	}
}
