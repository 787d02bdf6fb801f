package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/admintoken"
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
		return map[string]string{"ADMIN_TOKEN": "s3cret", "CHOREO_SERVICES": "order=http://10.0.0.4:8080"}[name]
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

// TestTokenSources: the token is -token's, else $ADMIN_TOKEN's, else the
// one the local modes wrote to the token file; with none, the services'
// 401 is the answer.
func TestTokenSources(t *testing.T) {
	payment := fakeAdmin(t, true) // wants "Bearer tok"
	services := "-services=payment=" + payment.URL
	dir := t.TempDir()
	tokFile, otherFile := filepath.Join(dir, "tok"), filepath.Join(dir, "other")
	if err := admintoken.Write(tokFile, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := admintoken.Write(otherFile, "other"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"File", []string{services, "parked"}, map[string]string{admintoken.EnvFile: tokFile}, ""},
		{"FileUnderHome", []string{services, "parked"}, map[string]string{"HOME": dir, "XDG_CACHE_HOME": filepath.Join(dir, "cache")}, "401"},
		{"EnvOverFile", []string{services, "parked"}, map[string]string{"ADMIN_TOKEN": "tok", admintoken.EnvFile: otherFile}, ""},
		{"FlagOverEnv", []string{services, "-token", "tok", "parked"}, map[string]string{"ADMIN_TOKEN": "other"}, ""},
		{"NoFile", []string{services, "parked"}, map[string]string{admintoken.EnvFile: filepath.Join(dir, "none")}, "401"},
		{"WrongFile", []string{services, "parked"}, map[string]string{admintoken.EnvFile: otherFile}, "401"},
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
}
