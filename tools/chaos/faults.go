package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
			i = c.Get(f.Service, f.Instance)
			in.Note = fmt.Sprintf("relay leader unknown (%v); paused instance %d instead", err, f.Instance)
		}
		return j.pause(ctx, i, f.For, in)

	case KindPauseConsumer:
		i := c.Get(f.Service, f.Instance)
		// Prefer the instance that does not lead the relay, so this pause
		// is about the consumer group.
		if l, err := c.RelayLeader(ctx, f.Service); err == nil && l == i {
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
	sleep(ctx, d)
	if err := i.Resume(); err != nil {
		return fmt.Errorf("SIGCONT: %w (the process was replaced meanwhile)", err)
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
