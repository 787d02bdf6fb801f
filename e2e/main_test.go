// Package e2e runs the four services, and the saga tracker that watches
// them, as separate processes against a Kafka and a PostgreSQL, drives
// them over HTTP and Kafka, injects faults
// (redelivery, concurrent delivery, poison messages, crashes, broker
// restarts) and asserts the end state in every service.
//
// The infrastructure comes from infra.Discover: the real Kafka and
// PostgreSQL scripts/infra.sh starts (through the environment, and the only
// source accepted under CI=true), else testcontainers, else the embedded
// broker and a throwaway PostgreSQL. It logs which one it used.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/infra"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// service is one running service process.
type service struct {
	name    string
	bin     string
	env     []string
	baseURL string
	logPath string

	mu  sync.Mutex
	cmd *exec.Cmd
}

var (
	services = map[string]*service{}
	dbURLs   = map[string]string{}
	workDir  string
	running  *infra.Running
	// ordersCreated counts the orders the suite sent through a saga.
	ordersCreated atomic.Int64
	// collector receives every service's spans (see tracing_test.go).
	collector *traceSink
	// tokens signs the callers' tokens with the key in keyDir, which the
	// services verify with; operatorToken is the one do sends by default.
	tokens        testenv.Tokens
	keyDir        string
	operatorToken string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	running, err = infra.Discover(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: using %s infrastructure\n", running.Mode)
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := running.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop infrastructure:", err)
		}
	}()
	if err := testenv.Report(running); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	workDir, err = os.MkdirTemp("", "choreo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(workDir)

	// The services take tokens of a key of this run's; choreoctl signs
	// an operator's with it (ctlErr).
	keyDir = filepath.Join(workDir, "dev-key")
	if tokens, err = testenv.NewTokens(keyDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if operatorToken, err = tokens.Key().Token("e2e-operator", true, 24*time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}

	collector = startCollector()
	defer collector.srv.Close()

	// The tracker's group follows what this run produces, not the history
	// of a broker earlier runs filled: it would read all of it first.
	if err := testenv.SkipToEnd(running.Kafka, "tracker", events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	// Connectors an earlier run left on the worker (OUTBOX_RELAY=debezium
	// make run shares these databases, a run cut short leaves its own)
	// would read the services' slots: the built-in relay refuses to start
	// beside them, and a Debezium run must start from no offsets.
	if err := removeConnectors(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if os.Getenv("OUTBOX_RELAY") == outbox.RelayDebezium {
		stop, err := startConnectors(ctx, log)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer stop()
	}
	for _, name := range []string{"order", "payment", "inventory", "shipping", "tracker"} {
		dbURLs[name] = running.DatabaseURLs[name]
		bin := filepath.Join(workDir, name)
		build := exec.Command("go", "build", "-o", bin, "./services/"+name+"/cmd/"+name)
		build.Dir = ".."
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n", name, err)
			return 1
		}
		port, err := freePort()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		s := &service{
			name:    name,
			bin:     bin,
			baseURL: fmt.Sprintf("http://127.0.0.1:%d", port),
			logPath: filepath.Join(workDir, name+".log"),
			env: append(os.Environ(),
				fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port),
				"DATABASE_URL="+dbURLs[name],
				// Some tests read the "event applied" lines, which are
				// at DEBUG.
				"LOG_LEVEL=DEBUG",
				// Short, so that TestTrackerReportsStuckSaga need not wait
				// long; only the tracker reads it.
				"TRACKER_SAGA_SLA="+trackerSLA.String(),
			),
		}
		s.env = append(s.env, tokens.Env()...)
		// Each service is its own Kafka user, allowed only its topics
		// and group (internal/kafkaacl): the suite passing shows each can
		// do its job with no more.
		s.env = append(s.env, running.ServiceEnv(name)...)
		s.env = append(s.env, collector.env()...)
		services[name] = s
		if err := s.start(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	defer func() {
		for _, s := range services {
			s.stop(syscall.SIGTERM)
		}
	}()
	for _, s := range services {
		if err := s.waitReady(90 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n--- %s log tail ---\n%s\n", err, s.name, s.logTail(40))
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: four services and the tracker built and ready in %s\n", time.Since(start).Round(time.Millisecond))

	code := m.Run()
	fmt.Fprintf(os.Stderr, "e2e: %d orders ran through the saga in %s\n", ordersCreated.Load(), time.Since(start).Round(time.Second))
	if code != 0 {
		for _, s := range services {
			fmt.Fprintf(os.Stderr, "--- %s log tail ---\n%s\n", s.name, s.logTail(30))
		}
	}
	return code
}

// startConnectors registers the Debezium connectors of the four services'
// databases on the worker at KAFKA_CONNECT_URL (scripts/infra.sh connect-up)
// before the services start, with OUTBOX_RELAY=debezium (which they inherit),
// and returns what removes them and their slots: a later run on the
// built-in relay must not have Debezium publish its rows too.
func startConnectors(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	base := os.Getenv("KAFKA_CONNECT_URL")
	if running.Mode != infra.ModeEnvironment || base == "" {
		return nil, fmt.Errorf("OUTBOX_RELAY=debezium needs scripts/infra.sh's Kafka and PostgreSQL and its Connect worker (KAFKA_CONNECT_URL; bash scripts/infra.sh connect-up), not %s infrastructure", running.Mode)
	}
	client, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), os.Getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		return nil, err
	}
	secretsDir := os.Getenv("KAFKA_CONNECT_SECRETS_DIR")
	var started []string
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, name := range started {
			if err := connect.Stop(ctx, client, base, name, running.DatabaseURLs[name], secretsDir); err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
			}
		}
	}
	t0 := time.Now()
	for _, name := range []string{"order", "payment", "inventory", "shipping"} {
		password, err := running.Users[name].Secret()
		if err != nil {
			stop()
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err = connect.Start(ctx, client, base, name, running.DatabaseURLs[name], connect.Secrets{Dir: secretsDir, KafkaPassword: password}, log)
		cancel()
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, name)
	}
	fmt.Fprintf(os.Stderr, "e2e: the outboxes are published by Debezium (%s): four connectors running in %s\n", base, time.Since(t0).Round(time.Millisecond))
	return stop, nil
}

// removeConnectors removes the four services' connectors and slots, when
// a worker answers at KAFKA_CONNECT_URL (infra.sh exports it before
// connect-up has started one); connect.Stop passes over what is not there.
// Without a worker no slot is read, and the built-in relay's start only
// warns of one left behind.
func removeConnectors(ctx context.Context) error {
	base := os.Getenv("KAFKA_CONNECT_URL")
	if running.Mode != infra.ModeEnvironment || base == "" {
		return nil
	}
	if _, err := os.Stat(os.Getenv("KAFKA_CONNECT_PASSWORD_FILE")); err != nil {
		return nil // connect-up writes it: no worker was ever started here
	}
	client, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), os.Getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		return err
	}
	probe, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(probe, http.MethodGet, base, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil // no worker runs
	}
	resp.Body.Close()
	ctx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	for _, name := range []string{"order", "payment", "inventory", "shipping"} {
		if err := connect.Stop(ctx, client, base, name, running.DatabaseURLs[name], os.Getenv("KAFKA_CONNECT_SECRETS_DIR")); err != nil {
			return fmt.Errorf("remove what an earlier run left: %w", err)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start launches the process, appending its output to its log file.
func (s *service) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin)
	cmd.Env = s.env // the environment is overridden by the later entries
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd = cmd
	go func() { cmd.Wait(); logf.Close() }()
	return nil
}

// stop sends sig (SIGTERM for a graceful stop, SIGKILL for a crash) and waits
// for the process to exit.
func (s *service) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
}

func (s *service) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.baseURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s within %s", s.name, s.baseURL, within)
}

func (s *service) logTail(lines int) string {
	b, _ := os.ReadFile(s.logPath)
	var all []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		// The tests' polling buries what the consumer and the relay said.
		if !strings.Contains(l, `"msg":"http request"`) {
			all = append(all, l)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// logContains reports whether the service's log has a line containing every
// one of parts.
func (s *service) logContains(parts ...string) bool {
	b, _ := os.ReadFile(s.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// restart crashes (SIGKILL) or stops (SIGTERM) the service and starts it again.
func (s *service) restart(t *testing.T, sig syscall.Signal) {
	t.Helper()
	s.stop(sig)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, s.logTail(30))
	}
}
