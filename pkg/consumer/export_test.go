package consumer

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Lag returns the lag gauge of service's group for topic/partition.
func Lag(service, topic string, partition int32) float64 {
	return testutil.ToFloat64(lag.WithLabelValues(service, topic, strconv.Itoa(int(partition))))
}

// Crash makes g stop as a process killed with -9 would: without removing
// its static member from the group.
func Crash(g *Group) { g.crash = true }

// SessionTimeout sets the session timeout g joins with, so a test can tell
// a member that left from one that timed out.
func SessionTimeout(g *Group, d time.Duration) { g.sessionTimeout = d }

// MissingTopics returns the missing-topics gauge of service.
func MissingTopics(service string) float64 {
	return testutil.ToFloat64(missingTopics.WithLabelValues(service))
}
