package pg

import "time"

// MoveClock moves the statement cache's clock by d until the test ends.
func MoveClock(cleanup func(func()), d time.Duration) {
	prev := now
	now = func() time.Time { return prev().Add(d) }
	cleanup(func() { now = prev })
}
