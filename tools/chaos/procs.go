package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// Build compiles the four services into dir/bin: from the working tree,
// or, if rev is set, from that git revision (exported with git archive
// into dir/src, so that files others are editing do not get in).
func Build(ctx context.Context, log *slog.Logger, repo, rev, dir string) (map[string]string, error) {
	if rev != "" {
		src := filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", `set -o pipefail; git -C "$1" archive "$2" | tar -x -C "$3"`, "archive", repo, rev, src)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("git archive %s: %w\n%s", rev, err, out)
		}
		log.Info("building from a git revision", "rev", rev, "src", src)
		repo = src
	}
	bins := map[string]string{}
	for _, s := range Services {
		bin := filepath.Join(dir, "bin", s)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./services/"+s+"/cmd/"+s)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w\n%s", s, err, out)
		}
		bins[s] = bin
	}
	log.Info("built the services", "dir", filepath.Join(dir, "bin"))
	return bins, nil
}

// Exit is one end of an instance's process.
type Exit struct {
	At    time.Time `json:"at"`
	Cause string    `json:"cause"` // killed, failpoint:<name>, exit status …
}

// Instance is one process of a service, restarted whenever it ends until
// the cluster stops. Its output goes to a log file (appended over
// restarts).
type Instance struct {
	Service string
	Index   int // 1-based
	Port    int
	bin     string
	env     []string
	logPath string
	log     *slog.Logger

	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{} // closed when the current process has been reaped
	failpoints string        // CHOREO_FAILPOINTS of the next start
	expect     string        // the next exit is ours: "killed" or "restarted"
	delay      time.Duration // before the next restart
	paused     bool
	stopping   bool
	starts     int
	exits      []Exit
	fpw        *fpWriter
}

// Name is e.g. "payment-2", also its KAFKA_GROUP_INSTANCE_ID.
func (i *Instance) Name() string { return fmt.Sprintf("%s-%d", i.Service, i.Index) }

// fpWriter copies a process's stderr to its log and notes a failpoint
// crash ("failpoint after-commit: killing the process …").
type fpWriter struct {
	f   *os.File
	mu  sync.Mutex
	hit string
}

func (w *fpWriter) Write(p []byte) (int, error) {
	if i := bytes.Index(p, []byte("failpoint ")); i >= 0 {
		rest := p[i+len("failpoint "):]
		if j := bytes.IndexByte(rest, ':'); j > 0 {
			w.mu.Lock()
			w.hit = string(rest[:j])
			w.mu.Unlock()
		}
	}
	return w.f.Write(p)
}

// start launches the process and a goroutine that reaps it and, unless
// the cluster stops, starts it again. Callers hold i.mu.
func (i *Instance) start() error {
	f, err := os.OpenFile(i.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	env := append([]string{}, i.env...)
	if i.failpoints != "" {
		env = append(env, "CHOREO_FAILPOINTS="+i.failpoints)
	}
	fmt.Fprintf(f, "\n=== chaos: start %d of %s (failpoints %q) at %s\n", i.starts+1, i.Name(), i.failpoints, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(i.bin)
	cmd.Env = env
	cmd.Stdout = f
	i.fpw = &fpWriter{f: f}
	cmd.Stderr = i.fpw
	// Own process group: a Ctrl-C on the terminal reaches the suite, which
	// stops its children itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", i.Name(), err)
	}
	i.cmd, i.paused, i.expect, i.delay = cmd, false, "", 300*time.Millisecond
	i.starts++
	exited := make(chan struct{})
	i.exited = exited
	fpw := i.fpw
	go func() {
		err := cmd.Wait()
		f.Close()
		i.mu.Lock()
		cause := "exit"
		fpw.mu.Lock()
		hit := fpw.hit
		fpw.mu.Unlock()
		switch {
		case i.expect != "":
			cause = i.expect
		case hit != "":
			cause = "failpoint:" + hit
		case err != nil:
			cause = err.Error()
		}
		i.exits = append(i.exits, Exit{At: time.Now(), Cause: cause})
		i.cmd = nil
		close(exited)
		stopping, delay := i.stopping, i.delay
		i.mu.Unlock()
		if stopping {
			return
		}
		if cause != "killed" && cause != "restarted" {
			i.log.Warn("instance ended on its own; restarting", "instance", i.Name(), "cause", cause)
		}
		time.Sleep(delay)
		i.mu.Lock()
		defer i.mu.Unlock()
		if i.stopping || i.cmd != nil {
			return
		}
		if err := i.start(); err != nil {
			i.log.Error("restart failed", "instance", i.Name(), "err", err)
		}
	}()
	return nil
}

// Kill sends SIGKILL; the instance is started again after down.
func (i *Instance) Kill(down time.Duration) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cmd == nil {
		return fmt.Errorf("%s is not running", i.Name())
	}
	if i.paused || i.expect != "" {
		// Frozen by another fault (a kill would cut its pause short), or
		// already being killed or restarted: the caller picks again.
		return fmt.Errorf("%s is paused or being %s", i.Name(), i.expect)
	}
	i.expect, i.delay = "killed", down
	return i.cmd.Process.Signal(syscall.SIGKILL)
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (i *Instance) Pause() error { return i.signal(syscall.SIGSTOP, true) }

// Resume sends SIGCONT to a paused instance.
func (i *Instance) Resume() error { return i.signal(syscall.SIGCONT, false) }

func (i *Instance) signal(sig syscall.Signal, paused bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cmd == nil {
		return fmt.Errorf("%s is not running", i.Name())
	}
	if paused && i.expect != "" {
		// Being killed or restarted: a pause now would be cut short.
		return fmt.Errorf("%s is being %s", i.Name(), i.expect)
	}
	i.paused = paused
	return i.cmd.Process.Signal(sig)
}

// WaitThawed waits, up to limit, until i is not paused.
func (i *Instance) WaitThawed(ctx context.Context, limit time.Duration) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil {
		i.mu.Lock()
		paused := i.paused && i.cmd != nil
		i.mu.Unlock()
		if !paused {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// Running reports whether a process runs, is not paused and is not being
// killed or restarted.
func (i *Instance) Running() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cmd != nil && !i.paused && i.expect == ""
}

// Restart stops the process gracefully (SIGTERM, SIGKILL after 10 s) and
// starts it again with the given CHOREO_FAILPOINTS. A paused process is
// left to its pause first (up to a minute): a restart would thaw it and
// cut the pause short. The check and the stop are one step under i.mu, so
// a pause cannot begin between them.
func (i *Instance) Restart(ctx context.Context, failpoints string) error {
	end := time.Now().Add(time.Minute)
	i.mu.Lock()
	for i.paused && i.cmd != nil && time.Now().Before(end) && ctx.Err() == nil {
		i.mu.Unlock()
		sleep(ctx, 100*time.Millisecond)
		i.mu.Lock()
	}
	i.failpoints = failpoints
	cmd, exited := i.cmd, i.exited
	if cmd == nil {
		i.mu.Unlock()
		return nil // between a crash and its restart: the restart takes the new setting
	}
	i.expect, i.delay = "restarted", 0
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	i.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// stop ends the process for good: SIGCONT, SIGTERM, SIGKILL after grace.
func (i *Instance) stop(grace time.Duration) {
	i.mu.Lock()
	i.stopping = true
	cmd, exited := i.cmd, i.exited
	i.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// Starts is how many processes of i have been started: the current one's
// number.
func (i *Instance) Starts() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.starts
}

// Exits returns the ends of the instance's processes so far.
func (i *Instance) Exits() []Exit {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]Exit(nil), i.exits...)
}

// Cluster is two instances of every service.
type Cluster struct {
	Instances []*Instance
	log       *slog.Logger
	twins     twins // started beside a frozen instance (twin.go)
}

// ClusterConfig is where the instances find their infrastructure.
type ClusterConfig struct {
	Bins      map[string]string
	Dir       string // logs go to Dir/logs
	PortBase  int    // service s, instance i: PortBase + index(s) + 100(i-1)
	Brokers   string
	Users     map[string]broker.Conn // service → its Kafka user (KAFKA_USERNAME, KAFKA_PASSWORD_FILE)
	Databases map[string]string      // service → DATABASE_URL
	ExtraEnv  []string
	// DerivedIDs leaves KAFKA_GROUP_INSTANCE_ID unset, as make run does, so
	// every instance derives its own (-defaults).
	DerivedIDs bool
}

// StartCluster starts every instance and waits until each answers /readyz.
func StartCluster(ctx context.Context, log *slog.Logger, cc ClusterConfig) (*Cluster, error) {
	if err := os.MkdirAll(filepath.Join(cc.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{log: log}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for si, s := range Services {
		for n := 1; n <= Instances; n++ {
			inst := &Instance{Service: s, Index: n, Port: cc.PortBase + si + 100*(n-1), bin: cc.Bins[s], log: log}
			inst.logPath = filepath.Join(cc.Dir, "logs", inst.Name()+".log")
			inst.env = append(append(base, cc.ExtraEnv...),
				fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", inst.Port),
				"DATABASE_URL="+cc.Databases[s],
				"KAFKA_BROKERS="+cc.Brokers,
				"KAFKA_USERNAME="+cc.Users[s].Username,
				"KAFKA_PASSWORD_FILE="+cc.Users[s].PasswordFile,
			)
			if !cc.DerivedIDs {
				inst.env = append(inst.env, "KAFKA_GROUP_INSTANCE_ID="+inst.Name())
			}
			c.Instances = append(c.Instances, inst)
		}
	}
	for _, inst := range c.Instances {
		inst.mu.Lock()
		err := inst.start()
		inst.mu.Unlock()
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, 2*time.Minute); err != nil {
		c.Stop()
		return nil, err
	}
	log.Info("cluster ready", "instances", len(c.Instances), "logs", filepath.Join(cc.Dir, "logs"))
	return c, nil
}

// Get returns instance n (1-based) of service s.
func (c *Cluster) Get(s string, n int) *Instance {
	for _, i := range c.Instances {
		if i.Service == s && i.Index == n {
			return i
		}
	}
	return nil
}

// URL is the base URL of instance n of service s.
func (c *Cluster) URL(s string, n int) string {
	return fmt.Sprintf("http://127.0.0.1:%d", c.Get(s, n).Port)
}

// WaitReady waits until every instance runs and answers /readyz with 200.
func (c *Cluster) WaitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		var notReady []string
		var tails strings.Builder
		for _, i := range c.Instances {
			if why := i.ready(ctx, hc); why != "" {
				notReady = append(notReady, i.Name()+" ("+why+")")
				fmt.Fprintf(&tails, "\n--- last lines of %s\n%s", i.logPath, logTail(i.logPath, 8))
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instances not ready after %s: %s%s", limit, strings.Join(notReady, ", "), tails.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// WaitReady waits until i runs and answers /readyz with 200.
func (i *Instance) WaitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		why := i.ready(ctx, hc)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (%s); last lines of %s:\n%s", i.Name(), limit, why, i.logPath, logTail(i.logPath, 8))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ready returns "" if i runs and answers /readyz with 200, else why not.
func (i *Instance) ready(ctx context.Context, hc *http.Client) string {
	if !i.Running() {
		return "down"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", i.Port), nil)
	resp, err := hc.Do(req)
	if err != nil {
		return "no answer"
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	return ""
}

// Stop ends every instance (in parallel), for good.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, i := range c.Instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i.stop(10 * time.Second)
		}()
	}
	wg.Wait()
}

// ExitsByCause counts the ends of every instance's processes by cause.
func (c *Cluster) ExitsByCause() map[string]int {
	out := map[string]int{}
	for _, i := range c.Instances {
		for _, e := range i.Exits() {
			out[e.Cause]++
		}
	}
	return out
}

// Metrics fetches an instance's /metrics and returns the samples whose
// name is name, as label string → value.
func Metrics(ctx context.Context, hc *http.Client, port int, name string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	return parseMetrics(buf.String(), name), nil
}

// parseMetrics picks the samples of one metric out of the Prometheus text
// format: `name{labels} value` → labels → value.
func parseMetrics(text, name string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // another metric with this prefix
		}
		var v float64
		if _, err := fmt.Sscan(strings.TrimSpace(rest), &v); err == nil {
			out[labels] = v
		}
	}
	return out
}

// RelayLeader returns the instance whose /metrics says it leads svc's
// relay (choreo_outbox_leader{service="<svc>"} 1), or an error saying why
// not, e.g. that no instance exports the gauge yet.
func (c *Cluster) RelayLeader(ctx context.Context, svc string) (*Instance, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	seen := false
	var errs []error
	for n := 1; n <= Instances; n++ {
		i := c.Get(svc, n)
		m, err := Metrics(ctx, hc, i.Port, "choreo_outbox_leader")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", i.Name(), err))
			continue
		}
		for labels, v := range m {
			if !strings.Contains(labels, `service="`+svc+`"`) {
				continue
			}
			seen = true
			if v == 1 {
				return i, nil
			}
		}
	}
	if !seen {
		return nil, errors.Join(append(errs, fmt.Errorf("no %s instance exports choreo_outbox_leader{service=%q}", svc, svc))...)
	}
	return nil, errors.Join(append(errs, fmt.Errorf("no %s instance leads its relay now", svc))...)
}

// instanceNames lists names, sorted, for logs.
func instanceNames(is []*Instance) []string {
	out := make([]string, 0, len(is))
	for _, i := range is {
		out = append(out, i.Name())
	}
	sort.Strings(out)
	return out
}

// RelayLeaderFromLogs is the fallback of RelayLeader while no instance
// exports the gauge: the instance whose log's latest relay event, since
// its latest start, is "elected the active relay".
func (c *Cluster) RelayLeaderFromLogs(svc string) (*Instance, error) {
	var best *Instance
	var bestAt string
	for n := 1; n <= Instances; n++ {
		i := c.Get(svc, n)
		b, err := os.ReadFile(i.logPath)
		if err != nil {
			return nil, err
		}
		leads, at := false, ""
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "=== chaos: start"):
				leads = false
			case strings.Contains(line, `"msg":"elected the active relay"`):
				leads = true
				if t, _, ok := strings.Cut(strings.TrimPrefix(line, `{"time":"`), `"`); ok {
					at = t
				}
			case strings.Contains(line, `"msg":"resigned as the active relay"`):
				leads = false
			}
		}
		if leads && (best == nil || at > bestAt) {
			best, bestAt = i, at
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no %s instance's log says it leads the relay", svc)
	}
	return best, nil
}

// ElectedSince returns when i's log first says it was elected relay
// leader at or after since, if it does.
func (i *Instance) ElectedSince(since time.Time) (time.Time, bool) {
	b, err := os.ReadFile(i.logPath)
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"msg":"elected the active relay"`) {
			continue
		}
		ts, _, ok := strings.Cut(strings.TrimPrefix(line, `{"time":"`), `"`)
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && !t.Before(since) {
			return t, true
		}
	}
	return time.Time{}, false
}

// logTail returns the last n lines of the log at path (read from its last
// 16 KiB), for errors that should say why without a trip to the file.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 16<<10 {
		_, _ = f.Seek(-16<<10, io.SeekEnd)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}
