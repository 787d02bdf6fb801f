package httpapi_test

import (
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/httpapi"
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
		apitest.CheckSchema(t, spec, "Stock", domain.Stock{SKU: "SKU-1", Available: 118, Reserved: 2})
		at := time.Date(2026, 11, 25, 9, 30, 0, 210344000, time.UTC)
		apitest.CheckSchema(t, spec, "Reservation", domain.ReservationRecord{Reservation: domain.Reservation{
			OrderID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Status: domain.StatusRejected,
			Items: []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
		}, Reason: events.ReasonOutOfStock, Detail: "out of stock: SKU-1 requested 2 available 0", CreatedAt: at, UpdatedAt: at})
		// The store never hands out nil items, so a tombstone shows [].
		apitest.CheckSchema(t, spec, "Reservation", domain.ReservationRecord{Reservation: domain.Reservation{
			OrderID: "9c8b7a65-4321-4fed-8cba-0123456789ab", Status: domain.StatusReleased, Items: []events.Item{},
		}, Reason: events.ReasonShippingUnavailable, Detail: "release arrived before reserve: shipping_unavailable", CreatedAt: at, UpdatedAt: at, ReleasedAt: &at})
	})

	api.Check(t, apitest.PutRequests("PutStock", "/stock/", "SKU-1", "available"))
	api.Check(t, apitest.PostRequests("Restock", "/stock/", "SKU-1", "/restock", "quantity"))
	api.Check(t, apitest.GetRequests("GetStock", "/stock/"))
	api.Check(t, apitest.GetRequests("GetReservation", "/reservations/"))
	api.Check(t, []apitest.Request{
		{Name: "PutStockMissing", Method: "PUT", Path: "/stock/SKU-1", Body: `{}`, Want: 400},
		{Name: "PutStockReserved", Method: "PUT", Path: "/stock/SKU-1", Body: `{"available":1,"reserved":0}`, Want: 400},
		{Name: "RestockUnknownField", Method: "POST", Path: "/stock/SKU-1/restock", Body: `{"quantity":1,"available":3}`, Want: 400},
		{Name: "UnknownPath", Method: "GET", Path: "/stock", Want: 404},
		{Name: "UnlistedMethod", Method: "DELETE", Path: "/reservations/o-1", Want: 405},
	})
}
