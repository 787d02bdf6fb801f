// Package httpapi is the tracker's HTTP adapter: the sagas as JSON, and a
// page that draws them.
package httpapi

import (
	"embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// spec is the tracker's OpenAPI document, served at GET /openapi.yaml.
// openapi_test.go fails when it and the routes below disagree.
//
//go:embed openapi.yaml
var spec []byte

// ui is the page at GET /: plain HTML, CSS and JavaScript, built into the
// binary — no build step, nothing fetched from elsewhere, so it works
// offline and shows the version of the API it talks to.
//
//go:embed ui
var ui embed.FS

// PageAssets are the paths of the page, served without a token.
var PageAssets = []string{"/", "/app.js", "/app.css"}

// Routes returns the tracker's API builder (the shape of
// participant.Spec's API, which apitest checks): the whole HTTP API over
// the store in db, calling a saga stuck once it ran longer than sla by
// now's clock (time.Now if nil).
func Routes(sla time.Duration, now func() time.Time) func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
	return func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
		st := store.New(db, sla, now)
		r := web.NewRouter(log, checks)
		// Every order's saga is the operator's to see. The page and its
		// assets are open (PageAssets): they hold no data, and the page
		// asks for a token before it reads any.
		operator := bearer.RequireOperator(log)
		r.Method(http.MethodGet, "/sagas/{order_id}", operator(web.Get(log, "order_id", st.Saga)))
		r.Method(http.MethodGet, "/sagas", operator(listSagas(log, st)))
		r.Method(http.MethodGet, "/", asset("ui/index.html", "text/html; charset=utf-8"))
		r.Method(http.MethodGet, "/app.js", asset("ui/app.js", "text/javascript; charset=utf-8"))
		r.Method(http.MethodGet, "/app.css", asset("ui/app.css", "text/css; charset=utf-8"))
		r.Method(http.MethodGet, "/openapi.yaml", web.OpenAPI(spec))
		return r
	}
}
