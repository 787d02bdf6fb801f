package park

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/web"
)

// Admin returns the service's operator API, which Run mounts at /admin and
// choreoctl calls; its routes are listed in its body. Who may call it is
// the service's to decide: Run serves it to the operator role only
// (package bearer), and not at all with authentication off (Off). Every
// POST must carry the header X-Choreo-Admin, which a browser sends
// cross-site only after a CORS preflight this API never grants: a web page
// cannot replay or release. Answers are JSON, failures
// application/problem+json.
func Admin(op *Operator, db *sqlx.DB, log *slog.Logger) http.Handler {
	r := chi.NewRouter() // mounted: the service's router logs, recovers and names requests
	r.Use(requireAdminHeader(log))
	r.NotFound(web.NotFound(log))
	r.MethodNotAllowed(web.MethodNotAllowed(log))
	// GET /parked[?order=ID][&limit=N]: the rows parked now, in order (limit 1000 unless asked).
	r.Method(http.MethodGet, "/parked", listParked(op, log))
	// POST /parked/replay?order=ID[&through=N] (or ?event=ID, ?row=N): apply them, in order.
	r.Method(http.MethodPost, "/parked/replay", resolveParked(op.Replay, log))
	// POST /parked/release?order=ID[&through=N] (or ?event=ID, ?row=N): let them go unapplied.
	r.Method(http.MethodPost, "/parked/release", resolveParked(op.Release, log))
	// GET /outbox/refused[?limit=N]: the outbox rows Kafka refused (limit 1000 unless asked).
	r.Method(http.MethodGet, "/outbox/refused", listRefused(db, log))
	// POST /outbox/refused/{id}/retry: put one back in line for the relay
	// (409, with the reason, if Debezium's trigger refuses it again).
	r.Method(http.MethodPost, "/outbox/refused/{id}/retry", retryRefused(db, log))
	return r
}

// Off is the admin API of a service started with authentication off
// (AUTH_DISABLED=true): every request is refused with 403, whatever it
// carries, since no caller can be known; the detail says how to turn it
// on. Replay and release change what a saga did, so the API fails
// closed, not open. 403, not 404: choreoctl reads a 404 as "not parked at
// this service", and would pass over a service whose API is off without a
// word.
func Off(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.Respond(w, r, log, web.Errorf(http.StatusForbidden, "the operator API is off on this service: authentication is disabled (AUTH_DISABLED); configure a token key to serve /admin"))
	})
}

// AdminHeader must be set on every POST to the admin API (see Admin).
const AdminHeader = "X-Choreo-Admin"

// requireAdminHeader refuses a POST without AdminHeader.
func requireAdminHeader(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get(AdminHeader) == "" {
				web.Respond(w, r, log, web.Errorf(http.StatusForbidden, "a POST to the admin API needs the header %s (choreoctl sets it)", AdminHeader))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// parkedList is the answer of GET /admin/parked.
type parkedList struct {
	Service string `json:"service"`
	Orders  int    `json:"orders"` // distinct keys among Rows
	Rows    []Row  `json:"rows"`
}

// listLimit reads a list's limit parameter: 1000 rows unless asked, at most
// 10000, so one answer stays a size a client and the database can take.
func listLimit(r *http.Request) (int, error) {
	n, err := param(r, "limit", 1000)
	if err != nil || n > 10000 {
		return 0, web.Errorf(http.StatusBadRequest, "limit: 1 to 10000")
	}
	return int(n), nil
}

func listParked(op *Operator, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := listLimit(r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		rows, err := op.List(r.Context(), r.URL.Query().Get("order"), limit)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		keys := map[string]bool{}
		for _, row := range rows {
			if row.Key != nil {
				keys[*row.Key] = true
			}
		}
		web.Encode(w, http.StatusOK, parkedList{Service: op.service, Orders: len(keys), Rows: append([]Row{}, rows...)})
	})
}

func resolveParked(resolve func(ctx context.Context, target Target) (Report, error), log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		target := Target{Key: q.Get("order"), EventID: q.Get("event")}
		var err error
		for name, n := range map[string]*int64{"row": &target.Seq, "through": &target.Through} {
			if *n, err = param(r, name, 0); err != nil {
				web.Respond(w, r, log, err)
				return
			}
		}
		res, err := resolve(r.Context(), target)
		var failing *StillFailing
		if errors.As(err, &failing) {
			err = &web.Error{Status: http.StatusConflict, Detail: failing.Error(), Err: err}
		}
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		if res.Resolved == nil {
			res.Resolved = []ResolvedRow{}
		}
		web.Encode(w, http.StatusOK, res)
	})
}

// param reads the positive integer query parameter name, def if absent.
func param(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, web.Errorf(http.StatusBadRequest, "%s %q is not a row number", name, v)
	}
	return n, nil
}

func listRefused(db *sqlx.DB, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := listLimit(r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		rows, err := outbox.ListRefused(r.Context(), db, limit)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, map[string]any{"rows": append([]outbox.RefusedRow{}, rows...)})
	})
}

func retryRefused(db *sqlx.DB, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			web.Respond(w, r, log, web.Errorf(http.StatusBadRequest, "%q is not an outbox row id", chi.URLParam(r, "id")))
			return
		}
		retried, err := outbox.Retry(r.Context(), db, id)
		var again *outbox.RefusedAgainError
		if errors.As(err, &again) {
			err = &web.Error{Status: http.StatusConflict, Err: err,
				Detail: fmt.Sprintf("outbox row %d refused again, left as it was: %s; fix the cause, then retry it", id, again.Reason)}
		}
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, map[string]any{"id": id, "retried": retried})
	})
}
