package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// instState is what the choice of a fault's target knows of an instance
// when the fault fires.
type instState struct {
	Index   int  // 1-based
	Running bool // a process runs and is not paused
	Leads   bool // leads its service's relay
}

// pickTarget returns the Index of the running instance that a process fault
// of kind k hits now, or 0 if none fits yet (one another fault killed or
// froze a moment ago would make it a silent no-op), preferring the
// scheduled one: pause-leader hits the relay leader, pause-consumer an
// instance that does not lead the relay, kill and crash-loop any. relaxed
// (the caller waited long enough) lets a pause take any running instance: a
// pause of the wrong role is worth more than none.
func pickTarget(k Kind, scheduled int, states []instState, relaxed bool) int {
	first := func(fits func(instState) bool) int {
		for _, s := range states {
			if s.Index == scheduled && s.Running && fits(s) {
				return s.Index
			}
		}
		for _, s := range states {
			if s.Running && fits(s) {
				return s.Index
			}
		}
		return 0
	}
	anyone := func(instState) bool { return true }
	var role func(instState) bool
	switch k {
	case KindPauseLeader:
		role = func(s instState) bool { return s.Leads }
	case KindPauseConsumer:
		role = func(s instState) bool { return !s.Leads }
	default:
		return first(anyone)
	}
	if n := first(role); n != 0 || !relaxed {
		return n
	}
	return first(anyone)
}

// targetWait is how long a process fault waits for a fitting target
// (pickTarget) before it gives up and is reported as not fired. A crash
// loop's kill waits less than the loop's period.
func targetWait(k Kind) time.Duration {
	switch k {
	case KindCrashLoop:
		return 1500 * time.Millisecond
	case KindKill:
		return 5 * time.Second
	default:
		return 8 * time.Second
	}
}

// hit finds the target of process fault f (pickTarget, relaxed after half
// of targetWait) and applies act to it, trying again while the target
// vanishes under it (killed, frozen or restarted by another fault between
// the choice and act). It returns the instance hit, a note when it is
// not the first choice and, for a pause that hit an instance of the wrong
// role, why (fallback); or an error saying why nothing was hit.
func (j *Injector) hit(ctx context.Context, f Fault, act func(*Instance) error) (i *Instance, note, fallback string, err error) {
	wait := targetWait(f.Kind)
	t0 := time.Now()
	var last error
	for {
		states, leader := j.states(ctx, f)
		relaxed := time.Since(t0) >= wait/2
		if n := pickTarget(f.Kind, f.Instance, states, relaxed); n != 0 {
			i := j.Cluster.Get(f.Service, n)
			if last = act(i); last == nil {
				return i, targetNote(f, states[n-1], leader, time.Since(t0)), targetFallback(f.Kind, states[n-1], leader), nil
			}
		} else {
			last = fmt.Errorf("no fitting target: %s", describeStates(states))
		}
		if time.Since(t0) >= wait || ctx.Err() != nil {
			return nil, "", "", fmt.Errorf("could not fire within %s: %w", wait, last)
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// states reads the state of f's service's instances; for the pauses also
// who leads the relay, and how that was learnt (leader).
func (j *Injector) states(ctx context.Context, f Fault) ([]instState, string) {
	c := j.Cluster
	var lead *Instance
	leader := ""
	if f.Kind == KindPauseLeader || f.Kind == KindPauseConsumer {
		var err error
		if lead, err = c.RelayLeader(ctx, f.Service); err == nil {
			leader = "gauge"
		} else if lead, err = c.RelayLeaderFromLogs(f.Service); err == nil {
			leader = "log"
		} else {
			leader = "unknown"
		}
	}
	out := make([]instState, 0, Instances)
	for n := 1; n <= Instances; n++ {
		i := c.Get(f.Service, n)
		out = append(out, instState{Index: n, Running: i.Running(), Leads: i == lead})
	}
	return out, leader
}

// targetNote says how the target of f came to be s, if not simply as
// scheduled; leader is how the relay leader was learnt.
func targetNote(f Fault, s instState, leader string, waited time.Duration) string {
	var parts []string
	if waited >= 500*time.Millisecond {
		parts = append(parts, fmt.Sprintf("waited %s for a target", waited.Round(100*time.Millisecond)))
	}
	switch {
	case f.Kind == KindPauseLeader && !s.Leads && leader == "unknown":
		parts = append(parts, "relay leader unknown; paused a running instance")
	case f.Kind == KindPauseLeader && !s.Leads:
		parts = append(parts, "relay leader not running; paused the other instance")
	case f.Kind == KindPauseLeader && leader == "log":
		parts = append(parts, "no leader gauge; leader found in its log")
	case f.Kind != KindPauseLeader && s.Index != f.Instance:
		parts = append(parts, fmt.Sprintf("scheduled %s-%d was not fit", f.Service, f.Instance))
	}
	return strings.Join(parts, "; ")
}

// targetFallback says why a pause's target s is not of the role its kind
// is for — the relay leader for pause-leader, a consumer that does not
// lead for pause-consumer — or "" if it is. leader is how the relay
// leader was learnt.
func targetFallback(k Kind, s instState, leader string) string {
	switch {
	case k == KindPauseLeader && !s.Leads && leader == "unknown":
		return "relay leader unknown: paused a running instance"
	case k == KindPauseLeader && !s.Leads:
		return "relay leader not running: paused the other instance"
	case k == KindPauseConsumer && s.Leads:
		return "only the relay leader ran: paused it"
	}
	return ""
}

// describeStates is e.g. "order-1 down, order-2 leads" for errors.
func describeStates(states []instState) string {
	parts := make([]string, len(states))
	for n, s := range states {
		st := "runs"
		switch {
		case !s.Running:
			st = "down or paused"
		case s.Leads:
			st = "leads"
		}
		parts[n] = fmt.Sprintf("#%d %s", s.Index, st)
	}
	return strings.Join(parts, ", ")
}
