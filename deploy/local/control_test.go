package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestControl stops and starts a service through the control endpoint: a
// stop ends its Run, a start runs it again, repeats change nothing, and
// only a Run that ends unasked ends the launcher.
func TestControl(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ready.Close()
	var starts, running atomic.Int32
	fail := make(chan error)
	svc := newService("shipping", ready.URL, func(ctx context.Context) error {
		starts.Add(1)
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-fail:
			return err
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loopErr := make(chan error, 1)
	go func() { loopErr <- svc.loop(ctx) }()
	api := httptest.NewServer(controlRoutes(ctx, []*service{svc}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer api.Close()

	post := func(path string, wantStatus int, wantBody string) {
		t.Helper()
		resp, err := http.Post(api.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus || !strings.Contains(string(b), wantBody) {
			t.Fatalf("POST %s = %d %s, want %d %s", path, resp.StatusCode, b, wantStatus, wantBody)
		}
	}
	t.Run("Stop", func(t *testing.T) {
		post("/services/shipping/stop", 200, `{"service":"shipping","state":"stopped"}`)
		if running.Load() != 0 {
			t.Error("stop answered while Run still runs")
		}
		post("/services/shipping/stop", 200, `"state":"stopped"`)
	})
	t.Run("Start", func(t *testing.T) {
		post("/services/shipping/start", 200, `{"service":"shipping","state":"running"}`)
		post("/services/shipping/start", 200, `"state":"running"`)
		if n := starts.Load(); n != 2 {
			t.Errorf("Run started %d times, want 2: once, and once again after the stop", n)
		}
	})
	t.Run("List", func(t *testing.T) {
		resp, err := http.Get(api.URL + "/services")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); strings.TrimSpace(string(b)) != `[{"service":"shipping","state":"running"}]` {
			t.Errorf("GET /services = %s", b)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		post("/services/billing/stop", 404, "")
		post("/services/shipping/pause", 404, "")
	})
	t.Run("RefusesWebPages", func(t *testing.T) {
		// What a page the user opens can send without asking: a simple
		// POST with its Origin, or under a rebound host name.
		for _, h := range []map[string]string{
			{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Host": "evil.example:8089"},
		} {
			req, _ := http.NewRequest(http.MethodPost, api.URL+"/services/shipping/stop", strings.NewReader(""))
			req.Header.Set("Content-Type", "text/plain")
			for k, v := range h {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST stop with %v = %d, want 403", h, resp.StatusCode)
			}
			if running.Load() != 1 {
				t.Fatalf("POST stop with %v stopped the service", h)
			}
		}
	})
	t.Run("RunEndsUnasked", func(t *testing.T) {
		fail <- errors.New("disk full")
		select {
		case err := <-loopErr:
			if err == nil || err.Error() != "shipping: disk full" {
				t.Errorf("loop = %v, want the service's error, named", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a service that failed did not end its loop")
		}
	})
}

// TestServiceEndingCleanlyUnaskedEndsTheLauncher: a Run that returns nil
// before anyone asked it to stop must not leave a launcher running without
// it, with nobody left to answer a start.
func TestServiceEndingCleanlyUnaskedEndsTheLauncher(t *testing.T) {
	svc := newService("payment", "http://unused", func(context.Context) error { return nil })
	done := make(chan error, 1)
	go func() { done <- svc.loop(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "payment: stopped by itself") {
			t.Fatalf("loop = %v, want payment: stopped by itself", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop went on without its service")
	}
}
