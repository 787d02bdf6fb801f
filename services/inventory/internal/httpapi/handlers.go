package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

const maxIDLen = 64

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
	}
	return nil
}

func putStock(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sku, err := pathID(r, "sku")
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
		sku, err := pathID(r, "sku")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		s, err := st.Stock(r.Context(), sku)
		if err != nil {
			web.Respond(w, r, log, problem(err, "stock "+sku))
			return
		}
		web.Encode(w, http.StatusOK, s)
	})
}

func getReservation(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "order_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		res, err := st.Reservation(r.Context(), id)
		if err != nil {
			web.Respond(w, r, log, problem(err, "reservation for order "+id))
			return
		}
		web.Encode(w, http.StatusOK, res)
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
