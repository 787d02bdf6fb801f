// Package e2e runs the four services as separate processes against the real
// Kafka and PostgreSQL started by scripts/infra.sh, drives them over HTTP and
// Kafka, injects faults (redelivery, concurrent delivery, poison messages,
// crashes, broker restarts) and asserts the end state in every service's
// database-backed API.
//
// It never skips: without the infrastructure it fails and says how to start
// it.
package e2e

import (
	"context"
	"fmt"
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
)

const howToStart = `start the infrastructure first: eval "$(scripts/infra.sh up)"`

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
	brokers  string
	dbURLs   = map[string]string{}
	workDir  string
	// ordersCreated counts the orders the suite sent through a saga.
	ordersCreated atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	required := []string{"KAFKA_BROKERS", "ORDER_DATABASE_URL", "PAYMENT_DATABASE_URL", "INVENTORY_DATABASE_URL", "SHIPPING_DATABASE_URL"}
	for _, v := range required {
		if os.Getenv(v) == "" {
			fmt.Fprintf(os.Stderr, "e2e: %s is not set; %s\n", v, howToStart)
			return 1
		}
	}
	brokers = os.Getenv("KAFKA_BROKERS")
	var err error
	workDir, err = os.MkdirTemp("", "choreo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(workDir)

	start := time.Now()
	for _, name := range []string{"order", "payment", "inventory", "shipping"} {
		dbURLs[name] = os.Getenv(strings.ToUpper(name) + "_DATABASE_URL")
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
				"KAFKA_BROKERS="+brokers,
			),
		}
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
			fmt.Fprintf(os.Stderr, "e2e: %v; %s\n--- %s log tail ---\n%s\n", err, howToStart, s.name, s.logTail(40))
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: four services built and ready in %s\n", time.Since(start).Round(time.Millisecond))

	code := m.Run()
	fmt.Fprintf(os.Stderr, "e2e: %d orders ran through the saga in %s\n", ordersCreated.Load(), time.Since(start).Round(time.Second))
	if code != 0 {
		for _, s := range services {
			fmt.Fprintf(os.Stderr, "--- %s log tail ---\n%s\n", s.name, s.logTail(30))
		}
	}
	return code
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
	cmd.Env = s.env
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
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
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

var _ = context.Background
