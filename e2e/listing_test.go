package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

type orderPage struct {
	Orders     []order `json:"orders"`
	NextCursor *string `json:"next_cursor"`
}

// listOrders reads every page of GET /orders?query, limit per page, and
// returns the orders in the order listed.
func listOrders(t *testing.T, query url.Values, limit int) (orders []order, pages int) {
	t.Helper()
	query.Set("limit", strconv.Itoa(limit))
	for {
		p := mustGet[orderPage](t, "order", "/orders?"+query.Encode())
		pages++
		orders = append(orders, p.Orders...)
		if p.NextCursor == nil {
			return orders, pages
		}
		if *p.NextCursor == "" || len(p.Orders) != limit {
			t.Fatalf("page %d: %d orders, next_cursor %q", pages, len(p.Orders), *p.NextCursor)
		}
		query.Set("cursor", *p.NextCursor)
		if pages > 20 {
			t.Fatal("more than 20 pages: the cursor does not advance")
		}
	}
}

func ids(orders []order) []string {
	out := make([]string, len(orders))
	for i, o := range orders {
		out[i] = o.ID
	}
	return out
}

// TestListAndExplain runs one customer's sagas to each end — completed,
// declined, out of stock, shipping unavailable — then lists the customer's
// orders across pages, filtered by status, and reads why each failed saga
// failed where it failed: the payment's and the reservation's reason.
func TestListAndExplain(t *testing.T) {
	f := newFixture(t, 20000, 5)
	reqs := []struct {
		name   string
		req    orderRequest
		status string
		reason string
	}{
		{"Completed1", f.order(1, 1000, "JP"), "COMPLETED", ""},
		{"Declined", f.order(1, 900000, "JP"), "CANCELLED", "insufficient_funds"},
		{"Completed2", f.order(1, 1000, "JP"), "COMPLETED", ""},
		{"OutOfStock", f.order(50, 10, "JP"), "CANCELLED", "out_of_stock"},
		{"ShippingUnavailable", f.order(1, 1000, "BR"), "CANCELLED", "shipping_unavailable"},
	}
	created := map[string]string{} // name → order id
	var newestFirst []string
	for _, r := range reqs {
		// One at a time, so each is created after the one before.
		o := createOrder(t, r.req)
		created[r.name] = o.ID
		newestFirst = append([]string{o.ID}, newestFirst...)
		wantOrder(t, o.ID, r.status, r.reason)
	}

	t.Run("EveryPageOfTheCustomer", func(t *testing.T) {
		got, pages := listOrders(t, url.Values{"customer_id": {f.customer}}, 2)
		if !slices.Equal(ids(got), newestFirst) || pages != 3 {
			t.Fatalf("listed %v in %d pages, want %v in 3", ids(got), pages, newestFirst)
		}
		for _, o := range got {
			if o.CustomerID != f.customer {
				t.Fatalf("listed another customer's order: %+v", o)
			}
		}
	})
	t.Run("FilteredByStatus", func(t *testing.T) {
		for status, want := range map[string][]string{
			"CANCELLED": {created["ShippingUnavailable"], created["OutOfStock"], created["Declined"]},
			"COMPLETED": {created["Completed2"], created["Completed1"]},
			"PENDING":   nil,
		} {
			got, _ := listOrders(t, url.Values{"customer_id": {f.customer}, "status": {status}}, 2)
			if !slices.Equal(ids(got), want) {
				t.Fatalf("%s: listed %v, want %v", status, ids(got), want)
			}
		}
	})
	t.Run("BadParameterIs400", func(t *testing.T) {
		status, h, body := do(t, http.MethodGet, services["order"].baseURL+"/orders?status=SHIPPED", "", nil, nil)
		var p struct{ Detail string }
		_ = json.Unmarshal(body, &p)
		if status != http.StatusBadRequest || !problemJSON(h) || len(p.Detail) < 6 || p.Detail[:6] != "status" {
			t.Fatalf("GET /orders?status=SHIPPED = %d %s", status, body)
		}
	})

	type record struct {
		Status     string     `json:"status"`
		Reason     string     `json:"reason"`
		CreatedAt  time.Time  `json:"created_at"`
		UpdatedAt  time.Time  `json:"updated_at"`
		RefundedAt *time.Time `json:"refunded_at"`
		ReleasedAt *time.Time `json:"released_at"`
	}
	read := func(t *testing.T, svc, path string) record {
		t.Helper()
		r := mustGet[record](t, svc, path)
		if r.CreatedAt.IsZero() || r.UpdatedAt.Before(r.CreatedAt) {
			t.Fatalf("GET %s %s: created_at %v, updated_at %v", svc, path, r.CreatedAt, r.UpdatedAt)
		}
		return r
	}
	t.Run("DeclinedPaymentSaysWhy", func(t *testing.T) {
		p := read(t, "payment", "/payments/"+created["Declined"])
		if p.Status != "DECLINED" || p.Reason != "insufficient_funds" || p.RefundedAt != nil {
			t.Fatalf("payment = %+v, want DECLINED for insufficient_funds", p)
		}
	})
	t.Run("OutOfStockReservationSaysWhy", func(t *testing.T) {
		r := read(t, "inventory", "/reservations/"+created["OutOfStock"])
		if r.Status != "REJECTED" || r.Reason != "out_of_stock" || r.ReleasedAt != nil {
			t.Fatalf("reservation = %+v, want REJECTED for out_of_stock", r)
		}
		p := read(t, "payment", "/payments/"+created["OutOfStock"])
		if p.Status != "REFUNDED" || p.Reason != "out_of_stock" || p.RefundedAt == nil || p.RefundedAt.Before(p.CreatedAt) {
			t.Fatalf("payment = %+v, want REFUNDED for out_of_stock, with its time", p)
		}
	})
	t.Run("ReleasedReservationSaysWhy", func(t *testing.T) {
		r := read(t, "inventory", "/reservations/"+created["ShippingUnavailable"])
		if r.Status != "RELEASED" || r.Reason != "shipping_unavailable" || r.ReleasedAt == nil || r.ReleasedAt.Before(r.CreatedAt) {
			t.Fatalf("reservation = %+v, want RELEASED for shipping_unavailable, with its time", r)
		}
		p := read(t, "payment", "/payments/"+created["ShippingUnavailable"])
		if p.Status != "REFUNDED" || p.Reason != "shipping_unavailable" || p.RefundedAt == nil {
			t.Fatalf("payment = %+v, want REFUNDED for shipping_unavailable", p)
		}
	})
	t.Run("CompletedHasNoReason", func(t *testing.T) {
		if p := read(t, "payment", "/payments/"+created["Completed1"]); p.Status != "COMPLETED" || p.Reason != "" || p.RefundedAt != nil {
			t.Fatalf("payment = %+v", p)
		}
		if r := read(t, "inventory", "/reservations/"+created["Completed1"]); r.Status != "RESERVED" || r.Reason != "" || r.ReleasedAt != nil {
			t.Fatalf("reservation = %+v", r)
		}
	})
}

// TestIdempotencyKeyDerivesOrderID: with an Idempotency-Key, the client
// knows its order's id before any answer — the UUIDv5 the README gives —
// so after a lost response it can look the order up, and a replay answers
// the same order under that id.
func TestIdempotencyKeyDerivesOrderID(t *testing.T) {
	f := newFixture(t, 10000, 10)
	key := uuid.NewString()
	namespace := uuid.MustParse("5580bfa5-f3b2-5223-a630-ce8b08084e45")
	want := uuid.NewSHA1(namespace, []byte(f.customer+"/"+key)).String()

	if s := get(t, "order", "/orders/"+want, nil); s != http.StatusNotFound {
		t.Fatalf("GET /orders/%s before the create = %d, want 404", want, s)
	}
	req := f.order(1, 1000, "JP")
	s1, h1, o1 := postOrder(t, req, key)
	assertEqual(t, "first status", s1, http.StatusCreated)
	assertEqual(t, "order id", o1.ID, want)
	assertEqual(t, "Location", h1.Get("Location"), "/orders/"+want)
	ordersCreated.Add(1)
	// The client lost that answer: it reads the order by the id it computed,
	// and a replay answers the same order.
	wantOrder(t, want, "COMPLETED", "")
	s2, h2, o2 := postOrder(t, req, key)
	assertEqual(t, "replay status", s2, http.StatusCreated)
	assertEqual(t, "replayed id", o2.ID, want)
	assertEqual(t, "Idempotent-Replayed", h2.Get("Idempotent-Replayed"), "true")
	assertEqual(t, "charged once", balance(t, f.customer), 9000)

	// The same key from another customer is that customer's order.
	g := newFixture(t, 10000, 10)
	s3, h3, o3 := postOrder(t, g.order(1, 1000, "JP"), key)
	assertEqual(t, "other customer's status", s3, http.StatusCreated)
	assertEqual(t, "other customer's id", o3.ID, uuid.NewSHA1(namespace, []byte(g.customer+"/"+key)).String())
	assertEqual(t, "other customer's Idempotent-Replayed", h3.Get("Idempotent-Replayed"), "")
	ordersCreated.Add(1)
	wantOrder(t, o3.ID, "COMPLETED", "")
}
