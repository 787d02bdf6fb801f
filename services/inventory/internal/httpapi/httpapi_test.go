package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/pg"
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

	sku, orderID := "sku-"+uuid.NewString()[:13], uuid.NewString()
	if _, err := st.PutStock(ctx, sku, 7); err != nil {
		t.Fatal(err)
	}
	items := []events.Item{{SKU: sku, Quantity: 2, UnitPrice: 150}}
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		return store.InsertReservation(ctx, tx, domain.Reservation{OrderID: orderID, Status: domain.StatusReserved, Items: items}, "")
	}); err != nil {
		t.Fatal(err)
	}
	ghostSKU, ghostOrder := "ghost-"+uuid.NewString()[:13], uuid.NewString()

	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantBody   any // for a 404: the problem's detail
	}{
		{"StockIsShown", "/stock/" + sku, http.StatusOK, domain.Stock{SKU: sku, Available: 7}},
		{"ReservationIsShown", "/reservations/" + orderID, http.StatusOK, domain.Reservation{OrderID: orderID, Status: domain.StatusReserved, Items: items}},
		{"UnknownStockIsNotFound", "/stock/" + ghostSKU, http.StatusNotFound, "stock " + ghostSKU},
		{"UnknownReservationIsNotFound", "/reservations/" + ghostOrder, http.StatusNotFound, "reservation for order " + ghostOrder},
		{"LongestIDIsAccepted", "/reservations/" + strings.Repeat("x", 64), http.StatusNotFound, "reservation for order " + strings.Repeat("x", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
