package httpapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
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

// putAccount opens a customer's account or sets its balance and currency.
func putAccount(st *store.Store) func(context.Context, string, accountRequest) (domain.Account, error) {
	return func(ctx context.Context, id string, req accountRequest) (domain.Account, error) {
		return st.PutAccount(ctx, id, *req.Balance, req.Currency)
	}
}
