package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// Page sizes of GET /sagas.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// SagaPage is the body of GET /sagas. NextCursor, passed back as cursor,
// gets the following page; it is absent after the last one.
type SagaPage struct {
	Sagas      []domain.Summary `json:"sagas"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// lister is the store's list, as the handler needs it.
type lister interface {
	Sagas(ctx context.Context, f store.Filter) (store.Page, error)
}

// listSagas serves GET /sagas?state=&limit=&cursor=: a page of sagas,
// newest first. A parameter it does not know, given twice or out of range
// is a 400, not ignored.
func listSagas(log *slog.Logger, st lister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := parseFilter(r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		p, err := st.Sagas(r.Context(), f)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, SagaPage{Sagas: p.Sagas, NextCursor: p.Next.String()})
	})
}

// parseFilter reads GET /sagas' query; errors are 400 *web.Error.
func parseFilter(r *http.Request) (store.Filter, error) {
	f := store.Filter{Limit: DefaultLimit}
	q := r.URL.Query()
	for k, vs := range q {
		switch {
		case k != "state" && k != "limit" && k != "cursor":
			return f, web.Errorf(http.StatusBadRequest, "unknown query parameter %q; use state, limit and cursor", k)
		case len(vs) > 1:
			return f, web.Errorf(http.StatusBadRequest, "query parameter %s given %d times", k, len(vs))
		}
	}
	if s := q.Get("state"); s != "" {
		if !slices.Contains(domain.States, domain.State(s)) {
			return f, web.Errorf(http.StatusBadRequest, "state %q is not one of %v", s, domain.States)
		}
		f.State = domain.State(s)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLimit {
			return f, web.Errorf(http.StatusBadRequest, "limit %q is not a whole number from 1 to %d", l, MaxLimit)
		}
		f.Limit = n
	}
	c, err := store.ParseCursor(q.Get("cursor"))
	if err != nil {
		return f, web.Errorf(http.StatusBadRequest, "%v; pass next_cursor from a previous page as it is", err)
	}
	f.After = c
	return f, nil
}

// asset serves one file of the embedded page with its content type.
func asset(name, contentType string) http.Handler {
	body, err := ui.ReadFile(name)
	if err != nil {
		panic("httpapi: " + name + " is not embedded: " + err.Error()) // a build mistake, caught by every test
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		_, _ = w.Write(body)
	})
}
