// This file holds the reads of orders: one by id, and the pages of GET
// /orders.

package httpapi

import (
	"log/slog"
	"net/http"
	"net/url"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// getOrder serves GET /orders/{id}: a customer's own order, any order to
// an operator (ownOrder).
func getOrder(log *slog.Logger, st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(chi.URLParam(r, "id"))
		if err != nil {
			web.Respond(w, r, log, web.Errorf(http.StatusBadRequest, "order id must be a UUID"))
			return
		}
		o, err := ownOrder(r, st, id.String())
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
		// A customer's list holds their orders only: filtering by
		// another customer's id finds none, as it would for a customer
		// with no orders, so it tells nothing about theirs.
		c, ok := bearer.From(r.Context())
		if !ok {
			bearer.Refuse(w, r, log, "")
			return
		}
		if !c.Operator {
			if q.CustomerID != "" && q.CustomerID != c.Subject {
				web.Encode(w, http.StatusOK, domain.Page{Orders: []domain.Order{}})
				return
			}
			q.CustomerID = c.Subject
		}
		page, err := st.List(r.Context(), q)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		web.Encode(w, http.StatusOK, page)
	})
}

// ownOrder returns the order with id if the caller may see it: an
// operator sees every order, a customer their own. Another customer's is
// the fault.NotFound of no order at all, so its id is not confirmed.
func ownOrder(r *http.Request, st *store.Store, id string) (domain.Order, error) {
	o, err := st.Order(r.Context(), id)
	if err != nil {
		return domain.Order{}, err
	}
	if c, _ := bearer.From(r.Context()); !c.Operator && o.CustomerID != c.Subject {
		return domain.Order{}, fault.Errorf(fault.NotFound, "order %s", id)
	}
	return o, nil
}
