package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
)

// TestOpenAPI keeps openapi.yaml honest: valid OpenAPI, the routes Routes
// serves and no others, the bodies the handlers write, and the document
// served at GET /openapi.yaml. Only answers given before the store is
// reached are served here, so the store is nil; the bodies of answers that
// need it are checked through the domain types the handlers encode.
func TestOpenAPI(t *testing.T) {
	api := apitest.Start(t, httpapi.API{Service: order.Name, Now: time.Now}.Routes)
	spec := api.Spec
	t.Run("Schemas", func(t *testing.T) {
		created := time.Date(2026, 11, 25, 9, 30, 0, 123456000, time.UTC)
		apitest.CheckSchema(t, spec, "Order", domain.Order{
			ID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", CustomerID: "c-1",
			Items:       []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
			TotalAmount: 5000, Currency: "JPY",
			ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
			Status:          domain.StatusPending, CreatedAt: created, UpdatedAt: created,
			RequestHash: "never shown",
		})
		apitest.CheckSchema(t, spec, "OrderPage", domain.NewPage(nil, 20))
		apitest.CheckSchema(t, spec, "OrderPage", domain.NewPage([]domain.Order{
			{ID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", CustomerID: "c-1", Items: []events.Item{{SKU: "SKU-1", Quantity: 1}},
				Currency: "JPY", ShippingAddress: events.Address{Country: "JP"}, Status: domain.StatusPending, CreatedAt: created, UpdatedAt: created},
			{ID: "7b2e4d10-5c3a-4f6e-8d21-9e0a1b2c3d4e", CustomerID: "c-1", Items: []events.Item{{SKU: "SKU-1", Quantity: 1}},
				Currency: "JPY", ShippingAddress: events.Address{Country: "JP"}, Status: domain.StatusPending, CreatedAt: created, UpdatedAt: created},
		}, 1))
		// A cancelled or cancelling order differs from a pending one only
		// in its status, reason and the acknowledgements counted so far.
		ending := domain.Order{
			ID: "5a0c2e7d-1b3f-4c6a-8e9d-0f1a2b3c4d5e", CustomerID: "c-3",
			Items:       []events.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 2500}},
			TotalAmount: 2500, Currency: "JPY", ShippingAddress: events.Address{Country: "JP"},
			CreatedAt: created, UpdatedAt: created.Add(time.Second),
		}
		for _, end := range []struct {
			status domain.Status
			reason string
			acks   domain.Acks
		}{
			{domain.StatusCancelled, events.ReasonOutOfStock, domain.Acks{}},
			{domain.StatusCancelling, events.ReasonCustomerCancelled, domain.Acks{Payment: true}},
			{domain.StatusCancelled, events.ReasonTimeout, domain.Acks{}},
		} {
			o := ending
			o.Status, o.CancelReason, o.Acks = end.status, end.reason, end.acks
			apitest.CheckSchema(t, spec, "Order", o)
		}
		apitest.CheckSchema(t, spec, "OrderRequest", domain.Request{
			CustomerID: "c-1", Items: []events.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 980}},
			Currency: "JPY", ShippingAddress: events.Address{Country: "jp"},
		})
	})
	t.Run("RequestExampleIsAValidOrder", func(t *testing.T) {
		// The example a client copies must be one the handler accepts, and
		// the documented answer must carry the total it is priced at.
		doc := apitest.Load(t, spec)
		create := doc.Paths.Value("/orders").Post
		body, err := json.Marshal(create.RequestBody.Value.Content.Get("application/json").Example)
		if err != nil {
			t.Fatalf("encode the request example: %v", err)
		}
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		r, err := web.Decode[domain.Request](httptest.NewRecorder(), req)
		if err != nil {
			t.Fatalf("the request example does not decode: %v", err)
		}
		d, err := domain.Validate(r)
		if err != nil {
			t.Fatalf("the request example is not a valid order: %v", err)
		}
		answer, ok := create.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Example.(map[string]any)
		if !ok {
			t.Fatal("the 201 answer has no example object")
		}
		if got := answer["total_amount"]; got != float64(d.TotalAmount) {
			t.Fatalf("201 example total_amount = %v, want %d, the request example's total", got, d.TotalAmount)
		}
	})

	valid := `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"shipping_address":{"country":"JP"}}`
	huge := `{"items":[` + strings.Repeat(`{"sku":"SKU-1","quantity":1,"unit_price":1},`, web.MaxBodyBytes/40) + `]}`
	api.Check(t, apitest.GetRequests("GetOrder", "/orders/"))
	api.Check(t, []apitest.Request{
		{Name: "CreateEmptyKey", Method: "POST", Path: "/orders", Header: http.Header{"Idempotency-Key": {""}}, Body: valid, Want: 400},
		{Name: "CreateKeyTwice", Method: "POST", Path: "/orders", Header: http.Header{"Idempotency-Key": {"k1", "k2"}}, Body: valid, Want: 400},
		{Name: "CreateKeyTooLong", Method: "POST", Path: "/orders", Header: http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, Body: valid, Want: 400},
		{Name: "CreateKeyNotASCII", Method: "POST", Path: "/orders", Header: http.Header{"Idempotency-Key": {"キー"}}, Body: valid, Want: 400},
		{Name: "CreateNotJSON", Method: "POST", Path: "/orders", Header: http.Header{"Content-Type": {"text/plain"}}, Body: valid, Want: 415},
		{Name: "CreateTooLarge", Method: "POST", Path: "/orders", Body: huge, Want: 413},
		{Name: "CreateMalformed", Method: "POST", Path: "/orders", Body: `{"customer_id":`, Want: 400},
		{Name: "CreateUnknownField", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"customer_id"`, `"total_amount":1,"customer_id"`, 1), Want: 400},
		{Name: "CreateNoItems", Method: "POST", Path: "/orders", Body: `{"customer_id":"c-1","items":[],"shipping_address":{"country":"JP"}}`, Want: 400},
		{Name: "CreateBadCountry", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"JP"`, `"JPN"`, 1), Want: 400},
		{Name: "CreateTotalOverflows", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"quantity":2`, `"quantity":9223372036854775807`, 1), Want: 400},
		{Name: "CreateTotalAboveMaxAmount", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"quantity":2,"unit_price":2500`, `"quantity":2,"unit_price":500000000000001`, 1), Want: 400},
		{Name: "CreateCustomerWithNUL", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"c-1"`, `"c\u00001"`, 1), Want: 400},
		{Name: "CreateCustomerWithSlash", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"c-1"`, `"c/1"`, 1), Want: 400},
		{Name: "CreateSKUWithSpace", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"SKU-1"`, `"SKU 1"`, 1), Want: 400},
		{Name: "CreateLine1WithNUL", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"country":"JP"`, `"country":"JP","line1":"1-1\u0000"`, 1), Want: 400},
		{Name: "CreatePostalCodeWithNewline", Method: "POST", Path: "/orders", Body: strings.Replace(valid, `"country":"JP"`, `"country":"JP","postal_code":"100\n0001"`, 1), Want: 400},
		{Name: "GetNotAUUID", Method: "GET", Path: "/orders/42", Want: 400},
		{Name: "CancelNotAUUID", Method: "POST", Path: "/orders/42/cancel", Want: 400},
		{Name: "UnlistedMethodOnCancel", Method: "GET", Path: "/orders/3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13/cancel", Want: 405},
		{Name: "UnknownPath", Method: "GET", Path: "/customers/c-1", Want: 404},
		{Name: "UnlistedMethodOnOrder", Method: "DELETE", Path: "/orders/3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", Want: 405},
		{Name: "UnlistedMethodOnOrders", Method: "PUT", Path: "/orders", Want: 405},
		{Name: "ListUnknownStatus", Method: "GET", Path: "/orders?status=SHIPPED", Want: 400},
		{Name: "ListLimitZero", Method: "GET", Path: "/orders?limit=0", Want: 400},
		{Name: "ListLimitAboveMax", Method: "GET", Path: "/orders?limit=101", Want: 400},
		{Name: "ListLimitNotANumber", Method: "GET", Path: "/orders?limit=ten", Want: 400},
		{Name: "ListBadCursor", Method: "GET", Path: "/orders?cursor=garbage", Want: 400},
		{Name: "ListBadCustomer", Method: "GET", Path: "/orders?customer_id=c%2F1", Want: 400},
		{Name: "ListUnknownParameter", Method: "GET", Path: "/orders?offset=20", Want: 400},
		{Name: "ListRepeatedParameter", Method: "GET", Path: "/orders?status=PENDING&status=CANCELLED", Want: 400},
		{Name: "ListMalformedQuery", Method: "GET", Path: "/orders?status=%zz", Want: 400},
	})
}
