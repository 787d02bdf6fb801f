package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// failpointSpec is what an instance in a failpoint window runs with: each
// compiled-in crash point fires with this probability.
const failpointSpec = "after-commit=0.02,after-publish=0.02,between-batches=0.02"

// Injected is what became of one scheduled fault.
type Injected struct {
	Fault
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Target string    `json:"target,omitempty"`
	Note   string    `json:"note,omitempty"`
	Err    string    `json:"error,omitempty"`
	// Takeover: for a paused relay leader, how long until the other
	// instance led the relay; -1 if it did not during the pause.
	Takeover Duration `json:"takeover,omitempty"`
}

// Injector fires a schedule's faults at their times.
type Injector struct {
	Cluster *Cluster
	Infra   *Infra
	From    Offsets // the duplicating pass re-produces from here
	Log     *slog.Logger

	mu   sync.Mutex
	done []Injected
}

// Run fires every fault at start+At (in parallel: faults overlap), and
// returns when all have ended — paused instances resumed, killed brokers
// and instances started again, failpoints disarmed.
func (j *Injector) Run(ctx context.Context, start time.Time, sched []Fault) []Injected {
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
	c := j.Cluster
	switch f.Kind {
	case KindKill, KindCrashLoop:
		i := c.Get(f.Service, f.Instance)
		in.Target = i.Name()
		j.Log.Info("fault: kill -9", "kind", f.Kind, "instance", i.Name(), "down", f.For)
		return i.Kill(f.For)

	case KindPauseLeader:
		i, err := c.RelayLeader(ctx, f.Service)
		if err != nil {
			var lerr error
			if i, lerr = c.RelayLeaderFromLogs(f.Service); lerr == nil {
				in.Note = fmt.Sprintf("no leader gauge (%v); leader found in its log", err)
			} else {
				i = c.Get(f.Service, f.Instance)
				in.Note = fmt.Sprintf("relay leader unknown (%v; %v); paused instance %d instead", err, lerr, f.Instance)
			}
		}
		return j.pause(ctx, i, f.For, in)

	case KindPauseConsumer:
		i := c.Get(f.Service, f.Instance)
		// Prefer the instance that does not lead the relay, so this pause
		// is about the consumer group.
		l, err := c.RelayLeader(ctx, f.Service)
		if err != nil {
			l, _ = c.RelayLeaderFromLogs(f.Service)
		}
		if l == i {
			i = c.Get(f.Service, 1+f.Instance%Instances)
		}
		return j.pause(ctx, i, f.For, in)

	case KindBrokerKill:
		id, err := PartitionLeader(ctx, j.Infra.Brokers, f.Topic, f.Partition)
		if err != nil {
			return err
		}
		in.Target = fmt.Sprintf("broker %d (leader of %s/%d)", id, f.Topic, f.Partition)
		j.Log.Info("fault: kill -9 of a broker", "broker", id, "leads", fmt.Sprintf("%s/%d", f.Topic, f.Partition), "down", f.For)
		if err := j.Infra.KillNode(ctx, id); err != nil {
			return err
		}
		sleep(ctx, f.For)
		return j.Infra.StartNode(context.WithoutCancel(ctx), id)

	case KindPGRestart:
		in.Target = "postgresql"
		j.Log.Info("fault: PostgreSQL restart")
		return j.Infra.RestartPG(ctx)

	case KindDuplicate:
		in.Target = "saga topics"
		n, err := Duplicate(ctx, j.Infra.Brokers, j.From)
		in.Note = fmt.Sprintf("%d messages re-produced", n)
		return err

	case KindFailpoints:
		var armed []*Instance
		for _, s := range Services {
			armed = append(armed, c.Get(s, f.Instance))
		}
		in.Target = fmt.Sprint(instanceNames(armed))
		j.Log.Info("fault: failpoints armed", "instances", in.Target, "spec", failpointSpec, "for", f.For)
		if err := restartAll(ctx, armed, failpointSpec); err != nil {
			return err
		}
		sleep(ctx, f.For)
		if err := restartAll(context.WithoutCancel(ctx), armed, ""); err != nil {
			return err
		}
		in.Note = "spec " + failpointSpec
		return nil
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

// pause freezes i for d (SIGSTOP), then thaws it (SIGCONT).
func (j *Injector) pause(ctx context.Context, i *Instance, d time.Duration, in *Injected) error {
	in.Target = i.Name()
	j.Log.Info("fault: SIGSTOP", "kind", in.Kind, "instance", i.Name(), "for", d)
	if err := i.Pause(); err != nil {
		return err
	}
	t0 := time.Now()
	sleep(ctx, d)
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

// restartAll restarts the instances at once with the given failpoints.
func restartAll(ctx context.Context, is []*Instance, failpoints string) error {
	errs := make([]error, len(is))
	var wg sync.WaitGroup
	for n, i := range is {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[n] = i.Restart(ctx, failpoints)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
