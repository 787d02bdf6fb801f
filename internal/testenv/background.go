package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Background runs run in a goroutine, as a service runs its relay or
// consumer group, until stop is called or the test ends. stop cancels
// run's context and fails the test unless run returns nil within bound: a
// component that does not stop promptly when asked is a bug. Calling stop
// again does nothing. what names the component in the failure message.
func Background(t testing.TB, what string, bound time.Duration, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		t.Helper()
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			case <-time.After(bound):
				t.Fatalf("%s still running %v after its context ended", what, bound)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
