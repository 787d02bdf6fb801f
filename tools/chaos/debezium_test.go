package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestScheduleDebezium: with -relay debezium every run kills and freezes
// the Connect worker while orders flow, after the failpoint window (whose
// consumer crash point passes only on messages the worker publishes), one
// after the other (so none waits for another), and the relay leader's
// pause, which has no target without the built-in relay, is not scheduled.
func TestScheduleDebezium(t *testing.T) {
	for _, load := range []time.Duration{70 * time.Second, 400 * time.Second} {
		for seed := range int64(50) {
			tm := Timings{Load: load, CrashEvery: 3 * time.Second, Pause: 16 * time.Second, Relay: RelayDebezium}
			s, err := Schedule(seed, tm)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Schedule(seed, tm)
			if !reflect.DeepEqual(s, again) {
				t.Fatalf("seed %d: same seed, different schedules", seed)
			}
			kinds := map[Kind]int{}
			var pause, kill, prev, window *Fault
			for i, f := range s {
				kinds[f.Kind]++
				if i > 0 && f.At < s[i-1].At {
					t.Fatalf("seed %d: not sorted at %d", seed, i)
				}
				if f.At < 0 || f.At+f.For > load {
					t.Fatalf("seed %d: %s at %s for %s ends after the load (%s)", seed, f.Kind, f.At, f.For, load)
				}
				switch {
				case f.Kind == KindConnectPause && pause == nil:
					pause = &s[i]
				case f.Kind == KindConnectKill && kill == nil:
					kill = &s[i]
				}
				if f.Kind == KindFailpoints && window == nil {
					window = &s[i]
				}
				if f.Kind == KindConnectKill || f.Kind == KindConnectPause || f.Kind == KindFailpoints {
					if prev != nil && prev.At+prev.For > f.At {
						t.Fatalf("seed %d load %s: %s at %s for %s overlaps %s at %s", seed, load, prev.Kind, prev.At, prev.For, f.Kind, f.At)
					}
					prev = &s[i]
				}
				if f.Kind == KindConnectPause && f.For < tm.Pause {
					t.Fatalf("seed %d: worker pause of %s, want ≥ %s (past its group session)", seed, f.For, tm.Pause)
				}
				if f.Kind == KindConnectKill && (f.For <= 0 || f.Service != "connect") {
					t.Fatalf("seed %d: worker kill %+v", seed, f)
				}
			}
			for _, k := range KindsFor(RelayDebezium) {
				if kinds[k] == 0 {
					t.Fatalf("load %s seed %d: no %s fault in %v", load, seed, k, kinds)
				}
			}
			if kinds[KindPauseLeader] != 0 {
				t.Fatalf("seed %d: %d relay leader pauses with no built-in relay", seed, kinds[KindPauseLeader])
			}
			if pause.At > kill.At {
				t.Fatalf("seed %d: the first worker kill (%s) comes before the first pause (%s)", seed, kill.At, pause.At)
			}
			if window.At+window.For > pause.At {
				t.Fatalf("seed %d: the failpoint window (%s for %s) runs into the worker's pause at %s", seed, window.At, window.For, pause.At)
			}
			if from, _, _ := CrashWindow(s, tm.CrashEvery); kill.At >= from {
				t.Fatalf("seed %d: the worker kill (%s) in the crash loop (%s)", seed, kill.At, from)
			}
		}
	}
	// The built-in relay's schedule is as it was: no worker faults.
	s, _ := Schedule(1, Timings{Load: 70 * time.Second, CrashEvery: 3 * time.Second, Pause: 16 * time.Second})
	if slices.ContainsFunc(s, func(f Fault) bool { return f.Kind == KindConnectKill || f.Kind == KindConnectPause }) {
		t.Fatal("a worker fault in the built-in relay's schedule")
	}
}

// TestWorkerFaultsProven: a worker fault passes only if it fired and the
// connectors ran again after it; with Debezium the relay's crash points
// are not wanted, the consumers' is.
func TestWorkerFaultsProven(t *testing.T) {
	kill := Fault{At: 30 * time.Second, Kind: KindConnectKill, Service: "connect", For: 2 * time.Second}
	pause := Fault{At: 8 * time.Second, Kind: KindConnectPause, Service: "connect", For: 17 * time.Second}
	fp := Fault{At: 12 * time.Second, Kind: KindFailpoints, Service: "*", Instance: 1, For: 20 * time.Second}
	tests := []struct {
		name     string
		injected []Injected
		exits    map[string]int
		want     string // a Missing line containing this; "" for none
	}{
		{"AllProven", []Injected{{Fault: pause, Fired: true}, {Fault: fp, Fired: true}, {Fault: kill, Fired: true}},
			map[string]int{"failpoint:after-commit": 4}, ""},
		{"KillNeverInjected", []Injected{{Fault: pause, Fired: true}, {Fault: fp, Fired: true}},
			map[string]int{"failpoint:after-commit": 4}, "fault kind connect-kill: scheduled 1, injected 0"},
		{"ConnectorsNotBackAfterKill", []Injected{{Fault: pause, Fired: true}, {Fault: fp, Fired: true},
			{Fault: kill, Fired: true, Err: "connectors not all running after 3m0s: choreo-shipping not running"}},
			map[string]int{"failpoint:after-commit": 4}, "connect-kill at +30s: fired, but connectors not all running"},
		{"PauseNotFrozen", []Injected{{Fault: pause, Err: `worker pid 7 in state "S" after SIGSTOP, not stopped`}, {Fault: fp, Fired: true}, {Fault: kill, Fired: true}},
			map[string]int{"failpoint:after-commit": 4}, "connect-pause at +8s: not fired"},
		{"ConsumerCrashPointSilent", []Injected{{Fault: pause, Fired: true}, {Fault: fp, Fired: true}, {Fault: kill, Fired: true}},
			map[string]int{}, "crash point after-commit: armed, fired none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Schedule: []Fault{pause, fp, kill}, Injected: tt.injected, Exits: tt.exits,
				Config: Settings{Short: true, Relay: RelayDebezium}}
			r.tally()
			err := r.Proven()
			if tt.want == "" {
				if err != nil || len(r.Missing) > 0 {
					t.Fatalf("a proven run: Proven() = %v, Missing %q", err, r.Missing)
				}
				return
			}
			if err == nil || !slices.ContainsFunc(r.Missing, func(m string) bool { return strings.Contains(m, tt.want) }) {
				t.Fatalf("Proven() = %v, Missing %q; want a failure naming %q", err, r.Missing, tt.want)
			}
		})
	}
}

// TestProcState: what proves a worker fault — a frozen process reads T,
// a killed one is gone or a zombie.
func TestProcState(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill() //nolint:errcheck // already dead in the end
	if st := procState(pid); st != "S" && st != "R" {
		t.Fatalf("a running sleep: state %q", st)
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	if st, ok := waitState(t.Context(), pid, 2*time.Second, func(s string) bool { return s == "T" }); !ok {
		t.Fatalf("after SIGSTOP: state %q, want T", st)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if st, ok := waitState(t.Context(), pid, 2*time.Second, func(s string) bool { return s == "" || s == "Z" }); !ok {
		t.Fatalf("after kill -9: state %q, want gone or Z", st)
	}
	_ = cmd.Wait()
	if st := procState(pid); st != "" {
		t.Fatalf("reaped: state %q, want none", st)
	}
}

// TestWorkerFaultTurns: worker faults run one at a time in schedule order
// whichever fires first, a pause is proven on a real process (frozen, then
// thawed), and a fault after which a connector does not run again fails.
func TestWorkerFaultTurns(t *testing.T) {
	var down atomic.Bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state := "RUNNING"
		if down.Load() && strings.Contains(r.URL.Path, "choreo-shipping") {
			state = "UNASSIGNED"
		}
		fmt.Fprintf(w, `{"connector":{"state":%q},"tasks":[{"state":%q}]}`, state, state)
	}))
	defer api.Close()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	w := &Worker{URL: api.URL, log: slog.New(slog.DiscardHandler), pid: cmd.Process.Pid}
	first := Fault{At: time.Second, Kind: KindConnectPause, For: 1200 * time.Millisecond}
	second := Fault{At: 2 * time.Second, Kind: KindConnectPause, For: 300 * time.Millisecond}
	w.Order([]Fault{second, first})

	var ends [2]time.Time
	var ins [2]Injected
	var wg sync.WaitGroup
	for n, f := range []Fault{second, first} { // the later one fires first
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n == 1 {
				time.Sleep(200 * time.Millisecond)
			}
			if err := w.fault(t.Context(), f, &ins[n]); err != nil {
				t.Errorf("%s at %s: %v", f.Kind, f.At, err)
			}
			ends[n] = time.Now()
		}()
	}
	wg.Wait()
	if !ins[0].Fired || !ins[1].Fired {
		t.Fatalf("not fired: %+v", ins)
	}
	if !ends[1].Before(ends[0]) {
		t.Fatalf("the fault scheduled first ended at %s, after the one scheduled second (%s)", ends[1].Format(time.StampMilli), ends[0].Format(time.StampMilli))
	}
	if !strings.Contains(ins[0].Note, "waited") {
		t.Fatalf("the second fault's note %q does not say it waited", ins[0].Note)
	}
	if st := procState(cmd.Process.Pid); st == "T" {
		t.Fatal("the process is still frozen")
	}

	// A connector that does not come back: the fault fails after firing.
	down.Store(true)
	third := Fault{At: 3 * time.Second, Kind: KindConnectPause, For: 100 * time.Millisecond}
	w.Order([]Fault{third})
	w.Recover = time.Second
	var in Injected
	err := w.fault(t.Context(), third, &in)
	if err == nil || !in.Fired || !strings.Contains(err.Error(), "choreo-shipping") {
		t.Fatalf("fired %v, err %v: want fired and an error naming choreo-shipping", in.Fired, err)
	}
}
