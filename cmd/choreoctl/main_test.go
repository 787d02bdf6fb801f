package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/pkg/bearer"
)

// fakeAdmin answers like a service's admin API: order o-1 parked on it,
// or nothing.
func fakeAdmin(t *testing.T, parked bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"status":401,"detail":"the admin API needs the token"}`))
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("X-Choreo-Admin") == "" {
			t.Errorf("POST %s without the admin header", r.URL.Path)
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/admin/parked" && parked:
			w.Write([]byte(`{"service":"payment","orders":1,"rows":[
				{"seq":7,"service":"payment","key":"o-1","event_id":"e-1","event_type":"OrderCancelRequested","topic":"order.events","partition":2,"offset":40,"reason":"refund refused:\nsettle it by hand","parked_at":"2026-12-01T10:00:00Z"},
				{"seq":8,"service":"payment","key":"o-1","event_id":"e-2","event_type":"OrderCancelRequested","topic":"order.events","partition":2,"offset":41,"parked_at":"2026-12-01T10:00:01Z"}]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/admin/outbox/refused":
			w.Write([]byte(`{"rows":[{"id":3,"topic":"payment.events","key":"o-9","bytes":2000000,"refused_at":"2026-12-01T10:00:00Z","last_error":"message too large"}]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/admin/outbox/refused/3/retry":
			w.Write([]byte(`{"id":3,"retried":true}`))
		case r.Method == http.MethodPost && r.URL.Path == "/admin/outbox/refused/4/retry":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"status":409,"detail":"outbox row 4 refused again, left as it was: too large for Kafka; fix the cause, then retry it"}`))
		case r.Method == http.MethodGet && r.URL.Path == "/admin/parked":
			w.Write([]byte(`{"service":"order","orders":0,"rows":[]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/admin/parked/replay" && parked:
			if r.URL.Query().Get("order") != "o-1" {
				t.Errorf("replay query %q, want order=o-1", r.URL.RawQuery)
			}
			w.Write([]byte(`{"service":"payment","resolved":[{"seq":7,"key":"o-1","event_id":"e-1","event_type":"OrderCancelRequested","outcome":"applied"},{"seq":8,"key":"o-1","event_id":"e-2","event_type":"OrderCancelRequested","outcome":"duplicate"}]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/admin/parked/replay":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":404,"detail":"nothing of order o-1 was ever parked by order"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChoreoctl(t *testing.T) {
	payment, order := fakeAdmin(t, true), fakeAdmin(t, false)
	services := "-services=order=" + order.URL + ",payment=" + payment.URL
	tests := []struct {
		name    string
		args    []string
		want    []string // in the output
		wantErr string
	}{
		{"ListsRowsOnOneLineEach", []string{services, "-token", "tok", "parked"},
			[]string{"payment  o-1    7", "refund refused: settle it by hand", "parked behind the failure above"}, ""},
		{"DeadLettersAreTheFailuresOnly", []string{services, "-token", "tok", "dead-letters"},
			[]string{"e-1"}, ""},
		{"ReplayActsWhereTheOrderIsParked", []string{services, "-token", "tok", "replay", "-order", "o-1"},
			[]string{"payment: row 7 OrderCancelRequested e-1 of order o-1: applied", "payment: row 8 OrderCancelRequested e-2 of order o-1: duplicate"}, ""},
		{"ANamedServiceAnswersNotFound", []string{services, "-token", "tok", "replay", "-service", "order", "-order", "o-1"},
			nil, "404 nothing of order o-1 was ever parked"},
		{"OutboxRowsOfEveryService", []string{services, "-token", "tok", "outbox-refused"},
			[]string{"order    3   payment.events  o-9  2000000", "payment  3", "message too large"}, ""},
		{"OutboxRetry", []string{services, "-token", "tok", "outbox-retry", "-service", "payment", "-id", "3"},
			[]string{"payment: outbox row 3 back in line"}, ""},
		{"OutboxRetryRefusedAgainSaysWhy", []string{services, "-token", "tok", "outbox-retry", "-service", "payment", "-id", "4"},
			nil, "payment: outbox row 4 refused again, left as it was: too large for Kafka"},
		{"NothingParked", []string{"-services=order=" + order.URL, "-token", "tok", "parked"}, []string{"nothing parked\n"}, ""},
		{"NoDeadLetters", []string{"-services=order=" + order.URL, "-token", "tok", "dead-letters"}, []string{"no dead letters\n"}, ""},
		{"TokenMissing", []string{services, "parked"}, nil, "401"},
		{"OneSelector", []string{services, "replay", "-order", "o-1", "-event", "e-1"}, nil, "select by one of"},
		{"RowNeedsService", []string{services, "release", "-row", "3"}, nil, "-row needs -service"},
		{"BadServices", []string{"-services", "payment", "parked"}, nil, "not name=url"},
		{"UnknownService", []string{services, "parked", "-service", "billing"}, nil, `no service "billing"`},
		{"UnknownCommand", []string{services, "frobnicate"}, nil, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q\n%s", err, tt.wantErr, out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not hold %q:\n%s", w, out.String())
				}
			}
			if tt.name == "DeadLettersAreTheFailuresOnly" && strings.Contains(out.String(), "e-2") {
				t.Errorf("dead-letters lists the row parked behind:\n%s", out.String())
			}
		})
	}
}

// TestUsage: -h, before or after the command, prints the commands and
// every flag once, each default said once and no value taken from the
// environment (a token), and is not an error.
func TestUsage(t *testing.T) {
	env := func(name string) string {
		return map[string]string{"CHOREO_TOKEN": "s3cret", "CHOREO_SERVICES": "order=http://10.0.0.4:8080"}[name]
	}
	for _, args := range [][]string{{"-h"}, {"parked", "-h"}, {"replay", "-help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := run(context.Background(), args, env, &out, &errOut); err != nil {
				t.Fatalf("run %v = %v, want no error", args, err)
			}
			usage := errOut.String()
			for _, want := range []string{"commands:", "replay -order ID", "-services URLs", "-token token", "-service service", "-row number"} {
				if !strings.Contains(usage, want) {
					t.Errorf("usage does not hold %q:\n%s", want, usage)
				}
			}
			for _, l := range strings.Split(usage, "\n") {
				if strings.Count(l, "(default") > 1 {
					t.Errorf("a default said twice: %q", l)
				}
			}
			if strings.Contains(usage, "s3cret") || strings.Contains(usage, "10.0.0.4") || out.Len() > 0 {
				t.Errorf("usage shows the environment's values, or went to stdout:\n%s%s", usage, out.String())
			}
		})
	}
}

// TestTokenSources: the token is -token's, else $CHOREO_TOKEN's, else an
// operator's signed with the development key if there is one; with none,
// the services' 401 is the answer, and no key is made.
func TestTokenSources(t *testing.T) {
	dir := t.TempDir()
	keyDir, otherDir := filepath.Join(dir, "key"), filepath.Join(dir, "other")
	k, err := devkey.Open(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devkey.Open(otherDir); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	v, err := bearer.New(t.Context(), k.Auth(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Authenticate(log)(bearer.RequireOperator(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"service":"payment","orders":0,"rows":[]}`))
	}))))
	defer srv.Close()
	services := "-services=payment=" + srv.URL
	operator, err := k.Token("ops", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	customer, err := k.Token("c-1", false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(dir, "none")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"DevKey", []string{services, "parked"}, map[string]string{devkey.EnvDir: keyDir}, ""},
		{"NoDevKeyUnderHome", []string{services, "parked"}, map[string]string{"HOME": dir, "XDG_CACHE_HOME": filepath.Join(dir, "cache")}, "401"},
		{"EnvOverDevKey", []string{services, "parked"}, map[string]string{"CHOREO_TOKEN": customer, devkey.EnvDir: keyDir}, "403"},
		{"FlagOverEnv", []string{services, "-token", operator, "parked"}, map[string]string{"CHOREO_TOKEN": customer}, ""},
		{"NoDevKey", []string{services, "parked"}, map[string]string{devkey.EnvDir: none}, "401"},
		{"OtherDevKey", []string{services, "parked"}, map[string]string{devkey.EnvDir: otherDir}, "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out, io.Discard)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q\n%s", err, tt.wantErr, out.String())
			}
		})
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a key was made at %s by a command that only reads: %v", none, err)
	}
}

// TestDevTokens: dev-key makes the key pair once, its private half for
// its owner only, and prints the settings that accept its tokens; token
// prints one the services take as the customer, or the operator, it
// names.
func TestDevTokens(t *testing.T) {
	keyDir := filepath.Join(t.TempDir(), "key")
	env := func(k string) string { return map[string]string{devkey.EnvDir: keyDir}[k] }
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), args, env, &out, io.Discard)
		return strings.TrimSpace(out.String()), err
	}
	settings, err := cmd("dev-key")
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(keyDir, bearer.PublicKeyFile)
	want := "AUTH_PUBLIC_KEY_FILE=" + pub + "\nAUTH_ISSUER=" + devkey.Issuer + "\nAUTH_AUDIENCE=" + devkey.Audience
	if settings != want {
		t.Fatalf("dev-key printed\n%s\nwant\n%s", settings, want)
	}
	if fi, err := os.Stat(filepath.Join(keyDir, bearer.PrivateKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, %v; want mode 0600", fi, err)
	}
	if again, _ := cmd("dev-key"); again != settings {
		t.Fatalf("dev-key again printed %q, want the same key's %q", again, settings)
	}
	v, err := bearer.New(t.Context(), bearer.Config{PublicKeyFile: pub, Issuer: devkey.Issuer, Audience: devkey.Audience}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    bearer.Caller
		wantErr bool
	}{
		{"Customer", []string{"token", "-sub", "c-1"}, bearer.Caller{Subject: "c-1"}, false},
		{"Operator", []string{"token", "-sub", "ops", "-operator", "-ttl", "5m"}, bearer.Caller{Subject: "ops", Operator: true}, false},
		{"NoSubject", []string{"token"}, bearer.Caller{}, true},
		{"SubjectNotAnID", []string{"token", "-sub", "c 1"}, bearer.Caller{}, true},
		{"NegativeTTL", []string{"token", "-sub", "c-1", "-ttl", "-1h"}, bearer.Caller{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := cmd(tt.args...)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%v printed %q, want an error", tt.args, tok)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(t.Context(), tok)
			if err != nil || got != tt.want {
				t.Fatalf("Verify = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
