package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

type accountRequest struct {
	Balance *int64 `json:"balance"`
	// Currency defaults to JPY.
	Currency string `json:"currency"`
}

// defaultCurrency is the currency of an account created without one, and of
// orders placed without one.
const defaultCurrency = "JPY"

func (a *accountRequest) Validate() error {
	if a.Currency == "" {
		a.Currency = defaultCurrency
	}
	switch {
	case !currencyCode.MatchString(a.Currency):
		return fmt.Errorf("currency %q is not a three-letter ISO 4217 code", a.Currency)
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

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

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
		a, err := st.PutAccount(r.Context(), id, *req.Balance, req.Currency)
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
			web.Respond(w, r, log, err)
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
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, p)
	})
}
