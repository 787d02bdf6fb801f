package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

type accountRequest struct {
	Balance *int64 `json:"balance"`
}

func (a accountRequest) Validate() error {
	switch {
	case a.Balance == nil:
		return errors.New("balance is required")
	case *a.Balance < 0:
		return errors.New("balance must be >= 0")
	case *a.Balance > events.MaxAmount:
		// Refunds are added to the balance in SQL; the cap keeps the sum
		// inside bigint.
		return fmt.Errorf("balance must be at most %d", int64(events.MaxAmount))
	}
	return nil
}

func putAccount(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, "customer_id")
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
		id, err := web.PathID(r, "customer_id")
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
		id, err := web.PathID(r, "order_id")
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

// problem maps store errors to HTTP errors; the one place that does.
func problem(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return web.Errorf(http.StatusNotFound, "%s not found", what)
	}
	return err
}
