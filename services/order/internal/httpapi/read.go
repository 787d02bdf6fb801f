// This file holds the reads of orders: one by id, and the pages of GET
// /orders.

package httpapi

import (
	"log/slog"
	"net/http"
	"net/url"

	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// getOrder serves GET /orders/{id}.
func getOrder(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(chi.URLParam(r, "id"))
		if err != nil {
			web.Respond(w, r, log, web.Errorf(http.StatusBadRequest, "order id must be a UUID"))
			return
		}
		o, err := st.Order(r.Context(), id.String())
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, o)
	})
}

// listOrders serves GET /orders: a page of orders, newest first, filtered
// by customer_id and status, continued by the cursor the previous page
// gave (domain.ParseListQuery).
func listOrders(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		params, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			web.Respond(w, r, log, web.Errorf(http.StatusBadRequest, "malformed query string: %v", err))
			return
		}
		q, err := domain.ParseListQuery(params)
		if err != nil {
			web.Respond(w, r, log, &web.Error{Status: http.StatusBadRequest, Detail: err.Error()})
			return
		}
		page, err := st.List(r.Context(), q)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, page)
	})
}
