// Package fault names the kinds of failure a domain and its store report
// (not found, conflict, invalid, and the outcomes of a conditional write),
// which web.Respond maps to HTTP statuses in one place.
package fault

import (
	"errors"
	"fmt"
)

// The kinds. Test for one with errors.Is(err, fault.NotFound).
var (
	// NotFound: the thing asked for does not exist.
	NotFound = errors.New("not found")
	// Conflict: the request clashes with the current state, e.g. an
	// account's currency that can no longer change or an order that can no
	// longer change.
	Conflict = errors.New("conflict")
	// Invalid: the request is well-formed but cannot be carried out as
	// asked, e.g. an idempotency key reused for a different request.
	Invalid = errors.New("invalid")
	// PreconditionFailed: a write conditioned on a version found another
	// one (something changed the row since the caller read it), or a write
	// allowed only to create found the row there.
	PreconditionFailed = errors.New("precondition failed")
	// PreconditionRequired: a write that would replace a row's values did
	// not name the version it replaces, so it could erase a change it never
	// saw.
	PreconditionRequired = errors.New("precondition required")
)

// Error is a failure of a kind, with a message fit for the client.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg + ": " + e.Kind.Error() }

// Is makes errors.Is(err, kind) hold for the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Detail is the message for the client, without the kind.
func (e *Error) Detail() string { return e.Msg }

// Errorf returns an *Error of kind with a formatted message.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
