package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/events"
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
