package httpapi

import (
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Headers of the idempotent create.
const (
	// HeaderIdempotencyKey is sent by a client that may retry a create.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed marks a response that returns the order an earlier
	// request with the same key created.
	HeaderReplayed = "Idempotent-Replayed"
)

// createOrder starts a saga: it stores the order and the OrderCreated event
// that announces it, from service, in one transaction (store.Create).
func createOrder(log *slog.Logger, st *store.Store, service string, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotencyKey(r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		req, err := web.Decode[domain.Request](w, r)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		// A customer orders for themselves: customer_id may be left out,
		// and is then the token's subject; another customer's is refused,
		// not replaced, so a client's mistake is not billed to the caller.
		// An operator orders for the customer the body names.
		c, ok := bearer.From(r.Context())
		switch {
		case !ok:
			bearer.Refuse(w, r, log, "")
			return
		case c.Operator:
		case req.CustomerID == "":
			req.CustomerID = c.Subject
		case req.CustomerID != c.Subject:
			bearer.Refuse(w, r, log, "customer_id must be the token's subject (or be left out): a customer orders for themselves")
			return
		}
		draft, err := domain.Validate(req)
		if err != nil {
			web.Respond(w, r, log, &web.Error{Status: http.StatusBadRequest, Detail: err.Error()})
			return
		}
		// With a key, the id is the customer's key's (domain.IdempotentOrderID),
		// so the client knows it without an answer and a replay finds it.
		id := uuid.NewString()
		if key != "" {
			id = domain.IdempotentOrderID(draft.CustomerID, key)
		}
		o := domain.NewOrder(id, draft)
		created, err := events.New(service, o.ID, o.Created(), now())
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		got, replayed, err := st.Create(r.Context(), o, key, created)
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		w.Header().Set("Location", "/orders/"+got.ID)
		if replayed {
			// Same status as the first response, so a client that retries
			// after a lost response cannot tell the difference — except by
			// this header, if it cares.
			w.Header().Set(HeaderReplayed, "true")
			log.InfoContext(r.Context(), "order create replayed", "order_id", got.ID)
		} else {
			// DEBUG, with the access log: one a request under load.
			log.DebugContext(r.Context(), "order created", "order_id", got.ID,
				"customer_id", got.CustomerID, "total_amount", got.TotalAmount, "currency", got.Currency)
		}
		web.Encode(w, http.StatusCreated, got)
	})
}

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

// cancelOrder asks to cancel an order for the customer (store.Cancel): 202
// with the order, CANCELLING, while the saga can still be undone — also for
// a repeated request, so a client may retry — 409 once the order is
// COMPLETED or CANCELLED, 404 for no such order. 202, not 200: the cancel
// is accepted, and done only when the order reads CANCELLED. The request
// needs no body; one sent is ignored.
func cancelOrder(log *slog.Logger, st *store.Store, service string, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(chi.URLParam(r, "id"))
		if err != nil {
			web.Respond(w, r, log, web.Errorf(http.StatusBadRequest, "order id must be a UUID"))
			return
		}
		// The owner is checked first; an order's customer never changes,
		// so the cancel that follows acts on an order the caller owns.
		if _, err := ownOrder(r, st, id.String()); err != nil {
			web.Respond(w, r, log, err)
			return
		}
		o, err := st.Cancel(r.Context(), id.String(), events.ReasonCustomerCancelled, service, now())
		if err != nil {
			web.Respond(w, r, log, err)
			return
		}
		log.InfoContext(r.Context(), "order cancel accepted", "order_id", o.ID, "status", o.Status)
		web.Encode(w, http.StatusAccepted, o)
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

// idempotencyKey returns the request's Idempotency-Key, "" if it sent none.
// A header that is present must be valid: silently ignoring a bad key would
// drop the protection the client asked for.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(HeaderIdempotencyKey)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", web.Errorf(http.StatusBadRequest, "%s must be sent once, got %d", HeaderIdempotencyKey, len(vals))
	}
	if err := domain.ValidateIdempotencyKey(vals[0]); err != nil {
		return "", &web.Error{Status: http.StatusBadRequest, Detail: err.Error()}
	}
	return vals[0], nil
}
