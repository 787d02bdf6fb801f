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
	Seed      int64          `json:"seed"`
	Tag       string         `json:"tag"`
	Started   time.Time      `json:"started"`
	Wall      Duration       `json:"wall"`
	Config    Settings       `json:"config"`
	Dir       string         `json:"dir"`
	Load      LoadStats      `json:"load"`
	Schedule  []Fault        `json:"schedule"`
	Injected  []Injected     `json:"injected"`
	ByKind    map[Kind]int   `json:"faults_by_kind"`
	FaultErrs int            `json:"fault_errors"`
	Exits     map[string]int `json:"exits_by_cause"`
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
}

// Print writes the human report; its last line is the summary CI greps.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n=== chaos report (seed %d, tag %s, logs in %s)\n", r.Seed, r.Tag, r.Dir)
	l := r.Load
	fmt.Fprintf(w, "load: %d orders sent in %s (%.1f/s), accepted %d, refused %d, unsettled %d, client retries %d, replays %d, max in flight %d\n",
		l.Sent, Duration(l.Elapsed), l.Rate, l.Accepted, l.Rejected, l.Unsettled, l.Retries, l.Replays, l.MaxBacklog)
	fmt.Fprintln(w, "faults by kind:")
	for _, k := range AllKinds {
		fmt.Fprintf(w, "  %-15s %d\n", k, r.ByKind[k])
	}
	if r.FaultErrs > 0 {
		fmt.Fprintf(w, "  (%d faults failed to fire or undo, see the JSON)\n", r.FaultErrs)
	}
	for _, in := range r.Injected {
		if in.Note != "" && in.Kind == KindPauseLeader {
			fmt.Fprintf(w, "  pause-leader %s at +%s: %s\n", in.Target, Duration(in.Start.Sub(r.Started.Add(time.Duration(r.LoadStart)))), in.Note)
		}
	}
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
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	fmt.Fprintf(w, "wall time: %s\n", r.Wall)
	fmt.Fprintf(w, "chaos: lost=%d doubled=%d inconsistent=%d terminal=%d/%d\n",
		r.Verdict.Lost, r.Verdict.Doubled, r.Verdict.Inconsistent, r.Verdict.Terminal, r.Verdict.Total)
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
