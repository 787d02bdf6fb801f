package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// testDB returns a database of the test's own with the payment tables in
// place, dropped when the test ends.
func testDB(t *testing.T) *sqlx.DB {
	t.Helper()
	return testenv.DB(t, payment.Schema)
}

// uniq returns an id no other test uses.
func uniq(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

func inTx(db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	return pg.InTx(context.Background(), db, fn)
}

func mustBalance(t *testing.T, st *store.Store, customerID string, want int64) {
	t.Helper()
	got, err := st.Account(context.Background(), customerID)
	if err != nil {
		t.Fatalf("account %s: %v", customerID, err)
	}
	if w := (domain.Account{CustomerID: customerID, Balance: want, Currency: "JPY"}); got != w {
		t.Fatalf("account = %+v, want %+v", got, w)
	}
}

// isViolation reports whether err is a PostgreSQL error of the named class,
// e.g. "check_violation".
func isViolation(err error, name string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code.Name() == name
}

func TestPutAccountUpserts(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	c := uniq("c")
	updatedAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := db.Get(&at, `SELECT updated_at FROM accounts WHERE customer_id = $1`, c); err != nil {
			t.Fatal(err)
		}
		return at
	}

	got, err := st.PutAccount(ctx, c, 1000, "JPY")
	if err != nil {
		t.Fatalf("PutAccount (create): %v", err)
	}
	if want := (domain.Account{CustomerID: c, Balance: 1000, Currency: "JPY"}); got != want {
		t.Fatalf("PutAccount (create) = %+v, want %+v", got, want)
	}
	mustBalance(t, st, c, 1000)
	created := updatedAt()

	got, err = st.PutAccount(ctx, c, 250, "JPY")
	if err != nil {
		t.Fatalf("PutAccount (update): %v", err)
	}
	if want := (domain.Account{CustomerID: c, Balance: 250, Currency: "JPY"}); got != want {
		t.Fatalf("PutAccount (update) = %+v, want %+v", got, want)
	}
	mustBalance(t, st, c, 250)
	if !updatedAt().After(created) {
		t.Error("PutAccount on an existing account left updated_at unchanged")
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM accounts WHERE customer_id = $1`, c); err != nil || n != 1 {
		t.Fatalf("account rows = %d, %v; want 1", n, err)
	}

	t.Run("ZeroBalanceIsAllowed", func(t *testing.T) {
		if _, err := st.PutAccount(ctx, c, 0, "JPY"); err != nil {
			t.Fatalf("PutAccount(0): %v", err)
		}
		mustBalance(t, st, c, 0)
	})
}

func TestUnknownIsNotFound(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	if _, err := st.Account(ctx, uniq("ghost")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Account of unknown customer: err = %v, want fault.NotFound", err)
	}
	if _, err := st.Payment(ctx, uniq("ord")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Payment of unknown order: err = %v, want fault.NotFound", err)
	}
	err := inTx(db, func(tx *sqlx.Tx) error {
		if a, err := store.LockAccount(ctx, tx, uniq("ghost")); a != nil || err != nil {
			t.Errorf("LockAccount of unknown customer = %+v, %v; want nil, nil", a, err)
		}
		if p, err := store.LockPayment(ctx, tx, uniq("ord")); p != nil || err != nil {
			t.Errorf("LockPayment of unknown order = %+v, %v; want nil, nil", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAddBalance(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	c := uniq("c")
	if _, err := st.PutAccount(ctx, c, 1000, "JPY"); err != nil {
		t.Fatal(err)
	}
	if err := inTx(db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, -1000) }); err != nil {
		t.Fatalf("debit the whole balance: %v", err)
	}
	mustBalance(t, st, c, 0)
	if err := inTx(db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, 300) }); err != nil {
		t.Fatalf("credit: %v", err)
	}
	mustBalance(t, st, c, 300)

	t.Run("UnknownAccountFails", func(t *testing.T) {
		ghost := uniq("ghost")
		if err := inTx(db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, ghost, 1) }); err == nil {
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
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	c := uniq("c")
	if _, err := st.PutAccount(ctx, c, 100, "JPY"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		fn   func() error
	}{
		{"DebitBeyondBalance", func() error {
			return inTx(db, func(tx *sqlx.Tx) error { return store.AddBalance(ctx, tx, c, -101) })
		}},
		{"PutNegativeBalance", func() error {
			_, err := st.PutAccount(ctx, c, -1, "JPY")
			return err
		}},
		{"RawNegativeBalance", func() error {
			_, err := db.ExecContext(ctx, `UPDATE accounts SET balance = -1 WHERE customer_id = $1`, c)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); !isViolation(err, "check_violation") {
				t.Fatalf("err = %v, want a check_violation", err)
			}
			mustBalance(t, st, c, 100)
		})
	}

	t.Run("NewAccountWithNegativeBalance", func(t *testing.T) {
		ghost := uniq("c")
		if _, err := st.PutAccount(ctx, ghost, -1, "JPY"); !isViolation(err, "check_violation") {
			t.Fatalf("err = %v, want a check_violation", err)
		}
		if _, err := st.Account(ctx, ghost); !errors.Is(err, fault.NotFound) {
			t.Fatalf("account was created: err = %v", err)
		}
	})
}

func TestPaymentRoundTrip(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	p := domain.Payment{OrderID: uniq("ord"), CustomerID: uniq("c"), Amount: 2500, Currency: "JPY", Status: domain.StatusCompleted}
	if err := inTx(db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, p, "") }); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Payment(ctx, p.OrderID); err != nil || got != p {
		t.Fatalf("Payment = %+v, %v; want %+v", got, err, p)
	}

	err := inTx(db, func(tx *sqlx.Tx) error {
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
	db := testDB(t)
	ctx := context.Background()
	taken := domain.Payment{OrderID: uniq("ord"), CustomerID: "c", Amount: 1, Currency: "JPY", Status: domain.StatusCompleted}
	if err := inTx(db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, taken, "") }); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		p    domain.Payment
		want string
	}{
		{"SecondPaymentOfAnOrder", domain.Payment{OrderID: taken.OrderID, CustomerID: "c", Amount: 1, Currency: "JPY", Status: domain.StatusDeclined}, "unique_violation"},
		{"NegativeAmount", domain.Payment{OrderID: uniq("ord"), CustomerID: "c", Amount: -1, Currency: "JPY", Status: domain.StatusCompleted}, "check_violation"},
		{"UnknownStatus", domain.Payment{OrderID: uniq("ord"), CustomerID: "c", Amount: 1, Currency: "JPY", Status: "PENDING"}, "check_violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := inTx(db, func(tx *sqlx.Tx) error { return store.InsertPayment(ctx, tx, tt.p, "") })
			if !isViolation(err, tt.want) {
				t.Fatalf("err = %v, want a %s", err, tt.want)
			}
		})
	}
}
