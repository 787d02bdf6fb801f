package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestBadInput sends every kind of bad request to each service. Each gets
// the documented 4xx as application/problem+json with a detail — never a
// 5xx — and creates nothing.
func TestBadInput(t *testing.T) {
	valid := `{"customer_id":"c-bad","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP"}}`
	manyItems := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"sku":"S","quantity":1,"unit_price":1}`
		}
		return `{"customer_id":"c","items":[` + strings.Join(items, ",") + `],"shipping_address":{"country":"JP"}}`
	}
	huge := `{"customer_id":"` + strings.Repeat("x", 1<<20) + `"}`
	tests := []struct {
		name        string
		svc, method string
		path        string
		contentType string
		body        string
		headers     map[string]string
		want        int
	}{
		{"MalformedJSON", "order", "POST", "/orders", "application/json", `{"customer_id":`, nil, 400},
		{"NotAnObject", "order", "POST", "/orders", "application/json", `[1,2]`, nil, 400},
		{"TrailingData", "order", "POST", "/orders", "application/json", valid + `{}`, nil, 400},
		{"UnknownField", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"currency"`, `"coupon":"X","currency"`, 1), nil, 400},
		{"EmptyCustomer", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"c-bad"`, `""`, 1), nil, 400},
		{"CustomerTooLong", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"c-bad"`, `"`+strings.Repeat("c", 65)+`"`, 1), nil, 400},
		{"NoItems", "order", "POST", "/orders", "application/json", `{"customer_id":"c","items":[],"shipping_address":{"country":"JP"}}`, nil, 400},
		{"TooManyItems", "order", "POST", "/orders", "application/json", manyItems(101), nil, 400},
		{"ZeroQuantity", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"quantity":2`, `"quantity":0`, 1), nil, 400},
		{"NegativePrice", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"unit_price":2500`, `"unit_price":-1`, 1), nil, 400},
		{"QuantityNotInteger", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"quantity":2`, `"quantity":1.5`, 1), nil, 400},
		{"TotalOverflows", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"unit_price":2500`, `"unit_price":9223372036854775807`, 1), nil, 400},
		{"CountryNotTwoLetters", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"JP"`, `"JPN"`, 1), nil, 400},
		{"NoAddress", "order", "POST", "/orders", "application/json", `{"customer_id":"c","items":[{"sku":"S","quantity":1,"unit_price":1}]}`, nil, 400},
		{"BodyOver1MiB", "order", "POST", "/orders", "application/json", huge, nil, 413},
		{"WrongContentType", "order", "POST", "/orders", "text/plain", valid, nil, 415},
		{"NoContentType", "order", "POST", "/orders", "", valid, nil, 415},
		{"IdempotencyKeyTooLong", "order", "POST", "/orders", "application/json", valid, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, 400},
		{"OrderIDNotUUID", "order", "GET", "/orders/not-a-uuid", "", "", nil, 400},
		{"UnknownOrder", "order", "GET", "/orders/00000000-0000-4000-8000-000000000000", "", "", nil, 404},
		{"UnknownRoute", "order", "GET", "/nope", "", "", nil, 404},
		{"WrongMethod", "order", "DELETE", "/orders", "", "", nil, 405},
		{"NegativeBalance", "payment", "PUT", "/accounts/c-bad", "application/json", `{"balance":-1}`, nil, 400},
		{"MissingBalance", "payment", "PUT", "/accounts/c-bad", "application/json", `{}`, nil, 400},
		{"BalanceNotNumber", "payment", "PUT", "/accounts/c-bad", "application/json", `{"balance":"lots"}`, nil, 400},
		{"UnknownAccount", "payment", "GET", "/accounts/" + newID("nobody"), "", "", nil, 404},
		{"NoPaymentYet", "payment", "GET", "/payments/" + newID("o"), "", "", nil, 404},
		{"NegativeStock", "inventory", "PUT", "/stock/SKU-bad", "application/json", `{"available":-5}`, nil, 400},
		{"StockWrongContentType", "inventory", "PUT", "/stock/SKU-bad", "application/xml", `<available>5</available>`, nil, 415},
		{"UnknownSKU", "inventory", "GET", "/stock/" + newID("SKU"), "", "", nil, 404},
		{"NoReservationYet", "inventory", "GET", "/reservations/" + newID("o"), "", "", nil, 404},
		{"NoShipmentYet", "shipping", "GET", "/shipments/" + newID("o"), "", "", nil, 404},
		// Input PostgreSQL cannot store (NUL), ids another service could
		// not be asked about, and amounts whose sums could overflow bigint
		// are refused at the door: a 400, not a 500 from the database.
		{"NULInCustomerID", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"c-bad"`, `"c-bad\u0000"`, 1), nil, 400},
		{"SlashInCustomerID", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"c-bad"`, `"c/bad"`, 1), nil, 400},
		{"NULInSKU", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"SKU-1"`, `"SKU-1\u0000"`, 1), nil, 400},
		{"NULInLine1", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"country":"JP"`, `"country":"JP","line1":"1-1\u0000Chiyoda"`, 1), nil, 400},
		{"NULInPostalCode", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"country":"JP"`, `"country":"JP","postal_code":"\u0000"`, 1), nil, 400},
		{"TotalAboveCap", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"unit_price":2500`, `"unit_price":500000000000001`, 1), nil, 400},
		{"QuantityAboveCap", "order", "POST", "/orders", "application/json", strings.Replace(valid, `"quantity":2,"unit_price":2500`, `"quantity":1000000000000001,"unit_price":0`, 1), nil, 400},
		{"NULInAccountPath", "payment", "PUT", "/accounts/c-bad%00", "application/json", `{"balance":1}`, nil, 400},
		{"EscapedSlashInAccountPath", "payment", "PUT", "/accounts/c%2Fbad", "application/json", `{"balance":1}`, nil, 400},
		{"InvalidUTF8InAccountPath", "payment", "GET", "/accounts/c-bad%ff", "", "", nil, 400},
		{"NULInPaymentPath", "payment", "GET", "/payments/o%00", "", "", nil, 400},
		{"BalanceAboveCap", "payment", "PUT", "/accounts/c-bad", "application/json", `{"balance":1000000000000001}`, nil, 400},
		{"NULInStockPath", "inventory", "PUT", "/stock/SKU-bad%00", "application/json", `{"available":5}`, nil, 400},
		{"EscapedSlashInStockPath", "inventory", "PUT", "/stock/SKU%2Fbad", "application/json", `{"available":5}`, nil, 400},
		{"NULInReservationPath", "inventory", "GET", "/reservations/o%00", "", "", nil, 400},
		{"StockAboveCap", "inventory", "PUT", "/stock/SKU-bad", "application/json", `{"available":1000000000000001}`, nil, 400},
		{"NULInShipmentPath", "shipping", "GET", "/shipments/o%00", "", "", nil, 400},
		{"EscapedSlashInShipmentPath", "shipping", "GET", "/shipments/o%2F1", "", "", nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := do(t, tt.method, services[tt.svc].baseURL+tt.path, tt.contentType, []byte(tt.body), tt.headers)
			if status != tt.want {
				t.Fatalf("%s %s = %d, want %d: %s", tt.method, tt.path, status, tt.want, body)
			}
			if !problemJSON(h) {
				t.Fatalf("Content-Type = %q, want application/problem+json", h.Get("Content-Type"))
			}
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(body, &p); err != nil || p.Status != tt.want || p.Detail == "" {
				t.Fatalf("problem body %s (err %v), want status %d and a detail", body, err, tt.want)
			}
		})
	}
	// Nothing above created anything.
	var a struct{}
	assertEqual(t, "account c-bad created by a bad request", get(t, "payment", "/accounts/c-bad", &a), http.StatusNotFound)
	assertEqual(t, "stock SKU-bad created by a bad request", get(t, "inventory", "/stock/SKU-bad", &a), http.StatusNotFound)
}

var _ = fmt.Sprint
