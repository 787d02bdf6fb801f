package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/httpapi"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// TestReads serves the GETs from a real store: recorded rows as JSON, and
// the store's fault.NotFound as a 404 problem naming what is missing (the
// status comes from web.Respond, the detail from the store).
func TestReads(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, inventory.Schema)
	st := store.New(db)
	srv := httptest.NewServer(testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil)))
	t.Cleanup(srv.Close)

	sku, orderID, rejectedID := "sku-"+uuid.NewString()[:13], uuid.NewString(), uuid.NewString()
	if _, err := st.PutStock(ctx, sku, 7, store.Precondition{CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	items := []events.Item{{SKU: sku, Quantity: 2, UnitPrice: 150}}
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
		if err := store.InsertReservation(ctx, tx, domain.Reservation{OrderID: rejectedID, Status: domain.StatusRejected, Items: items}, "out of stock: "+sku+" requested 2 available 1"); err != nil {
			return err
		}
		return store.InsertReservation(ctx, tx, domain.Reservation{OrderID: orderID, Status: domain.StatusReserved, Items: items}, "")
	})
	ghostSKU, ghostOrder := "ghost-"+uuid.NewString()[:13], uuid.NewString()

	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantBody   any // for a 404: the problem's detail
	}{
		{"StockIsShown", "/stock/" + sku, http.StatusOK, domain.Stock{SKU: sku, Available: 7}},
		{"ReservationIsShown", "/reservations/" + orderID, http.StatusOK, domain.Reservation{OrderID: orderID, Status: domain.StatusReserved, Items: items}},
		{"RejectedReservationSaysWhy", "/reservations/" + rejectedID, http.StatusOK, struct {
			Status, Reason, Detail string
		}{"REJECTED", "out_of_stock", "out of stock: " + sku + " requested 2 available 1"}},
		{"UnknownStockIsNotFound", "/stock/" + ghostSKU, http.StatusNotFound, "stock " + ghostSKU},
		{"UnknownReservationIsNotFound", "/reservations/" + ghostOrder, http.StatusNotFound, "reservation for order " + ghostOrder},
		{"LongestIDIsAccepted", "/reservations/" + strings.Repeat("x", 64), http.StatusNotFound, "reservation for order " + strings.Repeat("x", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apitest.CheckResponse(t, testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil)), apitest.ReadSpec(t), httptest.NewRequest("GET", tt.path, nil), tt.wantStatus)
			res, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusNotFound {
				if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Fatalf("Content-Type = %q, want application/problem+json", ct)
				}
				var p web.Problem
				if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
					t.Fatalf("decode problem: %v", err)
				}
				if p.Status != http.StatusNotFound || p.Detail != tt.wantBody || p.Instance != tt.path {
					t.Fatalf("problem = %+v, want 404 %q at %s", p, tt.wantBody, tt.path)
				}
				return
			}
			got := reflect.New(reflect.TypeOf(tt.wantBody))
			if err := json.NewDecoder(res.Body).Decode(got.Interface()); err != nil {
				t.Fatalf("decode body: %v", err)
			}
			if !reflect.DeepEqual(got.Elem().Interface(), tt.wantBody) {
				t.Fatalf("body = %+v, want %+v", got.Elem().Interface(), tt.wantBody)
			}
		})
	}
}

// TestWrites sends an operator's writes, in order, to the router on a real
// store, each answer checked against the OpenAPI document (status, media
// type, body schema), and checks the SKU in the database and its ETag
// after each: only a PUT naming the current version replaces the units, a
// restock adds to them, and a release between an operator's read and write
// is never erased.
func TestWrites(t *testing.T) {
	db := testenv.DB(t, inventory.Schema)
	st := store.New(db)
	h := testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil))
	sku, ghost := "sku-"+uuid.NewString()[:13], "ghost-"+uuid.NewString()[:13]
	const maxAmount = int64(events.MaxAmount)

	apitest.CheckWrites(t, h, "/stock/", st.Stock, []apitest.Write[domain.Stock]{
		{Name: "RestockUnknownSKU", Method: "POST", Path: "/stock/" + ghost + "/restock", Body: `{"quantity":1}`, Want: 404},
		{Name: "PutIfMatchUnknownSKU", Method: "PUT", Path: "/stock/" + ghost, IfMatch: `"1"`, Body: `{"available":1}`, Want: 412},
		{Name: "PutCreates", Method: "PUT", Path: "/stock/" + sku, Body: `{"available":5}`, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{Name: "PutRetriedCreate", Method: "PUT", Path: "/stock/" + sku, Body: `{"available":5}`, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{Name: "PutCreateOnlyExisting", Method: "PUT", Path: "/stock/" + sku, IfNoneMatch: "*", Body: `{"available":5}`, Want: 412,
			Stored: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{Name: "PutWithoutIfMatch", Method: "PUT", Path: "/stock/" + sku, Body: `{"available":9}`, Want: 428,
			Stored: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{Name: "PutAfterReserveWithVersionRead", Method: "PUT", Path: "/stock/" + sku, IfMatch: `"1"`, Body: `{"available":9}`,
			Before: func(t *testing.T) { move(t, db, store.Reserve, sku, 3) }, Want: 412,
			Stored: domain.Stock{SKU: sku, Available: 2, Reserved: 3, Version: 2}},
		{Name: "PutCurrentVersion", Method: "PUT", Path: "/stock/" + sku, IfMatch: `"2"`, Body: `{"available":9}`, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 9, Reserved: 3, Version: 3}},
		{Name: "RestockDuringRelease", Method: "POST", Path: "/stock/" + sku + "/restock", Body: `{"quantity":4}`,
			Before: func(t *testing.T) { move(t, db, store.Release, sku, 3) }, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 16, Version: 5}},
		{Name: "RestockPastCap", Method: "POST", Path: "/stock/" + sku + "/restock", Body: fmt.Sprintf(`{"quantity":%d}`, maxAmount), Want: 409,
			Stored: domain.Stock{SKU: sku, Available: 16, Version: 5}},
		// A client retrying after a timeout restocks once.
		{Name: "RestockWithKey", Method: "POST", Path: "/stock/" + sku + "/restock", IdempotencyKey: "r-1", Body: `{"quantity":2}`, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 18, Version: 6}},
		{Name: "RestockRetried", Method: "POST", Path: "/stock/" + sku + "/restock", IdempotencyKey: "r-1", Body: `{"quantity":2}`, Want: 200,
			Stored: domain.Stock{SKU: sku, Available: 18, Version: 6}},
		{Name: "RestockKeyReusedForAnotherQuantity", Method: "POST", Path: "/stock/" + sku + "/restock", IdempotencyKey: "r-1", Body: `{"quantity":3}`, Want: 422,
			Stored: domain.Stock{SKU: sku, Available: 18, Version: 6}},
	})
}

// move reserves or releases n units of sku as a saga's reaction does.
func move(t *testing.T, db *sqlx.DB, fn func(context.Context, sqlx.ExtContext, map[string]int64) error, sku string, n int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return fn(ctx, tx, map[string]int64{sku: n}) })
}
