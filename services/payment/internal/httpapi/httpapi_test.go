package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
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
	h := testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil))
	c, ghost := "c-"+uuid.NewString()[:13], "ghost-"+uuid.NewString()[:13]
	acct := func(balance, version int64) domain.Account {
		return domain.Account{CustomerID: c, Balance: balance, Currency: "JPY", Version: version}
	}

	apitest.CheckWrites(t, h, "/accounts/", st.Account, []apitest.Write[domain.Account]{
		{Name: "DepositUnknownAccount", Method: "POST", Path: "/accounts/" + ghost + "/deposits", Body: `{"amount":1}`, Want: 404},
		{Name: "PutIfMatchUnknownAccount", Method: "PUT", Path: "/accounts/" + ghost, IfMatch: `"1"`, Body: `{"balance":1}`, Want: 412},
		{Name: "PutOpens", Method: "PUT", Path: "/accounts/" + c, Body: `{"balance":1000}`, Want: 200, Stored: acct(1000, 1)},
		{Name: "PutRetriedOpen", Method: "PUT", Path: "/accounts/" + c, Body: `{"balance":1000,"currency":"JPY"}`, Want: 200, Stored: acct(1000, 1)},
		{Name: "PutCreateOnlyExisting", Method: "PUT", Path: "/accounts/" + c, IfNoneMatch: "*", Body: `{"balance":1000}`, Want: 412, Stored: acct(1000, 1)},
		{Name: "PutWithoutIfMatch", Method: "PUT", Path: "/accounts/" + c, Body: `{"balance":9000}`, Want: 428, Stored: acct(1000, 1)},
		{Name: "PutAfterRefundWithVersionRead", Method: "PUT", Path: "/accounts/" + c, IfMatch: `"1"`, Body: `{"balance":9000}`,
			Before: func(t *testing.T) { addBalance(t, db, c, 250) }, Want: 412, Stored: acct(1250, 2)},
		{Name: "PutOtherCurrency", Method: "PUT", Path: "/accounts/" + c, IfMatch: `"2"`, Body: `{"balance":9000,"currency":"USD"}`, Want: 409, Stored: acct(1250, 2)},
		{Name: "PutCurrentVersion", Method: "PUT", Path: "/accounts/" + c, IfMatch: `"2"`, Body: `{"balance":9000}`, Want: 200, Stored: acct(9000, 3)},
		{Name: "DepositAfterDebit", Method: "POST", Path: "/accounts/" + c + "/deposits", Body: `{"amount":500}`,
			Before: func(t *testing.T) { addBalance(t, db, c, -1000) }, Want: 200, Stored: acct(8500, 5)},
		{Name: "DepositPastCap", Method: "POST", Path: "/accounts/" + c + "/deposits", Body: fmt.Sprintf(`{"amount":%d}`, int64(events.MaxAmount)), Want: 409, Stored: acct(8500, 5)},
		// A client retrying after a timeout deposits once.
		{Name: "DepositWithKey", Method: "POST", Path: "/accounts/" + c + "/deposits", IdempotencyKey: "d-1", Body: `{"amount":100}`, Want: 200, Stored: acct(8600, 6)},
		{Name: "DepositRetried", Method: "POST", Path: "/accounts/" + c + "/deposits", IdempotencyKey: "d-1", Body: `{"amount":100}`, Want: 200, Stored: acct(8600, 6)},
		{Name: "DepositKeyReusedForAnotherAmount", Method: "POST", Path: "/accounts/" + c + "/deposits", IdempotencyKey: "d-1", Body: `{"amount":200}`, Want: 422, Stored: acct(8600, 6)},
		{Name: "DepositBadKey", Method: "POST", Path: "/accounts/" + c + "/deposits", IdempotencyKey: "ключ", Body: `{"amount":100}`, Want: 400, Stored: acct(8600, 6)},
	})
}

// TestBadInputsAnswerInPlainWords: what an operator is told when a write
// is wrong, exactly: ">=" as written, not "\u003e="; a field Go cannot
// decode named with what it must be; and a currency in either case taken
// as the order service takes it, upper case.
func TestBadInputsAnswerInPlainWords(t *testing.T) {
	db := testenv.DB(t, payment.Schema)
	h := testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil))
	c := "c-" + uuid.NewString()[:13]
	tests := []struct {
		name, method, path, body string
		want                     int
		detail                   string // the problem's detail; for a 200, the account's currency
	}{
		{"NegativeBalance", "PUT", "/accounts/" + c, `{"balance":-1}`, 400, "balance must be >= 0"},
		{"FractionalBalance", "PUT", "/accounts/" + c, `{"balance":1.5}`, 400, "balance: must be a whole number"},
		{"CurrencyNotLetters", "PUT", "/accounts/" + c, `{"balance":1,"currency":"US$"}`, 400, `currency must be 3 letters (ISO 4217, e.g. JPY), got "US$"`},
		{"LowerCaseCurrencyAccepted", "PUT", "/accounts/" + c, `{"balance":1,"currency":"usd"}`, 200, "USD"},
		{"DepositAsString", "POST", "/accounts/" + c + "/deposits", `{"amount":"5"}`, 400, "amount: must be a whole number, not a string"},
		{"ZeroDeposit", "POST", "/accounts/" + c + "/deposits", `{"amount":0}`, 400, "amount must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apitest.Request{Method: tt.method, Path: tt.path, Body: tt.body}.HTTP()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var body struct{ Detail, Currency string }
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			got := body.Detail
			if rec.Code == 200 {
				got = body.Currency
			}
			if rec.Code != tt.want || got != tt.detail || strings.Contains(rec.Body.String(), `\u00`) {
				t.Errorf("%s %s %s = %d %s; want %d with %q", tt.method, tt.path, tt.body, rec.Code, rec.Body, tt.want, tt.detail)
			}
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
	h := testenv.As(testenv.Operator, httpapi.Routes(testenv.Logger(t), db, nil))
	specYAML := apitest.ReadSpec(t)
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
