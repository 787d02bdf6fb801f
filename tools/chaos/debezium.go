// This file is the relay switch (-relay debezium): a Kafka Connect worker
// publishes the outboxes instead of the services' own relay, and the
// worker, now the relay, is what the relay's faults hit: kill -9 and
// restart, SIGSTOP past its group session, then SIGCONT.

package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// The relays a run can choose (the services' OUTBOX_RELAY).
const (
	RelayBuiltin  = outbox.RelayBuiltin
	RelayDebezium = outbox.RelayDebezium
)

// The fault kinds of the Connect worker, scheduled only with Debezium.
const (
	// KindConnectKill is kill -9 of the Connect worker, started again after
	// a delay with the command line infra.sh started it with.
	KindConnectKill Kind = "connect-kill"
	// KindConnectPause is SIGSTOP of the Connect worker past its group
	// session timeout, then SIGCONT.
	KindConnectPause Kind = "connect-pause"
)

// KindsFor returns the fault kinds of the standard schedule for relay, in
// report order. With Debezium the worker's faults take the place of the
// relay leader's pause, as there is no relay leader to freeze.
func KindsFor(relay string) []Kind {
	if relay != RelayDebezium {
		return AllKinds
	}
	var out []Kind
	for _, k := range AllKinds {
		if k != KindPauseLeader {
			out = append(out, k)
		}
	}
	return append(out, KindConnectKill, KindConnectPause)
}

// failpointNames are the crash points a failpoint window arms for relay:
// without the built-in relay, only the consumers' after-commit is passed.
func failpointNames(relay string) []string {
	if relay == RelayDebezium {
		return []string{failpoint.AfterCommit}
	}
	return FailpointNames
}

// placeWorkerFaults lays the failpoint window and the worker's faults out
// one after the other over [warm, crashStart): the window first, while
// the worker publishes (a consumer's crash point passes only on messages
// that arrive), then the worker's pause, then its kill, then any more
// worker faults, each followed by room for the worker to recover
// (afterWorkerFault), so that none waits for the one before and all happen
// while orders flow. More worker faults than fit are dropped, and the
// window shortened if the mandatory ones do not fit.
func placeWorkerFaults(r *rand.Rand, out []Fault, warm, crashStart time.Duration) []Fault {
	first := func(k Kind) int { return slices.IndexFunc(out, func(f Fault) bool { return f.Kind == k }) }
	pause, kill := first(KindConnectPause), first(KindConnectKill)
	if pause < 0 || kill < 0 {
		return out
	}
	var seq []int
	if fp := first(KindFailpoints); fp >= 0 {
		seq = append(seq, fp)
	}
	seq = append(seq, pause, kill)
	mandatory := len(seq)
	for i, f := range out {
		if (f.Kind == KindConnectKill || f.Kind == KindConnectPause) && i != pause && i != kill {
			seq = append(seq, i)
		}
	}
	need := func(seq []int) time.Duration {
		var d time.Duration
		for n, i := range seq {
			d += out[i].For
			if n < len(seq)-1 {
				d += afterWorkerFault(out[i].Kind)
			}
		}
		return d
	}
	for len(seq) > mandatory && need(seq) > crashStart-warm {
		drop := seq[len(seq)-1]
		seq = seq[:len(seq)-1]
		out = slices.Delete(out, drop, drop+1)
		// The extras were appended last and in order: dropping from the
		// end leaves the indices of the others as they were.
	}
	// A short load: the failpoint window gives up what is missing, down to
	// 10 s, rather than the worker's faults their time.
	if over := need(seq) - (crashStart - warm); over > 0 && out[seq[0]].Kind == KindFailpoints {
		out[seq[0]].For = max(10*time.Second, out[seq[0]].For-over)
	}
	slack := max(0, crashStart-warm-need(seq))
	cur := warm
	for _, i := range seq {
		cur += time.Duration(r.Int64N(int64(max(time.Millisecond, slack/time.Duration(len(seq))))))
		out[i].At = cur
		cur += out[i].For + afterWorkerFault(out[i].Kind)
	}
	return out
}

// afterWorkerFault is the room a schedule leaves after a fault of kind k
// before the next worker fault: a killed worker takes a minute or more to
// start again and run its connectors on a busy 2-core machine, a thawed one
// a few seconds.
func afterWorkerFault(k Kind) time.Duration {
	switch k {
	case KindConnectKill:
		return time.Minute
	case KindConnectPause:
		return 5 * time.Second
	}
	return 3 * time.Second
}

// Worker is the run's Kafka Connect worker, started by infra.sh
// connect-up on the run's cluster, and after a kill by the suite with the
// same command line, environment and directory.
type Worker struct {
	Infra *Infra
	URL   string
	log   *slog.Logger
	// Recover is how long the connectors get to run again after a fault
	// (recoverWithin if 0).
	Recover time.Duration
	// client carries the REST credential (nil: none).
	client *http.Client

	// Worker faults take turns in schedule order, one at a time, none cut
	// short by another: turns are their schedule times, served how many
	// have ended (see Order).
	turns  []time.Duration
	served int

	mu     sync.Mutex
	pid    int
	argv   []string
	env    []string
	dir    string
	exited chan struct{} // closed when a process the suite started has ended; nil for infra.sh's
}

// connectorNames are the four connectors, one per service database.
func connectorNames() []string {
	out := make([]string, len(Services))
	for n, s := range Services {
		out[n] = "choreo-" + s
	}
	return out
}

// StartWorker starts the worker (infra.sh connect-up), checks that its
// internal topics are replicated on every broker and its producers
// write with acks=all and idempotence, and registers one connector per
// service database (internal/connect), each running with its slot made
// before the services start.
func StartWorker(ctx context.Context, log *slog.Logger, in *Infra) (*Worker, error) {
	linkConnectJars(log, in.Dir)
	if _, err := in.script(ctx, "connect-up"); err != nil {
		return nil, err
	}
	w := &Worker{Infra: in, URL: fmt.Sprintf("http://127.0.0.1:%d", in.ConnectPort), log: log}
	if err := w.adopt(); err != nil {
		return nil, err
	}
	// The worker's REST API wants infra.sh's credential; each connector
	// produces as its service's own Kafka user, whose password goes to
	// the secrets directory the worker reads.
	client, err := connect.Client(in.Exported["KAFKA_CONNECT_USERNAME"], in.Exported["KAFKA_CONNECT_PASSWORD_FILE"])
	if err != nil {
		return nil, err
	}
	w.client = client
	secretsDir := in.Exported["KAFKA_CONNECT_SECRETS_DIR"]
	props, err := os.ReadFile(filepath.Join(in.Dir, "connect-config", "worker.properties"))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	rf := strconv.Itoa(min(in.Nodes, 3))
	for _, want := range []string{"config.storage.replication.factor=" + rf, "offset.storage.replication.factor=" + rf,
		"status.storage.replication.factor=" + rf, "producer.acks=all", "producer.enable.idempotence=true"} {
		if !slices.Contains(strings.Split(string(props), "\n"), want) {
			return nil, fmt.Errorf("connect: the worker's configuration lacks %s", want)
		}
	}
	t0 := time.Now()
	errs := make([]error, len(Services))
	var wg sync.WaitGroup
	for n, s := range Services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			password, err := in.Users[s].Secret()
			if err == nil {
				_, err = connect.Start(rctx, client, w.URL, s, in.Databases[s], connect.Secrets{Dir: secretsDir, KafkaPassword: password}, log)
			}
			if err != nil {
				errs[n] = fmt.Errorf("registering %s's connector: %w", s, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log.Info("connect worker ready", "url", w.URL, "pid", w.pid, "connectors", len(Services), "registered_in", time.Since(t0).Round(time.Millisecond))
	return w, nil
}

// linkConnectJars points the fresh state dir's Connect jars at those of
// the default state dir (~/.cache/choreo-infra), if complete there, so a
// run fetches nothing; else infra.sh fetches them into the state dir.
func linkConnectJars(log *slog.Logger, dir string) {
	home, _ := os.UserHomeDir()
	shared := filepath.Join(home, ".cache", "choreo-infra", "connect-4.1.1")
	for _, part := range []string{"libs", filepath.Join("plugins", "debezium-postgres-3.6.1.Final")} {
		if _, err := os.Stat(filepath.Join(shared, part, ".complete")); err != nil {
			return
		}
	}
	dst := filepath.Join(dir, "connect-4.1.1")
	if _, err := os.Lstat(dst); err == nil {
		return
	}
	if err := os.Symlink(shared, dst); err == nil {
		log.Info("reusing the Connect jars", "from", shared)
	}
}

// adopt reads the pid infra.sh wrote and the process's command line,
// environment and directory, to start it again the same way.
func (w *Worker) adopt() error {
	b, err := os.ReadFile(w.pidFile())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("connect: pid file: %w", err)
	}
	proc := func(name string) ([]string, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), err
	}
	if w.argv, err = proc("cmdline"); err != nil {
		return fmt.Errorf("connect: the worker's command line: %w", err)
	}
	if w.env, err = proc("environ"); err != nil {
		return fmt.Errorf("connect: the worker's environment: %w", err)
	}
	if w.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return fmt.Errorf("connect: the worker's directory: %w", err)
	}
	w.pid = pid
	return nil
}

func (w *Worker) pidFile() string { return filepath.Join(w.Infra.Dir, "run", "connect.pid") }

// start launches the worker again as infra.sh did, in a session of its
// own, its output appended to infra.sh's connect.out, its pid in infra.sh's
// pid file (so that infra.sh down stops it), reaped by the suite.
func (w *Worker) start() error {
	out, err := os.OpenFile(filepath.Join(w.Infra.Dir, "logs", "connect.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n==== %s chaos: starting Kafka Connect again ====\n", time.Now().Format(time.RFC3339))
	cmd := exec.Command(w.argv[0], w.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = w.env, w.dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("connect: start the worker: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(exited)
	}()
	w.mu.Lock()
	w.pid, w.exited = cmd.Process.Pid, exited
	w.mu.Unlock()
	return os.WriteFile(w.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
}

// procState is the state letter of /proc/pid/stat (R, S, T, Z …), or ""
// if there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state …: comm may hold spaces, so cut after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// waitState waits up to limit until ok(pid's state) holds.
func waitState(ctx context.Context, pid int, limit time.Duration, ok func(string) bool) (string, bool) {
	end := time.Now().Add(limit)
	for {
		st := procState(pid)
		if ok(st) {
			return st, true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return st, false
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// Order makes the worker's faults in sched take turns in schedule order.
func (w *Worker) Order(sched []Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.turns, w.served = nil, 0
	for _, f := range sched {
		if f.Kind == KindConnectKill || f.Kind == KindConnectPause {
			w.turns = append(w.turns, f.At)
		}
	}
	slices.Sort(w.turns)
}

// WaitConnectors waits up to limit until the worker answers and every
// connector and its task run.
func (w *Worker) WaitConnectors(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	if w.client != nil {
		hc.Transport = w.client.Transport
	}
	for {
		var last error
		all := true
		for _, name := range connectorNames() {
			ok, err := connect.Running(ctx, hc, w.URL, name)
			if err != nil {
				last = err
			}
			if !ok {
				all = false
				if last == nil {
					last = fmt.Errorf("%s not running", name)
				}
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connectors not all running after %s: %w", limit, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// recoverWithin is how long the connectors get to run again after a
// worker fault: a JVM start, a group join and four tasks on a busy 2-core
// machine.
const recoverWithin = 5 * time.Minute

// fault fires a worker fault, after any other worker fault has ended, and
// proves it: the process dead (kill) or stopped (pause) as /proc shows
// it, and afterwards every connector running again.
func (w *Worker) fault(ctx context.Context, f Fault, in *Injected) error {
	t0 := time.Now()
	turn := slices.Index(w.turns, f.At)
	for {
		w.mu.Lock()
		served := w.served
		w.mu.Unlock()
		if turn < 0 || served >= turn || ctx.Err() != nil {
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	defer func() {
		w.mu.Lock()
		w.served++
		w.mu.Unlock()
	}()
	var notes []string
	if waited := time.Since(t0); waited >= time.Second {
		notes = append(notes, fmt.Sprintf("waited %s for the previous worker fault", Duration(waited)))
	}
	w.mu.Lock()
	pid, exited := w.pid, w.exited
	w.mu.Unlock()
	in.Target = fmt.Sprintf("connect worker pid %d", pid)
	switch f.Kind {
	case KindConnectKill:
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill -9 %d: %w", pid, err)
		}
		// Dead: reaped by the suite, gone, or a zombie init has yet to reap.
		if exited != nil {
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("worker pid %d still runs 10s after kill -9", pid)
			}
		} else if st, ok := waitState(ctx, pid, 10*time.Second, func(s string) bool { return s == "" || s == "Z" }); !ok {
			return fmt.Errorf("worker pid %d in state %s 10s after kill -9", pid, st)
		}
		in.Fired = true
		w.log.Info("fault: kill -9 of the connect worker", "pid", pid, "down", f.For)
		sleep(ctx, f.For)
		if err := w.start(); err != nil {
			return err
		}
		restarted := time.Now()
		if err := w.WaitConnectors(context.WithoutCancel(ctx), cmp.Or(w.Recover, recoverWithin)); err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("killed pid %d; pid %d started after %s down; every connector running %s later",
			pid, w.pid, Duration(f.For), Duration(time.Since(restarted))))
	case KindConnectPause:
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("SIGSTOP %d: %w", pid, err)
		}
		st, ok := waitState(ctx, pid, 2*time.Second, func(s string) bool { return s == "T" })
		if !ok {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			return fmt.Errorf("worker pid %d in state %q after SIGSTOP, not stopped", pid, st)
		}
		in.Fired = true
		w.log.Info("fault: SIGSTOP of the connect worker", "pid", pid, "for", f.For)
		sleep(ctx, f.For)
		if st := procState(pid); st != "T" {
			return fmt.Errorf("worker pid %d in state %q at the end of its pause: not frozen throughout", pid, st)
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return fmt.Errorf("SIGCONT %d: %w", pid, err)
		}
		resumed := time.Now()
		if err := w.WaitConnectors(context.WithoutCancel(ctx), cmp.Or(w.Recover, recoverWithin)); err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("pid %d frozen %s; every connector running %s after SIGCONT",
			pid, Duration(f.For), Duration(time.Since(resumed))))
	default:
		return errors.New("not a worker fault: " + string(f.Kind))
	}
	in.Note = strings.Join(notes, "; ")
	return nil
}

// newWindow returns the channel closed when sched's first failpoint window
// ends, or nil if it has none.
func newWindow(sched []Fault) chan struct{} {
	if slices.ContainsFunc(sched, func(f Fault) bool { return f.Kind == KindFailpoints }) {
		return make(chan struct{})
	}
	return nil
}

// closeWindow marks the failpoint window over, once.
func (j *Injector) closeWindow() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.window != nil {
		close(j.window)
		j.window = nil
	}
}

// waitWindow holds a worker fault back while the failpoint window lasts,
// until 10 s before the load ends at the latest, and says how long it
// waited. A stopped or dead worker publishes nothing, so the consumers'
// crash point would pass no message; and restarting eight instances to arm
// and disarm it takes longer than the schedule can know on a busy machine.
func (j *Injector) waitWindow(ctx context.Context) time.Duration {
	j.mu.Lock()
	window := j.window
	j.mu.Unlock()
	if window == nil {
		return 0
	}
	t0 := time.Now()
	select {
	case <-window:
	case <-time.After(time.Until(j.start.Add(j.Load - 10*time.Second))):
	case <-ctx.Done():
	}
	return time.Since(t0)
}
