package testenv

import (
	"sync"
	"testing"
)

// AllAtOnce runs f in n goroutines released at the same moment, not one
// after another as they start, and returns when all have returned: how a
// test makes copies of one request or delivery race for the same row.
func AllAtOnce(n int, f func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}

// AllSucceed runs each of fns in a goroutine of its own, released at the
// same moment, and fails the test unless every one returned nil: how a
// test makes different writes to one row race (a restock and a reserve,
// two orders of one customer) and then checks that none was lost.
func AllSucceed(t testing.TB, fns ...func() error) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(fns))
	for i, fn := range fns {
		wg.Go(func() {
			<-start
			errs[i] = fn()
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// AllSucceedTimes is AllSucceed of n copies of each of fns: how a test
// races writes of a few kinds to one row (restocks and reserves, deposits
// and debits) and then checks that none was lost.
func AllSucceedTimes(t testing.TB, n int, fns ...func() error) {
	t.Helper()
	var all []func() error
	for range n {
		all = append(all, fns...)
	}
	AllSucceed(t, all...)
}
