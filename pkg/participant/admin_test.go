package participant_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/park"
)

// TestAdminAPI: the operator API answers JSON, every failure as
// problem+json with the status its kind maps to, and serves an operator's
// token only: none, an expired one or a customer's is refused.
func TestAdminAPI(t *testing.T) {
	spec, db, order, msgs := poisoned(t)
	keys := testenv.Keys(t)
	log := testenv.Logger(t)
	v, err := bearer.New(t.Context(), keys.Auth(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Authenticate(log)(spec.Admin(db, log, v)))
	defer srv.Close()
	op, customer, expired := keys.Operator(t), keys.Customer(t, "c-1"), keys.Expired(t, "ops", true)

	call := func(method, path, token string) (int, string, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if method == http.MethodPost && token != "" {
			req.Header.Set(park.AdminHeader, "test")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	tests := []struct {
		name, method, path, token string
		want                      int
		problem                   bool
		detail                    string // in a problem's detail
	}{
		{"NoToken", "GET", "/parked", "", http.StatusUnauthorized, true, "needs a token"},
		{"NotAToken", "GET", "/parked", "guess", http.StatusUnauthorized, true, "token refused"},
		{"ExpiredOperatorToken", "POST", "/parked/release?order=" + order, expired, http.StatusUnauthorized, true, "expired"},
		{"CustomerToken", "GET", "/parked", customer, http.StatusForbidden, true, "operator role"},
		{"CustomerTokenRelease", "POST", "/parked/release?order=" + order, customer, http.StatusForbidden, true, "operator role"},
		{"List", "GET", "/parked?order=" + order, op, http.StatusOK, false, ""},
		{"ReplayBeforeTheFix", "POST", "/parked/replay?order=" + order, op, http.StatusConflict, true, "still fails"},
		{"ReplayBehindTheHead", "POST", "/parked/replay?event=" + eventID(t, msgs[1]), op, http.StatusConflict, true, "is behind row"},
		{"NeverParked", "POST", "/parked/replay?order=nope", op, http.StatusNotFound, true, "was ever parked"},
		{"TwoSelectors", "POST", "/parked/release?order=" + order + "&row=1", op, http.StatusUnprocessableEntity, true, "one of order, event and row"},
		{"BadRow", "POST", "/parked/release?row=x", op, http.StatusBadRequest, true, "not a row number"},
		{"OutboxList", "GET", "/outbox/refused", op, http.StatusOK, false, ""},
		{"OutboxBadID", "POST", "/outbox/refused/x/retry", op, http.StatusBadRequest, true, "not an outbox row id"},
		{"OutboxRetryNothing", "POST", "/outbox/refused/12345/retry", op, http.StatusOK, false, ""},
		{"UnknownRoute", "GET", "/nope", op, http.StatusNotFound, true, ""},
		{"ThroughWithoutOrder", "POST", "/parked/release?event=" + eventID(t, msgs[1]) + "&through=3", op, http.StatusUnprocessableEntity, true, "with an order"},
		{"LimitTooLarge", "GET", "/parked?limit=20000", op, http.StatusBadRequest, true, "limit"},
		{"OutboxLimitTooLarge", "GET", "/outbox/refused?limit=20000", op, http.StatusBadRequest, true, "limit"},
		{"OutboxLimit", "GET", "/outbox/refused?limit=1", op, http.StatusOK, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ctype, body := call(tt.method, tt.path, tt.token)
			if status != tt.want {
				t.Fatalf("%s %s = %d %v, want %d", tt.method, tt.path, status, body, tt.want)
			}
			if got := ctype == "application/problem+json"; got != tt.problem {
				t.Fatalf("content type %q, want problem+json: %v", ctype, tt.problem)
			}
			if d, _ := body["detail"].(string); !strings.Contains(d, tt.detail) {
				t.Errorf("detail %q does not say %q", d, tt.detail)
			}
		})
	}

	// A POST without the admin header, as a cross-site form would send it.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/parked/release?order="+order, nil)
	req.Header.Set("Authorization", "Bearer "+op)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without %s = %v, %v; want 403", park.AdminHeader, resp, err)
	} else {
		resp.Body.Close()
	}

	_, _, list := call("GET", "/parked?order="+order, op)
	if rows, _ := list["rows"].([]any); len(rows) != 3 || list["orders"] != float64(1) {
		t.Fatalf("GET /parked = %v, want the order's three rows", list)
	}
	fix(t, db)
	status, _, res := call("POST", "/parked/replay?order="+order, op)
	if resolved, _ := res["resolved"].([]any); status != http.StatusOK || len(resolved) != 3 {
		t.Fatalf("replay after the fix = %d %v, want three rows resolved", status, res)
	}
	status, _, res = call("POST", "/parked/replay?order="+order, op)
	if already, _ := res["already"].([]any); status != http.StatusOK || len(already) != 3 {
		t.Fatalf("replay again = %d %v, want 200 and three already resolved", status, res)
	}
}

// TestAdminIsOffWithAuthDisabled: a service started with AUTH_DISABLED
// serves no operator API: every path, with any credential or none, is a
// 403 problem that says how to turn it on, and nothing parked changes.
func TestAdminIsOffWithAuthDisabled(t *testing.T) {
	spec, db, order, _ := poisoned(t)
	log := testenv.Logger(t)
	v, err := bearer.New(t.Context(), bearer.Config{Disabled: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Authenticate(log)(spec.Admin(db, log, v)))
	defer srv.Close()
	tests := []struct{ name, method, path, auth string }{
		{"ListWithoutCredential", "GET", "/parked", ""},
		{"ListWithEmptyBearer", "GET", "/parked", "Bearer "},
		{"ReleaseWithEmptyBearer", "POST", "/parked/release?order=" + order, "Bearer "},
		{"ReplayWithAnOperatorToken", "POST", "/parked/replay?order=" + order, "Bearer " + testenv.Keys(t).Operator(t)},
		{"OutboxRetry", "POST", "/outbox/refused/1/retry", ""},
		{"UnknownPath", "GET", "/nope", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(park.AdminHeader, "test")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s %s = %d %s, want a 403 problem", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if d, _ := body["detail"].(string); !strings.Contains(d, "AUTH_DISABLED") {
				t.Errorf("detail %q does not say how to turn the API on", d)
			}
		})
	}
	var open int
	if err := db.Get(&open, `SELECT count(*) FROM parked_events WHERE park_key = $1 AND resolved_at IS NULL`, order); err != nil || open != 3 {
		t.Fatalf("%d of the order's rows still parked (err %v), want 3", open, err)
	}
}
