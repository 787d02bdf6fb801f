package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/httpapi"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// TestWrites sends an operator's writes, in order, to the router on a real
// store, each answer checked against the OpenAPI document (status, media
// type, body schema), and checks the account in the database and its ETag
// after each: only a PUT naming the current version replaces the balance,
// the currency never changes, a deposit adds, and a refund between an
// operator's read and write is never erased.
func TestWrites(t *testing.T) {
	db := testenv.DB(t, payment.Schema)
	st := store.New(db)
	h := httpapi.Routes(testenv.Logger(t), db, nil)
	specYAML, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, ghost := "c-"+uuid.NewString()[:13], "ghost-"+uuid.NewString()[:13]
	acct := func(balance, version int64) domain.Account {
		return domain.Account{CustomerID: c, Balance: balance, Currency: "JPY", Version: version}
	}

	steps := []struct {
		name         string
		method, path string
		ifMatch      string
		ifNoneMatch  string
		body         string
		before       func(t *testing.T) // a saga's change before the request
		want         int
		wantAccount  domain.Account // afterwards; zero: the account does not exist
	}{
		{name: "DepositUnknownAccount", method: "POST", path: "/accounts/" + ghost + "/deposits", body: `{"amount":1}`, want: 404},
		{name: "PutIfMatchUnknownAccount", method: "PUT", path: "/accounts/" + ghost, ifMatch: `"1"`, body: `{"balance":1}`, want: 412},
		{name: "PutOpens", method: "PUT", path: "/accounts/" + c, body: `{"balance":1000}`, want: 200, wantAccount: acct(1000, 1)},
		{name: "PutRetriedOpen", method: "PUT", path: "/accounts/" + c, body: `{"balance":1000,"currency":"JPY"}`, want: 200, wantAccount: acct(1000, 1)},
		{name: "PutCreateOnlyExisting", method: "PUT", path: "/accounts/" + c, ifNoneMatch: "*", body: `{"balance":1000}`, want: 412, wantAccount: acct(1000, 1)},
		{name: "PutWithoutIfMatch", method: "PUT", path: "/accounts/" + c, body: `{"balance":9000}`, want: 428, wantAccount: acct(1000, 1)},
		{name: "PutAfterRefundWithVersionRead", method: "PUT", path: "/accounts/" + c, ifMatch: `"1"`, body: `{"balance":9000}`,
			before: func(t *testing.T) { addBalance(t, db, c, 250) }, want: 412, wantAccount: acct(1250, 2)},
		{name: "PutOtherCurrency", method: "PUT", path: "/accounts/" + c, ifMatch: `"2"`, body: `{"balance":9000,"currency":"USD"}`, want: 409, wantAccount: acct(1250, 2)},
		{name: "PutCurrentVersion", method: "PUT", path: "/accounts/" + c, ifMatch: `"2"`, body: `{"balance":9000}`, want: 200, wantAccount: acct(9000, 3)},
		{name: "DepositAfterDebit", method: "POST", path: "/accounts/" + c + "/deposits", body: `{"amount":500}`,
			before: func(t *testing.T) { addBalance(t, db, c, -1000) }, want: 200, wantAccount: acct(8500, 5)},
		{name: "DepositPastCap", method: "POST", path: "/accounts/" + c + "/deposits", body: fmt.Sprintf(`{"amount":%d}`, int64(events.MaxAmount)), want: 409, wantAccount: acct(8500, 5)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			apitest.CheckWrite(t, h, specYAML, s.method, s.path, s.ifMatch, s.ifNoneMatch, s.body, s.want)

			id := strings.TrimSuffix(strings.TrimPrefix(s.path, "/accounts/"), "/deposits")
			apitest.CheckStored(t, h, st.Account, id, "/accounts/"+id, s.wantAccount, s.wantAccount.Version)
		})
	}
}

// addBalance debits or refunds as a saga's reaction does.
func addBalance(t *testing.T, db *sqlx.DB, customerID string, delta int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, customerID, delta) })
}

// TestReadPayment serves GET /payments/{order_id} from a real store, each
// answer checked against the OpenAPI document: every kind of payment with
// its reason and times.
func TestReadPayment(t *testing.T) {
	db := testenv.DB(t, payment.Schema)
	h := httpapi.Routes(testenv.Logger(t), db, nil)
	specYAML, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		p          domain.Payment
		detail     string
		refund     string // a reason to refund it with afterwards
		wantReason string
	}{
		{"Completed", domain.Payment{CustomerID: "c-1", Amount: 5000, Currency: "JPY", Status: domain.StatusCompleted}, "", "", ""},
		{"Declined", domain.Payment{CustomerID: "c-1", Amount: 5000, Currency: "JPY", Status: domain.StatusDeclined}, domain.DeclineInsufficientFunds, "", "insufficient_funds"},
		{"Refunded", domain.Payment{CustomerID: "c-1", Amount: 5000, Currency: "JPY", Status: domain.StatusCompleted}, "", events.ReasonOutOfStock, "out_of_stock"},
		{"Tombstone", domain.Payment{Status: domain.StatusRefunded}, "refund arrived before charge: shipping_unavailable", "", "shipping_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.OrderID = uuid.NewString()
			testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
				if err := store.InsertPayment(ctx, tx, tt.p, tt.detail); err != nil {
					return err
				}
				if tt.refund == "" {
					return nil
				}
				return store.SetPaymentStatus(ctx, tx, tt.p.OrderID, domain.StatusRefunded, tt.refund)
			})
			path := "/payments/" + tt.p.OrderID
			apitest.CheckResponse(t, h, specYAML, httptest.NewRequest("GET", path, nil), 200)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			_, refunded := got["refunded_at"]
			if got["reason"] != tt.wantReason || got["created_at"] == nil || got["updated_at"] == nil || refunded != (got["status"] == "REFUNDED") {
				t.Fatalf("GET %s = %s; want reason %q, the times, and refunded_at only if refunded", path, rec.Body, tt.wantReason)
			}
		})
	}
}
