package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// putStock creates a SKU.
func putStock(t *testing.T, st *store.Store, sku string, available int64) {
	t.Helper()
	if _, err := st.PutStock(context.Background(), sku, available, store.Precondition{CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
}

// mustStock checks a SKU's units; its version is checked where it matters.
func mustStock(t *testing.T, st *store.Store, sku string, available, reserved int64) domain.Stock {
	t.Helper()
	got, err := st.Stock(context.Background(), sku)
	if err != nil {
		t.Fatalf("stock %s: %v", sku, err)
	}
	if got.SKU != sku || got.Available != available || got.Reserved != reserved {
		t.Fatalf("stock = %+v, want %s with %d available, %d reserved", got, sku, available, reserved)
	}
	return got
}

// reserve moves units of each SKU from available to reserved in a
// transaction of its own, as a saga's reserve does, failing the test on
// error.
func reserve(t *testing.T, db *sqlx.DB, units map[string]int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.Reserve(ctx, tx, units) })
}

// release moves them back, as a saga's release does.
func release(t *testing.T, db *sqlx.DB, units map[string]int64) {
	t.Helper()
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error { return store.Release(ctx, tx, units) })
}

// TestPutStock runs PUTs, in order, against one SKU that a saga changed
// since it was created: only a PUT naming the current version replaces its
// units (the reserved ones stay); the others leave the row as it is.
func TestPutStock(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	ctx := context.Background()
	sku, ghost := testenv.ID("put"), testenv.ID("ghost")
	putStock(t, st, sku, 5)                  // version 1
	reserve(t, db, map[string]int64{sku: 2}) // version 2: 3 available, 2 reserved
	none, createOnly := store.Precondition{}, store.Precondition{CreateOnly: true}
	at := func(n int64) store.Precondition { return store.Precondition{IfVersion: &n} }

	tests := []struct {
		name      string
		sku       string
		available int64
		pre       store.Precondition
		wantErr   error
		want      domain.Stock // the row afterwards
	}{
		{"WithoutVersionIsRefused", sku, 10, none, fault.PreconditionRequired, domain.Stock{SKU: sku, Available: 3, Reserved: 2, Version: 2}},
		{"WithoutVersionSameUnitsIsRetriedCreate", sku, 3, none, nil, domain.Stock{SKU: sku, Available: 3, Reserved: 2, Version: 2}},
		{"CreateOnlyOnExistingIsRefused", sku, 3, createOnly, fault.PreconditionFailed, domain.Stock{SKU: sku, Available: 3, Reserved: 2, Version: 2}},
		{"StaleVersionIsRefused", sku, 10, at(1), fault.PreconditionFailed, domain.Stock{SKU: sku, Available: 3, Reserved: 2, Version: 2}},
		{"CurrentVersionReplacesAvailableKeepsReserved", sku, 10, at(2), nil, domain.Stock{SKU: sku, Available: 10, Reserved: 2, Version: 3}},
		{"SameVersionTwiceIsRefused", sku, 11, at(2), fault.PreconditionFailed, domain.Stock{SKU: sku, Available: 10, Reserved: 2, Version: 3}},
		{"VersionOfUnknownSKUIsRefused", ghost, 1, at(1), fault.PreconditionFailed, domain.Stock{}},
		{"CreateOnlyCreates", ghost, 4, createOnly, nil, domain.Stock{SKU: ghost, Available: 4, Version: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.PutStock(ctx, tt.sku, tt.available, tt.pre)
			testenv.WantResult(t, "PutStock", got, err, tt.want, tt.wantErr)
			testenv.WantStored(t, st.Stock, tt.sku, tt.want)
		})
	}
}

// TestStockAmounts runs the tests of a versioned amount on a SKU's
// available units: a reserve takes them, holding them as reserved, a
// release gives them back, a restock adds to them.
func TestStockAmounts(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	move := func(f func(context.Context, sqlx.ExtContext, map[string]int64) error) func(context.Context, string, int64) error {
		return func(ctx context.Context, sku string, n int64) error {
			return pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return f(ctx, tx, map[string]int64{sku: n}) })
		}
	}
	row := func(s domain.Stock, err error) (testenv.AmountRow, error) {
		return testenv.AmountRow{Amount: s.Available, Held: s.Reserved, Version: s.Version}, err
	}
	testenv.WantAmounts(t, testenv.Amounts{
		Create: func(ctx context.Context, sku string, n int64) error {
			_, err := st.PutStock(ctx, sku, n, store.Precondition{CreateOnly: true})
			return err
		},
		Read: func(ctx context.Context, sku string) (testenv.AmountRow, error) { return row(st.Stock(ctx, sku)) },
		Add: func(ctx context.Context, sku string, n int64) (testenv.AmountRow, error) {
			s, _, err := st.Restock(ctx, sku, n, "")
			return row(s, err)
		},
		Put: func(ctx context.Context, sku string, n, v int64) error {
			_, err := st.PutStock(ctx, sku, n, store.Precondition{IfVersion: &v})
			return err
		},
		Take:  move(store.Reserve),
		Give:  move(store.Release),
		Holds: true,
		ByHand: func(ctx context.Context, sku string, n int64) error {
			_, err := db.ExecContext(ctx, `UPDATE stock SET available = $2 WHERE sku = $1`, sku, n)
			return err
		},
	})
}

// TestRestockIdempotencyKey: a restock sent with a key applies once; its
// retry answers as the first did (testenv.WantIdempotentAdd).
func TestRestockIdempotencyKey(t *testing.T) {
	_, st := testenv.Store(t, inventory.Schema, store.New)
	testenv.WantIdempotentAdd(t, testenv.IdempotentAdd{
		Create: func(ctx context.Context, sku string, n int64) error {
			_, err := st.PutStock(ctx, sku, n, store.Precondition{CreateOnly: true})
			return err
		},
		Read: func(ctx context.Context, sku string) (testenv.AmountRow, error) {
			s, err := st.Stock(ctx, sku)
			return testenv.AmountRow{Amount: s.Available, Held: s.Reserved, Version: s.Version}, err
		},
		Add: func(ctx context.Context, sku string, n int64, key string) (testenv.AmountRow, bool, error) {
			s, replayed, err := st.Restock(ctx, sku, n, key)
			return testenv.AmountRow{Amount: s.Available, Held: s.Reserved, Version: s.Version}, replayed, err
		},
	})
}

func TestUnknownIsNotFound(t *testing.T) {
	_, st := testenv.Store(t, inventory.Schema, store.New)
	if _, err := st.Stock(context.Background(), testenv.ID("ghost")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Stock of unknown sku: err = %v, want fault.NotFound", err)
	}
	if _, err := st.Reservation(context.Background(), testenv.ID("ord")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Reservation of unknown order: err = %v, want fault.NotFound", err)
	}
}

func TestLockStockReturnsAvailableOfKnownSkus(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	a, b, ghost := testenv.ID("a"), testenv.ID("b"), testenv.ID("ghost")
	putStock(t, st, a, 3)
	putStock(t, st, b, 0)
	testenv.InTx(t, db, func(ctx context.Context, tx *sqlx.Tx) error {
		got, err := store.LockStock(ctx, tx, []string{b, ghost, a, a})
		if err != nil {
			return err
		}
		if want := map[string]int64{a: 3, b: 0}; !reflect.DeepEqual(got, want) {
			t.Errorf("LockStock = %v, want %v", got, want)
		}
		return nil
	})
}

func TestReserveMovesUnits(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	a, b := testenv.ID("a"), testenv.ID("b")
	putStock(t, st, a, 5)
	putStock(t, st, b, 1)
	reserve(t, db, map[string]int64{a: 3, b: 1})
	mustStock(t, st, a, 2, 3)
	mustStock(t, st, b, 0, 1)
}

func TestReleaseReturnsUnits(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	a := testenv.ID("a")
	putStock(t, st, a, 5)
	reserve(t, db, map[string]int64{a: 4})
	release(t, db, map[string]int64{a: 4})
	mustStock(t, st, a, 5, 0)
}

// TestCheckForbidsNegativeStock shows the table itself refuses to oversell
// or over-return, whatever a code path computes.
func TestCheckForbidsNegativeStock(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	a := testenv.ID("a")
	putStock(t, st, a, 2)
	ctx := context.Background()

	tests := []struct {
		name string
		fn   func(tx *sqlx.Tx) error
	}{
		{"ReserveMoreThanAvailable", func(tx *sqlx.Tx) error { return store.Reserve(ctx, tx, map[string]int64{a: 3}) }},
		{"ReleaseMoreThanReserved", func(tx *sqlx.Tx) error { return store.Release(ctx, tx, map[string]int64{a: 1}) }},
		{"RawNegativeAvailable", func(tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE stock SET available = -1 WHERE sku = $1`, a)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.InTx(ctx, db, tt.fn)
			if !testenv.IsViolation(err, "check_violation") {
				t.Fatalf("err = %v, want a check_violation", err)
			}
			mustStock(t, st, a, 2, 0)
		})
	}
}

func TestMoveOfUnknownSkuFails(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.Store(t, inventory.Schema, store.New)
	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		return store.Reserve(ctx, tx, map[string]int64{testenv.ID("ghost"): 1})
	})
	if err == nil {
		t.Fatal("Reserve of an unknown sku succeeded")
	}
}

func TestReservationRoundTrip(t *testing.T) {
	db, st := testenv.Store(t, inventory.Schema, store.New)
	ctx := context.Background()
	items := []events.Item{{SKU: "a", Quantity: 2, UnitPrice: 150}, {SKU: "b", Quantity: 1, UnitPrice: 99}}

	reserved, tomb := testenv.ID("ord"), testenv.ID("ord")
	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if err := store.InsertReservation(ctx, tx, domain.Reservation{OrderID: reserved, Status: domain.StatusReserved, Items: items}, ""); err != nil {
			return err
		}
		return store.InsertReservation(ctx, tx, domain.Reservation{OrderID: tomb, Status: domain.StatusReleased}, "tombstone")
	})
	if err != nil {
		t.Fatal(err)
	}

	got, err := st.Reservation(ctx, reserved)
	if err != nil {
		t.Fatal(err)
	}
	if want := (domain.Reservation{OrderID: reserved, Status: domain.StatusReserved, Items: items}); !reflect.DeepEqual(got, want) {
		t.Fatalf("Reservation = %+v, want %+v", got, want)
	}

	got, err = st.Reservation(ctx, tomb)
	if err != nil {
		t.Fatal(err)
	}
	if got.Items == nil || len(got.Items) != 0 {
		t.Fatalf("tombstone items = %#v, want an empty, non-nil slice", got.Items)
	}

	err = pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		locked, err := store.LockReservation(ctx, tx, reserved)
		if err != nil {
			return err
		}
		if locked == nil || locked.Status != domain.StatusReserved || !reflect.DeepEqual(locked.Items, items) {
			t.Errorf("LockReservation = %+v", locked)
		}
		if err := store.SetReservationStatus(ctx, tx, reserved, domain.StatusReleased, "shipping_unavailable"); err != nil {
			return err
		}
		missing, err := store.LockReservation(ctx, tx, testenv.ID("ord"))
		if missing != nil || err != nil {
			t.Errorf("LockReservation of unknown order = %+v, %v; want nil, nil", missing, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Reservation(ctx, reserved); got.Status != domain.StatusReleased || !reflect.DeepEqual(got.Items, items) {
		t.Fatalf("after release: %+v, want RELEASED with the items kept", got)
	}
}

func TestSecondReservationOfAnOrderIsRefused(t *testing.T) {
	db, _ := testenv.Store(t, inventory.Schema, store.New)
	ctx := context.Background()
	id := testenv.ID("ord")
	r := domain.Reservation{OrderID: id, Status: domain.StatusReserved, Items: []events.Item{{SKU: "a", Quantity: 1}}}
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.InsertReservation(ctx, tx, r, "") }); err != nil {
		t.Fatal(err)
	}
	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.InsertReservation(ctx, tx, r, "") })
	if !testenv.IsViolation(err, "unique_violation") {
		t.Fatalf("second insert: err = %v, want a unique_violation", err)
	}
}
