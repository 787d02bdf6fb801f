package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/workload"
)

func TestScheduleDeterministicPerSeed(t *testing.T) {
	tm := Timings{Load: 60 * time.Second, CrashEvery: 3 * time.Second, Pause: 16 * time.Second}
	a, err := Schedule(7, tm)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Schedule(7, tm)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	c, _ := Schedule(8, tm)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
}

func TestScheduleEveryKindWithinLoad(t *testing.T) {
	for _, load := range []time.Duration{60 * time.Second, 10 * time.Minute} {
		for seed := range int64(50) {
			tm := Timings{Load: load, CrashEvery: 3 * time.Second, Pause: 16 * time.Second}
			s, err := Schedule(seed, tm)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[Kind]int{}
			var leader, consumer string
			for i, f := range s {
				kinds[f.Kind]++
				if i > 0 && f.At < s[i-1].At {
					t.Fatalf("seed %d: not sorted at %d", seed, i)
				}
				if f.At < 0 || f.At+f.For > load {
					t.Fatalf("seed %d: %s at %s for %s ends after the load (%s)", seed, f.Kind, f.At, f.For, load)
				}
				if f.Kind == KindPauseLeader || f.Kind == KindPauseConsumer {
					if f.For <= tm.Pause-time.Nanosecond {
						t.Fatalf("seed %d: pause of %s, want ≥ %s", seed, f.For, tm.Pause)
					}
				}
				if f.Kind == KindPauseLeader && leader == "" {
					leader = f.Service
				}
				if f.Kind == KindPauseConsumer && consumer == "" {
					consumer = f.Service
				}
			}
			for _, k := range AllKinds {
				if kinds[k] == 0 {
					t.Fatalf("load %s seed %d: no %s fault in %v", load, seed, k, kinds)
				}
			}
			if load < 2*time.Minute && leader == consumer { // no extra faults: these are the mandatory ones
				t.Fatalf("seed %d: both mandatory pauses on %s", seed, leader)
			}
			if kinds[KindCrashLoop] < 4 {
				t.Fatalf("seed %d: crash loop of %d kills", seed, kinds[KindCrashLoop])
			}
			// The crash loop comes last, alone.
			from, _, _ := CrashWindow(s, tm.CrashEvery)
			for _, f := range s {
				if f.Kind != KindCrashLoop && f.At+f.For > from {
					t.Fatalf("seed %d: %s overlaps the crash loop", seed, f.Kind)
				}
			}
		}
	}
}

func TestScheduleTooShort(t *testing.T) {
	if _, err := Schedule(1, Timings{Load: 20 * time.Second, CrashEvery: 3 * time.Second, Pause: 16 * time.Second}); err == nil {
		t.Fatal("a 20s load: want an error")
	}
}

func TestPlanMix(t *testing.T) {
	w := NewWorld("t", 50, 20)
	a, b := Plan(3, "t", 2000, w), Plan(3, "t", 2000, w)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different plans")
	}
	kinds := map[workload.Kind]int{}
	inst := map[int]int{}
	for _, r := range a {
		kinds[r.Kind]++
		inst[r.Instance]++
		if len(r.Items) == 0 {
			t.Fatalf("%s: no items", r.Key)
		}
	}
	if comp := len(a) - kinds[workload.Happy]; comp*10 < len(a) {
		t.Fatalf("%d compensating of %d, want ≥10%%", comp, len(a))
	}
	for _, k := range []workload.Kind{workload.Declined, workload.OutOfStock, workload.Unserved} {
		if kinds[k] == 0 {
			t.Fatalf("no %s order", k)
		}
	}
	if inst[1] == 0 || inst[2] == 0 {
		t.Fatalf("orders not spread over both instances: %v", inst)
	}
}

func TestLongestStall(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fin := []time.Time{at(1), at(2), at(9), at(10), at(30)}
	d, from := LongestStall(fin, at(0), at(12))
	if d != 7*time.Second || !from.Equal(at(2)) {
		t.Fatalf("got %s from %s, want 7s from +2s", d, from.Sub(t0))
	}
	if d, _ := LongestStall(nil, at(0), at(5)); d != 5*time.Second {
		t.Fatalf("nothing finished: got %s, want 5s", d)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP choreo_outbox_leader x
choreo_outbox_leader{service="payment"} 1
choreo_outbox_leader_other 3
choreo_events_handled_total{outcome="applied",service="order",type="ShipmentScheduled"} 12
`
	if m := parseMetrics(text, "choreo_outbox_leader"); len(m) != 1 || m[`service="payment"`] != 1 {
		t.Fatalf("leader: %v", m)
	}
	if m := parseMetrics(text, "choreo_events_handled_total"); m[`outcome="applied",service="order",type="ShipmentScheduled"`] != 12 {
		t.Fatalf("handled: %v", m)
	}
}
