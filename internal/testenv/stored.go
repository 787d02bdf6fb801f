package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-saga/choreo/pkg/fault"
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
