package main

import (
	"slices"
	"testing"
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
			allPoints, []string{"fault kind pause-consumer: scheduled 1, fired none"}},
		{"NeverInjected", []Injected{{Fault: sched[1], Fired: true}, {Fault: sched[2], Fired: true}},
			allPoints, []string{"fault kind kill: scheduled 1, fired none"}},
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
