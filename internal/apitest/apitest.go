// Package apitest keeps each service's OpenAPI document honest: the routes,
// the responses and their JSON bodies are the ones documented, and only
// _test.go files import it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/web"
)

// SpecPath is where every service serves its OpenAPI document.
const SpecPath = "/openapi.yaml"

// Load parses specYAML and validates it as an OpenAPI 3 document: required
// fields, resolvable $refs, path parameters declared for every template
// segment, and every example valid against its schema. It fails t
// otherwise.
func Load(t testing.TB, specYAML []byte) *openapi3.T {
	t.Helper()
	doc, err := load(specYAML)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func load(specYAML []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(specYAML)
	if err != nil {
		return nil, fmt.Errorf("parse OpenAPI document: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, fmt.Errorf("OpenAPI document: openapi is %q, want 3.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError()); err != nil {
		return nil, fmt.Errorf("invalid OpenAPI document: %w", err)
	}
	return doc, nil
}

// CheckRoutesDocumented fails t unless specYAML is a valid OpenAPI 3
// document (see Load) whose operations are exactly the routes h serves:
// every (method, path) the router matches is documented, and every
// documented one is served. h must be the chi router the service runs.
func CheckRoutesDocumented(t testing.TB, h http.Handler, specYAML []byte) {
	t.Helper()
	if err := checkRoutes(h, specYAML); err != nil {
		t.Fatal(err)
	}
}

func checkRoutes(h http.Handler, specYAML []byte) error {
	doc, err := load(specYAML)
	if err != nil {
		return err
	}
	served, err := servedRoutes(h)
	if err != nil {
		return err
	}
	return diffRoutes(documentedRoutes(doc), served)
}

// route is one operation: "GET /orders/{id}".
type route struct{ method, path string }

func (r route) String() string { return r.method + " " + r.path }

// chiParam matches a chi path parameter with a regexp, {id:[0-9]+}, which
// OpenAPI writes as plain {id}.
var chiParam = regexp.MustCompile(`\{([^{}:]+):[^{}]*\}`)

// servedRoutes walks h, which must be a chi router, for its routes.
func servedRoutes(h http.Handler) ([]route, error) {
	r, ok := h.(chi.Routes)
	if !ok {
		return nil, fmt.Errorf("router is a %T, not a chi router; cannot list its routes", h)
	}
	var routes []route
	err := chi.Walk(r, func(method, path string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, route{method, chiParam.ReplaceAllString(path, "{$1}")})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk router: %w", err)
	}
	return routes, nil
}

// documentedRoutes lists doc's operations.
func documentedRoutes(doc *openapi3.T) []route {
	var routes []route
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, route{strings.ToUpper(method), path})
		}
	}
	return routes
}

// diffRoutes returns an error naming each route that only one side has.
func diffRoutes(documented, served []route) error {
	undocumented := missing(served, documented)
	unserved := missing(documented, served)
	if len(undocumented) == 0 && len(unserved) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("OpenAPI document and router disagree:")
	for _, r := range undocumented {
		fmt.Fprintf(&b, "\n  served but not documented: %s", r)
	}
	for _, r := range unserved {
		fmt.Fprintf(&b, "\n  documented but not served: %s", r)
	}
	return fmt.Errorf("%s", b.String())
}

// missing returns the routes of want that got lacks, sorted.
func missing(want, got []route) []string {
	var out []string
	for _, r := range want {
		if !slices.Contains(got, r) {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckSchema fails t unless v, encoded as the handlers encode it, is valid
// against the schema specYAML names in components/schemas. With the
// document's schemas closed (additionalProperties: false) and their fields
// required, this catches a field renamed, added or dropped in a Go struct
// that the document did not follow.
func CheckSchema(t testing.TB, specYAML []byte, name string, v any) {
	t.Helper()
	if err := checkSchema(specYAML, name, v); err != nil {
		t.Fatal(err)
	}
}

func checkSchema(specYAML []byte, name string, v any) error {
	doc, err := load(specYAML)
	if err != nil {
		return err
	}
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("OpenAPI document has no schema %q in components/schemas", name)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	var decoded any
	if err := json.Unmarshal(b, &decoded); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	if err := doc.ValidateSchemaJSON(ref.Value, decoded); err != nil {
		return fmt.Errorf("%T encoded as %s does not match schema %s: %w", v, b, name, err)
	}
	return nil
}

// CheckSpecServed fails t unless h answers GET /openapi.yaml with 200, a
// YAML content type and exactly specYAML, so the document the tests check
// is the one clients get.
func CheckSpecServed(t testing.TB, h http.Handler, specYAML []byte) {
	t.Helper()
	if err := checkSpecServed(h, specYAML); err != nil {
		t.Fatal(err)
	}
}

func checkSpecServed(h http.Handler, specYAML []byte) error {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, SpecPath, nil))
	if rec.Code != http.StatusOK {
		return fmt.Errorf("GET %s: status %d, want 200; body: %s", SpecPath, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/yaml" {
		return fmt.Errorf("GET %s: Content-Type %q, want application/yaml", SpecPath, ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), specYAML) {
		return fmt.Errorf("GET %s: body (%d bytes) differs from the document on disk (%d bytes); is the embedded file stale?",
			SpecPath, rec.Body.Len(), len(specYAML))
	}
	return nil
}

// CheckResponse serves req on h and fails t unless the answer has status
// want and is documented: for a request a documented operation handles, the
// operation lists the status (or a default response), the Content-Type, and
// a schema the JSON body is valid against. A request no operation handles —
// an unknown path, 404, or an unlisted method, 405 — must answer with a
// body valid against components/schemas/Problem, the problem shape every
// service shares.
//
// h must be a chi router: the route it matched tells which operation
// documents the answer.
func CheckResponse(t testing.TB, h http.Handler, specYAML []byte, req *http.Request, want int) {
	t.Helper()
	if err := checkResponse(h, specYAML, req, want); err != nil {
		t.Fatal(err)
	}
}

func checkResponse(h http.Handler, specYAML []byte, req *http.Request, want int) error {
	doc, err := load(specYAML)
	if err != nil {
		return err
	}
	// A routing context of our own, which chi then fills in rather than
	// taking one from its pool, so the matched pattern is readable after.
	rctx := chi.NewRouteContext()
	req = req.WithContext(context.WithValue(req.Context(), chi.RouteCtxKey, rctx))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	name := req.Method + " " + req.URL.RequestURI()
	if rec.Code != want {
		return fmt.Errorf("%s: status %d, want %d; body: %s", name, rec.Code, want, rec.Body)
	}
	ct := rec.Header().Get("Content-Type")
	mediaType := ""
	if ct != "" {
		if mediaType, _, err = mime.ParseMediaType(ct); err != nil {
			return fmt.Errorf("%s: Content-Type %q: %w", name, ct, err)
		}
	}

	var schema *openapi3.Schema
	op := operation(doc, req.Method, chiParam.ReplaceAllString(rctx.RoutePattern(), "{$1}"))
	if op == nil {
		ref := doc.Components.Schemas["Problem"]
		if ref == nil || ref.Value == nil {
			return fmt.Errorf("%s: no operation handles it, and the document has no components/schemas/Problem to check the answer against", name)
		}
		if mediaType != "application/problem+json" {
			return fmt.Errorf("%s: no operation handles it; Content-Type %q, want application/problem+json", name, ct)
		}
		schema = ref.Value
	} else {
		resp := op.Responses.Status(rec.Code)
		if resp == nil {
			resp = op.Responses.Default()
		}
		if resp == nil || resp.Value == nil {
			return fmt.Errorf("%s: status %d is not documented for the operation (%s)", name, rec.Code, op.OperationID)
		}
		if len(resp.Value.Content) == 0 {
			if rec.Body.Len() > 0 {
				return fmt.Errorf("%s: status %d is documented without a body, got %d bytes", name, rec.Code, rec.Body.Len())
			}
			return nil
		}
		media := resp.Value.Content.Get(mediaType)
		if mediaType == "" || media == nil {
			return fmt.Errorf("%s: status %d: Content-Type %q is not documented for the operation (%s)", name, rec.Code, ct, op.OperationID)
		}
		if media.Schema == nil || media.Schema.Value == nil {
			return nil
		}
		schema = media.Schema.Value
	}
	if mediaType != "application/json" && !strings.HasSuffix(mediaType, "+json") {
		return nil // not JSON: the document has the media type, which is what can be checked
	}
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		return fmt.Errorf("%s: body is not JSON: %w; body: %s", name, err, rec.Body)
	}
	if err := doc.ValidateSchemaJSON(schema, body); err != nil {
		return fmt.Errorf("%s: status %d body does not match the documented schema: %w; body: %s", name, rec.Code, err, rec.Body)
	}
	return nil
}

// operation returns doc's operation for method on the route pattern, nil
// if there is none.
func operation(doc *openapi3.T, method, pattern string) *openapi3.Operation {
	if pattern == "" {
		return nil
	}
	item := doc.Paths.Value(pattern)
	if item == nil {
		return nil
	}
	return item.GetOperation(method)
}

// ReadSpec returns the OpenAPI document in the test's directory,
// openapi.yaml: the one the service embeds and serves.
func ReadSpec(t testing.TB) []byte {
	t.Helper()
	spec, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatalf("read the OpenAPI document: %v", err)
	}
	return spec
}

// API is a service's router with its OpenAPI document: Ready built with
// readiness checks that pass, NotReady with a database that is down, both
// serving every request as an operator's (testenv.As), and Guarded, Ready
// behind a real bearer.Authenticate that takes Keys' tokens.
type API struct {
	Spec            []byte
	Ready, NotReady http.Handler
	Guarded         http.Handler
	Keys            testenv.Tokens
}

// Start reads the OpenAPI document in the test's directory (openapi.yaml),
// builds the service's router twice with routes (its participant.Spec API)
// on a nil database, and runs the checks every service shares as subtests:
// every served route documented and vice versa, the document served at
// GET /openapi.yaml as documented, /healthz and /readyz answering as
// documented, up and with the database down, web.Problem, the body of
// every refusal, valid against components/schemas/Problem, and every
// operation but those on open (bearer.OpenPaths, and the page's paths the
// service adds) refusing a request without a token with the 401 it
// documents. With no database, only answers given before the store is
// reached can be checked; Check sends those.
func Start(t *testing.T, routes func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler, open ...string) API {
	t.Helper()
	spec := ReadSpec(t)
	log := slog.New(slog.DiscardHandler)
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	ready := routes(log, nil, map[string]web.Check{"database": ok, "kafka": ok})
	keys := testenv.Keys(t)
	v, err := bearer.New(t.Context(), keys.Auth(), log)
	if err != nil {
		t.Fatal(err)
	}
	open = append(slices.Clone(bearer.OpenPaths), open...)
	api := API{
		Spec:     spec,
		Ready:    testenv.As(testenv.Operator, ready),
		NotReady: testenv.As(testenv.Operator, routes(log, nil, map[string]web.Check{"database": down, "kafka": ok})),
		Guarded:  v.Authenticate(log, open...)(ready),
		Keys:     keys,
	}
	t.Run("RoutesDocumented", func(t *testing.T) { CheckRoutesDocumented(t, ready, spec) })
	t.Run("Served", func(t *testing.T) { CheckSpecServed(t, api.Guarded, spec) })
	t.Run("Healthz", func(t *testing.T) {
		CheckResponse(t, api.Guarded, spec, httptest.NewRequest("GET", "/healthz", nil), 200)
	})
	t.Run("Ready", func(t *testing.T) {
		CheckResponse(t, api.Guarded, spec, httptest.NewRequest("GET", "/readyz", nil), 200)
	})
	t.Run("NotReady", func(t *testing.T) {
		CheckResponse(t, api.NotReady, spec, httptest.NewRequest("GET", "/readyz", nil), 503)
	})
	t.Run("OpenAPI", func(t *testing.T) {
		CheckResponse(t, api.Guarded, spec, httptest.NewRequest("GET", SpecPath, nil), 200)
	})
	t.Run("Problem", func(t *testing.T) {
		CheckSchema(t, spec, "Problem", web.Problem{
			Type: "about:blank", Title: "Not Found", Status: 404, Detail: "o-1 not found", Instance: "/things/o-1",
		})
	})
	t.Run("NoTokenRefused", func(t *testing.T) { checkTokenRequired(t, api.Guarded, spec, open) })
	return api
}

// checkTokenRequired sends every documented operation whose path is not
// open, with its path parameters filled in and no token, to h and fails
// t unless each answers the 401 it documents; and fails it unless the
// document marks exactly the open operations as needing no token
// (security: []).
func checkTokenRequired(t *testing.T, h http.Handler, specYAML []byte, open []string) {
	t.Helper()
	doc := Load(t, specYAML)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documentedOpen := op.Security != nil && len(*op.Security) == 0
			if documentedOpen != slices.Contains(open, path) {
				t.Errorf("%s %s: the document says security: [] is %v, the service serves it open: %v", method, path, documentedOpen, !documentedOpen)
				continue
			}
			if documentedOpen {
				continue
			}
			if len(doc.Security) == 0 && op.Security == nil {
				t.Errorf("%s %s: no security requirement documented", method, path)
			}
			req := httptest.NewRequest(method, pathParam.ReplaceAllString(path, "p-1"), strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			if err := checkResponse(h, specYAML, req, http.StatusUnauthorized); err != nil {
				t.Error(err)
			}
		}
	}
}

// pathParam is a path parameter of an OpenAPI path, {id}.
var pathParam = regexp.MustCompile(`\{[^{}]+\}`)

// Request is one request of a service's table of answers, and the status
// it must get.
type Request struct {
	Name         string
	Method, Path string
	// Body, if any, is sent as application/json.
	Body string
	// Header is set on the request last, so it can replace the
	// Content-Type.
	Header http.Header
	Want   int
}

// Check sends each request to the Ready router as a subtest named after
// it, and fails it unless the answer has the status the request wants and
// is documented (CheckResponse).
func (a API) Check(t *testing.T, reqs []Request) {
	t.Helper()
	for _, rq := range reqs {
		t.Run(rq.Name, func(t *testing.T) { CheckResponse(t, a.Ready, a.Spec, rq.HTTP(), rq.Want) })
	}
}

// HTTP returns the request as a client sends it: Body, if any, as
// application/json, and Header set last.
func (rq Request) HTTP() *http.Request {
	req := httptest.NewRequest(rq.Method, rq.Path, strings.NewReader(rq.Body))
	if rq.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range rq.Header {
		req.Header[k] = vs
	}
	return req
}

// CheckWrite sends body as JSON with method to path on h, with an If-Match,
// an If-None-Match and an Idempotency-Key header when they are not empty — a write as a
// client of web.Put and web.Post sends it — and fails t unless the answer
// has status want and is documented (CheckResponse).
func CheckWrite(t testing.TB, h http.Handler, specYAML []byte, method, path, ifMatch, ifNoneMatch, key, body string, want int) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	CheckResponse(t, h, specYAML, req, want)
}

// CheckETag fails t unless GET path on h answers with the ETag of version
// (web.ETag), the one a client must name to replace the resource.
func CheckETag(t testing.TB, h http.Handler, path string, version int64) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if etag := rec.Header().Get("ETag"); etag != web.ETag(version) {
		t.Fatalf("GET %s ETag = %q, want %q", path, etag, web.ETag(version))
	}
}

// CheckStored reads a resource back after a write through the store's
// get (testenv.WantStored) and, if it is there, checks that path serves it
// with the ETag of version.
func CheckStored[T comparable](t testing.TB, h http.Handler, get func(context.Context, string) (T, error), id, path string, want T, version int64) {
	t.Helper()
	testenv.WantStored(t, get, id, want)
	var zero T
	if want != zero {
		CheckETag(t, h, path, version)
	}
}
