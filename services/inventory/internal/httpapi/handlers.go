package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

type stockRequest struct {
	// A pointer, so a missing field is an error rather than a silent zero
	// that would empty the shelf.
	Available *int64 `json:"available"`
}

func (s stockRequest) Validate() error {
	switch {
	case s.Available == nil:
		return errors.New("available is required")
	case *s.Available < 0:
		return errors.New("available must be >= 0")
	case *s.Available > events.MaxAmount:
		// Released units are added back in SQL; the cap keeps the sum
		// inside bigint.
		return fmt.Errorf("available must be at most %d", int64(events.MaxAmount))
	}
	return nil
}

func putStock(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sku, err := web.PathID(r, "sku")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		req, err := web.Decode[stockRequest](w, r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		s, err := st.PutStock(r.Context(), sku, *req.Available)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, s)
	})
}

func getStock(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sku, err := web.PathID(r, "sku")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		s, err := st.Stock(r.Context(), sku)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, s)
	})
}

func getReservation(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, "order_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		res, err := st.Reservation(r.Context(), id)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, res)
	})
}
