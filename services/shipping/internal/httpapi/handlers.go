package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

func getShipment(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, "order_id")
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

// problem maps store errors to HTTP errors; the one place that does.
func problem(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return web.Errorf(http.StatusNotFound, "%s not found", what)
	}
	return err
}
