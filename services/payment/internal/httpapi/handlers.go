package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

const maxIDLen = 64

type accountRequest struct {
	Balance *int64 `json:"balance"`
}

func (a accountRequest) Validate() error {
	switch {
	case a.Balance == nil:
		return errors.New("balance is required")
	case *a.Balance < 0:
		return errors.New("balance must be >= 0")
	}
	return nil
}

func putAccount(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "customer_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		req, err := web.Decode[accountRequest](w, r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		a, err := st.PutAccount(r.Context(), id, *req.Balance)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, a)
	})
}

func getAccount(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "customer_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		a, err := st.Account(r.Context(), id)
		if err != nil {
			web.Respond(w, r, log, problem(err, "account "+id))
			return
		}
		web.Encode(w, http.StatusOK, a)
	})
}

func getPayment(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "order_id")
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		p, err := st.Payment(r.Context(), id)
		if err != nil {
			web.Respond(w, r, log, problem(err, "payment for order "+id))
			return
		}
		web.Encode(w, http.StatusOK, p)
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
