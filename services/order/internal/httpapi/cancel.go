// This file holds the customer's cancel of an order.

package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/store"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// cancelOrder asks to cancel an order of the customer's own, or any order
// for an operator (ownOrder; another's is a 404), with store.Cancel: 202
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
