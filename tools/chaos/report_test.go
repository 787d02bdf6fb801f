package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

func TestTallyMissing(t *testing.T) {
	sched := []Fault{{Kind: KindKill}, {Kind: KindPauseConsumer}, {Kind: KindFailpoints}}
	allPoints := map[string]int{"failpoint:after-commit": 3, "failpoint:after-publish": 1, "failpoint:between-batches": 2, "killed": 9}
	tests := []struct {
		name     string
		injected []Injected
		exits    map[string]int
		want     []string
	}{
		{"AllFired", []Injected{{Fault: sched[0], Fired: true}, {Fault: sched[1], Fired: true}, {Fault: sched[2], Fired: true}},
			allPoints, nil},
		{"PauseConsumerNotFired", []Injected{{Fault: sched[0], Fired: true}, {Fault: sched[1], Err: "could not fire"}, {Fault: sched[2], Fired: true}},
			allPoints, []string{"pause-consumer at +0s: not fired: could not fire"}},
		{"NeverInjected", []Injected{{Fault: sched[1], Fired: true}, {Fault: sched[2], Fired: true}},
			allPoints, []string{"fault kind kill: scheduled 1, injected 0"}},
		{"ACrashPointSilent", []Injected{{Fault: sched[0], Fired: true}, {Fault: sched[1], Fired: true}, {Fault: sched[2], Fired: true}},
			map[string]int{"failpoint:after-commit": 5}, []string{"crash point after-publish: armed, fired none", "crash point between-batches: armed, fired none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Schedule: sched, Injected: tt.injected, Exits: tt.exits}
			r.tally()
			if !slices.Equal(r.Missing, tt.want) {
				t.Fatalf("Missing = %q, want %q", r.Missing, tt.want)
			}
		})
	}
}

// TestFaultsProven: every scheduled fault must be shown to have done what
// it was for, in a full run as in -short. Each case is one fault that
// did less than planned, in an otherwise complete run.
func TestFaultsProven(t *testing.T) {
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	kill := func(s int) Fault { return Fault{At: at(s), Kind: KindKill, Service: "payment", Instance: 1} }
	leader := Fault{At: at(20), Kind: KindPauseLeader, Service: "order", Instance: 2, For: 16 * time.Second}
	dup := Fault{At: at(30), Kind: KindDuplicate}
	copies := map[string]int{events.TypeOrderCreated: 10, events.TypePaymentCompleted: 8}
	// OrderCreated is payment's; PaymentCompleted is inventory's.
	counted := map[string]int{"payment": 10, "inventory": 8}
	base := func() []Injected {
		return []Injected{
			{Fault: kill(10), Fired: true, Target: "payment-1"},
			{Fault: kill(40), Fired: true, Target: "payment-2"},
			{Fault: leader, Fired: true, Target: "order-2", Takeover: Duration(8 * time.Second)},
			{Fault: dup, Fired: true, Copies: copies, Counted: counted},
		}
	}
	tests := []struct {
		name   string
		short  bool
		change func([]Injected)
		want   string // a Missing line containing this; "" for none
	}{
		{"AllProven", true, func([]Injected) {}, ""},
		{"AllProvenFullRun", false, func([]Injected) {}, ""},
		{"OneOfTwoKillsNeverFired", false, func(in []Injected) { in[1].Fired, in[1].Err = false, "no fitting target" }, "kill at +40s: not fired"},
		{"FallbackTargetInShort", true, func(in []Injected) {
			in[2].Fallback, in[2].Takeover = "relay leader not running; paused the other instance", 0
		}, "pause-leader at +20s: fell back"},
		{"FallbackTargetReportedInAFullRun", false, func(in []Injected) {
			in[2].Fallback, in[2].Takeover = "relay leader not running; paused the other instance", 0
		}, ""},
		{"PauseWithoutTakeover", false, func(in []Injected) { in[2].Takeover = -1 }, "not taken over"},
		{"PauseCutShort", true, func(in []Injected) {
			in[2].Err = "order-2 was replaced 6.7s into its pause (restarted or killed meanwhile)"
		}, "pause-leader at +20s: fired, but order-2 was replaced"},
		{"DuplicatePassNoDuplicateCounted", false, func(in []Injected) { in[3].Counted = map[string]int{} }, "duplicate at +30s: payment counted 0 duplicates, want ≥ 10"},
		{"DuplicatePassCountedShort", true, func(in []Injected) { in[3].Counted = map[string]int{"payment": 10, "inventory": 7} }, "inventory counted 7 duplicates, want ≥ 8"},
		{"DuplicatePassNeverMeasured", false, func(in []Injected) { in[3].Counted = nil }, "duplicates not measured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.change(in)
			sched := make([]Fault, len(in))
			for n := range in {
				sched[n] = in[n].Fault
			}
			r := &Report{Schedule: sched, Injected: in, Config: Settings{Short: tt.short}}
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

// TestDuplicatesWanted: a re-produced message is counted as a duplicate
// by every service that reacts to its type, once per pass still to come.
func TestDuplicatesWanted(t *testing.T) {
	got := duplicatesWanted(map[string]int{events.TypeOrderCancelRequested: 3, events.TypeInventoryReserved: 2, events.TypePaymentCompleted: 1})
	want := map[string]int{"payment": 3, "inventory": 4, "shipping": 5}
	for s, n := range want {
		if got[s] != n {
			t.Fatalf("duplicatesWanted = %v, want %v", got, want)
		}
	}
	if got["order"] != 0 {
		t.Fatalf("order reacts to none of these: %v", got)
	}
}
