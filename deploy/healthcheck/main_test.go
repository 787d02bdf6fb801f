package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProbeURL(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		httpAddr string
		want     string
		wantErr  bool
	}{
		{name: "argument wins", args: []string{"http://x:1/readyz"}, httpAddr: ":8080", want: "http://x:1/readyz"},
		{name: "all interfaces", httpAddr: ":8081", want: "http://127.0.0.1:8081/readyz"},
		{name: "unspecified IPv4", httpAddr: "0.0.0.0:8082", want: "http://127.0.0.1:8082/readyz"},
		{name: "unspecified IPv6", httpAddr: "[::]:8083", want: "http://127.0.0.1:8083/readyz"},
		{name: "explicit host", httpAddr: "10.0.0.7:9000", want: "http://10.0.0.7:9000/readyz"},
		{name: "no HTTP_ADDR", wantErr: true},
		{name: "bad HTTP_ADDR", httpAddr: "8080", wantErr: true},
		{name: "too many arguments", args: []string{"a", "b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "HTTP_ADDR" {
					return tt.httpAddr
				}
				return ""
			}
			got, err := probeURL(tt.args, getenv)
			if (err != nil) != tt.wantErr {
				t.Fatalf("probeURL() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("probeURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		status  int
		wantErr bool
	}{
		{http.StatusOK, false},
		{http.StatusServiceUnavailable, true},
		{http.StatusNoContent, true},
		{http.StatusNotFound, true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			err := probe(context.Background(), srv.URL+"/readyz")
			if (err != nil) != tt.wantErr {
				t.Errorf("probe() error = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		if err := probe(context.Background(), url); err == nil {
			t.Error("probe() of a closed server succeeded")
		}
	})
}
