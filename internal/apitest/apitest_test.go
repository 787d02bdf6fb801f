package apitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// spec documents GET /things/{id} and GET /openapi.yaml; extra is spliced
// into its paths.
func spec(extra string) []byte {
	return []byte(`openapi: 3.0.3
info: {title: things, version: "1"}
paths:
  /things/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    get:
      responses:
        "200":
          description: a thing
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
              example: {id: t-1, count: 2}
  /openapi.yaml:
    get:
      responses:
        "200": {description: this document}
` + extra + `
components:
  schemas:
    Thing:
      type: object
      additionalProperties: false
      required: [id, count]
      properties:
        id: {type: string}
        count: {type: integer, format: int64}
`)
}

func router(specYAML []byte) *chi.Mux {
	r := chi.NewRouter()
	ok := func(w http.ResponseWriter, r *http.Request) {}
	r.Get("/things/{id:[a-z0-9-]+}", ok)
	r.Get(SpecPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(specYAML)
	})
	return r
}

func TestCheckRoutes(t *testing.T) {
	tests := []struct {
		name    string
		spec    []byte
		extra   func(r *chi.Mux) // adds routes to the served router
		wantErr []string         // substrings; none means the check passes
	}{
		{"SameRoutesPass", spec(""), nil, nil},
		{"UndocumentedRouteFails", spec(""),
			func(r *chi.Mux) { r.Delete("/things/{id}", func(http.ResponseWriter, *http.Request) {}) },
			[]string{"served but not documented: DELETE /things/{id}"}},
		{"UnservedRouteFails", spec(`  /others:
    post:
      responses:
        "204": {description: done}
`), nil, []string{"documented but not served: POST /others"}},
		{"BothDirectionsAreReported", spec(`  /others:
    post:
      responses:
        "204": {description: done}
`), func(r *chi.Mux) { r.Put("/things/{id}", func(http.ResponseWriter, *http.Request) {}) },
			[]string{"served but not documented: PUT /things/{id}", "documented but not served: POST /others"}},
		{"UndeclaredPathParameterFails", spec(`  /others/{id}:
    get:
      responses:
        "200": {description: done}
`), func(r *chi.Mux) { r.Get("/others/{id}", func(http.ResponseWriter, *http.Request) {}) },
			[]string{"must define exactly all path parameters"}},
		{"DanglingRefFails", []byte(strings.Replace(string(spec("")), `"#/components/schemas/Thing"`, `"#/components/schemas/Nope"`, 1)),
			nil, []string{"Nope"}},
		{"ExampleOffSchemaFails", []byte(strings.Replace(string(spec("")), "count: 2", "count: two", 1)),
			nil, []string{"count"}},
		{"NotOpenAPI3Fails", []byte(strings.Replace(string(spec("")), "openapi: 3.0.3", `openapi: "2.0"`, 1)),
			nil, []string{"want 3.x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := router(tt.spec)
			if tt.extra != nil {
				tt.extra(r)
			}
			err := checkRoutes(r, tt.spec)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("checkRoutes: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkRoutes passed, want an error with %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestCheckRoutesNeedsChi(t *testing.T) {
	err := checkRoutes(http.NewServeMux(), spec(""))
	if err == nil || !strings.Contains(err.Error(), "not a chi router") {
		t.Fatalf("checkRoutes(ServeMux) = %v, want a not-a-chi-router error", err)
	}
}

func TestCheckSchema(t *testing.T) {
	type thing struct {
		ID    string `json:"id"`
		Count int64  `json:"count"`
	}
	type renamed struct {
		ID  string `json:"id"`
		Cnt int64  `json:"cnt"`
	}
	type extra struct {
		ID    string `json:"id"`
		Count int64  `json:"count"`
		Note  string `json:"note"`
	}
	tests := []struct {
		name    string
		schema  string
		v       any
		wantErr string
	}{
		{"MatchingStructPasses", "Thing", thing{"t-1", 2}, ""},
		{"RenamedFieldFails", "Thing", renamed{"t-1", 2}, "cnt"},
		{"ExtraFieldFails", "Thing", extra{"t-1", 2, "x"}, "note"},
		{"UnknownSchemaFails", "Nope", thing{}, `no schema "Nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSchema(spec(""), tt.schema, tt.v)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("checkSchema: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("checkSchema = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckSpecServed(t *testing.T) {
	s := spec("")
	if err := checkSpecServed(router(s), s); err != nil {
		t.Fatalf("checkSpecServed: %v", err)
	}
	if err := checkSpecServed(router([]byte("stale")), s); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("checkSpecServed(stale) = %v, want a differs error", err)
	}
	if err := checkSpecServed(chi.NewRouter(), s); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Fatalf("checkSpecServed(no route) = %v, want a 404 error", err)
	}
}

func TestCheckResponse(t *testing.T) {
	// The document needs a Problem schema for answers no operation handles.
	withProblem := []byte(strings.Replace(string(spec("")), "components:\n  schemas:\n", `components:
  schemas:
    Problem:
      type: object
      required: [status]
      properties:
        status: {type: integer}
`, 1))
	problem := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"status":404}`))
	}
	tests := []struct {
		name     string
		path     string
		handler  http.HandlerFunc // answers GET /things/{id}
		notFound http.HandlerFunc // nil: chi's plain-text default
		want     int
		wantErr  string // substring; "" means the check passes
	}{
		{"DocumentedAnswerPasses", "/things/t-1", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"t-1","count":2}`))
		}, nil, 200, ""},
		{"WrongStatusFails", "/things/t-1", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
		}, nil, 200, "status 202, want 200"},
		{"UndocumentedStatusFails", "/things/t-1", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}, nil, http.StatusTeapot, "status 418 is not documented"},
		{"UndocumentedContentTypeFails", "/things/t-1", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("t-1"))
		}, nil, 200, `Content-Type "text/plain" is not documented`},
		{"BodyOffSchemaFails", "/things/t-1", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"t-1","count":"two"}`))
		}, nil, 200, "does not match the documented schema"},
		{"UnroutedProblemPasses", "/nope", nil, problem, 404, ""},
		{"UnroutedPlainTextFails", "/nope", nil, nil, 404, "want application/problem+json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := chi.NewRouter()
			if tt.notFound != nil {
				r.NotFound(tt.notFound)
			}
			r.Get("/things/{id}", func(w http.ResponseWriter, r *http.Request) {
				if tt.handler != nil {
					tt.handler(w, r)
				}
			})
			err := checkResponse(r, withProblem, httptest.NewRequest(http.MethodGet, tt.path, nil), tt.want)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("checkResponse: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("checkResponse = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
