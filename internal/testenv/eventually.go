package testenv

import (
	"testing"
	"time"
)

// Eventually calls cond until it returns true and fails the test if it has
// not within bound. It is the one way tests wait for something another
// goroutine or process does: a bounded poll on an observable condition,
// never a sleep that hopes the work is done. what names the awaited state
// in the failure message.
func Eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", bound, what)
		}
		time.Sleep(wait)
	}
}
