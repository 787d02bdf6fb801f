package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is everything a run found, as printed and as written to -out.
type Report struct {
	Seed     int64      `json:"seed"`
	Tag      string     `json:"tag"`
	Started  time.Time  `json:"started"`
	Wall     Duration   `json:"wall"`
	Config   Settings   `json:"config"`
	Dir      string     `json:"dir"`
	Load     LoadStats  `json:"load"`
	Schedule []Fault    `json:"schedule"`
	Injected []Injected `json:"injected"`
	// ByKind counts the faults that fired, Scheduled those scheduled.
	ByKind    map[Kind]int   `json:"faults_by_kind"`
	Scheduled map[Kind]int   `json:"scheduled_by_kind"`
	FaultErrs int            `json:"fault_errors"`
	Exits     map[string]int `json:"exits_by_cause"`
	// Failpoints counts the crashes of every armed crash point.
	Failpoints map[string]int `json:"failpoints_fired"`
	// Missing lists what was meant to happen and did not: a scheduled
	// fault kind that never fired, a crash point that never did.
	Missing []string `json:"missing,omitempty"`
	// Drain: from the end of the last fault (all processes up) until the
	// last order was seen finishing; DrainAfterLoad from the last order
	// sent.
	Drain          Duration `json:"drain_after_last_fault"`
	DrainAfterLoad Duration `json:"drain_after_load"`
	// Stalls: the longest stretch with no saga finishing, in the crash
	// loop's window and over the whole load.
	CrashWindow Duration `json:"crash_window"`
	CrashStall  Duration `json:"longest_stall_crash_loop"`
	LoadStall   Duration `json:"longest_stall_load"`
	LoadStallAt Duration `json:"longest_stall_load_at"`
	Verdict     Verdict  `json:"verdict"`
	// Budget is how many planned orders could go without a 201.
	Budget Budget `json:"budget"`
	// Rest is the wait for the system at rest before the reads.
	Rest Rest `json:"at_rest"`
	// LoadStart is when the load began, from Started.
	LoadStart Duration `json:"load_start"`
	Error     string   `json:"error,omitempty"`

	// Bounds: the stalls -defaults and -rolling are held to (profile.go).
	Bounds []Bound `json:"bounds,omitempty"`
	// Duplicates counts, by service, the deliveries the consumers skipped
	// as already processed, from the start until the system was at rest.
	Duplicates map[string]int `json:"duplicates_skipped,omitempty"`
}

// Duration marshals as a string like "1.5s".
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d Duration) String() string { return time.Duration(d).Round(100 * time.Millisecond).String() }

// Settings are the run's knobs, as reported.
type Settings struct {
	Orders    int     `json:"orders"`
	Rate      float64 `json:"rate"`
	Customers int     `json:"customers"`
	SKUs      int     `json:"skus"`
	Short     bool    `json:"short"`
	Profile   string  `json:"profile"` // standard, defaults, rolling
	Relay     string  `json:"relay"`   // the services' OUTBOX_RELAY: builtin, debezium
	Instances int     `json:"instances"`
}

// Print writes the human report; its last line is the summary CI greps.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n=== chaos report (seed %d, tag %s, relay %s, logs in %s)\n", r.Seed, r.Tag, orBuiltin(r.Config.Relay), r.Dir)
	l := r.Load
	fmt.Fprintf(w, "load: %d orders sent in %s (%.1f/s), accepted %d, refused %d, unsettled %d, client retries %d, replays %d, max in flight %d\n",
		l.Sent, Duration(l.Elapsed), l.Rate, l.Accepted, l.Rejected, l.Unsettled, l.Retries, l.Replays, l.MaxBacklog)
	fmt.Fprintln(w, "faults by kind (fired/scheduled):")
	for _, k := range r.kinds() {
		fmt.Fprintf(w, "  %-15s %d/%d\n", k, r.ByKind[k], r.Scheduled[k])
	}
	if r.FaultErrs > 0 {
		fmt.Fprintf(w, "  (%d faults failed to fire or undo, see the JSON)\n", r.FaultErrs)
	}
	loadStart := r.Started.Add(time.Duration(r.LoadStart))
	for _, in := range r.Injected {
		at := Duration(in.Start.Sub(loadStart))
		switch {
		case !in.Fired:
			fmt.Fprintf(w, "  NOT FIRED %s %s at +%s: %s\n", in.Kind, in.Service, at, in.Err)
		case in.Fallback != "":
			fmt.Fprintf(w, "  FALLBACK %s %s at +%s: %s\n", in.Kind, in.Target, at, in.Fallback)
		case in.Kind == KindPauseLeader || in.Kind == KindConnectKill || in.Kind == KindConnectPause || (in.Kind == KindPauseConsumer && in.Note != ""):
			fmt.Fprintf(w, "  %s %s at +%s: %s\n", in.Kind, in.Target, at, in.Note)
		case in.Kind == KindDuplicate:
			want := duplicatesWanted(in.Copies)
			parts := make([]string, len(Services))
			for n, s := range Services {
				parts[n] = fmt.Sprintf("%s %d/%d", s, in.Counted[s], want[s])
			}
			fmt.Fprintf(w, "  %s at +%s: %s; duplicates counted/re-produced for it until at rest: %s\n", in.Kind, at, in.Note, strings.Join(parts, ", "))
		}
	}
	names := failpointNames(r.Config.Relay)
	fps := make([]string, len(names))
	for n, name := range names {
		fps[n] = fmt.Sprintf("%s %d", name, r.Failpoints[name])
	}
	fmt.Fprintf(w, "crash points fired: %s\n", strings.Join(fps, ", "))
	causes := make([]string, 0, len(r.Exits))
	for c, n := range r.Exits {
		causes = append(causes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(causes)
	fmt.Fprintf(w, "process ends: %s\n", strings.Join(causes, ", "))
	fmt.Fprintf(w, "outcomes: %s\n", formatOutcomes(r.Verdict.Outcomes))
	if len(r.Duplicates) > 0 {
		parts := make([]string, len(Services))
		for n, s := range Services {
			parts[n] = fmt.Sprintf("%s %d", s, r.Duplicates[s])
		}
		fmt.Fprintf(w, "duplicate deliveries skipped by the consumers, every fault together: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "drain: %s after the last fault, %s after the last order sent\n", r.Drain, r.DrainAfterLoad)
	if r.Rest.Reached {
		fmt.Fprintf(w, "at rest after %s more: every outbox sent, every consumer group at the partitions' ends; two reads %s apart compared\n", r.Rest.Waited, rereadAfter)
	} else {
		fmt.Fprintf(w, "NOT AT REST after %s: outboxes unsent %v, consumer lag %v %s\n", r.Rest.Waited, r.Rest.Outbox, r.Rest.Lag, r.Rest.Err)
	}
	fmt.Fprintf(w, "longest stall (no saga finishing): %s in the crash loop (kill -9 every ~3s for %s), %s over the load (at +%s)\n",
		r.CrashStall, r.CrashWindow, r.LoadStall, r.LoadStallAt)
	if p := r.Config.Profile; p != "" && p != "standard" {
		r.printBounds(w)
	}
	if len(r.Verdict.RefusedByKind)+len(r.Verdict.UnsettledByKind) > 0 {
		fmt.Fprintf(w, "without a 201: refused %s; unsettled %s (budget: %d refused, %d unsettled)\n",
			orNone(formatOutcomes(r.Verdict.RefusedByKind)), orNone(formatOutcomes(r.Verdict.UnsettledByKind)), r.Budget.Refused, r.Budget.Unsettled)
	}
	if r.Verdict.BoundedCustomers+r.Verdict.BoundedSKUs > 0 {
		fmt.Fprintf(w, "checked within bounds (touched by unsettled keys): %d customers, %d SKUs\n", r.Verdict.BoundedCustomers, r.Verdict.BoundedSKUs)
	}
	for i, v := range r.Verdict.Violations {
		if i == 20 {
			fmt.Fprintf(w, "… and %d more violations (see the JSON)\n", len(r.Verdict.Violations)-20)
			break
		}
		fmt.Fprintf(w, "VIOLATION %s/%s order=%s key=%s: %s\n", v.Class, v.What, v.Order, v.Key, v.Detail)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "MISSING %s\n", m)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	fmt.Fprintf(w, "wall time: %s\n", r.Wall)
	fmt.Fprintf(w, "chaos: lost=%d doubled=%d inconsistent=%d unproven=%d terminal=%d/%d%s\n",
		r.Verdict.Lost, r.Verdict.Doubled, r.Verdict.Inconsistent, r.Verdict.Unproven, r.Verdict.Terminal, r.Verdict.Total, r.boundsSuffix())
}

func orBuiltin(relay string) string {
	if relay == "" {
		return RelayBuiltin
	}
	return relay
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func formatOutcomes(m map[string]int) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Proven returns an error if a scheduled fault or crash point did not do
// what it was for (r.Missing, from tally), in any profile.
func (r *Report) Proven() error {
	if len(r.Missing) > 0 {
		return fmt.Errorf("%d scheduled faults or crash points not proven", len(r.Missing))
	}
	return nil
}

// tally fills the fault counts of the report from r.Injected and
// r.Exits, and r.Missing: every scheduled fault that was not injected,
// did not fire or failed after firing, hit a fallback target in -short, froze a relay leader that
// nobody took over from, or re-produced messages the consumers did not
// count as duplicates; every armed crash point that never fired.
func (r *Report) tally() {
	r.ByKind, r.Scheduled, r.Failpoints = map[Kind]int{}, map[Kind]int{}, map[string]int{}
	r.FaultErrs = 0
	injected := map[Kind]int{}
	for _, f := range r.Schedule {
		r.Scheduled[f.Kind]++
	}
	for _, in := range r.Injected {
		injected[in.Kind]++
		if in.Fired {
			r.ByKind[in.Kind]++
		}
		if in.Err != "" {
			r.FaultErrs++
		}
	}
	for cause, n := range r.Exits {
		if name, ok := strings.CutPrefix(cause, "failpoint:"); ok {
			r.Failpoints[name] += n
		}
	}
	r.Missing = nil
	for _, k := range r.kinds() {
		if injected[k] < r.Scheduled[k] {
			r.Missing = append(r.Missing, fmt.Sprintf("fault kind %s: scheduled %d, injected %d", k, r.Scheduled[k], injected[k]))
		}
	}
	injectedInOrder := slices.SortedStableFunc(slices.Values(r.Injected), func(a, b Injected) int { return int(a.At - b.At) })
	for n, in := range injectedInOrder {
		what := fmt.Sprintf("%s at +%s", in.Kind, in.At)
		switch {
		case !in.Fired:
			r.Missing = append(r.Missing, fmt.Sprintf("%s: not fired: %s", what, in.Err))
		case in.Err != "":
			r.Missing = append(r.Missing, fmt.Sprintf("%s: fired, but %s", what, in.Err))
		case in.Fallback != "" && r.Config.Short:
			r.Missing = append(r.Missing, fmt.Sprintf("%s: fell back to %s (%s)", what, in.Target, in.Fallback))
		case in.Kind == KindPauseLeader && in.Fallback == "" && in.Takeover < 0:
			r.Missing = append(r.Missing, fmt.Sprintf("%s: the paused relay leader %s was not taken over", what, in.Target))
		case in.Kind == KindDuplicate:
			r.Missing = append(r.Missing, duplicatesMissing(what, in, injectedInOrder[n+1:])...)
		}
	}
	if r.Scheduled[KindFailpoints] > 0 {
		for _, name := range failpointNames(r.Config.Relay) {
			if r.Failpoints[name] == 0 {
				r.Missing = append(r.Missing, fmt.Sprintf("crash point %s: armed, fired none", name))
			}
		}
	}
}

// duplicatesMissing says which services counted fewer duplicates from
// the pass in until the system was at rest than the pass and the passes
// after it (later) re-produced for them.
func duplicatesMissing(what string, in Injected, later []Injected) []string {
	if in.Counted == nil {
		return []string{what + ": duplicates not measured"}
	}
	copies := maps.Clone(in.Copies)
	for _, l := range later {
		if l.Kind == KindDuplicate {
			for t, n := range l.Copies {
				copies[t] += n
			}
		}
	}
	var out []string
	want := duplicatesWanted(copies)
	for _, s := range Services {
		if in.Counted[s] < want[s] {
			out = append(out, fmt.Sprintf("%s: %s counted %d duplicates, want ≥ %d (re-produced messages it reacts to)", what, s, in.Counted[s], want[s]))
		}
	}
	return out
}
