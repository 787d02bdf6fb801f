package connect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
)

// answer is one answer of a fake worker to GET /connectors/x/status: a
// code and body, or, with code 0, a connection closed unanswered.
type answer struct {
	code int
	body string
}

const running = `{"name":"x","connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"RUNNING"}]}`

// TestStartWaitsThroughAWorkerThatDoesNotAnswerYet: Start's wait for the
// connector asks again while the worker does not answer or answers 5xx, as
// one may right after a registration, and ends at once, saying why, on a
// failed task (with a trace or without) or a refused credential, which no
// wait mends.
func TestStartWaitsThroughAWorkerThatDoesNotAnswerYet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []answer // the last is repeated
		wantErr string   // "" for a connector that runs
	}{
		{"UnansweredAnd5xxAreAskedAgain", []answer{{0, ""}, {503, `{"error_code":503}`}, {500, `{"error_code":500,"message":"Request timed out"}`}, {200, running}}, ""},
		{"FailedTaskWithoutTrace", []answer{{200, `{"name":"x","connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"FAILED"}]}`}}, "task 0 FAILED (no trace)"},
		{"FailedTask", []answer{{200, `{"name":"x","connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"FAILED","trace":"ConnectException: boom\n\tat x"}]}`}}, "ConnectException: boom"},
		{"Unauthorized", []answer{{401, `{"error_code":401,"message":"Unauthorized"}`}}, "401"},
		{"Forbidden", []answer{{403, `{"error_code":403,"message":"Forbidden"}`}}, "403"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			asked := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				a := tc.answers[min(asked, len(tc.answers)-1)]
				asked++
				mu.Unlock()
				if a.code == 0 {
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.code)
				fmt.Fprint(w, a.body)
			}))
			defer srv.Close()
			var logs bytes.Buffer
			// Generous: the wait asks every 200ms.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := connect.AwaitRunning(ctx, srv.Client(), srv.URL, "x", slog.New(slog.NewTextHandler(&logs, nil)))
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the wait did not end within 10s: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("wait: %v, want the connector running", err)
				}
				if asked != len(tc.answers) {
					t.Errorf("asked %d times, want %d", asked, len(tc.answers))
				}
				if n := strings.Count(logs.String(), "asking again"); n != len(tc.answers)-1 {
					t.Errorf("logged %d retries, want %d, one per distinct answer:\n%s", n, len(tc.answers)-1, logs.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("wait: %v, want an error saying %q", err, tc.wantErr)
			}
			if asked != 1 {
				t.Errorf("asked %d times, want once: the wait should end at the first answer", asked)
			}
		})
	}
}
