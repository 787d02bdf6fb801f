package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// rollingGap is how long a rolling restart waits, after a replacement is
// ready, before it sends the next SIGTERM.
const rollingGap = 2 * time.Second

// rollingRestart restarts every instance of every service, one at a time
// in saga order, as a deploy does: SIGTERM (the service removes its static
// member, so its partitions move at once), the replacement started with
// the same environment as soon as the old process exited, and the next
// SIGTERM f.For after the replacement answers /readyz — the consumer
// group joined — as a Deployment with minReadySeconds does. Waiting for
// readiness keeps a two-instance service from being stopped whole; with
// one instance per service it is what lets each restart be measured alone.
// The note lists, per instance, how long it took to exit and to be ready.
func rollingRestart(ctx context.Context, c *Cluster, f Fault, in *Injected) error {
	var steps []string
	in.Target = "every instance"
	for _, s := range Services {
		for n := 1; n <= Instances; n++ {
			i := c.Get(s, n)
			t0 := time.Now()
			if err := i.Restart(ctx, ""); err != nil {
				return fmt.Errorf("restart %s: %w", i.Name(), err)
			}
			exited := time.Since(t0)
			in.Fired = true
			if err := i.WaitReady(ctx, time.Minute); err != nil {
				return err
			}
			steps = append(steps, fmt.Sprintf("%s %s/%s", i.Name(), Duration(exited), Duration(time.Since(t0))))
			in.Note = "exited/ready after SIGTERM: " + strings.Join(steps, ", ")
			sleep(ctx, f.For)
		}
	}
	return ctx.Err()
}
