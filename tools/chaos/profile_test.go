package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultsSchedule(t *testing.T) {
	tests := []struct {
		name    string
		load    time.Duration
		kills   int // crash-loop kills: one per CrashEvery of the loop
		wantErr bool
	}{
		{"OneMinute", time.Minute, 5, false},              // loop of load/4 = 15s
		{"TwoMinutes", 2 * time.Minute, 10, false},        // loop of 30s
		{"TenMinutesCapped", 10 * time.Minute, 10, false}, // still 30s
		{"TooShort", 40 * time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range int64(20) {
				tm := Timings{Load: tt.load, CrashEvery: 3 * time.Second, Pause: 15 * time.Second}
				s, err := DefaultsSchedule(seed, tm)
				if tt.wantErr {
					if err == nil {
						t.Fatalf("seed %d: want an error for a %s load", seed, tt.load)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				kinds := map[Kind]int{}
				var lastKill, freezeEnd time.Duration
				for _, f := range s {
					kinds[f.Kind]++
					if f.At+f.For > tt.load {
						t.Fatalf("seed %d: %s at %s for %s ends after the load", seed, f.Kind, f.At, f.For)
					}
					if f.Kind != KindBrokerKill && f.Instance != 1 {
						t.Fatalf("seed %d: %s on instance %d, want 1: -defaults runs one", seed, f.Kind, f.Instance)
					}
					switch f.Kind {
					case KindCrashLoop:
						lastKill = f.At
					case KindFreezeTwin:
						if f.At <= lastKill || f.For != tm.Pause {
							t.Fatalf("seed %d: freeze at %s for %s, want after the last kill (%s) for %s", seed, f.At, f.For, lastKill, tm.Pause)
						}
						freezeEnd = f.At + f.For
					case KindBrokerKill:
						if f.At < freezeEnd || freezeEnd == 0 {
							t.Fatalf("seed %d: broker kill at %s, want after the freeze (ends %s)", seed, f.At, freezeEnd)
						}
					default:
						t.Fatalf("seed %d: unexpected %s", seed, f.Kind)
					}
				}
				want := map[Kind]int{KindCrashLoop: tt.kills, KindFreezeTwin: 1, KindBrokerKill: 1}
				if !reflect.DeepEqual(kinds, want) {
					t.Fatalf("seed %d: kinds %v, want %v", seed, kinds, want)
				}
			}
		})
	}
}

func TestProfileSchedules(t *testing.T) {
	kindsOf := func(s []Fault) map[Kind]int {
		out := map[Kind]int{}
		for _, f := range s {
			out[f.Kind]++
		}
		return out
	}
	tests := []struct {
		name      string
		o         options
		instances int
		profile   string
		want      map[Kind]int // nil: the standard schedule, every kind
	}{
		{"Standard", options{}, 2, "standard", nil},
		{"Defaults", options{defaults: true}, 1, "defaults", map[Kind]int{KindCrashLoop: 5, KindFreezeTwin: 1, KindBrokerKill: 1}},
		{"Rolling", options{rolling: true}, 2, "rolling", map[Kind]int{KindRolling: 1}},
		{"DefaultsRolling", options{defaults: true, rolling: true}, 1, "defaults+rolling", map[Kind]int{KindRolling: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.seed, tt.o.crashEvery, tt.o.pause = 1, 3*time.Second, 15*time.Second
			if got := tt.o.instances(); got != tt.instances {
				t.Errorf("instances = %d, want %d", got, tt.instances)
			}
			if got := tt.o.profile(); got != tt.profile {
				t.Errorf("profile = %q, want %q", got, tt.profile)
			}
			s, err := tt.o.schedule(time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := kindsOf(s)
			if tt.want == nil {
				for _, k := range AllKinds {
					if got[k] == 0 {
						t.Errorf("no %s in the standard schedule: %v", k, got)
					}
				}
				for _, k := range ProfileKinds {
					if got[k] != 0 {
						t.Errorf("%s in the standard schedule", k)
					}
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("kinds %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseProfiles(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		pause   time.Duration
		wantErr string
	}{
		{"DefaultsPause15s", []string{"-defaults"}, 15 * time.Second, ""},
		{"DefaultsPauseGiven", []string{"-defaults", "-pause", "20s"}, 20 * time.Second, ""},
		{"StandardPause16s", nil, 16 * time.Second, ""},
		{"MaxStallAlone", []string{"-max-stall", "5s"}, 0, "-max-stall needs"},
		{"MaxStallRolling", []string{"-rolling", "-max-stall", "5s"}, 16 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, &strings.Builder{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.pause != tt.pause {
				t.Fatalf("pause = %s, want %s", o.pause, tt.pause)
			}
		})
	}
}

func TestStallOutside(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	win := func(a, b float64) Window { return Window{at(a), at(b)} }
	fin := []time.Time{at(1), at(2), at(12), at(13), at(30), at(31)}
	tests := []struct {
		name   string
		from   float64
		to     float64
		skip   []Window
		stall  time.Duration
		startS float64
	}{
		{"NoWindows", 0, 40, nil, 17 * time.Second, 13}, // 13 → 30
		{"WindowCoversTheLongest", 0, 40, []Window{win(13, 30)}, 10 * time.Second, 2},
		// 13 → 30 with 14–18 cut out: 12s from 18 to 30 is left.
		{"WindowInsideAStall", 0, 40, []Window{win(14, 18)}, 12 * time.Second, 18},
		{"TwoWindows", 0, 40, []Window{win(14, 29), win(3, 11)}, 9 * time.Second, 31}, // 31 → 40
		{"OverlappingWindows", 0, 40, []Window{win(3, 20), win(10, 27.5), win(33, 50)}, 2500 * time.Millisecond, 27.5},
		{"WindowBeyondTheEnd", 0, 20, []Window{win(25, 35)}, 10 * time.Second, 2},
		{"AllCut", 0, 40, []Window{win(-5, 50)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, from := StallOutside(fin, at(tt.from), at(tt.to), tt.skip)
			if d != tt.stall || (d > 0 && !from.Equal(at(tt.startS))) {
				t.Fatalf("got %s from +%s, want %s from +%gs", d, from.Sub(t0), tt.stall, tt.startS)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	fin := []time.Time{at(1), at(5), at(6), at(26), at(27), at(40)}
	// Declined payments finish without inventory or shipping: fewer
	// sagas complete than finish.
	done := []time.Time{at(1), at(6), at(26), at(40)}
	broker := Injected{Fault: Fault{Kind: KindBrokerKill}, Start: at(8), End: at(20), Fired: true}
	roll := Injected{Fault: Fault{Kind: KindRolling}, Start: at(2), End: at(30), Fired: true}
	tests := []struct {
		name     string
		o        options
		injected []Injected
		loadEnd  float64
		want     string // the last line's suffix
		met      bool
	}{
		// 6 → 26 less the broker's 8–20: 6s from 20; the 13s from 27 to 40 is
		// longer, and completions 26 → 40 a second more.
		{"DefaultsOutsideTheBroker", options{defaults: true}, []Injected{broker}, 45, " stall 13s ≤ 15s (completed 14s ≤ 15s)", true},
		{"DefaultsUnfiredBrokerNotCut", options{defaults: true}, []Injected{{Fault: broker.Fault, Start: at(8), End: at(20)}}, 45,
			" stall 20s > 15s (completed 20s > 15s)", false},
		{"DefaultsMaxStall", options{defaults: true, maxStall: 14 * time.Second}, []Injected{broker}, 45, " stall 13s ≤ 14s (completed 14s ≤ 14s)", true},
		// Only the completions exceed the bound: not met.
		{"DefaultsCompletionsExceed", options{defaults: true, maxStall: 13500 * time.Millisecond}, []Injected{broker}, 45,
			" stall 13s ≤ 13.5s (completed 14s > 13.5s)", false},
		{"Rolling", options{rolling: true}, []Injected{roll}, 45, " stall 20s > 5s (completed 20s > 5s)", false},
		// The load ended at +24: the restart is measured until then.
		{"RollingOutlastsTheLoad", options{rolling: true}, []Injected{roll}, 24, " stall 18s > 5s (completed 18s > 5s)", false},
		{"Standard", options{}, []Injected{broker, roll}, 45, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := tt.o.bounds(tt.injected, fin, done, start, at(tt.loadEnd))
			r := &Report{Bounds: bs}
			if got := r.boundsSuffix(); got != tt.want {
				t.Fatalf("suffix %q, want %q", got, tt.want)
			}
			if met := exceeded(bs) == nil; met != tt.met {
				t.Fatalf("met = %v, want %v (%v)", met, tt.met, exceeded(bs))
			}
		})
	}
}

func TestTwinEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"DerivedID", []string{"HTTP_ADDR=127.0.0.1:18082", "KAFKA_BROKERS=b:1"},
			[]string{"HTTP_ADDR=127.0.0.1:18182", "KAFKA_BROKERS=b:1"}},
		{"GivenID", []string{"KAFKA_GROUP_INSTANCE_ID=inventory-1", "HTTP_ADDR=127.0.0.1:18082"},
			[]string{"KAFKA_GROUP_INSTANCE_ID=inventory-2", "HTTP_ADDR=127.0.0.1:18182"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := twinEnv(tt.env, 18182, "inventory-2"); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("twinEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRisen(t *testing.T) {
	last := map[string]float64{}
	steps := []struct {
		sum, want float64
	}{
		{5, 0},  // the first scrape is a baseline
		{8, 3},  // rose by 3
		{8, 0},  // nothing finished
		{2, 2},  // restarted: its counter began again from zero
		{10, 8}, // rose again
	}
	for n, s := range steps {
		if got := risen(last, "order-1", s.sum); got != s.want {
			t.Fatalf("step %d: risen(%g) = %g, want %g", n, s.sum, got, s.want)
		}
	}
}
