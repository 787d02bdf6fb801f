package httpapi

import (
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
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, sh)
	})
}
