package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/choreo-saga/choreo/pkg/fault"
)

func TestKindSurvivesWrapping(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"NotFound", fault.Errorf(fault.NotFound, "account %s", "c-1"), fault.NotFound},
		{"ConflictWrapped", fmt.Errorf("put stock: %w", fault.Errorf(fault.Conflict, "version 3 is stale")), fault.Conflict},
		{"Invalid", fault.Errorf(fault.Invalid, "key reused"), fault.Invalid},
		{"PreconditionFailed", fault.Errorf(fault.PreconditionFailed, "stock s-1 is at version 4, not 3"), fault.PreconditionFailed},
		{"PreconditionRequired", fault.Errorf(fault.PreconditionRequired, "If-Match required"), fault.PreconditionRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []error{fault.NotFound, fault.Conflict, fault.Invalid, fault.PreconditionFailed, fault.PreconditionRequired} {
				if got := errors.Is(tt.err, k); got != (k == tt.kind) {
					t.Errorf("errors.Is(%v, %v) = %v", tt.err, k, got)
				}
			}
			var fe *fault.Error
			if !errors.As(tt.err, &fe) || fe.Detail() == "" {
				t.Errorf("no *fault.Error with a detail in %v", tt.err)
			}
		})
	}
}
