// Package tick runs the periodic jobs of a service: pruning, gauges, sweeps.
package tick

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends, then returns nil. f logs its own
// failures: the next tick tries again.
func Every(ctx context.Context, d time.Duration, f func(context.Context)) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		f(ctx)
	}
}
