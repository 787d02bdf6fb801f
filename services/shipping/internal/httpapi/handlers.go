package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

const maxIDLen = 64

func getShipment(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "order_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		sh, err := st.Shipment(r.Context(), id)
		if err != nil {
			web.Respond(w, r, log, problem(err, "shipment for order "+id))
			return
		}
		web.Encode(w, http.StatusOK, sh)
	})
}

// openAPI serves doc, the OpenAPI document built into the binary, so a
// client reads the contract of the very version it talks to.
func openAPI(doc []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(doc)
	})
}

// pathID reads a path parameter that must be a short, non-empty id.
func pathID(r *http.Request, name string) (string, error) {
	id := chi.URLParam(r, name)
	if id == "" || len(id) > maxIDLen {
		return "", web.Errorf(http.StatusBadRequest, "%s must be 1 to %d characters", name, maxIDLen)
	}
	return id, nil
}

// problem maps store errors to HTTP errors; the one place that does.
func problem(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return web.Errorf(http.StatusNotFound, "%s not found", what)
	}
	return err
}
