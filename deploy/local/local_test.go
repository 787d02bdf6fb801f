package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/testenv"
)

// TestRun runs the embedded mode as `go run ./deploy/local` does, on free
// ports so that it runs beside anything else (a real Kafka on 9092, the
// services on 8080-8084), takes one order down the happy path and one down a
// compensated path over HTTP, then stops it as Ctrl-C does and checks that
// nothing is left running.
func TestRun(t *testing.T) {
	ports := freePorts(t, 8)
	kafkaPort, pgPort := ports[0], ports[1]
	keyDir := filepath.Join(t.TempDir(), "dev-key")
	svc := map[string]string{
		"order":     "http://127.0.0.1:" + strconv.Itoa(ports[2]),
		"payment":   "http://127.0.0.1:" + strconv.Itoa(ports[3]),
		"inventory": "http://127.0.0.1:" + strconv.Itoa(ports[4]),
		"shipping":  "http://127.0.0.1:" + strconv.Itoa(ports[5]),
		"tracker":   "http://127.0.0.1:" + strconv.Itoa(ports[6]),
	}
	args := []string{
		"-kafka-addr", "127.0.0.1:" + strconv.Itoa(kafkaPort),
		"-pg-port", strconv.Itoa(pgPort),
		"-order-addr", strings.TrimPrefix(svc["order"], "http://"),
		"-payment-addr", strings.TrimPrefix(svc["payment"], "http://"),
		"-inventory-addr", strings.TrimPrefix(svc["inventory"], "http://"),
		"-shipping-addr", strings.TrimPrefix(svc["shipping"], "http://"),
		"-tracker-addr", strings.TrimPrefix(svc["tracker"], "http://"),
		"-control-addr", "127.0.0.1:" + strconv.Itoa(ports[7]),
		"-dev-key-dir", keyDir,
		"-kafka-admin-file", filepath.Join(filepath.Dir(keyDir), "kafka-admin-password"),
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, &stdout, io.MultiWriter(&stderr, t.Output()))
	}()

	deadline := time.After(3 * time.Minute)
	for !strings.Contains(stdout.String(), "Choreo is running") {
		select {
		case err := <-done:
			t.Fatalf("run returned before ready: %v", err)
		case <-deadline:
			t.Fatal("not ready after 3 minutes")
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("ready in %s", time.Since(start).Round(time.Millisecond))
	for name, base := range svc {
		if !strings.Contains(stdout.String(), base+"/") {
			t.Errorf("the walkthrough does not mention %s at %s:\n%s", name, base, stdout.String())
		}
	}

	// Every API takes the tokens of the development key the banner
	// names, and the operator API an operator's only.
	key, err := devkey.Open(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), keyDir) {
		t.Errorf("the banner does not name the development key's directory %s:\n%s", keyDir, stdout.String())
	}
	customer, err := key.Token("c-1", false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if token, err = key.Token("local-test", true, time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Run("AdminNeedsAnOperator", func(t *testing.T) {
		for _, tt := range []struct {
			auth string
			want int
		}{{"", http.StatusUnauthorized}, {"Bearer guess", http.StatusUnauthorized}, {"Bearer " + customer, http.StatusForbidden}, {"Bearer " + token, http.StatusOK}} {
			for _, name := range []string{"order", "payment", "inventory", "shipping"} {
				req, _ := http.NewRequest(http.MethodGet, svc[name]+"/admin/parked", nil)
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.want {
					t.Errorf("%s /admin/parked with %.20q = %d, want %d", name, tt.auth, resp.StatusCode, tt.want)
				}
			}
		}
	})

	t.Run("HappyPath", func(t *testing.T) {
		putJSON(t, svc["payment"]+"/accounts/c-happy", `{"balance":10000}`)
		putJSON(t, svc["inventory"]+"/stock/SKU-happy", `{"available":10}`)
		id := postOrder(t, svc["order"], "c-happy", "SKU-happy", "JP")
		o := waitOrder(t, svc["order"], id)
		if o["status"] != "COMPLETED" {
			t.Fatalf("order = %v, want COMPLETED", o)
		}
		wantField(t, svc["payment"]+"/accounts/c-happy", "balance", 5000.0)
		wantField(t, svc["inventory"]+"/stock/SKU-happy", "available", 8.0)
		wantField(t, svc["inventory"]+"/stock/SKU-happy", "reserved", 2.0)
		wantField(t, svc["payment"]+"/payments/"+id, "status", "COMPLETED")
		wantField(t, svc["inventory"]+"/reservations/"+id, "status", "RESERVED")
		wantField(t, svc["shipping"]+"/shipments/"+id, "status", "SCHEDULED")
		eventuallyField(t, svc["tracker"]+"/sagas/"+id, "state", "completed")
	})

	t.Run("Compensated", func(t *testing.T) {
		putJSON(t, svc["payment"]+"/accounts/c-comp", `{"balance":10000}`)
		putJSON(t, svc["inventory"]+"/stock/SKU-comp", `{"available":10}`)
		id := postOrder(t, svc["order"], "c-comp", "SKU-comp", "BR")
		o := waitOrder(t, svc["order"], id)
		if o["status"] != "CANCELLED" || o["cancel_reason"] != "shipping_unavailable" {
			t.Fatalf("order = %v, want CANCELLED/shipping_unavailable", o)
		}
		wantField(t, svc["shipping"]+"/shipments/"+id, "status", "FAILED")
		wantField(t, svc["inventory"]+"/reservations/"+id, "status", "RELEASED")
		wantField(t, svc["payment"]+"/payments/"+id, "status", "REFUNDED")
		wantField(t, svc["payment"]+"/accounts/c-comp", "balance", 10000.0)
		wantField(t, svc["inventory"]+"/stock/SKU-comp", "available", 10.0)
		wantField(t, svc["inventory"]+"/stock/SKU-comp", "reserved", 0.0)
		eventuallyField(t, svc["tracker"]+"/sagas/"+id, "state", "cancelled")
	})

	// What Ctrl-C does: cancel the context.
	logs := stderr.String()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("run did not return within 90s of cancel")
	}

	for _, p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second); err == nil {
			c.Close()
			t.Errorf("port %d still answers after shutdown", p)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("log line is not JSON, as the services write it: %s", l)
			break
		}
	}
	if strings.Contains(logs, `"msg":"http request"`) || strings.Contains(logs, `"msg":"event applied"`) {
		t.Error("access log or event applied lines at the default level INFO")
	}
	if m := regexp.MustCompile(`"msg":"postgres started".*"pid":(\d+)`).FindStringSubmatch(logs); m == nil {
		t.Error("no postgres pid in the log")
	} else if pid, _ := strconv.Atoi(m[1]); syscall.Kill(pid, 0) == nil {
		t.Errorf("postgres (pid %d) still runs after shutdown", pid)
	}
	if m := regexp.MustCompile(`"msg":"embedded infrastructure ready".*"dir":"([^"]+)"`).FindStringSubmatch(logs); m == nil {
		t.Error("no data dir in the log")
	} else if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s still exists after shutdown (%v)", m[1], err)
	}
}

// TestLogLevel: -log-level wins over LOG_LEVEL, which wins over INFO, and
// both are read as the services read LOG_LEVEL.
func TestLogLevel(t *testing.T) {
	tests := []struct {
		name, flag, env string
		want            slog.Level
		wantErr         bool
	}{
		{"DefaultIsInfo", "", "", slog.LevelInfo, false},
		{"LOG_LEVELIsRead", "", "debug", slog.LevelDebug, false},
		{"FlagWins", "warn", "debug", slog.LevelWarn, false},
		{"UpperCaseAsTheServicesTakeIt", "ERROR", "", slog.LevelError, false},
		{"UnknownLevelRefused", "", "loud", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := logLevel(tt.flag, tt.env)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Errorf("logLevel(%q, %q) = %v, %v; want %v, error %v", tt.flag, tt.env, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestBaseURL checks the addresses the walkthrough shows.
func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://localhost:8080",
		"0.0.0.0:8081":   "http://localhost:8081",
		"[::]:8082":      "http://localhost:8082",
		"127.0.0.1:8083": "http://127.0.0.1:8083",
	} {
		if got := baseURL(addr); got != want {
			t.Errorf("baseURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close() // held until all are chosen, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// token is the operator's token TestRun's requests carry, signed with the
// development key of the run.
var token string

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var v map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s = %d, body %q: %v", method, url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, v
}

func putJSON(t *testing.T, url, body string) {
	t.Helper()
	if status, v := do(t, http.MethodPut, url, body); status != http.StatusOK {
		t.Fatalf("PUT %s = %d: %v", url, status, v)
	}
}

// postOrder creates an order of two items at 2500 and returns its id.
func postOrder(t *testing.T, base, customer, sku, country string) string {
	t.Helper()
	body := fmt.Sprintf(`{"customer_id":%q,"items":[{"sku":%q,"quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":%q}}`,
		customer, sku, country)
	status, o := do(t, http.MethodPost, base+"/orders", body)
	if status != http.StatusCreated {
		t.Fatalf("POST /orders = %d: %v", status, o)
	}
	id, _ := o["id"].(string)
	return id
}

// waitOrder polls the order until it leaves PENDING.
func waitOrder(t *testing.T, base, id string) map[string]any {
	t.Helper()
	var o map[string]any
	testenv.Eventually(t, time.Minute, "order "+id+" leaves PENDING", func() bool {
		var status int
		status, o = do(t, http.MethodGet, base+"/orders/"+id, "")
		if status != http.StatusOK {
			t.Fatalf("GET /orders/%s = %d: %v", id, status, o)
		}
		return o["status"] != "PENDING"
	})
	return o
}

// wantField checks one field of a GET response. A terminal order status
// means every compensation is already committed, so there is no waiting.
func wantField(t *testing.T, url, field string, want any) {
	t.Helper()
	status, v := do(t, http.MethodGet, url, "")
	if status != http.StatusOK || v[field] != want {
		t.Errorf("GET %s = %d, %s = %v; want %v (%v)", url, status, field, v[field], want, v)
	}
}

// eventuallyField is wantField for a reader that may lag, such as the
// tracker: it retries for up to 30 seconds.
func eventuallyField(t *testing.T, url, field string, want any) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("GET %s has %s = %v", url, field, want), func() bool {
		status, v := do(t, http.MethodGet, url, "")
		return status == http.StatusOK && v[field] == want
	})
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of run's
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
