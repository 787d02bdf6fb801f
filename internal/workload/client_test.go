package workload_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/choreo-saga/choreo/internal/workload"
)

// TestDo sends JSON with the caller's headers and bearer token, decodes a
// 2xx answer and returns its headers, and turns any other status into a
// *StatusError carrying the body.
func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Idempotency-Key") != "k" || r.Header.Get("Authorization") != "Bearer tok" || string(b) != `{"n":1}` {
			http.Error(w, "bad request: "+string(b), http.StatusBadRequest)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		if r.URL.Path == "/down" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"id":"o-1"}`)
	}))
	t.Cleanup(srv.Close)
	ctx, hdr, body := context.Background(), map[string]string{"Idempotency-Key": "k"}, map[string]int{"n": 1}

	t.Run("Decodes", func(t *testing.T) {
		var got struct{ ID string }
		h, err := workload.Do(ctx, srv.Client(), "tok", http.MethodPost, srv.URL+"/orders", hdr, body, &got)
		if err != nil || got.ID != "o-1" || h.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("Do = %v, %+v, headers %v; want o-1 and the replay header", err, got, h)
		}
	})
	t.Run("StatusError", func(t *testing.T) {
		_, err := workload.Do(ctx, srv.Client(), "tok", http.MethodPost, srv.URL+"/down", hdr, body, nil)
		var se *workload.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || se.Body != "down" {
			t.Fatalf("Do = %v, want a 503 StatusError with body down", err)
		}
	})
}
