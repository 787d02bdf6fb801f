package web

import (
	"context"
	"log/slog"
	"net/http"
)

// Get serves a GET of one resource named by the path parameter param: the
// id, checked by PathID, is read with get and the result written as JSON
// with 200. Every error, a bad id's 400 or get's own (fault.NotFound → 404),
// goes to Respond.
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
		Encode(w, http.StatusOK, v)
	})
}

// Put serves a PUT that sets one resource named by the path parameter
// param: the id, checked by PathID, and the JSON body, decoded and
// validated by Decode, are handed to put, and what it returns is written as
// JSON with 200. Every error goes to Respond.
func Put[Req, T any](log *slog.Logger, param string, put func(ctx context.Context, id string, req Req) (T, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := PathID(r, param)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		req, err := Decode[Req](w, r)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		v, err := put(r.Context(), id, req)
		if err != nil {
			Respond(w, r, log, err)
			return
		}
		Encode(w, http.StatusOK, v)
	})
}
