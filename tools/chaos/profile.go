package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// The profiles below measure what the services do in their default
// configuration (issue 16): -defaults runs one instance per service with
// no KAFKA_GROUP_INSTANCE_ID, as make run starts them, under a crash loop,
// a freeze beside a started twin and a broker stop; -rolling restarts
// every instance one at a time with orders flowing. Each reports its
// longest stall against a bound; -max-stall makes the bound fail the run.

// The fault kinds only these profiles schedule.
const (
	// KindFreezeTwin is SIGSTOP of an instance with a twin started beside
	// it on the next instance's port, stopped once the frozen one is thawed
	// and ready again.
	KindFreezeTwin Kind = "freeze-twin"
	// KindRolling is a rolling restart of every instance (rollingRestart).
	KindRolling Kind = "rolling-restart"
)

// ProfileKinds are the fault kinds of -defaults and -rolling that the
// standard schedule never has.
var ProfileKinds = []Kind{KindFreezeTwin, KindRolling}

// kinds are the fault kinds the report counts, in report order: every
// kind of the standard schedule, and the profile kinds it scheduled.
func (r *Report) kinds() []Kind {
	out := slices.Clone(KindsFor(r.Config.Relay))
	for _, k := range ProfileKinds {
		if slices.ContainsFunc(r.Schedule, func(f Fault) bool { return f.Kind == k }) {
			out = append(out, k)
		}
	}
	return out
}

// The bounds of issue 16: the longest stall of a -defaults run outside
// broker downtime, and over a rolling restart.
const (
	DefaultsBound = 15 * time.Second
	RollingBound  = 5 * time.Second
)

// profile names the run's profile, as reported.
func (o options) profile() string {
	switch {
	case o.defaults && o.rolling:
		return "defaults+rolling"
	case o.defaults:
		return "defaults"
	case o.rolling:
		return "rolling"
	}
	return "standard"
}

// instances is how many instances of every service the profile runs.
func (o options) instances() int {
	if o.defaults {
		return 1
	}
	return MaxInstances
}

// schedule returns the profile's faults for a load of load.
func (o options) schedule(load time.Duration) ([]Fault, error) {
	t := Timings{Load: load, CrashEvery: o.crashEvery, Pause: o.pause, Relay: o.relay}
	switch {
	case o.rolling:
		return RollingSchedule(t)
	case o.defaults:
		return DefaultsSchedule(o.seed, t)
	}
	return Schedule(o.seed, t)
}

// DefaultsSchedule returns the faults of -defaults, one after the other
// so that each stall can be told apart: a crash loop (kill -9 of a random
// service every t.CrashEvery), a t.Pause freeze of a random service with
// a twin, then the kill -9 of the broker leading a random saga partition,
// last because how long a broker takes to come back varies most. The
// services and the broker's partition are the seed's.
func DefaultsSchedule(seed int64, t Timings) ([]Fault, error) {
	if t.CrashEvery <= 0 || t.Pause <= 0 {
		return nil, fmt.Errorf("schedule: CrashEvery and Pause must be positive")
	}
	const warm, gap, tail = 5 * time.Second, 3 * time.Second, 3 * time.Second
	r := rand.New(rand.NewPCG(uint64(seed), 0x64656661756c74)) //nolint:gosec // a seeded schedule, not a secret
	crashLen := min(max(t.Load/4, 5*t.CrashEvery), 30*time.Second)
	down := 5*time.Second + time.Duration(r.Int64N(int64(5*time.Second)))
	if need := warm + crashLen + gap + t.Pause + gap + down + tail; t.Load < need {
		return nil, fmt.Errorf("schedule: -defaults needs a load of at least %s, got %s", need, t.Load)
	}
	service := func() string { return Services[r.IntN(len(Services))] }
	var out []Fault
	for at := warm; at < warm+crashLen; at += t.CrashEvery {
		jitter := time.Duration(r.Int64N(int64(t.CrashEvery / 4)))
		out = append(out, Fault{At: at + jitter, Kind: KindCrashLoop, Service: service(), Instance: 1, For: 200 * time.Millisecond})
	}
	freeze := warm + crashLen + gap
	out = append(out, Fault{At: freeze, Kind: KindFreezeTwin, Service: service(), Instance: 1, For: t.Pause})
	out = append(out, Fault{At: freeze + t.Pause + gap, Kind: KindBrokerKill, For: down,
		Topic: SagaTopics[r.IntN(len(SagaTopics))], Partition: int32(r.IntN(3))})
	return out, nil
}

// RollingSchedule returns the one fault of -rolling: a rolling restart,
// once the load has warmed up. How long it takes depends on how fast the
// instances get ready; a load that ends first is reported (see bounds).
func RollingSchedule(t Timings) ([]Fault, error) {
	const warm = 5 * time.Second
	if t.Load < warm+10*time.Second {
		return nil, fmt.Errorf("schedule: -rolling needs a load of at least %s, got %s", warm+10*time.Second, t.Load)
	}
	return []Fault{{At: warm, Kind: KindRolling, Service: "*", For: rollingGap}}, nil
}

// runSchedule fires sched: the profile kinds here, the others with
// inj.Run, all from start and at once, as the standard schedule does.
func runSchedule(ctx context.Context, inj *Injector, start time.Time, sched []Fault) []Injected {
	var own, rest []Fault
	for _, f := range sched {
		if slices.Contains(ProfileKinds, f.Kind) {
			own = append(own, f)
		} else {
			rest = append(rest, f)
		}
	}
	others := make(chan []Injected, 1)
	go func() { others <- inj.Run(ctx, start, rest) }()
	var (
		mu  sync.Mutex
		out []Injected
		wg  sync.WaitGroup
	)
	for _, f := range own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			in := Injected{Fault: f, Start: time.Now()}
			var err error
			switch f.Kind {
			case KindFreezeTwin:
				err = freezeTwin(ctx, inj.Cluster, f, &in)
			case KindRolling:
				err = rollingRestart(ctx, inj.Cluster, f, &in)
			}
			in.End = time.Now()
			if err != nil {
				in.Err = err.Error()
				inj.Log.Warn("fault failed", "kind", f.Kind, "target", in.Target, "err", err)
			} else {
				inj.Log.Info("fault done", "kind", f.Kind, "target", in.Target, "took", in.End.Sub(in.Start).Round(time.Millisecond), "note", in.Note)
			}
			mu.Lock()
			out = append(out, in)
			mu.Unlock()
		}()
	}
	wg.Wait()
	out = append(<-others, out...)
	slices.SortStableFunc(out, func(a, b Injected) int { return a.Start.Compare(b.Start) })
	return out
}

// Span is a stretch of a run, from the start of the load.
type Span struct {
	From Duration `json:"from"`
	To   Duration `json:"to"`
}

// Bound is a profile's longest stall and the bound it is held to: the
// longest stretch with no saga finishing, and with none completing (see
// Observer), which a stop of inventory or shipping cannot hide behind
// declined payments that finish without them.
type Bound struct {
	What        string   `json:"what"`
	Stall       Duration `json:"stall"`
	At          Duration `json:"at"` // when it began, from the start of the load
	Completed   Duration `json:"stall_completed"`
	CompletedAt Duration `json:"stall_completed_at"`
	Max         Duration `json:"max"`
	// Over is the stretch the stall was measured in; Excluded the
	// stretches cut out of it (broker downtime).
	Over     Span   `json:"over"`
	Excluded []Span `json:"excluded,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Met reports whether both stalls are within the bound.
func (b Bound) Met() bool { return b.Stall <= b.Max && b.Completed <= b.Max }

// String is e.g. "stall 7.2s ≤ 15s (completed 9.1s ≤ 15s)", as on the
// report's last line.
func (b Bound) String() string {
	cmp := func(d Duration) string {
		if d <= b.Max {
			return fmt.Sprintf("%s ≤ %s", d, b.Max)
		}
		return fmt.Sprintf("%s > %s", d, b.Max)
	}
	return fmt.Sprintf("stall %s (completed %s)", cmp(b.Stall), cmp(b.Completed))
}

// bounds measures the profile's stalls in finishes and completions (the
// times sagas were seen finishing and completing): for -rolling over the restart, for -defaults over the
// load outside every broker fault, from its kill until the broker served
// again. The bound is -max-stall if set, else the issue's.
func (o options) bounds(injected []Injected, finishes, completions []time.Time, start, loadEnd time.Time) []Bound {
	rel := func(t time.Time) Duration { return Duration(t.Sub(start)) }
	limit := func(d time.Duration) Duration {
		if o.maxStall > 0 {
			return Duration(o.maxStall)
		}
		return Duration(d)
	}
	var out []Bound
	switch {
	case o.rolling:
		for _, in := range injected {
			if in.Kind != KindRolling || !in.Fired {
				continue
			}
			to, note := in.End, ""
			if to.After(loadEnd) {
				to, note = loadEnd, fmt.Sprintf("the restart outlasted the load by %s: measured until the load ended (raise -duration)", Duration(in.End.Sub(loadEnd)))
			}
			d, at := LongestStall(finishes, in.Start, to)
			dc, atc := LongestStall(completions, in.Start, to)
			out = append(out, Bound{What: "longest stall over the rolling restart", Stall: Duration(d), At: rel(at),
				Completed: Duration(dc), CompletedAt: rel(atc),
				Max: limit(RollingBound), Over: Span{rel(in.Start), rel(to)}, Note: note})
		}
	case o.defaults:
		var skip []Window
		var spans []Span
		for _, in := range injected {
			if in.Kind == KindBrokerKill && in.Fired {
				skip = append(skip, Window{in.Start, in.End})
				spans = append(spans, Span{rel(in.Start), rel(in.End)})
			}
		}
		d, at := StallOutside(finishes, start, loadEnd, skip)
		dc, atc := StallOutside(completions, start, loadEnd, skip)
		out = append(out, Bound{What: "longest stall outside broker downtime", Stall: Duration(d), At: rel(at),
			Completed: Duration(dc), CompletedAt: rel(atc),
			Max: limit(DefaultsBound), Over: Span{0, rel(loadEnd)}, Excluded: spans})
	}
	return out
}

// exceeded returns an error naming every bound not met, or nil.
func exceeded(bs []Bound) error {
	var errs []error
	for _, b := range bs {
		if !b.Met() {
			errs = append(errs, fmt.Errorf("%s: %s", b.What, b))
		}
	}
	return errors.Join(errs...)
}

// Window is a stretch of time.
type Window struct{ From, To time.Time }

// StallOutside is LongestStall over [from, to] with the windows in skip
// cut out: the longest stretch that overlaps no skip window and in which
// no saga finished, and when it began. A stall that runs into a window
// counts up to the window's start, one that runs out of it from its end.
func StallOutside(finishes []time.Time, from, to time.Time, skip []Window) (time.Duration, time.Time) {
	longest, at := time.Duration(0), from
	for _, p := range cut(Window{from, to}, skip) {
		if d, a := LongestStall(finishes, p.From, p.To); d > longest {
			longest, at = d, a
		}
	}
	return longest, at
}

// cut returns the parts of w outside every window in skip, in order.
func cut(w Window, skip []Window) []Window {
	skip = slices.Clone(skip)
	slices.SortFunc(skip, func(a, b Window) int { return a.From.Compare(b.From) })
	var out []Window
	cur := w.From
	for _, s := range skip {
		if !s.To.After(cur) {
			continue
		}
		if !s.From.Before(w.To) {
			break
		}
		if s.From.After(cur) {
			out = append(out, Window{cur, s.From})
		}
		cur = s.To
	}
	if cur.Before(w.To) {
		out = append(out, Window{cur, w.To})
	}
	return out
}

// printBounds writes the profile's lines of the report: each bound, the
// spans cut out of it, and the notes of the profile's faults.
func (r *Report) printBounds(w io.Writer) {
	loadStart := r.Started.Add(time.Duration(r.LoadStart))
	for _, in := range r.Injected {
		switch in.Kind {
		case KindFreezeTwin, KindRolling:
			fmt.Fprintf(w, "  %s %s at +%s for %s: %s\n", in.Kind, in.Target, Duration(in.Start.Sub(loadStart)), Duration(in.End.Sub(in.Start)), in.Note)
		case KindBrokerKill:
			fmt.Fprintf(w, "  %s %s: down +%s to +%s (%s, until it served again)\n", in.Kind, in.Target,
				Duration(in.Start.Sub(loadStart)), Duration(in.End.Sub(loadStart)), Duration(in.End.Sub(in.Start)))
		}
	}
	for _, b := range r.Bounds {
		var ex []string
		for _, s := range b.Excluded {
			ex = append(ex, fmt.Sprintf("+%s–+%s", s.From, s.To))
		}
		extra := ""
		if len(ex) > 0 {
			extra = ", excluding " + strings.Join(ex, ", ")
		}
		fmt.Fprintf(w, "%s (+%s–+%s%s): %s at +%s, completed %s at +%s: %s\n",
			b.What, b.Over.From, b.Over.To, extra, b.Stall, b.At, b.Completed, b.CompletedAt, b)
		if b.Note != "" {
			fmt.Fprintf(w, "  %s\n", b.Note)
		}
	}
}

// boundsSuffix is what the report's last line says of the bounds, e.g.
// " stall 7.2s ≤ 15s".
func (r *Report) boundsSuffix() string {
	var b strings.Builder
	for _, x := range r.Bounds {
		b.WriteString(" " + x.String())
	}
	return b.String()
}
