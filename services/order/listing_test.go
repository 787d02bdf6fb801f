package order_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/apitest"
)

// spec is the order service's OpenAPI document, which the answers of a
// real store are checked against.
func spec(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("internal/httpapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// list sends GET /orders?query, checks the answer against the OpenAPI
// document, and returns it.
func list(t *testing.T, h http.Handler, query string, want int) response {
	t.Helper()
	apitest.CheckResponse(t, h, spec(t), httptest.NewRequest("GET", "/orders?"+query, nil), want)
	return do(t, h, "GET", "/orders?"+query, "", "", nil)
}

func TestListOrders(t *testing.T) {
	h, _ := newAPI(t)
	a, b := customer(), customer()
	var aIDs []string
	for range 5 {
		r := do(t, h, "POST", "/orders", "application/json", orderBody(a, 1), nil)
		if r.status != http.StatusCreated {
			t.Fatalf("POST = %d %s", r.status, r.raw)
		}
		aIDs = append(aIDs, r.body["id"].(string))
	}
	if r := do(t, h, "POST", "/orders", "application/json", orderBody(b, 1), nil); r.status != http.StatusCreated {
		t.Fatalf("POST = %d %s", r.status, r.raw)
	}

	t.Run("PagesOfACustomerNewestFirst", func(t *testing.T) {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			q := url.Values{"customer_id": {a}, "limit": {"2"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := list(t, h, q.Encode(), http.StatusOK)
			orders, _ := r.body["orders"].([]any)
			for _, o := range orders {
				o := o.(map[string]any)
				if o["customer_id"] != a || o["status"] != "PENDING" {
					t.Fatalf("listed %v", o)
				}
				got = append(got, o["id"].(string))
			}
			next, ok := r.body["next_cursor"].(string)
			if !ok {
				if pages != 2 || len(orders) != 1 {
					t.Fatalf("last page is page %d with %d orders, want page 2 with 1: %s", pages, len(orders), r.raw)
				}
				break
			}
			if len(orders) != 2 {
				t.Fatalf("page %d has %d orders and a next_cursor: %s", pages, len(orders), r.raw)
			}
			cursor = next
		}
		if len(got) != 5 {
			t.Fatalf("listed %d orders, want 5", len(got))
		}
		seen := map[string]bool{}
		for i, id := range got {
			if seen[id] {
				t.Fatalf("order %s listed twice", id)
			}
			seen[id] = true
			// Created one after the other, so listed in reverse.
			if id != aIDs[len(aIDs)-1-i] {
				t.Fatalf("listed %v, want the reverse of %v", got, aIDs)
			}
		}
	})
	t.Run("EveryOrderByDefault", func(t *testing.T) {
		r := list(t, h, "", http.StatusOK)
		if orders, _ := r.body["orders"].([]any); len(orders) != 6 {
			t.Fatalf("listed %d orders, want all 6: %s", len(orders), r.raw)
		}
		if _, ok := r.body["next_cursor"]; ok {
			t.Fatalf("the only page has a next_cursor: %s", r.raw)
		}
	})
	t.Run("NoMatchIsAnEmptyList", func(t *testing.T) {
		r := list(t, h, "customer_id="+b+"&status=CANCELLED", http.StatusOK)
		if !strings.Contains(r.raw, `"orders":[]`) {
			t.Fatalf("body = %s, want an empty orders array", r.raw)
		}
	})

	for _, tt := range []struct{ name, query, param string }{
		{"UnknownStatus", "status=SHIPPED", "status"},
		{"LimitZero", "limit=0", "limit"},
		{"LimitAboveMax", "limit=101", "limit"},
		{"LimitNotANumber", "limit=all", "limit"},
		{"BadCursor", "cursor=bm90LWEtY3Vyc29y", "cursor"},
		{"InvalidCustomer", "customer_id=" + url.QueryEscape("c 1"), "customer_id"},
		{"UnknownParameter", "page=2", "page"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := list(t, h, tt.query, http.StatusBadRequest)
			if d, _ := r.body["detail"].(string); !strings.HasPrefix(d, tt.param) && !strings.Contains(d, `"`+tt.param+`"`) {
				t.Fatalf("detail = %q, want it to name %s", d, tt.param)
			}
		})
	}
}

func TestCreateIdempotencyKeyDerivesTheID(t *testing.T) {
	h, _ := newAPI(t)
	key := "test-" + uuid.NewString()
	header := map[string]string{"Idempotency-Key": key}
	ns := uuid.MustParse("5580bfa5-f3b2-5223-a630-ce8b08084e45") // as documented
	ids := map[string]bool{}
	for _, cust := range []string{customer(), customer()} {
		want := uuid.NewSHA1(ns, []byte(cust+"/"+key)).String()
		for _, replay := range []bool{false, true} {
			r := do(t, h, "POST", "/orders", "application/json", orderBody(cust, 1), header)
			if r.status != http.StatusCreated || r.body["id"] != want || (r.header.Get("Idempotent-Replayed") == "true") != replay {
				t.Fatalf("POST by %s (replay %v) = %d %v %s; want id %s", cust, replay, r.status, r.header, r.raw, want)
			}
		}
		ids[want] = true
	}
	if len(ids) != 2 {
		t.Fatal("two customers' orders under one key share an id")
	}
	// Without a key the id is random: a version 4 UUID.
	r := do(t, h, "POST", "/orders", "application/json", orderBody(customer(), 1), nil)
	if id, err := uuid.Parse(r.body["id"].(string)); err != nil || id.Version() != 4 {
		t.Fatalf("unkeyed order id = %v (%v), want a random UUID", r.body["id"], err)
	}
}
