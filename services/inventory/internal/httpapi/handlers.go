package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
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

// putStock creates a SKU, or replaces its available units if the request
// names the version it read (If-Match); the reserved ones stay.
func putStock(st *store.Store) func(context.Context, string, web.Precondition, stockRequest) (domain.Stock, error) {
	return func(ctx context.Context, sku string, pre web.Precondition, req stockRequest) (domain.Stock, error) {
		return st.PutStock(ctx, sku, *req.Available, pre.IfMatch, pre.CreateOnly)
	}
}

type restockRequest struct {
	Quantity *int64 `json:"quantity"`
}

func (r restockRequest) Validate() error {
	switch {
	case r.Quantity == nil:
		return errors.New("quantity is required")
	case *r.Quantity <= 0:
		return errors.New("quantity must be > 0")
	case *r.Quantity > events.MaxAmount:
		return fmt.Errorf("quantity must be at most %d", int64(events.MaxAmount))
	}
	return nil
}

// restock adds units to a SKU's available ones.
func restock(st *store.Store) func(context.Context, string, restockRequest) (domain.Stock, error) {
	return func(ctx context.Context, sku string, req restockRequest) (domain.Stock, error) {
		return st.Restock(ctx, sku, *req.Quantity)
	}
}
