package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// testDB returns a database of the test's own with the inventory tables in
// place, dropped when the test ends.
func testDB(t *testing.T) *sqlx.DB {
	t.Helper()
	return testenv.DB(t, pg.Schema{Name: "inventory", FS: store.Migrations, Dir: "migrations"})
}

// uniq returns an id no other test or run uses.
func uniq(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

// putStock creates a SKU.
func putStock(t *testing.T, st *store.Store, sku string, available int64) {
	t.Helper()
	if _, err := st.PutStock(context.Background(), sku, available); err != nil {
		t.Fatal(err)
	}
}

func mustStock(t *testing.T, st *store.Store, sku string, available, reserved int64) {
	t.Helper()
	got, err := st.Stock(context.Background(), sku)
	if err != nil {
		t.Fatalf("stock %s: %v", sku, err)
	}
	want := domain.Stock{SKU: sku, Available: available, Reserved: reserved}
	if got != want {
		t.Fatalf("stock = %+v, want %+v", got, want)
	}
}

func inTx(t *testing.T, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	t.Helper()
	return pg.InTx(context.Background(), db, fn)
}

func TestPutStockKeepsReserved(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	sku := uniq("put")
	putStock(t, st, sku, 5)
	if err := inTx(t, db, func(tx *sqlx.Tx) error {
		return store.Reserve(context.Background(), tx, map[string]int64{sku: 2})
	}); err != nil {
		t.Fatal(err)
	}
	got, err := st.PutStock(context.Background(), sku, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := (domain.Stock{SKU: sku, Available: 10, Reserved: 2}); got != want {
		t.Fatalf("PutStock = %+v, want %+v", got, want)
	}
}

func TestUnknownIsNotFound(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	if _, err := st.Stock(context.Background(), uniq("ghost")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Stock of unknown sku: err = %v, want fault.NotFound", err)
	}
	if _, err := st.Reservation(context.Background(), uniq("ord")); !errors.Is(err, fault.NotFound) {
		t.Errorf("Reservation of unknown order: err = %v, want fault.NotFound", err)
	}
}

func TestLockStockReturnsAvailableOfKnownSkus(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	a, b, ghost := uniq("a"), uniq("b"), uniq("ghost")
	putStock(t, st, a, 3)
	putStock(t, st, b, 0)
	err := inTx(t, db, func(tx *sqlx.Tx) error {
		got, err := store.LockStock(context.Background(), tx, []string{b, ghost, a, a})
		if err != nil {
			return err
		}
		if want := map[string]int64{a: 3, b: 0}; !reflect.DeepEqual(got, want) {
			t.Errorf("LockStock = %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReserveMovesUnits(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	a, b := uniq("a"), uniq("b")
	putStock(t, st, a, 5)
	putStock(t, st, b, 1)
	if err := inTx(t, db, func(tx *sqlx.Tx) error {
		return store.Reserve(context.Background(), tx, map[string]int64{a: 3, b: 1})
	}); err != nil {
		t.Fatal(err)
	}
	mustStock(t, st, a, 2, 3)
	mustStock(t, st, b, 0, 1)
}

func TestReleaseReturnsUnits(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	a := uniq("a")
	putStock(t, st, a, 5)
	ctx := context.Background()
	if err := inTx(t, db, func(tx *sqlx.Tx) error { return store.Reserve(ctx, tx, map[string]int64{a: 4}) }); err != nil {
		t.Fatal(err)
	}
	if err := inTx(t, db, func(tx *sqlx.Tx) error { return store.Release(ctx, tx, map[string]int64{a: 4}) }); err != nil {
		t.Fatal(err)
	}
	mustStock(t, st, a, 5, 0)
}

// TestCheckForbidsNegativeStock shows the table itself refuses to oversell
// or over-return, whatever a code path computes.
func TestCheckForbidsNegativeStock(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	a := uniq("a")
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
			err := inTx(t, db, tt.fn)
			var pqErr *pq.Error
			if !errors.As(err, &pqErr) || pqErr.Code.Name() != "check_violation" {
				t.Fatalf("err = %v, want a check_violation", err)
			}
			mustStock(t, st, a, 2, 0)
		})
	}
}

func TestMoveOfUnknownSkuFails(t *testing.T) {
	db := testDB(t)
	err := inTx(t, db, func(tx *sqlx.Tx) error {
		return store.Reserve(context.Background(), tx, map[string]int64{uniq("ghost"): 1})
	})
	if err == nil {
		t.Fatal("Reserve of an unknown sku succeeded")
	}
}

func TestReservationRoundTrip(t *testing.T) {
	db := testDB(t)
	st := store.New(db)
	ctx := context.Background()
	items := []events.Item{{SKU: "a", Quantity: 2, UnitPrice: 150}, {SKU: "b", Quantity: 1, UnitPrice: 99}}

	reserved, tomb := uniq("ord"), uniq("ord")
	err := inTx(t, db, func(tx *sqlx.Tx) error {
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

	err = inTx(t, db, func(tx *sqlx.Tx) error {
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
		missing, err := store.LockReservation(ctx, tx, uniq("ord"))
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
	db := testDB(t)
	ctx := context.Background()
	id := uniq("ord")
	r := domain.Reservation{OrderID: id, Status: domain.StatusReserved, Items: []events.Item{{SKU: "a", Quantity: 1}}}
	if err := inTx(t, db, func(tx *sqlx.Tx) error { return store.InsertReservation(ctx, tx, r, "") }); err != nil {
		t.Fatal(err)
	}
	err := inTx(t, db, func(tx *sqlx.Tx) error { return store.InsertReservation(ctx, tx, r, "") })
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code.Name() != "unique_violation" {
		t.Fatalf("second insert: err = %v, want a unique_violation", err)
	}
}
