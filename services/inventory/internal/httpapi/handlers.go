package httpapi

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

type stockRequest struct {
	Available *int64 `json:"available"`
}

// Validate: released units are added back in SQL (web.CheckAmount).
func (s stockRequest) Validate() error { return web.CheckAmount("available", s.Available) }

// putStock creates a SKU, or replaces its available units if the request
// names the version it read (If-Match); the reserved ones stay.
func putStock(st *store.Store) func(context.Context, string, web.Precondition, stockRequest) (domain.Stock, error) {
	return func(ctx context.Context, sku string, pre web.Precondition, req stockRequest) (domain.Stock, error) {
		return st.PutStock(ctx, sku, *req.Available, store.Precondition{IfVersion: pre.IfMatch, CreateOnly: pre.CreateOnly})
	}
}
