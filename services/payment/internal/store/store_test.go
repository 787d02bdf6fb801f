package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// addBalance adds delta to the account's balance in a transaction of its
// own, as a saga's charge (negative) or refund does, failing the test on
// error.
func addBalance(t *testing.T, db *sqlx.DB, customerID string, delta int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, customerID, delta) })
}

// open opens an account of balance JPY, failing the test on error.
func open(t *testing.T, st *store.Store, customerID string, balance int64) {
	t.Helper()
	if _, err := st.PutAccount(context.Background(), customerID, balance, "JPY", store.Precondition{CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
}

func mustBalance(t *testing.T, st *store.Store, customerID string, want int64) {
	t.Helper()
	got, err := st.Account(context.Background(), customerID)
	if err != nil {
		t.Fatalf("account %s: %v", customerID, err)
	}
	if got.CustomerID != customerID || got.Balance != want || got.Currency != "JPY" {
		t.Fatalf("account = %+v, want %s with %d JPY", got, customerID, want)
	}
}

// TestPutAccount runs PUTs, in order, against one account that a saga
// debited since it was opened: only a PUT naming the current version
// replaces the balance, and the currency never changes.
func TestPutAccount(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	c, ghost, usd := testenv.ID("c"), testenv.ID("ghost"), testenv.ID("usd")
	if _, err := st.PutAccount(ctx, c, 1000, "", store.Precondition{}); err != nil { // version 1, JPY by default
		t.Fatal(err)
	}
	addBalance(t, db, c, -300) // version 2: 700
	updatedAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := db.Get(&at, `SELECT updated_at FROM accounts WHERE customer_id = $1`, c); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := updatedAt()
	none, createOnly := store.Precondition{}, store.Precondition{CreateOnly: true}
	at := func(n int64) store.Precondition { return store.Precondition{IfVersion: &n} }
	acct := func(id string, balance int64, currency string, version int64) domain.Account {
		return domain.Account{CustomerID: id, Balance: balance, Currency: currency, Version: version}
	}

	tests := []struct {
		name     string
		id       string
		balance  int64
		currency string
		pre      store.Precondition
		wantErr  error
		want     domain.Account // the row afterwards; zero: none
	}{
		{"WithoutVersionIsRefused", c, 5000, "", none, fault.PreconditionRequired, acct(c, 700, "JPY", 2)},
		{"WithoutVersionSameBalanceIsRetriedCreate", c, 700, "JPY", none, nil, acct(c, 700, "JPY", 2)},
		{"CreateOnlyOnExistingIsRefused", c, 700, "", createOnly, fault.PreconditionFailed, acct(c, 700, "JPY", 2)},
		{"StaleVersionIsRefused", c, 5000, "", at(1), fault.PreconditionFailed, acct(c, 700, "JPY", 2)},
		{"OtherCurrencyIsRefused", c, 5000, "USD", at(2), fault.Conflict, acct(c, 700, "JPY", 2)},
		{"OtherCurrencyWithoutVersionIsRefused", c, 700, "USD", none, fault.Conflict, acct(c, 700, "JPY", 2)},
		{"CurrentVersionReplacesBalance", c, 5000, "", at(2), nil, acct(c, 5000, "JPY", 3)},
		{"SameCurrencyNamedIsFine", c, 0, "JPY", at(3), nil, acct(c, 0, "JPY", 4)},
		{"VersionOfUnknownAccountIsRefused", ghost, 1, "", at(1), fault.PreconditionFailed, domain.Account{}},
		{"CreateOnlyOpensInCurrency", usd, 10, "USD", createOnly, nil, acct(usd, 10, "USD", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.PutAccount(ctx, tt.id, tt.balance, tt.currency, tt.pre)
			testenv.WantResult(t, "PutAccount", got, err, tt.want, tt.wantErr)
			testenv.WantStored(t, st.Account, tt.id, tt.want)
		})
	}
	if !updatedAt().After(before) {
		t.Error("a PUT that replaced the balance left updated_at unchanged")
	}
}

// TestAccountAmounts runs the tests of a versioned amount on a customer's
// balance: a debit takes from it, spending it, a refund gives back, a
// deposit adds to it. None of them changes the account's currency.
func TestAccountAmounts(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	addBalance := func(sign int64) func(context.Context, string, int64) error {
		return func(ctx context.Context, c string, n int64) error {
			return pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, sign*n) })
		}
	}
	row := func(a domain.Account, err error) (testenv.AmountRow, error) {
		if err == nil && a.Currency != "JPY" {
			err = fmt.Errorf("account %s is in %q, want the JPY it was opened in", a.CustomerID, a.Currency)
		}
		return testenv.AmountRow{Amount: a.Balance, Version: a.Version}, err
	}
	testenv.WantAmounts(t, testenv.Amounts{
		Create: func(ctx context.Context, c string, n int64) error {
			_, err := st.PutAccount(ctx, c, n, "JPY", store.Precondition{CreateOnly: true})
			return err
		},
		Read: func(ctx context.Context, c string) (testenv.AmountRow, error) { return row(st.Account(ctx, c)) },
		Add: func(ctx context.Context, c string, n int64) (testenv.AmountRow, error) {
			a, _, err := st.Deposit(ctx, c, n, "")
			return row(a, err)
		},
		Put: func(ctx context.Context, c string, n, v int64) error {
			_, err := st.PutAccount(ctx, c, n, "", store.Precondition{IfVersion: &v})
			return err
		},
		Take: addBalance(-1),
		Give: addBalance(1),
		ByHand: func(ctx context.Context, c string, n int64) error {
			_, err := db.ExecContext(ctx, `UPDATE accounts SET balance = $2 WHERE customer_id = $1`, c, n)
			return err
		},
	})
}

// TestDepositIdempotencyKey: a deposit sent with a key applies once; its
// retry answers as the first did (testenv.WantIdempotentAdd).
func TestDepositIdempotencyKey(t *testing.T) {
	_, st := testenv.Store(t, payment.Schema, store.New)
	testenv.WantIdempotentAdd(t, testenv.IdempotentAdd{
		Create: func(ctx context.Context, c string, n int64) error {
			_, err := st.PutAccount(ctx, c, n, "JPY", store.Precondition{CreateOnly: true})
			return err
		},
		Read: func(ctx context.Context, c string) (testenv.AmountRow, error) {
			a, err := st.Account(ctx, c)
			return testenv.AmountRow{Amount: a.Balance, Version: a.Version}, err
		},
		Add: func(ctx context.Context, c string, n int64, key string) (testenv.AmountRow, bool, error) {
			a, replayed, err := st.Deposit(ctx, c, n, key)
			return testenv.AmountRow{Amount: a.Balance, Version: a.Version}, replayed, err
		},
	})
}

func TestUnknownIsNotFound(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	if _, err := st.Account(ctx, testenv.ID("ghost")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Account of unknown customer: err = %v, want fault.NotFound", err)
	}
	if _, err := st.Payment(ctx, testenv.ID("ord")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Payment of unknown order: err = %v, want fault.NotFound", err)
	}
	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if a, err := store.LockAccount(ctx, tx, testenv.ID("ghost")); a != nil || err != nil {
			t.Errorf("LockAccount of unknown customer = %+v, %v; want nil, nil", a, err)
		}
		if p, err := store.LockPayment(ctx, tx, testenv.ID("ord")); p != nil || err != nil {
			t.Errorf("LockPayment of unknown order = %+v, %v; want nil, nil", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAddBalance(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	c := testenv.ID("c")
	open(t, st, c, 1000)
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, -1000) }); err != nil {
		t.Fatalf("debit the whole balance: %v", err)
	}
	mustBalance(t, st, c, 0)
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, 300) }); err != nil {
		t.Fatalf("credit: %v", err)
	}
	mustBalance(t, st, c, 300)

	t.Run("UnknownAccountFails", func(t *testing.T) {
		ghost := testenv.ID("ghost")
		if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, ghost, 1) }); err == nil {
			t.Fatal("AddBalance of an unknown account succeeded")
		}
		if _, err := st.Account(ctx, ghost); !errors.Is(err, fault.NotFound) {
			t.Fatalf("account was created: err = %v", err)
		}
	})
}

// TestCheckForbidsNegativeBalance shows the table itself refuses to overdraw,
// whatever a code path computes.
func TestCheckForbidsNegativeBalance(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	c := testenv.ID("c")
	open(t, st, c, 100)

	tests := []struct {
		name string
		fn   func() error
	}{
		{"DebitBeyondBalance", func() error {
			return pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, -101) })
		}},
		{"PutNegativeBalance", func() error {
			_, err := st.PutAccount(ctx, c, -1, "JPY", store.Precondition{})
			return err
		}},
		{"RawNegativeBalance", func() error {
			_, err := db.ExecContext(ctx, `UPDATE accounts SET balance = -1 WHERE customer_id = $1`, c)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); !testenv.IsViolation(err, "check_violation") {
				t.Fatalf("err = %v, want a check_violation", err)
			}
			mustBalance(t, st, c, 100)
		})
	}

	t.Run("NewAccountWithNegativeBalance", func(t *testing.T) {
		ghost := testenv.ID("c")
		if _, err := st.PutAccount(ctx, ghost, -1, "JPY", store.Precondition{}); !testenv.IsViolation(err, "check_violation") {
			t.Fatalf("err = %v, want a check_violation", err)
		}
		if _, err := st.Account(ctx, ghost); !errors.Is(err, fault.NotFound) {
			t.Fatalf("account was created: err = %v", err)
		}
	})
}

func TestPaymentRoundTrip(t *testing.T) {
	db, st := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	p := domain.Payment{OrderID: testenv.ID("ord"), CustomerID: testenv.ID("c"), Amount: 2500, Currency: "JPY", Status: domain.StatusCompleted}
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, p, "") }); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Payment(ctx, p.OrderID); err != nil || got != p {
		t.Fatalf("Payment = %+v, %v; want %+v", got, err, p)
	}

	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		locked, err := store.LockPayment(ctx, tx, p.OrderID)
		if err != nil {
			return err
		}
		if locked == nil || *locked != p {
			t.Errorf("LockPayment = %+v, want %+v", locked, p)
		}
		return store.SetPaymentStatus(ctx, tx, p.OrderID, domain.StatusRefunded, "out_of_stock")
	})
	if err != nil {
		t.Fatal(err)
	}
	want := p
	want.Status = domain.StatusRefunded
	if got, err := st.Payment(ctx, p.OrderID); err != nil || got != want {
		t.Fatalf("after SetPaymentStatus: %+v, %v; want %+v", got, err, want)
	}
	var detail string
	if err := db.Get(&detail, `SELECT detail FROM payments WHERE order_id = $1`, p.OrderID); err != nil || detail != "out_of_stock" {
		t.Fatalf("detail = %q, %v; want out_of_stock", detail, err)
	}
}

// TestPaymentConstraints shows the payments table refuses a second record
// for an order, a negative amount and an unknown status.
func TestPaymentConstraints(t *testing.T) {
	db, _ := testenv.Store(t, payment.Schema, store.New)
	ctx := context.Background()
	taken := domain.Payment{OrderID: testenv.ID("ord"), CustomerID: "c", Amount: 1, Currency: "JPY", Status: domain.StatusCompleted}
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, taken, "") }); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		p    domain.Payment
		want string
	}{
		{"SecondPaymentOfAnOrder", domain.Payment{OrderID: taken.OrderID, CustomerID: "c", Amount: 1, Currency: "JPY", Status: domain.StatusDeclined}, "unique_violation"},
		{"NegativeAmount", domain.Payment{OrderID: testenv.ID("ord"), CustomerID: "c", Amount: -1, Currency: "JPY", Status: domain.StatusCompleted}, "check_violation"},
		{"UnknownStatus", domain.Payment{OrderID: testenv.ID("ord"), CustomerID: "c", Amount: 1, Currency: "JPY", Status: "PENDING"}, "check_violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, tt.p, "") })
			if !testenv.IsViolation(err, tt.want) {
				t.Fatalf("err = %v, want a %s", err, tt.want)
			}
		})
	}
}
