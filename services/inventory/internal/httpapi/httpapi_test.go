package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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
	srv := httptest.NewServer(httpapi.Routes(testenv.Logger(t), db, nil))
	t.Cleanup(srv.Close)

	sku, orderID, rejectedID := "sku-"+uuid.NewString()[:13], uuid.NewString(), uuid.NewString()
	if _, err := st.PutStock(ctx, sku, 7, nil, true); err != nil {
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
			if specYAML, err := os.ReadFile("openapi.yaml"); err != nil {
				t.Fatal(err)
			} else {
				apitest.CheckResponse(t, httpapi.Routes(testenv.Logger(t), db, nil), specYAML, httptest.NewRequest("GET", tt.path, nil), tt.wantStatus)
			}
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
	h := httpapi.Routes(testenv.Logger(t), db, nil)
	specYAML := mustRead(t, "openapi.yaml")
	sku, ghost := "sku-"+uuid.NewString()[:13], "ghost-"+uuid.NewString()[:13]
	const maxAmount = int64(events.MaxAmount)

	steps := []struct {
		name         string
		method, path string
		ifMatch      string
		ifNoneMatch  string
		body         string
		before       func(t *testing.T) // a saga's change before the request
		want         int
		wantStock    domain.Stock // afterwards; zero: the SKU does not exist
	}{
		{name: "RestockUnknownSKU", method: "POST", path: "/stock/" + ghost + "/restock", body: `{"quantity":1}`, want: 404},
		{name: "PutIfMatchUnknownSKU", method: "PUT", path: "/stock/" + ghost, ifMatch: `"1"`, body: `{"available":1}`, want: 412},
		{name: "PutCreates", method: "PUT", path: "/stock/" + sku, body: `{"available":5}`, want: 200,
			wantStock: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{name: "PutRetriedCreate", method: "PUT", path: "/stock/" + sku, body: `{"available":5}`, want: 200,
			wantStock: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{name: "PutCreateOnlyExisting", method: "PUT", path: "/stock/" + sku, ifNoneMatch: "*", body: `{"available":5}`, want: 412,
			wantStock: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{name: "PutWithoutIfMatch", method: "PUT", path: "/stock/" + sku, body: `{"available":9}`, want: 428,
			wantStock: domain.Stock{SKU: sku, Available: 5, Version: 1}},
		{name: "PutAfterReserveWithVersionRead", method: "PUT", path: "/stock/" + sku, ifMatch: `"1"`, body: `{"available":9}`,
			before: func(t *testing.T) { move(t, db, store.Reserve, sku, 3) }, want: 412,
			wantStock: domain.Stock{SKU: sku, Available: 2, Reserved: 3, Version: 2}},
		{name: "PutCurrentVersion", method: "PUT", path: "/stock/" + sku, ifMatch: `"2"`, body: `{"available":9}`, want: 200,
			wantStock: domain.Stock{SKU: sku, Available: 9, Reserved: 3, Version: 3}},
		{name: "RestockDuringRelease", method: "POST", path: "/stock/" + sku + "/restock", body: `{"quantity":4}`,
			before: func(t *testing.T) { move(t, db, store.Release, sku, 3) }, want: 200,
			wantStock: domain.Stock{SKU: sku, Available: 16, Version: 5}},
		{name: "RestockPastCap", method: "POST", path: "/stock/" + sku + "/restock", body: fmt.Sprintf(`{"quantity":%d}`, maxAmount), want: 409,
			wantStock: domain.Stock{SKU: sku, Available: 16, Version: 5}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			apitest.CheckWrite(t, h, specYAML, s.method, s.path, s.ifMatch, s.ifNoneMatch, s.body, s.want)

			id := strings.TrimSuffix(strings.TrimPrefix(s.path, "/stock/"), "/restock")
			apitest.CheckStored(t, h, st.Stock, id, "/stock/"+id, s.wantStock, s.wantStock.Version)
		})
	}
}

// move reserves or releases n units of sku as a saga's reaction does.
func move(t *testing.T, db *sqlx.DB, fn func(context.Context, sqlx.ExtContext, map[string]int64) error, sku string, n int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return fn(ctx, tx, map[string]int64{sku: n}) })
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
