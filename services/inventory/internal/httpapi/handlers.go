package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
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

// putStock sets a SKU's available units; the reserved ones stay.
func putStock(st *store.Store) func(context.Context, string, stockRequest) (domain.Stock, error) {
	return func(ctx context.Context, sku string, req stockRequest) (domain.Stock, error) {
		return st.PutStock(ctx, sku, *req.Available)
	}
}
