package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-saga/choreo/pkg/fault"
)

// Amounts is a store's rows that each hold an amount under a version every
// change raises — a SKU's available units, a customer's balance: sagas take
// from it and give back (a reserve and a release, a debit and a refund),
// operators add to it (a restock, a deposit; capped at events.MaxAmount)
// and replace it with a PUT that names the version they read. WantAmounts
// runs the tests every such store must pass.
type Amounts struct {
	// Create makes the row id holding amount, at version 1.
	Create func(ctx context.Context, id string, amount int64) error
	// Read returns the row id, or an error if the rest of it is not as
	// every test leaves it (an account's currency, say).
	Read func(ctx context.Context, id string) (AmountRow, error)
	// Add is an operator's add of delta to id; it returns the row after.
	Add func(ctx context.Context, id string, delta int64) (AmountRow, error)
	// Put is an operator's PUT of amount to id if it is at ifVersion.
	Put func(ctx context.Context, id string, amount, ifVersion int64) error
	// Take and Give are a saga's moves of delta out of id and back, each
	// in a transaction of its own.
	Take, Give func(ctx context.Context, id string, delta int64) error
	// Holds says a take keeps what it took on the row (reserved units)
	// rather than spending it (a debit): AmountRow.Held counts it.
	Holds bool
	// ByHand sets id's amount by an UPDATE of its own, as a person at a
	// psql prompt would, past the store.
	ByHand func(ctx context.Context, id string, amount int64) error
}

// AmountRow is a row of Amounts as a test reads it.
type AmountRow struct {
	Amount int64
	// Held is what the sagas' takes hold on the row; 0 unless Holds.
	Held    int64
	Version int64
}

// WantAmounts runs, each in a subtest, what a store of Amounts must do:
// every change raises the version by one; a saga's change between an
// operator's read and PUT makes the PUT fail rather than be erased; an add
// is capped (WantCappedAdd); adds and takes racing on one row all apply.
func WantAmounts(t *testing.T, a Amounts) {
	ctx := context.Background()
	// held is what takes of n units leave held on the row.
	held := func(n int64) int64 {
		if a.Holds {
			return n
		}
		return 0
	}
	create := func(t *testing.T, amount int64) string {
		t.Helper()
		id := ID("amount")
		if err := a.Create(ctx, id, amount); err != nil {
			t.Fatal(err)
		}
		return id
	}
	read := func(t *testing.T, id string) AmountRow {
		t.Helper()
		r, err := a.Read(ctx, id)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		return r
	}
	wantRow := func(t *testing.T, id string, amount, held int64) AmountRow {
		t.Helper()
		r := read(t, id)
		if r.Amount != amount || r.Held != held {
			t.Fatalf("%s = %+v, want amount %d, held %d", id, r, amount, held)
		}
		return r
	}

	t.Run("EveryChangeRaisesTheVersion", func(t *testing.T) {
		// A saga's take and give, an operator's add and PUT, and an
		// UPDATE by hand: each must raise it, or a PUT could erase it.
		id := create(t, 5)
		EachChangeRaisesVersion(t, func() (int64, error) { r, err := a.Read(ctx, id); return r.Version, err }, 1, []Change{
			{Name: "Take", Apply: func() error { return a.Take(ctx, id, 2) }},
			{Name: "Give", Apply: func() error { return a.Give(ctx, id, 1) }},
			{Name: "Add", Apply: func() error { _, err := a.Add(ctx, id, 3); return err }},
			{Name: "Put", Apply: func() error { return a.Put(ctx, id, 9, 4) }},
			{Name: "ByHand", Apply: func() error { return a.ByHand(ctx, id, 8) }},
		})
	})

	t.Run("SagaChangeBetweenReadAndPutIsNotErased", func(t *testing.T) {
		// The lost update a version prevents: an operator reads the row,
		// a saga gives units back, and the operator's PUT with the
		// version read is refused, not applied over the give.
		id := create(t, 5)
		if err := a.Take(ctx, id, 4); err != nil {
			t.Fatal(err)
		}
		before := wantRow(t, id, 1, held(4))
		if err := a.Give(ctx, id, 4); err != nil {
			t.Fatal(err)
		}
		if err := a.Put(ctx, id, before.Amount+10, before.Version); !errors.Is(err, fault.PreconditionFailed) {
			t.Fatalf("PUT with the version read before the give: err = %v, want fault.PreconditionFailed", err)
		}
		wantRow(t, id, 5, 0)
	})

	t.Run("Add", func(t *testing.T) {
		// What the sagas hold stays as it is whatever an add does.
		id := create(t, 5)
		if err := a.Take(ctx, id, 2); err != nil {
			t.Fatal(err)
		}
		WantCappedAdd(t, func(t *testing.T, id string, delta int64) (int64, error) {
			r, err := a.Add(ctx, id, delta)
			if err == nil && r.Held != held(2) {
				t.Errorf("add = %+v, want %d held", r, held(2))
			}
			return r.Amount, err
		}, func(t *testing.T) int64 {
			r := read(t, id)
			if r.Held != held(2) {
				t.Fatalf("%s = %+v, want %d held", id, r, held(2))
			}
			return r.Amount
		}, id, 3, 7)
	})

	t.Run("AddsCommuteWithTakes", func(t *testing.T) {
		// Each change is applied as a delta in one UPDATE, so none of
		// those racing on one row is lost.
		id := create(t, 100)
		const n = 16
		AllSucceedTimes(t, n,
			func() error { _, err := a.Add(ctx, id, 3); return err },
			func() error { return a.Take(ctx, id, 1) })
		if r := wantRow(t, id, 100+3*n-n, held(n)); r.Version != 1+2*n {
			t.Fatalf("version = %d, want %d (one per change)", r.Version, 1+2*n)
		}
	})
}
