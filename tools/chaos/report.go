package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	// LoadStart is when the load began, from Started.
	LoadStart Duration `json:"load_start"`
	Error     string   `json:"error,omitempty"`

	// Bounds: the stalls -defaults and -rolling are held to (profile.go).
	Bounds []Bound `json:"bounds,omitempty"`
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
	Instances int     `json:"instances"`
}

// Print writes the human report; its last line is the summary CI greps.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n=== chaos report (seed %d, tag %s, logs in %s)\n", r.Seed, r.Tag, r.Dir)
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
		case in.Kind == KindPauseLeader || (in.Kind == KindPauseConsumer && in.Note != ""):
			fmt.Fprintf(w, "  %s %s at +%s: %s\n", in.Kind, in.Target, at, in.Note)
		}
	}
	fps := make([]string, len(FailpointNames))
	for n, name := range FailpointNames {
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
	fmt.Fprintf(w, "drain: %s after the last fault, %s after the last order sent\n", r.Drain, r.DrainAfterLoad)
	fmt.Fprintf(w, "longest stall (no saga finishing): %s in the crash loop (kill -9 every ~3s for %s), %s over the load (at +%s)\n",
		r.CrashStall, r.CrashWindow, r.LoadStall, r.LoadStallAt)
	if p := r.Config.Profile; p != "" && p != "standard" {
		r.printBounds(w)
	}
	if r.Verdict.SkippedCustomers+r.Verdict.SkippedSKUs > 0 {
		fmt.Fprintf(w, "not checked (touched by unsettled keys): %d customers, %d SKUs\n", r.Verdict.SkippedCustomers, r.Verdict.SkippedSKUs)
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
	fmt.Fprintf(w, "chaos: lost=%d doubled=%d inconsistent=%d terminal=%d/%d%s\n",
		r.Verdict.Lost, r.Verdict.Doubled, r.Verdict.Inconsistent, r.Verdict.Terminal, r.Verdict.Total, r.boundsSuffix())
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

// tally fills the fault counts of the report from r.Injected and
// r.Exits, and r.Missing: in -short, where every fault kind and crash
// point is meant to happen, what did not.
func (r *Report) tally() {
	r.ByKind, r.Scheduled, r.Failpoints = map[Kind]int{}, map[Kind]int{}, map[string]int{}
	r.FaultErrs = 0
	for _, f := range r.Schedule {
		r.Scheduled[f.Kind]++
	}
	for _, in := range r.Injected {
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
		if r.Scheduled[k] > 0 && r.ByKind[k] == 0 {
			r.Missing = append(r.Missing, fmt.Sprintf("fault kind %s: scheduled %d, fired none", k, r.Scheduled[k]))
		}
	}
	if r.Scheduled[KindFailpoints] > 0 {
		for _, name := range FailpointNames {
			if r.Failpoints[name] == 0 {
				r.Missing = append(r.Missing, fmt.Sprintf("crash point %s: armed, fired none", name))
			}
		}
	}
}
