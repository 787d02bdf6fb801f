package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// twins are the instances started beside a frozen one (KindFreezeTwin).
// They are kept out of Cluster.Instances: they live only while their fault
// lasts, and what waits for the cluster to be ready must not wait for them.
type twins struct {
	mu  sync.Mutex
	run []*Instance
	all []*Instance // every twin started, for its log
}

// Serving returns svc's instances and any twin of it running now.
func (c *Cluster) Serving(svc string) []*Instance {
	var out []*Instance
	for _, i := range c.Instances {
		if i.Service == svc {
			out = append(out, i)
		}
	}
	c.twins.mu.Lock()
	defer c.twins.mu.Unlock()
	for _, i := range c.twins.run {
		if i.Service == svc {
			out = append(out, i)
		}
	}
	return out
}

// StartTwin starts a second process beside i: the same binary and
// environment on the port of the next instance, so that an instance id
// derived from the host and port (-defaults) makes it a group member of
// its own. It returns once the process runs, not once it is ready.
func (c *Cluster) StartTwin(i *Instance) (*Instance, error) {
	n := Instances + 1
	if n > MaxInstances {
		return nil, fmt.Errorf("no ports for a twin of %s: %d instances run already", i.Name(), Instances)
	}
	t := &Instance{Service: i.Service, Index: n, Port: i.Port + 100*(n-i.Index), bin: i.bin, log: i.log}
	t.logPath = filepath.Join(filepath.Dir(i.logPath), t.Name()+".log")
	t.env = twinEnv(i.env, t.Port, t.Name())
	t.mu.Lock()
	err := t.start()
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.twins.mu.Lock()
	c.twins.run = append(c.twins.run, t)
	c.twins.all = append(c.twins.all, t)
	c.twins.mu.Unlock()
	return t, nil
}

// twinEnv is env with the twin's own HTTP port and, if env sets an
// instance id, the twin's own: two live members under one id fence each
// other.
func twinEnv(env []string, port int, name string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		switch {
		case strings.HasPrefix(e, "HTTP_ADDR="):
			e = fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port)
		case strings.HasPrefix(e, "KAFKA_GROUP_INSTANCE_ID="):
			e = "KAFKA_GROUP_INSTANCE_ID=" + name
		}
		out = append(out, e)
	}
	return out
}

// StopTwin stops t for good with SIGTERM, so that it leaves the group and
// its partitions move back at once, and forgets it.
func (c *Cluster) StopTwin(t *Instance) {
	t.stop(10 * time.Second)
	c.twins.mu.Lock()
	c.twins.run = slices.DeleteFunc(c.twins.run, func(i *Instance) bool { return i == t })
	c.twins.mu.Unlock()
}

// freezeTwin freezes instance f.Instance of f.Service (SIGSTOP) and at once
// starts a twin beside it, as an orchestrator replaces an instance that
// stopped answering. After f.For it thaws the frozen one and, once that is
// ready again, stops the twin: the service is never left without a member
// that consumes. The note says when the twin and the thawed one were ready.
func freezeTwin(ctx context.Context, c *Cluster, f Fault, in *Injected) error {
	i := c.Get(f.Service, f.Instance)
	// A crash loop may have just killed it: wait for it to run again.
	for t0 := time.Now(); !i.Running(); {
		if time.Since(t0) > 5*time.Second || ctx.Err() != nil {
			return fmt.Errorf("%s did not run within 5s", i.Name())
		}
		sleep(ctx, 100*time.Millisecond)
	}
	if err := i.Pause(); err != nil {
		return err
	}
	in.Target, in.Fired = i.Name(), true
	t0 := time.Now()
	tw, err := c.StartTwin(i)
	if err != nil {
		_ = i.Resume()
		return err
	}
	defer c.StopTwin(tw)
	in.Target += " (twin " + tw.Name() + fmt.Sprintf(" on :%d)", tw.Port)
	twinReady := make(chan string, 1)
	go func() {
		if err := tw.WaitReady(ctx, f.For); err != nil {
			twinReady <- fmt.Sprintf("twin not ready during the %s freeze", f.For)
			return
		}
		twinReady <- fmt.Sprintf("twin ready after %s", Duration(time.Since(t0)))
	}()
	sleep(ctx, f.For)
	if err := i.Resume(); err != nil {
		return fmt.Errorf("SIGCONT: %w", err)
	}
	thawed := time.Now()
	in.Note = <-twinReady
	if err := i.WaitReady(ctx, 30*time.Second); err != nil {
		return err
	}
	in.Note += fmt.Sprintf("; %s ready %s after SIGCONT", i.Name(), Duration(time.Since(thawed)))
	return nil
}

// Logs returns, by service, the log file of every instance and of every
// twin ever started, each once.
func (c *Cluster) Logs() map[string][]string {
	out := map[string][]string{}
	add := func(i *Instance) {
		if !slices.Contains(out[i.Service], i.logPath) {
			out[i.Service] = append(out[i.Service], i.logPath)
		}
	}
	for _, i := range c.Instances {
		add(i)
	}
	c.twins.mu.Lock()
	defer c.twins.mu.Unlock()
	for _, i := range c.twins.all {
		add(i)
	}
	return out
}
