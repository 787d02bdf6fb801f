// Package failpoint crashes the process at named points of the runtime when
// CHOREO_FAILPOINTS asks it to, so that the chaos suite can show a crash at
// the worst moment loses and doubles nothing.
package failpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// The points the runtime defines.
const (
	// AfterCommit: a consumer's transaction committed; its offset is not
	// marked yet. The message is redelivered and must be skipped.
	AfterCommit = "after-commit"
	// AfterPublish: Kafka acknowledged a relay batch; the rows are not
	// marked sent yet. They are published again and consumers skip them.
	AfterPublish = "after-publish"
	// BetweenBatches: a relay batch is published and marked; the next
	// has not started.
	BetweenBatches = "between-batches"
)

var points atomic.Pointer[map[string]float64]

// Enable arms the points listed in spec, "name=probability,…", e.g.
// "after-commit=0.01,after-publish=0.02"; a name without a probability is
// armed at 1. An empty spec disarms every point. Unknown names are errors.
func Enable(spec string) error {
	m := map[string]float64{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, prob, hasProb := strings.Cut(item, "=")
		p := 1.0
		if hasProb {
			var err error
			if p, err = strconv.ParseFloat(prob, 64); err != nil || !(p >= 0 && p <= 1) { // also refuses NaN
				return fmt.Errorf("CHOREO_FAILPOINTS: %q: probability must be in [0, 1]", item)
			}
		}
		switch name {
		case AfterCommit, AfterPublish, BetweenBatches:
			m[name] = p
		default:
			return fmt.Errorf("CHOREO_FAILPOINTS: unknown point %q (known: %s, %s, %s)", name, AfterCommit, AfterPublish, BetweenBatches)
		}
	}
	if len(m) == 0 {
		points.Store(nil)
		return nil
	}
	points.Store(&m)
	return nil
}

// Hit kills the process with SIGKILL — no deferred function, no graceful
// shutdown, exactly as kill -9 would — with the probability Enable gave
// name. It returns at once when name is not armed.
func Hit(name string) {
	m := points.Load()
	if m == nil {
		return
	}
	p, ok := (*m)[name]
	if !ok || rand.Float64() >= p {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: killing the process (pid %d)\n", name, os.Getpid())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
