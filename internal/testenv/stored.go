package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// WantResult checks what a write returned: the error wantErr (as
// errors.Is finds it) when one is wanted, else no error and exactly want.
func WantResult[T comparable](t testing.TB, what string, got T, err error, want T, wantErr error) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: err = %v, want %v", what, err, wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("%s = %+v, %v; want %+v", what, got, err, want)
	}
}

// WantStored reads id back through the store's get after a write: none (a
// fault.NotFound) when want is the zero value — the write was refused and
// created nothing — else exactly want.
func WantStored[T comparable](t testing.TB, get func(context.Context, string) (T, error), id string, want T) {
	t.Helper()
	got, err := get(context.Background(), id)
	var zero T
	if want == zero {
		if !errors.Is(err, fault.NotFound) {
			t.Fatalf("%s = %+v, %v; want none", id, got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("%s afterwards = %+v, %v; want %+v", id, got, err, want)
	}
}

// Found reports whether a store read found its row: true when err is nil,
// false when it is a fault.NotFound — a tombstone's order, say, that has
// no record — and it fails the test on any other error, which no state a
// test reads can explain.
func Found(t testing.TB, err error) bool {
	t.Helper()
	switch {
	case err == nil:
		return true
	case errors.Is(err, fault.NotFound):
		return false
	}
	t.Fatal(err)
	return false
}

// InTx runs fn in a transaction on db (pg.InTx), as a saga's reaction
// writes, failing the test if fn or the commit fails: a test puts rows in
// place through the store functions the reactions call, not by SQL of its
// own.
func InTx(t testing.TB, db *sqlx.DB, fn func(ctx context.Context, tx *sqlx.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
}

// ID returns prefix, a dash and 13 random hex digits: an id (a SKU, a
// customer, an order) no other test or run uses, so tests sharing a
// database never see each other's rows.
func ID(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

// IsViolation reports whether err is a PostgreSQL error of the named
// condition, e.g. "check_violation" or "unique_violation": what a test of
// a table's constraints expects a forbidden write to fail with.
func IsViolation(err error, name string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code.Name() == name
}

// Change is a named write a test makes to one row.
type Change struct {
	Name  string
	Apply func() error
}

// EachChangeRaisesVersion makes changes in order, each in a subtest of its
// name, and fails unless each raised the row's version, as version reads
// it, by exactly one from first: the version is what an operator's
// conditional PUT names, so every writer — a saga's, an operator's, one by
// hand — must raise it or a PUT could erase its change.
func EachChangeRaisesVersion(t *testing.T, version func() (int64, error), first int64, changes []Change) {
	t.Helper()
	for i, c := range changes {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Apply(); err != nil {
				t.Fatal(err)
			}
			got, err := version()
			if want := first + int64(i) + 1; err != nil || got != want {
				t.Fatalf("version = %d (%v), want %d", got, err, want)
			}
		})
	}
}

// WantRecordTimes checks the times a store reads a record back with, as
// its API answers them: created and updated in UTC, updated unchanged
// until the record changes and never before created; ended (a release, a
// refund) set exactly when the record has ended, at its last change, in
// UTC, and after created when it ended by a change rather than at its
// insert (a tombstone).
func WantRecordTimes(t testing.TB, created, updated time.Time, ended *time.Time, hasEnded, changed bool) {
	t.Helper()
	if created.IsZero() || created.Location() != time.UTC || updated.Location() != time.UTC || updated.Before(created) {
		t.Fatalf("created_at %v, updated_at %v: want UTC times, created first", created, updated)
	}
	switch {
	case !hasEnded:
		if ended != nil || !updated.Equal(created) {
			t.Fatalf("ended at %v, updated_at %v; want none, unchanged", ended, updated)
		}
	case ended == nil || !ended.Equal(updated) || ended.Location() != time.UTC:
		t.Fatalf("ended at %v, want the last change's time %v", ended, updated)
	case changed && !ended.After(created):
		t.Fatalf("ended at %v, want after the insert at %v", ended, created)
	}
}

// WantCappedAdd runs, in order, the cases of an operator's add to an
// amount a row holds (a restock of a SKU, a deposit to an account): add
// of delta to id returns the new amount; an unknown id is fault.NotFound;
// a sum above events.MaxAmount is a fault.Conflict that leaves the row as
// it was; a sum of exactly events.MaxAmount is taken. add and amount get
// the case's t to check the rest of the row with; amount reads id's amount
// afterwards, which is start before the first case.
func WantCappedAdd(t *testing.T, add func(t *testing.T, id string, delta int64) (int64, error), amount func(t *testing.T) int64,
	id string, start, delta int64) {
	t.Helper()
	after := start + delta
	tests := []struct {
		name    string
		id      string
		delta   int64
		wantErr error
		want    int64 // id's amount afterwards
	}{
		{"AddsToTheAmount", id, delta, nil, after},
		{"UnknownIsNotFound", ID("ghost"), 1, fault.NotFound, after},
		{"AboveCapIsRefused", id, events.MaxAmount - after + 1, fault.Conflict, after},
		{"UpToCap", id, events.MaxAmount - after, nil, events.MaxAmount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := add(t, tt.id, tt.delta)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("added: %d, want %d", got, tt.want)
			}
			if got := amount(t); got != tt.want {
				t.Fatalf("afterwards: %d, want %d", got, tt.want)
			}
		})
	}
}
