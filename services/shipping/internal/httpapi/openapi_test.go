package httpapi_test

import (
	"testing"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
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
	api := apitest.Start(t, httpapi.Routes)
	spec := api.Spec
	t.Run("Schemas", func(t *testing.T) {
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Status: domain.StatusScheduled, Country: "JP",
		})
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "7b2e4d10-5c3a-4f6e-8d21-9e0a1b2c3d4e", Status: domain.StatusFailed, Country: "BR",
			Reason: events.ReasonShippingUnavailable,
		})
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "5a0c2e7d-1b3f-4c6a-8e9d-0f1a2b3c4d5e", Status: domain.StatusCancelled, Country: "JP",
			Reason: events.ReasonCustomerCancelled, Cancelled: true,
		})
		apitest.CheckSchema(t, spec, "Shipment", domain.Shipment{
			OrderID: "5a0c2e7d-1b3f-4c6a-8e9d-0f1a2b3c4d5f", Status: domain.StatusCancelled,
			Reason: events.ReasonTimeout, Cancelled: true,
		})
	})

	api.Check(t, apitest.GetRequests("GetShipment", "/shipments/"))
	api.Check(t, []apitest.Request{
		{Name: "UnknownPath", Method: "GET", Path: "/shipments", Want: 404},
		{Name: "UnlistedMethod", Method: "POST", Path: "/shipments/o-1", Want: 405},
	})
}
