package order_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
)

var quiet = slog.New(slog.DiscardHandler)

// newAPI returns the order service's HTTP API on a database of the test's
// own, dropped when the test ends, serving every request as an
// operator's: who may call it is auth_test.go's to check.
func newAPI(t *testing.T) (http.Handler, *sqlx.DB) {
	db := testenv.DB(t, order.Schema)
	return testenv.As(testenv.Operator, httpapi.API{Service: order.Name, Now: time.Now}.Routes(quiet, db, nil)), db
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, h http.Handler, method, path, contentType, body string, header map[string]string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Body)
	r := response{status: rec.Code, header: rec.Header(), raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func orderBody(customer string, quantity int) string {
	return fmt.Sprintf(`{"customer_id":%q,"items":[{"sku":"SKU-1","quantity":%d,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001","line1":"1-1 Chiyoda"}}`, customer, quantity)
}

func customer() string { return "c-" + uuid.NewString()[:8] }

func TestCreateAndGetOrder(t *testing.T) {
	h, _ := newAPI(t)
	cust := customer()
	r := do(t, h, "POST", "/orders", "application/json", orderBody(cust, 2), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.status, r.raw)
	}
	id, _ := r.body["id"].(string)
	if _, err := uuid.Parse(id); err != nil {
		t.Fatalf("id %q is not a UUID", id)
	}
	if loc := r.header.Get("Location"); loc != "/orders/"+id {
		t.Fatalf("Location = %q", loc)
	}
	if r.header.Get(httpapi.HeaderReplayed) != "" {
		t.Fatal("first create marked as replayed")
	}
	want := map[string]any{"customer_id": cust, "total_amount": 5000.0, "currency": "JPY", "status": "PENDING", "cancel_reason": ""}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("body[%s] = %v, want %v", k, r.body[k], v)
		}
	}
	for _, k := range []string{"items", "shipping_address", "created_at", "updated_at"} {
		if _, ok := r.body[k]; !ok {
			t.Errorf("body has no %s: %s", k, r.raw)
		}
	}
	if _, ok := r.body["request_hash"]; ok {
		t.Error("body leaks request_hash")
	}

	g := do(t, h, "GET", "/orders/"+id, "", "", nil)
	if g.status != http.StatusOK || g.body["id"] != id || g.body["status"] != "PENDING" {
		t.Fatalf("GET = %d %s", g.status, g.raw)
	}
}

func TestCreateIdempotencyKey(t *testing.T) {
	h, db := newAPI(t)
	key := map[string]string{"Idempotency-Key": "test-" + uuid.NewString()}
	cust := customer()

	first := do(t, h, "POST", "/orders", "application/json", orderBody(cust, 2), key)
	if first.status != http.StatusCreated {
		t.Fatalf("first = %d %s", first.status, first.raw)
	}
	// The same order, formatted differently and with the default currency
	// left out, is a replay.
	reformatted := fmt.Sprintf(`{ "shipping_address": {"line1":"1-1 Chiyoda", "country":"jp","postal_code":"100-0001"},
		"items": [ {"unit_price":2500, "quantity":2, "sku":"SKU-1"} ],
		"customer_id": %q }`, cust)
	again := do(t, h, "POST", "/orders", "application/json; charset=utf-8", reformatted, key)
	if again.status != http.StatusCreated || again.body["id"] != first.body["id"] || again.header.Get(httpapi.HeaderReplayed) != "true" {
		t.Fatalf("replay = %d %v %s", again.status, again.header, again.raw)
	}
	if again.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("replay Location = %q, want %q", again.header.Get("Location"), first.header.Get("Location"))
	}

	other := do(t, h, "POST", "/orders", "application/json", orderBody(cust, 3), key)
	if other.status != http.StatusUnprocessableEntity || other.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("other body = %d %s", other.status, other.raw)
	}
	if d, _ := other.body["detail"].(string); !strings.Contains(d, "Idempotency-Key") {
		t.Fatalf("422 detail = %q", d)
	}

	var n int
	if err := db.Get(&n, `SELECT count(*) FROM orders WHERE customer_id = $1`, cust); err != nil || n != 1 {
		t.Fatalf("orders = %d, %v; want 1", n, err)
	}
}

func TestCreateConcurrentRequestsWithOneKey(t *testing.T) {
	h, db := newAPI(t)
	key := map[string]string{"Idempotency-Key": "test-" + uuid.NewString()}
	cust := customer()
	const n = 20
	ids := make([]string, n)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := do(t, h, "POST", "/orders", "application/json", orderBody(cust, 1), key)
			statuses[i] = r.status
			ids[i], _ = r.body["id"].(string)
		}()
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != http.StatusCreated || ids[i] != ids[0] {
			t.Fatalf("request %d = %d id %s, want 201 id %s", i, statuses[i], ids[i], ids[0])
		}
	}
	var orders, outboxRows int
	if err := db.Get(&orders, `SELECT count(*) FROM orders WHERE customer_id = $1`, cust); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&outboxRows, `SELECT count(*) FROM outbox WHERE key = $1`, []byte(ids[0])); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || outboxRows != 1 {
		t.Fatalf("orders = %d, outbox rows = %d; want 1 and 1", orders, outboxRows)
	}
}

func TestBadRequests(t *testing.T) {
	h, _ := newAPI(t)
	valid := orderBody("c-1", 1)
	unknown := uuid.NewString()
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		header      map[string]string
		want        int
		detail      string
	}{
		{"MalformedJSON", "POST", "/orders", "application/json", `{"customer_id":`, nil, 400, "malformed JSON"},
		{"UnknownField", "POST", "/orders", "application/json", `{"customer_id":"c-1","bogus":1}`, nil, 400, "bogus"},
		// The order service prices the order itself (domain.Total): a total
		// the client sends is refused, never trusted or ignored.
		{"ClientSetsTheTotal", "POST", "/orders", "application/json", strings.Replace(valid, `"customer_id"`, `"total_amount":1,"customer_id"`, 1), nil, 400, `unknown field "total_amount"`},
		{"UnknownNestedField", "POST", "/orders", "application/json", strings.Replace(valid, `"sku"`, `"colour":"red","sku"`, 1), nil, 400, "colour"},
		{"TrailingData", "POST", "/orders", "application/json", valid + `{}`, nil, 400, "after the JSON value"},
		{"FractionalQuantity", "POST", "/orders", "application/json", strings.Replace(valid, `"quantity":1`, `"quantity":1.5`, 1), nil, 400, "quantity"},
		{"NullBody", "POST", "/orders", "application/json", `null`, nil, 400, "customer_id"},
		{"NoItems", "POST", "/orders", "application/json", `{"customer_id":"c-1","items":[],"shipping_address":{"country":"JP"}}`, nil, 400, "items"},
		{"Overflow", "POST", "/orders", "application/json", `{"customer_id":"c-1","items":[{"sku":"A","quantity":1000000000000000,"unit_price":1000000000000000}],"shipping_address":{"country":"JP"}}`, nil, 400, "total overflows"},
		{"NumberBeyondInt64", "POST", "/orders", "application/json", `{"customer_id":"c-1","items":[{"sku":"A","quantity":99999999999999999999,"unit_price":2}],"shipping_address":{"country":"JP"}}`, nil, 400, "quantity"},
		{"BadCountry", "POST", "/orders", "application/json", strings.Replace(valid, `"JP"`, `"JPN"`, 1), nil, 400, "country"},
		{"BadCurrency", "POST", "/orders", "application/json", strings.Replace(valid, `"JPY"`, `"US$"`, 1), nil, 400, "currency"},
		{"TooLarge", "POST", "/orders", "application/json", `{"customer_id":"` + strings.Repeat("x", 1<<20) + `"}`, nil, 413, "exceeds"},
		{"NotJSON", "POST", "/orders", "text/plain", valid, nil, 415, "Content-Type"},
		{"NoContentType", "POST", "/orders", "", valid, nil, 415, "Content-Type"},
		{"EmptyIdempotencyKey", "POST", "/orders", "application/json", valid, map[string]string{"Idempotency-Key": ""}, 400, "Idempotency-Key"},
		{"LongIdempotencyKey", "POST", "/orders", "application/json", valid, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, 400, "Idempotency-Key"},
		{"NonASCIIIdempotencyKey", "POST", "/orders", "application/json", valid, map[string]string{"Idempotency-Key": "ключ"}, 400, "Idempotency-Key"},
		{"MalformedID", "GET", "/orders/42", "", "", nil, 400, "UUID"},
		{"UnknownID", "GET", "/orders/" + unknown, "", "", nil, 404, "order " + unknown},
		{"WrongMethod", "DELETE", "/orders/" + uuid.NewString(), "", "", nil, 405, "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, h, tt.method, tt.path, tt.contentType, tt.body, tt.header)
			if r.status != tt.want {
				t.Fatalf("status = %d, want %d: %s", r.status, tt.want, r.raw)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type = %q", ct)
			}
			if title := r.body["title"]; title != http.StatusText(tt.want) {
				t.Fatalf("title = %v, want %q", title, http.StatusText(tt.want))
			}
			if d, _ := r.body["detail"].(string); !strings.Contains(d, tt.detail) {
				t.Fatalf("detail = %q, want it to mention %q", d, tt.detail)
			}
		})
	}
}

// TestBadInputsAnswerInPlainWords: what a client is told when an order or
// a query is wrong, exactly — the field as the client wrote it and what it
// must be, never a Go type, and ">=" rather than "\u003e=" — and that
// codes follow one case rule: currency and country in either case are
// accepted and answered upper case, and an order without a currency is
// in JPY.
func TestBadInputsAnswerInPlainWords(t *testing.T) {
	h, _ := newAPI(t)
	valid := orderBody("c-1", 1)
	tests := []struct {
		name, method, path, body string
		want                     int
		detail                   string // the problem's detail, exactly; for a 201, what the order says
	}{
		{"FractionalQuantity", "POST", "/orders", strings.Replace(valid, `"quantity":1`, `"quantity":1.5`, 1), 400,
			"items[0].quantity: must be a whole number"},
		{"QuantityAsString", "POST", "/orders", strings.Replace(valid, `"quantity":1`, `"quantity":"1"`, 1), 400,
			"items[0].quantity: must be a whole number, not a string"},
		{"QuantityBeyondInt64", "POST", "/orders", strings.Replace(valid, `"quantity":1`, `"quantity":99999999999999999999`, 1), 400,
			"items[0].quantity: is too large a number"},
		{"ZeroQuantity", "POST", "/orders", strings.Replace(valid, `"quantity":1`, `"quantity":0`, 1), 400,
			"items[0].quantity must be 1 to 1000000000000000, got 0"},
		{"ItemsNotAnArray", "POST", "/orders", `{"customer_id":"c-1","items":{"sku":"SKU-1"},"shipping_address":{"country":"JP"}}`, 400,
			"items: must be an array, not an object"},
		{"UnknownField", "POST", "/orders", `{"customer_id":"c-1","colour":"red"}`, 400,
			`unknown field "colour"`},
		{"Truncated", "POST", "/orders", `{"customer_id":`, 400,
			"malformed JSON: the body ends in the middle of a value"},
		{"Empty", "POST", "/orders", ``, 400,
			"the body is empty; send a JSON object"},
		{"CurrencyNotLetters", "POST", "/orders", strings.Replace(valid, `"JPY"`, `"US$"`, 1), 400,
			`currency must be 3 letters (ISO 4217, e.g. JPY), got "US$"`},
		{"CountryTooLong", "POST", "/orders", strings.Replace(valid, `"JP"`, `"JPN"`, 1), 400,
			`shipping_address.country must be 2 letters (ISO 3166-1 alpha-2, e.g. JP), got "JPN"`},
		{"LowerCaseCodesAccepted", "POST", "/orders", strings.Replace(strings.Replace(valid, `"JPY"`, `"jpy"`, 1), `"JP"`, `"jp"`, 1), 201,
			"JPY JP"},
		{"NoCurrencyIsJPY", "POST", "/orders", strings.Replace(valid, `"currency":"JPY",`, ``, 1), 201,
			"JPY JP"},
		{"UnknownStatusFilter", "GET", "/orders?status=SHIPPED", "", 400,
			`status must be PENDING, CANCELLING, COMPLETED or CANCELLED, got "SHIPPED"`},
		{"CancellingIsAFilter", "GET", "/orders?status=CANCELLING", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, h, tt.method, tt.path, "application/json", tt.body, nil)
			if r.status != tt.want {
				t.Fatalf("status = %d, want %d: %s", r.status, tt.want, r.raw)
			}
			if strings.Contains(r.raw, `\u00`) {
				t.Errorf("answer escapes characters a client reads as they are: %s", r.raw)
			}
			switch r.status {
			case http.StatusCreated:
				addr, _ := r.body["shipping_address"].(map[string]any)
				if got := fmt.Sprintf("%v %v", r.body["currency"], addr["country"]); got != tt.detail {
					t.Errorf("currency and country = %s, want %s", got, tt.detail)
				}
			case http.StatusOK:
			default:
				if d := r.body["detail"]; d != tt.detail {
					t.Errorf("detail = %q\nwant     %q", d, tt.detail)
				}
			}
		})
	}
}

// TestCancelOrder: 202 with the order CANCELLING while the saga can be
// undone, 202 again for a repeated cancel (and one OrderCancelRequested in
// all), 409 problem once the order is terminal, 404 for no such order.
func TestCancelOrder(t *testing.T) {
	h, db := newAPI(t)
	create := func() string {
		r := do(t, h, "POST", "/orders", "application/json", orderBody(customer(), 1), nil)
		if r.status != http.StatusCreated {
			t.Fatalf("POST /orders = %d %s", r.status, r.raw)
		}
		return r.body["id"].(string)
	}
	requests := func(id string) int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE key = $1 AND headers->>'event_type' = $2`, []byte(id), "OrderCancelRequested"); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("PendingIsAccepted", func(t *testing.T) {
		id := create()
		for i := range 3 {
			r := do(t, h, "POST", "/orders/"+id+"/cancel", "", "", nil)
			if r.status != http.StatusAccepted || r.body["id"] != id || r.body["status"] != "CANCELLING" || r.body["cancel_reason"] != "customer_cancelled" {
				t.Fatalf("cancel #%d = %d %s", i+1, r.status, r.raw)
			}
		}
		if n := requests(id); n != 1 {
			t.Fatalf("%d OrderCancelRequested queued, want 1", n)
		}
		g := do(t, h, "GET", "/orders/"+id, "", "", nil)
		if g.body["status"] != "CANCELLING" || g.body["cancel_reason"] != "customer_cancelled" {
			t.Fatalf("GET after cancel = %s", g.raw)
		}
	})
	for _, end := range []string{"COMPLETED", "CANCELLED"} {
		t.Run(end+"IsAConflict", func(t *testing.T) {
			id := create()
			if _, err := db.Exec(`UPDATE orders SET status = $2 WHERE id = $1`, id, end); err != nil {
				t.Fatal(err)
			}
			r := do(t, h, "POST", "/orders/"+id+"/cancel", "", "", nil)
			if r.status != http.StatusConflict || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("cancel of a %s order = %d %s", end, r.status, r.raw)
			}
			if d, _ := r.body["detail"].(string); !strings.Contains(d, end) {
				t.Fatalf("409 detail = %q, want it to name %s", d, end)
			}
			if n := requests(id); n != 0 {
				t.Fatalf("%d OrderCancelRequested queued for a %s order", n, end)
			}
		})
	}
	t.Run("UnknownIsNotFound", func(t *testing.T) {
		r := do(t, h, "POST", "/orders/"+uuid.NewString()+"/cancel", "", "", nil)
		if r.status != http.StatusNotFound || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("cancel of no order = %d %s", r.status, r.raw)
		}
	})
	t.Run("NotAUUIDIsBadRequest", func(t *testing.T) {
		if r := do(t, h, "POST", "/orders/42/cancel", "", "", nil); r.status != http.StatusBadRequest {
			t.Fatalf("cancel of /orders/42 = %d %s", r.status, r.raw)
		}
	})
	t.Run("GetIsNotAllowed", func(t *testing.T) {
		if r := do(t, h, "GET", "/orders/"+uuid.NewString()+"/cancel", "", "", nil); r.status != http.StatusMethodNotAllowed {
			t.Fatalf("GET cancel = %d %s", r.status, r.raw)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	base := order.DefaultConfig()
	base.DatabaseURL = "postgres://postgres@127.0.0.1:5432/order_db?sslmode=disable"
	base.Kafka = broker.Conn{Brokers: []string{"127.0.0.1:9092"}, Username: "order", Password: "pw"}
	base.Auth = testenv.Keys(t).Auth()
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if base.Deadline != 5*time.Minute {
		t.Fatalf("default ORDER_DEADLINE = %s, want 5m", base.Deadline)
	}
	for name, change := range map[string]func(c *order.Config){
		"ORDER_DEADLINE":       func(c *order.Config) { c.Deadline = 0 },
		"ORDER_DEADLINE_SWEEP": func(c *order.Config) { c.DeadlineSweep = -time.Second },
	} {
		c := base
		change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate with a bad %s = %v, want an error naming it", name, err)
		}
		if _, err := order.Spec(c); err == nil {
			t.Errorf("Spec with a bad %s = nil error", name)
		}
	}
}
