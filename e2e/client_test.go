package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/google/uuid"
)

type item struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unit_price"`
}

type address struct {
	Country    string `json:"country"`
	PostalCode string `json:"postal_code,omitempty"`
	Line1      string `json:"line1,omitempty"`
}

type orderRequest struct {
	CustomerID      string  `json:"customer_id"`
	Items           []item  `json:"items"`
	Currency        string  `json:"currency"`
	ShippingAddress address `json:"shipping_address"`
}

type order struct {
	ID           string `json:"id"`
	CustomerID   string `json:"customer_id"`
	Items        []item `json:"items"`
	TotalAmount  int64  `json:"total_amount"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	CancelReason string `json:"cancel_reason"`
}

type stockLevel struct {
	SKU       string `json:"sku"`
	Available int64  `json:"available"`
	Reserved  int64  `json:"reserved"`
}

type paymentRecord struct {
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id"`
	Amount     int64  `json:"amount"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
}

type reservation struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Items   []item `json:"items"`
	Reason  string `json:"reason"`
}

type shipment struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Country string `json:"country"`
	Reason  string `json:"reason"`
}

func newID(prefix string) string { return prefix + "-" + uuid.NewString()[:8] }

// do sends a request and returns status, headers and body.
func do(t *testing.T, method, url, contentType string, body []byte, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	// An operator's, unless the caller sends its own (or "" for none).
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("Authorization") == "" {
		req.Header.Del("Authorization")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get decodes a GET response into v and returns the status.
func get(t *testing.T, svc, path string, v any) int {
	t.Helper()
	status, _, body := do(t, http.MethodGet, services[svc].baseURL+path, "", nil, nil)
	if status == http.StatusOK && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s %s: %v: %s", svc, path, err, body)
		}
	}
	return status
}

// mustGet GETs path of svc, fails the test unless it answers 200, and
// returns the body decoded as a T.
func mustGet[T any](t *testing.T, svc, path string) T {
	t.Helper()
	var v T
	if s := get(t, svc, path, &v); s != http.StatusOK {
		t.Fatalf("GET %s %s = %d", svc, path, s)
	}
	return v
}

func put(t *testing.T, svc, path string, v any) {
	t.Helper()
	status, _, body := do(t, http.MethodPut, services[svc].baseURL+path, "application/json", mustJSON(t, v), nil)
	if status != http.StatusOK {
		t.Fatalf("PUT %s %s = %d: %s", svc, path, status, body)
	}
}

func putAccount(t *testing.T, customer string, balance int64) {
	t.Helper()
	put(t, "payment", "/accounts/"+customer, map[string]int64{"balance": balance})
}

func balance(t *testing.T, customer string) int64 {
	t.Helper()
	return mustGet[struct{ Balance int64 }](t, "payment", "/accounts/"+customer).Balance
}

func putStock(t *testing.T, sku string, available int64) {
	t.Helper()
	put(t, "inventory", "/stock/"+sku, map[string]int64{"available": available})
}

func stock(t *testing.T, sku string) stockLevel {
	t.Helper()
	return mustGet[stockLevel](t, "inventory", "/stock/"+sku)
}

// postOrder sends POST /orders and returns status, headers and the decoded
// order (zero if the status is not 201).
func postOrder(t *testing.T, req orderRequest, idempotencyKey string) (int, http.Header, order) {
	t.Helper()
	// The customer orders, with a token of their own.
	headers := map[string]string{"Authorization": "Bearer " + customerToken(t, req.CustomerID)}
	if idempotencyKey != "" {
		headers["Idempotency-Key"] = idempotencyKey
	}
	status, h, body := do(t, http.MethodPost, services["order"].baseURL+"/orders", "application/json", mustJSON(t, req), headers)
	var o order
	if status == http.StatusCreated {
		if err := json.Unmarshal(body, &o); err != nil {
			t.Fatalf("POST /orders: %v: %s", err, body)
		}
	}
	return status, h, o
}

// createOrder posts an order that must be accepted and counts it.
func createOrder(t *testing.T, req orderRequest) order {
	t.Helper()
	status, h, o := postOrder(t, req, "")
	if status != http.StatusCreated {
		t.Fatalf("POST /orders = %d", status)
	}
	if h.Get("Location") != "/orders/"+o.ID {
		t.Fatalf("Location = %q, want /orders/%s", h.Get("Location"), o.ID)
	}
	ordersCreated.Add(1)
	return o
}

// waitOrder polls the order until it leaves PENDING and returns it.
func waitOrder(t *testing.T, id string) order {
	t.Helper()
	var o order
	testenv.Eventually(t, 90*time.Second, "order "+id+" leaves PENDING", func() bool {
		o = mustGet[order](t, "order", "/orders/"+id)
		return o.Status != "PENDING"
	})
	return o
}

func wantOrder(t *testing.T, id, status, reason string) order {
	t.Helper()
	o := waitOrder(t, id)
	if o.Status != status || o.CancelReason != reason {
		t.Fatalf("order %s = %s/%q, want %s/%q", id, o.Status, o.CancelReason, status, reason)
	}
	return o
}

// eventually retries check until it returns nil or the deadline passes.
func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	var err error
	defer func() {
		if err != nil {
			t.Logf("last error: %v", err)
		}
	}()
	testenv.Eventually(t, within, "the check passes (last error below)", func() bool {
		err = check()
		return err == nil
	})
}

// fixture is a customer with a balance and one stocked SKU.
type fixture struct {
	customer string
	sku      string
}

func newFixture(t *testing.T, balance, available int64) fixture {
	t.Helper()
	f := fixture{customer: newID("c"), sku: newID("SKU")}
	putAccount(t, f.customer, balance)
	putStock(t, f.sku, available)
	return f
}

func (f fixture) order(qty, price int64, country string) orderRequest {
	return orderRequest{
		CustomerID:      f.customer,
		Items:           []item{{SKU: f.sku, Quantity: qty, UnitPrice: price}},
		Currency:        "JPY",
		ShippingAddress: address{Country: country, PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
	}
}

func assertEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func problemJSON(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "application/problem+json")
}

// metric returns the value of the Prometheus sample name{labels…} that svc
// serves on /metrics, or 0 if it has none yet.
func metric(t *testing.T, svc, name string, labels map[string]string) float64 {
	t.Helper()
	status, _, body := do(t, http.MethodGet, services[svc].baseURL+"/metrics", "", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s /metrics = %d", svc, status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(line, k+`="`+v+`"`) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return 0
}

// customerToken returns a token of customer id.
func customerToken(t *testing.T, id string) string {
	t.Helper()
	tok, err := tokens.Key().Token(id, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
