package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
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
		{"TrailingBracket", "application/json", `{"name":"x"}]`, 400},
		{"TrailingBrace", "application/json", `{"name":"x"}}`, 400},
		{"TrailingWhitespace", "application/json", "{\"name\":\"x\"} \n", 0},
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

// TestDecodeDetailsInTheClientsWords: a value Go cannot decode is named by
// its place in the document and what it must be, never by a Go type or
// struct field.
func TestDecodeDetailsInTheClientsWords(t *testing.T) {
	type line struct {
		Quantity int64  `json:"quantity"`
		SKU      string `json:"sku"`
	}
	type order struct {
		Items   []line             `json:"items"`
		Address struct{ C string } `json:"address"`
		Gift    bool               `json:"gift"`
		Rate    float64            `json:"rate"`
		Tags    map[string]int     `json:"tags"`
	}
	tests := []struct {
		name, body, want string
	}{
		{"Fraction", `{"items":[{"quantity":1},{"quantity":1.5}]}`, "items[1].quantity: must be a whole number"},
		{"Exponent", `{"items":[{"quantity":1e3}]}`, "items[0].quantity: must be a whole number"},
		{"BeyondInt64", `{"items":[{"quantity":99999999999999999999}]}`, "items[0].quantity: is too large a number"},
		{"BeyondFloat64InAWholeNumber", `{"items":[{"quantity":1e400}]}`, "items[0].quantity: is too large a number"},
		{"BeyondFloat64InANumber", `{"rate":1e400}`, "rate: is too large a number"},
		{"StringForNumber", `{"items":[{"sku":"A","quantity":"2"}]}`, "items[0].quantity: must be a whole number, not a string"},
		{"NumberForString", `{"items":[{"sku":7}]}`, "items[0].sku: must be a string, not a number"},
		{"ArrayForObject", `{"address":[]}`, "address: must be an object, not an array"},
		{"ObjectForArray", `{"items":{}}`, "items: must be an array, not an object"},
		{"StringForBool", `{"gift":"yes"}`, "gift: must be true or false, not a string"},
		{"BoolForFloat", `{"rate":true}`, "rate: must be a number, not true or false"},
		{"InAMap", `{"tags":{"a":1,"b":"x"}}`, "tags.b: must be a whole number, not a string"},
		{"AfterANestedObject", `{"address":{"C":"x"},"items":[{"sku":"A","quantity":0.5}]}`, "items[0].quantity: must be a whole number"},
		{"TheBodyItself", `[1]`, "the body: must be an object, not an array"},
		{"Empty", ``, "the body is empty; send a JSON object"},
		{"Truncated", `{"items":[`, "malformed JSON: the body ends in the middle of a value"},
		{"Syntax", `{"items" 1}`, "malformed JSON at byte 10: invalid character '1' after object key"},
		{"UnknownField", `{"colour":"red"}`, `unknown field "colour"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			_, err := web.Decode[order](httptest.NewRecorder(), r)
			var we *web.Error
			if !errors.As(err, &we) || we.Status != http.StatusBadRequest || we.Detail != tt.want {
				t.Fatalf("Decode(%s) = %v; want 400 %q", tt.body, err, tt.want)
			}
		})
	}
}

// TestJSONIsNotHTMLEscaped: answers read ">=" and "&", not "\u003e=".
func TestJSONIsNotHTMLEscaped(t *testing.T) {
	rec := httptest.NewRecorder()
	web.Encode(rec, http.StatusOK, map[string]string{"rule": "balance must be >= 0 & <= 10"})
	if want := `{"rule":"balance must be >= 0 & <= 10"}` + "\n"; rec.Body.String() != want {
		t.Errorf("Encode = %q, want %q", rec.Body.String(), want)
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
			if w.Header().Get("X-Request-Id") == "" {
				t.Fatal("no X-Request-Id in the response")
			}
			if tt.allow != "" && w.Header().Get("Allow") != tt.allow {
				t.Fatalf("Allow = %q, want %q", w.Header().Get("Allow"), tt.allow)
			}
		})
	}
}

// TestPathID serves ids through a real chi router, which matches the raw,
// still-escaped path: an escaped character must be refused, not passed on
// as "%2F" to be stored, nor decoded into a NUL that PostgreSQL rejects.
func TestPathID(t *testing.T) {
	r := web.NewRouter(slog.New(slog.DiscardHandler), map[string]web.Check{})
	r.Method(http.MethodGet, "/things/{id}", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, err := web.PathID(req, "id")
		if err != nil {
			web.Respond(w, req, slog.New(slog.DiscardHandler), err)
			return
		}
		web.Encode(w, http.StatusOK, map[string]string{"id": id})
	}))
	tests := []struct {
		name, path string
		want       int
		id         string
	}{
		{"Plain", "/things/c-1", 200, "c-1"},
		{"UUID", "/things/3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13", 200, "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13"},
		{"EveryAllowedPunctuation", "/things/a.b_c~d:e@f-g", 200, "a.b_c~d:e@f-g"},
		{"MaxLength", "/things/" + strings.Repeat("x", events.MaxIDLen), 200, strings.Repeat("x", events.MaxIDLen)},
		{"TooLong", "/things/" + strings.Repeat("x", events.MaxIDLen+1), 400, ""},
		{"EscapedSlash", "/things/a%2Fb", 400, ""},
		{"EscapedNUL", "/things/a%00b", 400, ""},
		{"EscapedInvalidUTF8", "/things/%ff", 400, ""},
		{"EscapedSpace", "/things/a%20b", 400, ""},
		{"EscapedLetter", "/things/%41", 400, ""},
		{"NonASCII", "/things/%E6%B3%A8%E6%96%87", 400, ""},
		{"Plus", "/things/a+b", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if w.Code != tt.want {
				t.Fatalf("GET %s = %d, want %d: %s", tt.path, w.Code, tt.want, w.Body)
			}
			if tt.want == 200 && !strings.Contains(w.Body.String(), `"id":"`+tt.id+`"`) {
				t.Fatalf("GET %s = %s, want id %q", tt.path, w.Body, tt.id)
			}
		})
	}
}

// TestRespondMapsFaultKinds: a domain's kind of failure reaches the client
// as its status, with the domain's message as the problem's detail.
func TestRespondMapsFaultKinds(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
	}{
		{"NotFound", fault.Errorf(fault.NotFound, "account c-1"), http.StatusNotFound},
		{"ConflictWrapped", fmt.Errorf("store: %w", fault.Errorf(fault.Conflict, "stale version")), http.StatusConflict},
		{"Invalid", fault.Errorf(fault.Invalid, "key reused"), http.StatusUnprocessableEntity},
		{"PreconditionFailed", fault.Errorf(fault.PreconditionFailed, "version 3 is stale"), http.StatusPreconditionFailed},
		{"PreconditionRequired", fault.Errorf(fault.PreconditionRequired, "If-Match required"), http.StatusPreconditionRequired},
		{"WebErrorWins", web.Errorf(http.StatusTeapot, "tea"), http.StatusTeapot},
		{"Unknown", errors.New("db down"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			web.Respond(w, httptest.NewRequest(http.MethodGet, "/x", nil), slog.New(slog.NewTextHandler(io.Discard, nil)), tt.err)
			if w.Code != tt.status || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("status %d %q, want %d problem+json", w.Code, w.Header().Get("Content-Type"), tt.status)
			}
			var fe *fault.Error
			if errors.As(tt.err, &fe) && !strings.Contains(w.Body.String(), fe.Detail()) {
				t.Errorf("body %s lacks the detail %q", w.Body, fe.Detail())
			}
		})
	}
}

type thing struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int64  `json:"-"`
}

func (t thing) CurrentVersion() int64 { return t.Version }

// things serves GET, PUT and POST /things/{id} over a map, as a service's
// routes serve its store: a PUT replacing a thing must name its version.
func things() http.Handler {
	stored := map[string]thing{"t-1": {ID: "t-1", Name: "one", Version: 1}}
	log := slog.New(slog.DiscardHandler)
	r := chi.NewRouter()
	r.Method(http.MethodGet, "/things/{id}", web.Get(log, "id", func(_ context.Context, id string) (thing, error) {
		th, ok := stored[id]
		if !ok {
			return thing{}, fault.Errorf(fault.NotFound, "thing %s not found", id)
		}
		return th, nil
	}))
	r.Method(http.MethodPut, "/things/{id}", web.Put(log, "id", func(_ context.Context, id string, pre web.Precondition, b body) (thing, error) {
		if b.Name == "taken" {
			return thing{}, fault.Errorf(fault.Conflict, "name %s is taken", b.Name)
		}
		old, ok := stored[id]
		switch {
		case ok && pre.CreateOnly:
			return thing{}, fault.Errorf(fault.PreconditionFailed, "thing %s exists", id)
		case ok && pre.IfMatch == nil:
			return thing{}, fault.Errorf(fault.PreconditionRequired, "If-Match required")
		case pre.IfMatch != nil && (!ok || *pre.IfMatch != old.Version):
			return thing{}, fault.Errorf(fault.PreconditionFailed, "thing %s is not at version %d", id, *pre.IfMatch)
		}
		stored[id] = thing{ID: id, Name: b.Name, Version: old.Version + 1}
		return stored[id], nil
	}))
	r.Method(http.MethodPost, "/things/{id}/renames", web.Post(log, "id", func(_ context.Context, id string, b body) (thing, error) {
		th, ok := stored[id]
		if !ok {
			return thing{}, fault.Errorf(fault.NotFound, "thing %s not found", id)
		}
		th.Name, th.Version = b.Name, th.Version+1
		stored[id] = th
		return th, nil
	}))
	return r
}

func TestGetPutPost(t *testing.T) {
	h := things()
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		want                     int
		wantBody                 string // a substring of the response body
		wantETag                 string
	}{
		{"GetFound", "GET", "/things/t-1", "", nil, 200, `{"id":"t-1","name":"one"}`, `"1"`},
		{"GetNotFound", "GET", "/things/t-2", "", nil, 404, "thing t-2 not found", ""},
		{"GetBadID", "GET", "/things/t%2F1", "", nil, 400, "id must be", ""},
		{"PutCreates", "PUT", "/things/t-3", `{"name":"three"}`, nil, 200, `{"id":"t-3","name":"three"}`, `"1"`},
		{"PutWithoutIfMatchOnExisting", "PUT", "/things/t-3", `{"name":"3"}`, nil, 428, "If-Match required", ""},
		{"PutStaleIfMatch", "PUT", "/things/t-3", `{"name":"3"}`, http.Header{"If-Match": {`"7"`}}, 412, "not at version 7", ""},
		{"PutIfMatch", "PUT", "/things/t-3", `{"name":"three!"}`, http.Header{"If-Match": {`"1"`}}, 200, `"name":"three!"`, `"2"`},
		{"PutCreateOnlyExisting", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-None-Match": {"*"}}, 412, "exists", ""},
		{"PutCreateOnly", "PUT", "/things/t-5", `{"name":"five"}`, http.Header{"If-None-Match": {"*"}}, 200, `"name":"five"`, `"1"`},
		{"PutWeakIfMatch", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-Match": {`W/"2"`}}, 400, "If-Match must be", ""},
		{"PutIfMatchStar", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-Match": {"*"}}, 400, "If-Match must be", ""},
		{"PutIfMatchList", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-Match": {`"1", "2"`}}, 400, "If-Match must be", ""},
		{"PutIfNoneMatchTag", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-None-Match": {`"2"`}}, 400, "If-None-Match must be *", ""},
		{"PutBothConditions", "PUT", "/things/t-3", `{"name":"x"}`, http.Header{"If-Match": {`"2"`}, "If-None-Match": {"*"}}, 400, "not both", ""},
		{"PutBadID", "PUT", "/things/" + strings.Repeat("x", 65), `{"name":"x"}`, nil, 400, "id must be", ""},
		{"PutInvalidBody", "PUT", "/things/t-3", `{"name":""}`, nil, 400, "name is required", ""},
		{"PutNotJSON", "PUT", "/things/t-3", "", nil, 415, "Content-Type", ""},
		{"PutConflict", "PUT", "/things/t-4", `{"name":"taken"}`, nil, 409, "name taken is taken", ""},
		{"PostActs", "POST", "/things/t-1/renames", `{"name":"uno"}`, nil, 200, `{"id":"t-1","name":"uno"}`, `"2"`},
		{"PostNotFound", "POST", "/things/t-9/renames", `{"name":"nine"}`, nil, 404, "thing t-9 not found", ""},
		{"PostInvalidBody", "POST", "/things/t-1/renames", `{"name":""}`, nil, 400, "name is required", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, apitest.Request{Method: tt.method, Path: tt.path, Body: tt.body, Header: tt.header}.HTTP())
			got, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.want || !strings.Contains(string(got), tt.wantBody) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, rec.Code, got, tt.want, tt.wantBody)
			}
			if etag := rec.Header().Get("ETag"); etag != tt.wantETag {
				t.Errorf("ETag = %q, want %q", etag, tt.wantETag)
			}
		})
	}
	t.Run("PutThenGet", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/things/t-3", nil))
		if want := fmt.Sprintln(`{"id":"t-3","name":"three!"}`); rec.Body.String() != want || rec.Header().Get("ETag") != `"2"` {
			t.Errorf("GET after PUT = %q %s, want %q \"2\"", rec.Body.String(), rec.Header().Get("ETag"), want)
		}
	})
}

// TestAdd serves an addition to a counter: the body's one field, checked
// by CheckAddition, is handed over; any other field is refused as Decode
// refuses one.
func TestAdd(t *testing.T) {
	r := chi.NewRouter()
	r.Method(http.MethodPost, "/counters/{id}/additions", web.AddAmount(slog.New(slog.DiscardHandler), "id", "n",
		func(_ context.Context, id string, n int64, key string) (map[string]int64, bool, error) {
			return map[string]int64{id: n}, key == "seen", nil
		}))
	tests := []struct {
		name, body string
		key        []string // Idempotency-Key values
		want       int
		wantBody   string // a substring of the response body
		replayed   bool
	}{
		{"Adds", `{"n":3}`, nil, 200, `{"c-1":3}`, false},
		{"ReplayIsMarked", `{"n":3}`, []string{"seen"}, 200, `{"c-1":3}`, true},
		{"NewKey", `{"n":3}`, []string{"k-1"}, 200, `{"c-1":3}`, false},
		{"EmptyKey", `{"n":3}`, []string{""}, 400, "Idempotency-Key must be 1 to 255", false},
		{"LongKey", `{"n":3}`, []string{strings.Repeat("k", 256)}, 400, "Idempotency-Key must be 1 to 255", false},
		{"NonASCIIKey", `{"n":3}`, []string{"ключ"}, 400, "printable ASCII", false},
		{"TwoKeys", `{"n":3}`, []string{"a", "b"}, 400, "sent once", false},
		{"Missing", `{}`, nil, 400, "n is required", false},
		{"Null", `null`, nil, 400, "n is required", false},
		{"Zero", `{"n":0}`, nil, 400, `n must be > 0`, false}, // not \u003e
		{"UnknownField", `{"n":1,"m":2}`, nil, 400, "unknown field", false},
		{"NotANumber", `{"n":"1"}`, nil, 400, "n: must be a whole number, not a string", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := apitest.Request{Method: "POST", Path: "/counters/c-1/additions", Body: tt.body}.HTTP()
			for _, k := range tt.key {
				req.Header.Add("Idempotency-Key", k)
			}
			r.ServeHTTP(rec, req)
			if rec.Code != tt.want || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("POST %s = %d %s, want %d with %q", tt.body, rec.Code, rec.Body, tt.want, tt.wantBody)
			}
			if got := rec.Header().Get("Idempotent-Replayed") == "true"; got != tt.replayed {
				t.Errorf("Idempotent-Replayed %v, want %v", got, tt.replayed)
			}
		})
	}
}

func TestCheckAmount(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	level, addition := web.CheckAmount, web.CheckAddition
	tests := []struct {
		name  string
		check func(string, *int64) error
		v     *int64
		want  string // "" means valid
	}{
		{"Missing", level, nil, "n is required"},
		{"MissingAddition", addition, nil, "n is required"},
		{"ZeroLevel", level, n(0), ""},
		{"ZeroAddition", addition, n(0), "n must be > 0"},
		{"Negative", level, n(-1), "n must be >= 0"},
		{"NegativeAddition", addition, n(-1), "n must be > 0"},
		{"Max", addition, n(events.MaxAmount), ""},
		{"AboveMax", level, n(events.MaxAmount + 1), "n must be at most 1000000000000000"},
		{"AboveMaxAddition", addition, n(events.MaxAmount + 1), "n must be at most 1000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check("n", tt.v)
			if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
				t.Fatalf("check = %v, want %q", err, tt.want)
			}
		})
	}
}
