package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/httpapi"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

func TestGetShipment(t *testing.T) {
	log := testenv.Logger(t)
	db := testenv.DB(t, shipping.Schema)
	srv := httptest.NewServer(testenv.As(testenv.Operator, httpapi.Routes(log, db, nil)))
	t.Cleanup(srv.Close)

	failed := domain.Shipment{OrderID: uuid.NewString(), Status: domain.StatusFailed, Country: "BR", Reason: "shipping_unavailable"}
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.InsertShipment(ctx, tx, failed) })

	tests := []struct {
		name       string
		orderID    string
		wantStatus int
		wantBody   map[string]string // nil: a problem body
	}{
		{"RecordedShipmentIsShown", failed.OrderID, http.StatusOK, map[string]string{
			"order_id": failed.OrderID, "status": "FAILED", "country": "BR", "reason": "shipping_unavailable",
		}},
		{"UnknownOrderIsNotFound", uuid.NewString(), http.StatusNotFound, nil},
		{"LongestIDIsAccepted", strings.Repeat("x", 64), http.StatusNotFound, nil},
		{"TooLongIDIsBadRequest", strings.Repeat("x", 65), http.StatusBadRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := http.Get(srv.URL + "/shipments/" + tt.orderID)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if tt.wantBody == nil {
				if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Fatalf("Content-Type = %q, want application/problem+json", ct)
				}
				return
			}
			var got map[string]string
			if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
				t.Fatalf("decode body: %v", err)
			}
			if !maps.Equal(got, tt.wantBody) {
				t.Fatalf("body = %v, want %v", got, tt.wantBody)
			}
		})
	}
}
