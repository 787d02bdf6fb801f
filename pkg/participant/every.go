package participant

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends, then returns nil: the loop of a
// periodic job — the runtime's pruning and parked gauges, a service's
// sweep in its Spec.Jobs — each of which logs its own failures and tries
// again at the next tick.
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
