package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/choreo-saga/choreo/pkg/failpoint"
)

// Failpoints are the crash points an instance in a failpoint window runs
// with (CHOREO_FAILPOINTS), each firing with its probability per pass.
type Failpoints struct {
	// Consumer: after-commit, passed once a consumed message.
	Consumer string
	// Relay: after-publish and between-batches, passed once a batch on
	// the relay leader only.
	Relay string
}

// FailpointsFor returns the crash points of a run. A full run passes them
// often enough at 2%. The short one (-short) has one window of 15–25 s at
// 6 orders/s, in which a 2% after-commit fired twice, and a 5% relay point
// 2–9 times (fewer, larger batches on a loaded machine): at 8% and 10%
// each fires ~5–15 times, so that none stays silent but by a fluke.
func FailpointsFor(short bool, relay string) Failpoints {
	if relay == RelayDebezium {
		// No relay of the services' own passes the relay's points. The
		// consumers' fires at the short run's 8% in a full run too: at 2%
		// it passed a 22 s window of 10,000 orders at 25/s without firing
		// (Debezium delivers in bursts, and a batch passes it once).
		return Failpoints{Consumer: FailpointsFor(true, RelayBuiltin).Consumer}
	}
	if short {
		return Failpoints{Consumer: "after-commit=0.08", Relay: "after-publish=0.1,between-batches=0.1"}
	}
	return Failpoints{Consumer: "after-commit=0.02", Relay: "after-publish=0.02,between-batches=0.02"}
}

// FailpointNames are the crash points a failpoint window arms.
var FailpointNames = []string{failpoint.AfterCommit, failpoint.AfterPublish, failpoint.BetweenBatches}

// Injected is what became of one scheduled fault.
type Injected struct {
	Fault
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Target string    `json:"target,omitempty"`
	// Fired: the fault took effect (an instance killed or frozen, a
	// broker killed, ...). If not, Err says why.
	Fired bool   `json:"fired"`
	Note  string `json:"note,omitempty"`
	Err   string `json:"error,omitempty"`
	// Takeover: for a paused relay leader, how long until the other
	// instance led the relay; -1 if it did not during the pause.
	Takeover Duration `json:"takeover,omitempty"`
	// Fallback says why a pause hit an instance of the wrong role (not
	// the relay leader, or the leader for a consumer pause), if it did.
	Fallback string `json:"fallback,omitempty"`
	// Copies: for a duplicating pass, the messages re-produced by event
	// type; Counted, the rise of each service's duplicate counters from
	// the pass until the system was at rest.
	Copies  map[string]int `json:"copies_by_type,omitempty"`
	Counted map[string]int `json:"duplicates_counted,omitempty"`
	// countedFrom: the duplicate counters by service when the pass began.
	countedFrom map[string]int
}

// Injector fires a schedule's faults at their times.
type Injector struct {
	Cluster *Cluster
	Infra   *Infra
	From    Offsets // the duplicating pass re-produces from here
	Log     *slog.Logger
	// Failpoints are what a failpoint window arms.
	Failpoints Failpoints
	// Dups follows the consumers' duplicate counters, read before an
	// instance is stopped so that its count is not lost with it.
	Dups *DupCounter
	// Worker is the Kafka Connect worker with -relay debezium, else nil.
	Worker *Worker
	// Load is how long orders are sent: a worker fault waits for the
	// failpoint window at most until shortly before it ends.
	Load time.Duration

	mu   sync.Mutex
	done []Injected
	// window is closed when the first failpoint window has ended (see
	// waitWindow); start is when the load began.
	window chan struct{}
	start  time.Time
}

// Run fires every fault at start+At (in parallel: faults overlap), and
// returns when all have ended — paused instances resumed, killed brokers
// and instances started again, failpoints disarmed.
func (j *Injector) Run(ctx context.Context, start time.Time, sched []Fault) []Injected {
	j.window = newWindow(sched)
	j.start = start
	if j.Worker != nil {
		j.Worker.Order(sched)
	}
	var wg sync.WaitGroup
	for _, f := range sched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			in := Injected{Fault: f, Start: time.Now()}
			err := j.fire(ctx, f, &in)
			in.End = time.Now()
			if err != nil {
				in.Err = err.Error()
				j.Log.Warn("fault failed", "kind", f.Kind, "target", in.Target, "err", err)
			} else {
				j.Log.Info("fault done", "kind", f.Kind, "target", in.Target, "took", in.End.Sub(in.Start).Round(time.Millisecond), "note", in.Note)
			}
			j.mu.Lock()
			j.done = append(j.done, in)
			j.mu.Unlock()
		}()
	}
	wg.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Injected(nil), j.done...)
}

// sleep waits d or until ctx ends; faults still undo themselves (resume,
// restart) when ctx ends early.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (j *Injector) fire(ctx context.Context, f Fault, in *Injected) error {
	switch f.Kind {
	case KindKill, KindCrashLoop:
		i, note, _, err := j.hit(ctx, f, func(i *Instance) error {
			return i.Kill(f.For)
		})
		if err != nil {
			return err
		}
		in.Target, in.Note, in.Fired = i.Name(), note, true
		j.Log.Info("fault: kill -9", "kind", f.Kind, "instance", i.Name(), "down", f.For)
		return nil

	case KindPauseLeader, KindPauseConsumer:
		i, note, fallback, err := j.hit(ctx, f, func(i *Instance) error { return i.Pause() })
		if err != nil {
			return err
		}
		in.Target, in.Note, in.Fallback, in.Fired = i.Name(), note, fallback, true
		return j.pause(ctx, i, f.For, in)

	case KindBrokerKill:
		id, err := PartitionLeader(ctx, j.Infra.Kafka, f.Topic, f.Partition)
		if err != nil {
			return err
		}
		in.Target = fmt.Sprintf("broker %d (leader of %s/%d)", id, f.Topic, f.Partition)
		j.Log.Info("fault: kill -9 of a broker", "broker", id, "leads", fmt.Sprintf("%s/%d", f.Topic, f.Partition), "down", f.For)
		if err := j.Infra.KillNode(ctx, id); err != nil {
			return err
		}
		in.Fired = true
		sleep(ctx, f.For)
		return j.Infra.StartNode(context.WithoutCancel(ctx), id)

	case KindPGRestart:
		in.Target = "postgresql"
		j.Log.Info("fault: PostgreSQL restart")
		if err := j.Infra.RestartPG(ctx); err != nil {
			return err
		}
		in.Fired = true
		return nil

	case KindDuplicate:
		in.Target = "saga topics"
		// The counters before the first copy: every duplicate counted from
		// here until the system is at rest may be one of this pass.
		in.countedFrom = j.Dups.Totals(ctx)
		copies, err := Duplicate(ctx, j.Infra.Kafka, j.From)
		n := 0
		for _, c := range copies {
			n += c
		}
		in.Copies = copies
		in.Note = fmt.Sprintf("%d messages re-produced", n)
		in.Fired = n > 0
		return err

	case KindFailpoints:
		defer j.closeWindow()
		return j.failpoints(ctx, f, in)

	case KindConnectKill, KindConnectPause:
		if j.Worker == nil {
			return fmt.Errorf("%s needs -relay debezium", f.Kind)
		}
		waited := j.waitWindow(ctx)
		err := j.Worker.fault(ctx, f, in)
		if waited >= time.Second {
			in.Note = strings.TrimSpace(fmt.Sprintf("waited %s for the failpoint window to end; %s", Duration(waited), in.Note))
		}
		return err
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

// failpoints arms the crash points for f.For, then disarms them. The
// relay's points only fire on the relay leader, and a restarted leader
// loses its leadership to the other instance, so both instances of every
// service are armed with them, the leader restarted last: whichever leads
// — also after a crash point moved the leadership — is armed. The
// consumer's point is armed on the scheduled instance only, as before.
func (j *Injector) failpoints(ctx context.Context, f Fault, in *Injected) error {
	spec := func(i *Instance) string {
		if j.Failpoints.Relay == "" {
			// Without the relay's points, the consumers' on every instance:
			// the group may hand one instance only topics its service
			// rarely reacts to, and its crash point would pass nothing.
			return j.Failpoints.Consumer
		}
		if i.Index == f.Instance {
			return j.Failpoints.Consumer + "," + j.Failpoints.Relay
		}
		return j.Failpoints.Relay
	}
	var targets []string
	for _, i := range j.Cluster.Instances {
		targets = append(targets, i.Name()+"["+spec(i)+"]")
	}
	in.Target = strings.Join(targets, " ")
	j.Log.Info("fault: failpoints armed", "instances", in.Target, "for", f.For)
	if err := j.restartServices(ctx, spec); err != nil {
		return err
	}
	in.Fired = true
	sleep(ctx, f.For)
	return j.restartServices(context.WithoutCancel(ctx), func(*Instance) string { return "" })
}

// restartServices restarts every instance with the crash points spec
// gives it: the services at once, within a service one instance after the
// other, the relay leader last, each restart waiting until the instance
// answers /readyz — so that no service is ever down whole.
func (j *Injector) restartServices(ctx context.Context, spec func(*Instance) string) error {
	errs := make([]error, len(Services))
	var wg sync.WaitGroup
	for n, s := range Services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range j.leaderLast(ctx, s) {
				// Restart waits for a paused instance's pause to end.
				i.WaitThawed(ctx, time.Minute)
				if err := i.Restart(ctx, spec(i)); err != nil {
					errs[n] = err
					return
				}
				if err := i.WaitReady(ctx, time.Minute); err != nil {
					errs[n] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// leaderLast returns svc's instances with its relay leader, if known,
// last.
func (j *Injector) leaderLast(ctx context.Context, svc string) []*Instance {
	lead, err := j.Cluster.RelayLeader(ctx, svc)
	if err != nil {
		lead, _ = j.Cluster.RelayLeaderFromLogs(svc)
	}
	var out []*Instance
	for n := 1; n <= Instances; n++ {
		if i := j.Cluster.Get(svc, n); i != lead {
			out = append(out, i)
		}
	}
	if lead != nil {
		out = append(out, lead)
	}
	return out
}

// pause keeps i, just frozen (SIGSTOP), so for d, then thaws it
// (SIGCONT).
func (j *Injector) pause(ctx context.Context, i *Instance, d time.Duration, in *Injected) error {
	j.Log.Info("fault: SIGSTOP", "kind", in.Kind, "instance", i.Name(), "for", d, "note", in.Note)
	t0 := time.Now()
	starts := i.Starts()
	sleep(ctx, d)
	if i.Starts() != starts {
		// Another fault restarted or killed it: the pause was cut short.
		return fmt.Errorf("%s was replaced during its %s pause", i.Name(), d.Round(100*time.Millisecond))
	}
	if err := i.Resume(); err != nil {
		return fmt.Errorf("SIGCONT: %w (the process was replaced meanwhile)", err)
	}
	if in.Kind == KindPauseLeader {
		// Did another instance take the relay over while this one was frozen?
		other := j.Cluster.Get(i.Service, 1+i.Index%Instances)
		if t, ok := other.ElectedSince(t0); ok && t.Before(t0.Add(d)) {
			in.Takeover = Duration(t.Sub(t0))
			in.Note = strings.TrimSpace(in.Note + fmt.Sprintf(" %s took the relay over after %s", other.Name(), in.Takeover))
		} else {
			in.Takeover = -1
			in.Note = strings.TrimSpace(in.Note + fmt.Sprintf(" no takeover by %s during the %s pause", other.Name(), d.Round(100*time.Millisecond)))
		}
	}
	return nil
}
