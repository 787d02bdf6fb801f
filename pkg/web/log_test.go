package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/web"
)

// records captures what a logger writes, one decoded JSON object per line.
type records struct{ buf bytes.Buffer }

func (r *records) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&r.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (r *records) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func TestAccessLogOneLinePerRequest(t *testing.T) {
	tests := []struct {
		name, path string
		wantStatus float64
		wantLevel  string
		wantRoute  string
	}{
		{"RouteAtDebug", "/things/42", 201, "DEBUG", "/things/{id}"},
		{"UnknownRouteLogged", "/nope", 404, "DEBUG", ""},
		{"ProbeAtDebug", "/healthz", 200, "DEBUG", "/healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec records
			r := web.NewRouter(rec.logger(), map[string]web.Check{})
			r.Method(http.MethodGet, "/things/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
			}))
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))

			got := rec.lines(t, "http request")
			if len(got) != 1 {
				t.Fatalf("%d access log lines, want 1: %s", len(got), rec.buf.String())
			}
			l := got[0]
			if l["status"] != tt.wantStatus || l["level"] != tt.wantLevel || l["path"] != tt.path || l["route"] != tt.wantRoute {
				t.Errorf("access log = %v; want status %v, level %s, path %s, route %q", l, tt.wantStatus, tt.wantLevel, tt.path, tt.wantRoute)
			}
			if id := w.Header().Get("X-Request-Id"); id == "" || l["request_id"] != id {
				t.Errorf("access log request_id = %v, response X-Request-Id = %q; want the same, non-empty", l["request_id"], id)
			}
		})
	}
}

// TestAccessLogQuietAtInfo: at the default level a request writes no
// access-log line, so a busy service's log keeps what its consumers say.
func TestAccessLogQuietAtInfo(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := web.NewRouter(log, map[string]web.Check{})
	r.Method(http.MethodGet, "/things/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/things/42", nil))
	if strings.Contains(buf.String(), "http request") {
		t.Errorf("access log at INFO: %s", buf.String())
	}
}

// TestReadyzLogsChangesOnly: a dependency that stays down is reported once
// at WARN, not at every probe; its recovery once at INFO; and a 503 is
// still answered to every probe.
func TestReadyzLogsChangesOnly(t *testing.T) {
	var rec records
	var down error
	h := web.Readyz(rec.logger(), map[string]web.Check{"database": func(context.Context) error { return down }})
	probe := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return w.Code
	}
	steps := []struct {
		down error
		want int
	}{{nil, 200}, {errors.New("refused"), 503}, {errors.New("refused again"), 503}, {errors.New("still"), 503}, {nil, 200}, {nil, 200}}
	for i, s := range steps {
		down = s.down
		if got := probe(); got != s.want {
			t.Fatalf("probe %d = %d, want %d", i, got, s.want)
		}
	}
	if n := len(rec.lines(t, "not ready")); n != 1 {
		t.Errorf("%d 'not ready' lines for one outage, want 1:\n%s", n, rec.buf.String())
	}
	if n := len(rec.lines(t, "ready again")); n != 1 {
		t.Errorf("%d 'ready again' lines, want 1", n)
	}
	for _, l := range rec.lines(t, "not ready") {
		if l["level"] != "WARN" {
			t.Errorf("not ready logged at %v, want WARN", l["level"])
		}
	}
	if n := len(rec.lines(t, "request failed")); n != 0 {
		t.Errorf("readiness failures logged as request errors %d times, want none", n)
	}
}

// TestReadyzNamesTheCheckNotTheError: a caller learns which check failed;
// the dependency's error, with its hosts and users, is only logged.
func TestReadyzNamesTheCheckNotTheError(t *testing.T) {
	var rec records
	secret := errors.New(`pq: password authentication failed for user "payment" at 10.0.0.7:5432`)
	h := web.Readyz(rec.logger(), map[string]web.Check{
		"database": func(context.Context) error { return secret },
		"kafka":    func(context.Context) error { return nil },
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", w.Code)
	}
	body := w.Body.String()
	if strings.Contains(body, "10.0.0.7") || strings.Contains(body, "payment") {
		t.Errorf("answer shows the dependency's error: %s", body)
	}
	if !strings.Contains(body, "not ready: database failed") {
		t.Errorf("answer does not name the failed check: %s", body)
	}
	if !strings.Contains(rec.buf.String(), "10.0.0.7") {
		t.Errorf("log does not keep the error: %s", rec.buf.String())
	}
}

// TestRequestIDIsBounded: a client's X-Request-Id is adopted only if it is
// short and plain; any other is replaced by one the server makes, in the
// answer and in the log alike.
func TestRequestIDIsBounded(t *testing.T) {
	tests := []struct {
		name, sent string
		adopted    bool
	}{
		{"Plain", "req-42_a.b:c/d+e=", true},
		{"OfMaxLength", strings.Repeat("r", 128), true},
		{"TooLong", strings.Repeat("r", 129), false},
		{"Megabyte", strings.Repeat("r", 1<<20), false},
		{"Spaces", "a b", false},
		{"ForgedLogLine", "x\" level=ERROR msg=forged", false},
		{"NonASCII", "ключ", false},
		{"Quote", `a"b`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec records
			r := web.NewRouter(rec.logger(), map[string]web.Check{})
			req := httptest.NewRequest(http.MethodGet, "/nope", nil)
			req.Header.Set("X-Request-Id", tt.sent)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			got := w.Header().Get("X-Request-Id")
			if got == "" || len(got) > 128 {
				t.Fatalf("X-Request-Id = %q, want one of 1 to 128 characters", got)
			}
			if (got == tt.sent) != tt.adopted {
				t.Fatalf("X-Request-Id = %.40q for %.40q, want adopted %v", got, tt.sent, tt.adopted)
			}
			lines := rec.lines(t, "http request")
			if len(lines) != 1 || lines[0]["request_id"] != got {
				t.Fatalf("access log %v, want request_id %q", lines, got)
			}
		})
	}
}
