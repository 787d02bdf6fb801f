package web_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/web"
)

type body struct {
	Name string `json:"name"`
}

func (b body) Validate() error {
	if b.Name == "" {
		return errString("name is required")
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

func TestDecode(t *testing.T) {
	tests := []struct {
		name, contentType, body string
		want                    int // 0 = success
	}{
		{"Valid", "application/json", `{"name":"x"}`, 0},
		{"ValidWithCharset", "application/json; charset=utf-8", `{"name":"x"}`, 0},
		{"WrongContentType", "text/plain", `{"name":"x"}`, 415},
		{"NoContentType", "", `{"name":"x"}`, 415},
		{"Malformed", "application/json", `{"name":`, 400},
		{"UnknownField", "application/json", `{"name":"x","extra":1}`, 400},
		{"TrailingData", "application/json", `{"name":"x"} {}`, 400},
		{"FailsValidation", "application/json", `{"name":""}`, 400},
		{"TooLarge", "application/json", `{"name":"` + strings.Repeat("x", web.MaxBodyBytes) + `"}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			_, err := web.Decode[body](httptest.NewRecorder(), r)
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var we *web.Error
			if !errors.As(err, &we) || we.Status != tt.want {
				t.Fatalf("Decode error = %v, want status %d", err, tt.want)
			}
		})
	}
}

func TestRouter(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	r := web.NewRouter(log, map[string]web.Check{})
	r.Method(http.MethodPut, "/things/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r.Method(http.MethodGet, "/things/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r.Method(http.MethodGet, "/panic", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }))

	tests := []struct {
		name, method, path string
		want               int
		allow              string
	}{
		{"HealthzAnswers", http.MethodGet, "/healthz", 200, ""},
		{"HeadUsesGetRoute", http.MethodHead, "/healthz", 200, ""},
		{"UnknownRouteIsProblem404", http.MethodGet, "/nope", 404, ""},
		{"WrongMethodIs405WithAllow", http.MethodDelete, "/things/1", 405, "GET, HEAD, PUT"},
		{"PanicIsProblem500", http.MethodGet, "/panic", 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d", w.Code, tt.want)
			}
			if tt.want >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
				b, _ := io.ReadAll(w.Body)
				t.Fatalf("Content-Type = %q, body %s", w.Header().Get("Content-Type"), b)
			}
			if tt.allow != "" && w.Header().Get("Allow") != tt.allow {
				t.Fatalf("Allow = %q, want %q", w.Header().Get("Allow"), tt.allow)
			}
		})
	}
}
