package tick_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/tick"
)

// TestEveryRunsUntilTheContextEnds: a periodic job's function runs at each
// tick, and Every returns nil promptly once ctx ends (Background's stop
// fails the test otherwise).
func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	var calls atomic.Int64
	stop := testenv.Background(t, "Every", 5*time.Second, func(ctx context.Context) error {
		return tick.Every(ctx, time.Millisecond, func(context.Context) { calls.Add(1) })
	})
	testenv.Eventually(t, 5*time.Second, "three ticks", func() bool { return calls.Load() >= 3 })
	stop()
}
