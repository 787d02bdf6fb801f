package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind names a fault the suite injects.
type Kind string

// The fault kinds. Every run injects each of them at least once.
const (
	// KindKill is kill -9 of one service instance, restarted after a delay.
	KindKill Kind = "kill"
	// KindCrashLoop is one kill -9 of a crash loop: a random instance every
	// ~3 s for a window, each restarted at once.
	KindCrashLoop Kind = "crash-loop"
	// KindPauseLeader is SIGSTOP of a service's relay leader past 15 s,
	// then SIGCONT.
	KindPauseLeader Kind = "pause-leader"
	// KindPauseConsumer is SIGSTOP of a consumer instance past its
	// consumer-group session timeout, then SIGCONT.
	KindPauseConsumer Kind = "pause-consumer"
	// KindBrokerKill is kill -9 of the broker that leads a saga topic's
	// partition, restarted after a while.
	KindBrokerKill Kind = "broker-kill"
	// KindPGRestart is a restart of PostgreSQL (every service's database).
	KindPGRestart Kind = "pg-restart"
	// KindDuplicate re-produces every message of the four saga topics.
	KindDuplicate Kind = "duplicate"
	// KindFailpoints restarts every instance with the compiled-in crash
	// points armed (CHOREO_FAILPOINTS) for a window: after-commit on the
	// scheduled instance of every service, the relay's on both.
	KindFailpoints Kind = "failpoints"
)

// AllKinds lists every fault kind, in report order.
var AllKinds = []Kind{KindKill, KindCrashLoop, KindPauseLeader, KindPauseConsumer,
	KindBrokerKill, KindPGRestart, KindDuplicate, KindFailpoints}

// Services are the four saga participants, in saga order.
var Services = []string{"order", "payment", "inventory", "shipping"}

// MaxInstances is how many instances of a service can run at once: the
// ports a run claims cover this many.
const MaxInstances = 2

// Instances is how many instances of every service run: MaxInstances, or
// 1 with -defaults (whose frozen instance's twin takes the second ports).
var Instances = MaxInstances

// Fault is one scheduled fault. Process faults name their service and
// preferred instance (1-based); the instance they hit is chosen when they
// fire, among those running (see pickTarget). A broker kill finds its
// target when it fires.
type Fault struct {
	At       time.Duration `json:"at"`
	Kind     Kind          `json:"kind"`
	Service  string        `json:"service,omitempty"`
	Instance int           `json:"instance,omitempty"`
	// For is how long the fault lasts: the pause, the broker's or the
	// killed instance's down time, the failpoint window.
	For time.Duration `json:"for,omitempty"`
	// Topic and Partition: for a broker kill, whose leader to kill.
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition,omitempty"`
}

// Timings shape a schedule.
type Timings struct {
	// Load is how long orders are sent; every fault ends before it does.
	Load time.Duration
	// CrashEvery is the crash loop's period (~3 s).
	CrashEvery time.Duration
	// Pause is how long a SIGSTOP lasts: past a relay takeover's 15 s and
	// past the consumer session timeout.
	Pause time.Duration
	// Relay is the services' OUTBOX_RELAY, which decides the relay's
	// faults (KindsFor); "" is the built-in relay.
	Relay string
}

// Schedule returns the faults for a run of t.Load, the same for the same
// seed: every kind at least once, more of them the longer the load, and a
// crash loop (a kill every t.CrashEvery) as the last window, alone, so
// that the longest stall it causes is measured without other faults.
func Schedule(seed int64, t Timings) ([]Fault, error) {
	if t.CrashEvery <= 0 || t.Pause <= 0 {
		return nil, fmt.Errorf("schedule: CrashEvery and Pause must be positive")
	}
	warm := min(5*time.Second, t.Load/10)
	crashLen := min(max(t.Load/5, 5*t.CrashEvery), 40*time.Second)
	tail := 3 * time.Second
	crashStart := t.Load - tail - crashLen
	if crashStart-warm < t.Pause+5*time.Second {
		return nil, fmt.Errorf("schedule: a load of %s is too short for every fault (want at least %s)",
			t.Load, warm+t.Pause+5*time.Second+crashLen+tail)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x63686f72656f)) //nolint:gosec // a seeded schedule, not a secret
	var out []Fault
	// at places a fault lasting d somewhere in [warm, crashStart-d].
	at := func(d time.Duration) time.Duration {
		span := crashStart - d - warm
		if span <= 0 {
			return warm
		}
		return warm + time.Duration(r.Int64N(int64(span)))
	}
	instance := func() int { return 1 + r.IntN(Instances) }
	service := func() string { return Services[r.IntN(len(Services))] }
	topics := []string{"order.events", "payment.events", "inventory.events", "shipping.events"}
	mk := func(k Kind) Fault {
		switch k {
		case KindKill:
			d := 300*time.Millisecond + time.Duration(r.Int64N(int64(2*time.Second)))
			return Fault{At: at(d), Kind: k, Service: service(), Instance: instance(), For: d}
		case KindPauseLeader, KindPauseConsumer:
			d := t.Pause + time.Duration(r.Int64N(int64(3*time.Second)))
			return Fault{At: at(d), Kind: k, Service: service(), Instance: instance(), For: d}
		case KindBrokerKill:
			d := 5*time.Second + time.Duration(r.Int64N(int64(5*time.Second)))
			return Fault{At: at(d), Kind: k, For: d, Topic: topics[r.IntN(len(topics))], Partition: int32(r.IntN(3))}
		case KindConnectKill:
			d := time.Second + time.Duration(r.Int64N(int64(3*time.Second)))
			return Fault{At: at(d), Kind: k, Service: "connect", For: d}
		case KindConnectPause:
			d := t.Pause + time.Duration(r.Int64N(int64(3*time.Second)))
			return Fault{At: at(d), Kind: k, Service: "connect", For: d}
		case KindFailpoints:
			d := 15*time.Second + time.Duration(r.Int64N(int64(10*time.Second)))
			return Fault{At: at(d), Kind: k, Service: "*", Instance: instance(), For: d}
		default: // pg-restart, duplicate: instantaneous
			return Fault{At: at(0), Kind: k}
		}
	}
	for _, k := range KindsFor(t.Relay) {
		if k != KindCrashLoop {
			out = append(out, mk(k))
		}
	}
	// infra.sh runs one command at a time per state dir, and restarting a
	// broker takes a while (~40 s on a busy 2-core machine): the mandatory
	// PostgreSQL restart comes first, then the broker kill, early, so that
	// neither waits for the other nor spills into the crash loop.
	for i := range out {
		switch out[i].Kind {
		case KindPGRestart:
			out[i].At = warm + time.Duration(r.Int64N(int64(3*time.Second)))
		case KindBrokerKill:
			out[i].At = warm + 8*time.Second + time.Duration(r.Int64N(int64(max(time.Second, (crashStart-warm)/5))))
		}
	}
	// The two pauses on different services, so that no service has both
	// instances frozen by the mandatory faults.
	var leader, consumer *Fault
	for i := range out {
		switch out[i].Kind {
		case KindPauseLeader:
			leader = &out[i]
		case KindPauseConsumer:
			consumer = &out[i]
		}
	}
	for leader != nil && leader.Service == consumer.Service {
		consumer.Service = service()
	}
	// One more fault per 15 s of load beyond the first minute.
	extra := []Kind{KindKill, KindKill, KindKill, KindDuplicate, KindPGRestart, KindBrokerKill, KindPauseConsumer}
	if t.Relay == RelayDebezium {
		extra = append(extra, KindConnectKill, KindConnectPause)
	}
	for range max(0, int((crashStart-warm-time.Minute)/(15*time.Second))) {
		out = append(out, mk(extra[r.IntN(len(extra))]))
	}
	out = placeWorkerFaults(r, out, warm, crashStart)
	for at := crashStart; at < crashStart+crashLen; at += t.CrashEvery {
		jitter := time.Duration(r.Int64N(int64(t.CrashEvery / 4)))
		out = append(out, Fault{At: at + jitter, Kind: KindCrashLoop, Service: service(), Instance: instance(),
			For: 200 * time.Millisecond})
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out, nil
}

// CrashWindow returns when the crash loop of a schedule starts and ends
// (its last kill plus one period), or ok false if it has none.
func CrashWindow(s []Fault, every time.Duration) (from, to time.Duration, ok bool) {
	for _, f := range s {
		if f.Kind != KindCrashLoop {
			continue
		}
		if !ok || f.At < from {
			from = f.At
		}
		to = max(to, f.At+every)
		ok = true
	}
	return from, to, ok
}
