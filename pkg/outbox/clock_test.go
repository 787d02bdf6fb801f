package outbox_test

import (
	"slices"
	"sync"
	"time"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// fakeClock is an outbox.Clock that stands still until the test moves it
// with Advance: a relay on it polls, retries, backs off, cleans up and
// refreshes its gauge only when the test says the time has come.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer // neither fired nor stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

type fakeTimer struct {
	clock *fakeClock
	at    time.Time
	c     chan time.Time // buffered: firing never blocks the test
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) outbox.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.pending = append(f.pending, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.pending, t)
	if i < 0 {
		return false
	}
	f.pending = slices.Delete(f.pending, i, i+1)
	return true
}

// Advance moves the clock d forward and fires, earliest first, every timer
// due by then. Timers armed later, in reaction, wait for the next Advance.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	slices.SortStableFunc(f.pending, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	due := 0
	for _, t := range f.pending {
		if t.at.After(f.now) {
			break
		}
		t.c <- f.now
		due++
	}
	f.pending = slices.Delete(f.pending, 0, due)
}

// Pending returns how many timers wait to fire.
func (f *fakeClock) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// Next returns how long until the earliest pending timer fires, or false
// if none is pending.
func (f *fakeClock) Next() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return 0, false
	}
	next := slices.MinFunc(f.pending, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	return next.at.Sub(f.now), true
}
