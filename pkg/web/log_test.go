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
