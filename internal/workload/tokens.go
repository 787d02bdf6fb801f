package workload

import (
	"fmt"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
)

// Tokens are the bearer tokens of a world's callers, signed with a
// development key: an operator's for setting the world up and reading it
// back, and each customer's own for their orders, so a load takes the
// path a customer's requests take (their subject must be the order's
// customer). They are signed once, before the load, not per request.
type Tokens struct {
	// Operator is the token of an operator named after the tool.
	Operator  string
	customers map[string]string
}

// NewTokens signs, with key, an operator's token of subject operator and
// a token of every customer of w, each good for ttl: longer than the run.
func NewTokens(key devkey.Key, operator string, w World, ttl time.Duration) (Tokens, error) {
	op, err := key.Token(operator, true, ttl)
	if err != nil {
		return Tokens{}, fmt.Errorf("tokens: %w", err)
	}
	t := Tokens{Operator: op, customers: make(map[string]string, len(w.Balance))}
	for c := range w.Balance {
		if t.customers[c], err = key.Token(c, false, ttl); err != nil {
			return Tokens{}, fmt.Errorf("tokens: %w", err)
		}
	}
	return t, nil
}

// Customer returns the token of customer id; "" for one not of the world,
// which the services refuse with 401.
func (t Tokens) Customer(id string) string { return t.customers[id] }
