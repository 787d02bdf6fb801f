package httpapi

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

type accountRequest struct {
	Balance *int64 `json:"balance"`
	// Currency is the account's: omitted, it stays what it is, or
	// store.DefaultCurrency for a new account. It cannot change. Either
	// case is taken and kept upper case, the order service's rule.
	Currency string `json:"currency"`
}

func (a accountRequest) Validate() error {
	if a.Currency != "" && !currencyCode.MatchString(a.Currency) {
		return fmt.Errorf("currency must be 3 letters (ISO 4217, e.g. JPY), got %q", a.Currency)
	}
	// Refunds are added to the balance in SQL (web.CheckAmount).
	return web.CheckAmount("balance", a.Balance)
}

var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

// putAccount opens a customer's account, or replaces its balance if the
// request names the version it read (If-Match).
func putAccount(st *store.Store) func(context.Context, string, web.Precondition, accountRequest) (domain.Account, error) {
	return func(ctx context.Context, id string, pre web.Precondition, req accountRequest) (domain.Account, error) {
		return st.PutAccount(ctx, id, *req.Balance, strings.ToUpper(req.Currency), store.Precondition{IfVersion: pre.IfMatch, CreateOnly: pre.CreateOnly})
	}
}
