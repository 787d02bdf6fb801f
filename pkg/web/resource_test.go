package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/web"
)

type thing struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// things serves GET and PUT /things/{id} over a map, as a service's routes
// serve its store.
func things() http.Handler {
	stored := map[string]thing{"t-1": {ID: "t-1", Name: "one"}}
	log := slog.New(slog.DiscardHandler)
	r := chi.NewRouter()
	r.Method(http.MethodGet, "/things/{id}", web.Get(log, "id", func(_ context.Context, id string) (thing, error) {
		th, ok := stored[id]
		if !ok {
			return thing{}, fault.Errorf(fault.NotFound, "thing %s not found", id)
		}
		return th, nil
	}))
	r.Method(http.MethodPut, "/things/{id}", web.Put(log, "id", func(_ context.Context, id string, b body) (thing, error) {
		if b.Name == "taken" {
			return thing{}, fault.Errorf(fault.Conflict, "name %s is taken", b.Name)
		}
		stored[id] = thing{ID: id, Name: b.Name}
		return stored[id], nil
	}))
	return r
}

func TestGetAndPut(t *testing.T) {
	h := things()
	tests := []struct {
		name, method, path, body string
		want                     int
		wantBody                 string // a substring of the response body
	}{
		{"GetFound", "GET", "/things/t-1", "", 200, `{"id":"t-1","name":"one"}`},
		{"GetNotFound", "GET", "/things/t-2", "", 404, "thing t-2 not found"},
		{"GetBadID", "GET", "/things/t%2F1", "", 400, "id must be"},
		{"PutStores", "PUT", "/things/t-3", `{"name":"three"}`, 200, `{"id":"t-3","name":"three"}`},
		{"PutBadID", "PUT", "/things/" + strings.Repeat("x", 65), `{"name":"x"}`, 400, "id must be"},
		{"PutInvalidBody", "PUT", "/things/t-3", `{"name":""}`, 400, "name is required"},
		{"PutNotJSON", "PUT", "/things/t-3", "", 415, "Content-Type"},
		{"PutConflict", "PUT", "/things/t-4", `{"name":"taken"}`, 409, "name taken is taken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.want || !strings.Contains(string(got), tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, rec.Code, got, tt.want, tt.wantBody)
			}
		})
	}
	t.Run("PutThenGet", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/things/t-3", nil))
		if want := fmt.Sprintln(`{"id":"t-3","name":"three"}`); rec.Body.String() != want {
			t.Errorf("GET after PUT = %q, want %q", rec.Body.String(), want)
		}
	})
}
