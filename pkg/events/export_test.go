package events

import "testing"

// SetUpcasters makes chain the upcaster chain of eventType until t ends:
// chain[0] upcasts version 1 to 2, chain[1] version 2 to 3, and so on, so
// the type's current version is len(chain)+1. No real type has a second
// version yet; the evolution tests give one a history to exercise the
// mechanism. Tests using it must not run in parallel.
func SetUpcasters(t testing.TB, eventType string, chain ...Upcaster) {
	t.Helper()
	old, had := upcasters[eventType]
	upcasters[eventType] = chain
	t.Cleanup(func() {
		if had {
			upcasters[eventType] = old
		} else {
			delete(upcasters, eventType)
		}
	})
}
