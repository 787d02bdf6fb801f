// Package web holds the HTTP plumbing the services share: JSON decoding
// with its checks, problem responses from one error mapping (Respond),
// health endpoints and a graceful server.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
)

// MaxBodyBytes bounds a request body; larger bodies get 413.
const MaxBodyBytes = 1 << 20

// Error is an error with the HTTP status and client-facing detail it maps to.
type Error struct {
	Status int
	Detail string
	Err    error // optional cause, logged but not shown
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted detail.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// statusOf is the one mapping from a domain's kind of failure (package
// fault) to an HTTP status.
var statusOf = map[error]int{
	fault.NotFound: http.StatusNotFound,
	fault.Conflict: http.StatusConflict,
	fault.Invalid:  http.StatusUnprocessableEntity,

	fault.PreconditionFailed:   http.StatusPreconditionFailed,
	fault.PreconditionRequired: http.StatusPreconditionRequired,
}

// Respond writes err as application/problem+json. An *Error keeps its status
// and detail; a *fault.Error gets its kind's status and its message as the
// detail; anything else is a 500 whose cause is logged, not shown.
func Respond(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var we *Error
	var fe *fault.Error
	if !errors.As(err, &we) && errors.As(err, &fe) && statusOf[fe.Kind] != 0 {
		we = &Error{Status: statusOf[fe.Kind], Detail: fe.Detail(), Err: err}
	}
	if we == nil {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", middleware.GetReqID(r.Context()), "err", err)
		we = &Error{Status: http.StatusInternalServerError, Detail: "internal error; see the service log"}
	} else if we.Status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", middleware.GetReqID(r.Context()), "err", err)
	}
	writeProblem(w, r, we)
}

// writeProblem writes we as application/problem+json, logging nothing.
func writeProblem(w http.ResponseWriter, r *http.Request, we *Error) {
	p := Problem{
		Type:     "about:blank",
		Title:    http.StatusText(we.Status),
		Status:   we.Status,
		Detail:   we.Detail,
		Instance: r.URL.Path,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(we.Status)
	_ = encoder(w).Encode(p)
}

// Encode writes v as JSON with status.
func Encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = encoder(w).Encode(v)
}

// encoder writes JSON as a client reads it: "balance must be >= 0", not
// "\u003e=". Escaping <, > and & only matters for JSON pasted into HTML,
// and every answer here is served as application/json.
func encoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// Validator is implemented by request bodies that can check themselves.
type Validator interface {
	Validate() error
}

// CheckAmount is the rule for an amount field of a request body that sets
// a level (a balance, the units on a shelf), named name, for a Validator:
// v is a pointer so that a missing field is an error rather than a silent
// zero (that would empty an account or a shelf); it must be at least 0 and
// at most events.MaxAmount, which keeps what a store adds to it in SQL
// inside bigint.
func CheckAmount(name string, v *int64) error { return checkAmount(name, v, false) }

// CheckAddition is CheckAmount for an amount added to a level (a deposit,
// a restock), which must be above 0.
func CheckAddition(name string, v *int64) error { return checkAmount(name, v, true) }

func checkAmount(name string, v *int64, addition bool) error {
	switch {
	case v == nil:
		return fmt.Errorf("%s is required", name)
	case addition && *v <= 0:
		return fmt.Errorf("%s must be > 0", name)
	case *v < 0:
		return fmt.Errorf("%s must be >= 0", name)
	case *v > events.MaxAmount:
		return fmt.Errorf("%s must be at most %d", name, int64(events.MaxAmount))
	}
	return nil
}

// Decode reads r's JSON body into a T and validates it if T is a Validator.
// It returns an *Error with status 415 for a non-JSON content type, 413 for
// a body over MaxBodyBytes, and 400 for malformed JSON, unknown fields,
// a value of the wrong type (its detail names the field as the client
// wrote it: "items[0].quantity: must be a whole number"), trailing data or
// a failed validation.
func Decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return v, Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json, got %q", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return v, Errorf(http.StatusRequestEntityTooLarge, "body exceeds %d bytes", MaxBodyBytes)
		}
		return v, Errorf(http.StatusBadRequest, "reading body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, &Error{Status: http.StatusBadRequest, Detail: decodeDetail(body, err)}
	}
	// More alone misses a stray "]" or "}", which it reads as the end of a
	// value; only io.EOF says the body held one JSON value and nothing else.
	if _, err := dec.Token(); err != io.EOF {
		return v, Errorf(http.StatusBadRequest, "malformed JSON: data after the JSON value")
	}
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, &Error{Status: http.StatusBadRequest, Detail: err.Error()}
		}
	} else if val, ok := any(v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, &Error{Status: http.StatusBadRequest, Detail: err.Error()}
		}
	}
	return v, nil
}

// Check is a readiness probe of one dependency.
type Check func(ctx context.Context) error

// Healthz answers 200 while the process runs.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Encode(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// Readyz runs every check with a short deadline and answers 200 if all pass,
// 503 naming the checks that failed otherwise. Why they failed goes to the
// log only: a dependency's error names hosts, ports and users, which are
// not the caller's to read. Probes come every few seconds, so a
// failure is logged once, at WARN, when the set of failing checks changes
// (and the recovery once, at INFO), not on every probe.
func Readyz(log *slog.Logger, checks map[string]Check) http.Handler {
	var mu sync.Mutex
	last := "" // the failing checks at the previous probe, "" when ready
	report := func(ctx context.Context, failing string, status map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case failing == last:
		case failing == "":
			log.InfoContext(ctx, "ready again", "was_failing", last)
		default:
			log.WarnContext(ctx, "not ready", "failing", failing, "status", status)
		}
		last = failing
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status := map[string]string{}
		var failed []string
		for name, check := range checks {
			if err := check(ctx); err != nil {
				status[name] = err.Error()
				failed = append(failed, name)
				continue
			}
			status[name] = "ok"
		}
		slices.Sort(failed)
		report(r.Context(), strings.Join(failed, ","), status)
		if len(failed) > 0 {
			writeProblem(w, r, Errorf(http.StatusServiceUnavailable, "not ready: %s failed (the service log says why)", strings.Join(failed, ", ")))
			return
		}
		Encode(w, http.StatusOK, status)
	})
}

// validRequestID reports whether a client's X-Request-Id is one to adopt:
// up to 128 characters that need no escaping in a log line or a header.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:/+=", c) >= 0) {
			return false
		}
	}
	return true
}

// WriteTimeout is the longest a handler may take to answer. It is above
// the 30 s the operator's replay may hold its transaction (package park),
// so the answer of a slow replay that committed still reaches choreoctl;
// a shorter one would drop the connection on a replay that took effect.
const WriteTimeout = 45 * time.Second

// Serve runs an HTTP server for h on addr until ctx ends, then stops
// accepting connections and waits up to 10 seconds for requests in flight.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web: listen %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("http listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("web: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("web: shutdown: %w", err)
	}
	return nil
}

// Recover turns a panicking handler into a 500 problem response.
func Recover(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					Respond(w, r, log, fmt.Errorf("panic: %v", v))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// NotFound and MethodNotAllowed answer unknown routes with problem bodies.
func NotFound(log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		Respond(w, r, log, Errorf(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path))
	}
}

// MethodNotAllowed answers a known path with the wrong method.
func MethodNotAllowed(log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		Respond(w, r, log, Errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
	}
}

// PathID returns the path parameter name, which must follow the id rule
// (events.ValidID), or a 400 *Error. An escaped character (%2F, %00, %ff)
// is refused, not decoded.
func PathID(r *http.Request, name string) (string, error) {
	id := chi.URLParam(r, name)
	if !events.ValidID(id) {
		return "", Errorf(http.StatusBadRequest, "%s must be %s", name, events.IDRule)
	}
	return id, nil
}

// OpenAPI serves doc, the service's OpenAPI document built into its binary,
// so a client reads the contract of the very version it talks to.
func OpenAPI(doc []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(doc)
	})
}

// Versioned is a resource whose version changes with every change of it.
// Get, Put and Post send the version of what they return as the
// response's ETag ("<version>", a strong entity tag), which a client
// sends back in If-Match to make its PUT conditional (see Precondition).
type Versioned interface {
	CurrentVersion() int64
}

// ETag is the entity tag of a version: the version in double quotes.
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// setETag sets the ETag header when v is Versioned.
func setETag(w http.ResponseWriter, v any) {
	if vv, ok := v.(Versioned); ok {
		w.Header().Set("ETag", ETag(vv.CurrentVersion()))
	}
}

// Precondition is what a PUT's conditional headers (RFC 9110, section
// 13.1) ask of the write.
type Precondition struct {
	// IfMatch is the version the write must replace, from If-Match:
	// "<version>" (the ETag a GET answered); nil without If-Match.
	IfMatch *int64
	// CreateOnly is If-None-Match: *: the write may only create.
	CreateOnly bool
}

var etagVersion = regexp.MustCompile(`^"([0-9]{1,18})"$`)

// ParsePrecondition reads r's If-Match and If-None-Match. It understands
// one strong entity tag of a version in If-Match and * in If-None-Match;
// anything else — a list, a weak tag, If-Match: *, both headers — is a
// 400 *Error rather than a condition silently ignored.
func ParsePrecondition(r *http.Request) (Precondition, error) {
	var p Precondition
	ifMatch, ifNoneMatch := r.Header.Values("If-Match"), r.Header.Values("If-None-Match")
	switch {
	case len(ifMatch) > 0 && len(ifNoneMatch) > 0:
		return p, Errorf(http.StatusBadRequest, "send If-Match or If-None-Match, not both")
	case len(ifMatch) > 0:
		m := etagVersion.FindStringSubmatch(strings.TrimSpace(ifMatch[0]))
		if len(ifMatch) > 1 || m == nil {
			return p, Errorf(http.StatusBadRequest, `If-Match must be one entity tag as the ETag header gives it, e.g. "3"`)
		}
		v, _ := strconv.ParseInt(m[1], 10, 64) // 18 digits fit
		p.IfMatch = &v
	case len(ifNoneMatch) > 0:
		if len(ifNoneMatch) > 1 || strings.TrimSpace(ifNoneMatch[0]) != "*" {
			return p, Errorf(http.StatusBadRequest, "If-None-Match must be *")
		}
		p.CreateOnly = true
	}
	return p, nil
}

// Get serves a GET of one resource named by the path parameter param: the
// id, checked by PathID, is read with get and the result written as JSON
// with 200, and its ETag if it is Versioned. Every error, a bad id's 400 or
// get's own (fault.NotFound → 404), goes to Respond.
//
//	r.Method(http.MethodGet, "/stock/{sku}", web.Get(log, "sku", st.Stock))
func Get[T any](log *slog.Logger, param string, get func(ctx context.Context, id string) (T, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := PathID(r, param)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		v, err := get(r.Context(), id)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		setETag(w, v)
		Encode(w, http.StatusOK, v)
	})
}

// Put serves a PUT that sets one resource named by the path parameter
// param: the id, checked by PathID, the conditional headers, read by
// ParsePrecondition, and the JSON body, decoded and validated by Decode,
// are handed to put, and what it returns is written as JSON with 200, and
// its ETag if it is Versioned. put decides what the precondition means
// for its resource (fault.PreconditionFailed → 412,
// fault.PreconditionRequired → 428). Every error goes to Respond.
func Put[Req, T any](log *slog.Logger, param string, put func(ctx context.Context, id string, pre Precondition, req Req) (T, error)) http.Handler {
	return write(log, param, true, put)
}

// Post serves a POST that acts on one resource named by the path
// parameter param, e.g. a deposit to an account: the id, checked by
// PathID, and the JSON body, decoded and validated by Decode, are handed
// to act, and the resource it returns is written as JSON with 200, and its
// ETag if it is Versioned. Every error goes to Respond.
func Post[Req, T any](log *slog.Logger, param string, act func(ctx context.Context, id string, req Req) (T, error)) http.Handler {
	return write(log, param, false, func(ctx context.Context, id string, _ Precondition, req Req) (T, error) {
		return act(ctx, id, req)
	})
}

// AddAmount serves a POST that adds a positive amount to one resource named
// by the path parameter param, e.g. a deposit to an account: a body whose
// one field, named field, holds the amount, checked by CheckAddition; an
// unknown field fails with 400 as Decode fails one. The request's
// Idempotency-Key ("" without one, see IdempotencyKey) goes to add, which
// applies a key once; an answer it replays carries Idempotent-Replayed:
// true and the same status as the first.
func AddAmount[T any](log *slog.Logger, param, field string, add func(ctx context.Context, id string, amount int64, key string) (T, bool, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := PathID(r, param)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		key, err := IdempotencyKey(r)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		body, err := Decode[map[string]*int64](w, r)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		for name := range body {
			if name != field {
				Respond(w, r, log, Errorf(http.StatusBadRequest, "unknown field %q", name))
				return
			}
		}
		if err := CheckAddition(field, body[field]); err != nil {
			Respond(w, r, log, &Error{Status: http.StatusBadRequest, Detail: err.Error()})
			return
		}
		v, replayed, err := add(r.Context(), id, *body[field], key)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		if replayed {
			w.Header().Set(HeaderReplayed, "true")
		}
		setETag(w, v)
		Encode(w, http.StatusOK, v)
	})
}

// Headers of an idempotent POST.
const (
	// HeaderIdempotencyKey is sent by a client that may retry a POST.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed marks an answer that repeats the first one to the
	// same key.
	HeaderReplayed = "Idempotent-Replayed"
	// MaxIdempotencyKeyLen bounds the Idempotency-Key header.
	MaxIdempotencyKeyLen = 255
)

// IdempotencyKey returns the request's Idempotency-Key, "" if it sent
// none: 1 to 255 printable ASCII characters, sent once. A header that is
// present must be valid, since ignoring a bad key would drop the
// protection the client asked for.
func IdempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(HeaderIdempotencyKey)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", Errorf(http.StatusBadRequest, "%s must be sent once, got %d", HeaderIdempotencyKey, len(vals))
	}
	key := vals[0]
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return "", Errorf(http.StatusBadRequest, "%s must be 1 to %d characters", HeaderIdempotencyKey, MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return "", Errorf(http.StatusBadRequest, "%s must be printable ASCII; byte %d is 0x%02x", HeaderIdempotencyKey, i, c)
		}
	}
	return key, nil
}

// write is Put, and Post when conditional is false: a POST's conditional
// headers are not read, so they neither fail nor change it.
func write[Req, T any](log *slog.Logger, param string, conditional bool, fn func(ctx context.Context, id string, pre Precondition, req Req) (T, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := PathID(r, param)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		var pre Precondition
		if conditional {
			if pre, err = ParsePrecondition(r); err != nil {
				Respond(w, r, log, err)
				return
			}
		}
		req, err := Decode[Req](w, r)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		v, err := fn(r.Context(), id, pre, req)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		setETag(w, v)
		Encode(w, http.StatusOK, v)
	})
}
