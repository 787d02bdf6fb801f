// This file holds the cancels of an order, the customer's (Cancel) and the
// deadline's (TimeOut): one row lock decides, and OrderCancelRequested is
// emitted with the change. TestCancel and TestTimeOut show why.

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/jmoiron/sqlx"
)

// Cancel asks to cancel the order with id for reason, as decided by
// domain.DecideCancel, and returns the order as it is then. A PENDING
// order becomes CANCELLING and, in the same transaction, OrderCancelRequested
// from source is emitted; an order already CANCELLING is returned as it is,
// nothing emitted. The error is a fault.NotFound for no such order, a
// fault.Conflict for an order that is COMPLETED or CANCELLED.
//
// The order row is locked for the decision, as the reactions lock it, so a
// cancel and the ShipmentScheduled that would complete the order are
// applied one after the other: the first one wins.
func (s *Store) Cancel(ctx context.Context, id, reason, source string, now time.Time) (domain.Order, error) {
	var got domain.Order
	err := pg.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		o, err := LockOrder(ctx, tx, id)
		if err != nil {
			return err
		}
		if o == nil {
			return fault.Errorf(fault.NotFound, "order %s", id)
		}
		switch domain.DecideCancel(o.Status) {
		case domain.CancelRefused:
			return fault.Errorf(fault.Conflict, "order %s is %s: its saga has ended and can no longer be cancelled", id, o.Status)
		case domain.CancelAlreadyRequested:
			got = *o
			return nil
		}
		got, err = requestCancel(ctx, tx, *o, reason, source, now)
		return err
	})
	if err != nil {
		return domain.Order{}, err
	}
	return got, nil
}

// TimeOut cancels, for reason events.ReasonTimeout, up to limit PENDING
// orders created more than age ago, oldest first, exactly as Cancel would,
// in one transaction, and returns their ids. The age is measured on the
// database's clock, which stamped created_at: an instance whose clock runs
// ahead would otherwise cancel orders early; now stamps the events. Rows
// another transaction holds — another instance's sweep, a reaction, a
// customer's cancel — are skipped (FOR UPDATE SKIP LOCKED), so instances
// sweeping at once share the work instead of queueing; a skipped order is
// PENDING still at the next sweep, or ended meanwhile.
func (s *Store) TimeOut(ctx context.Context, age time.Duration, limit int, source string, now time.Time) ([]string, error) {
	var ids []string
	err := pg.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		ids = nil
		var rows []row
		if err := tx.SelectContext(ctx, &rows, `
			SELECT `+columns+` FROM orders
			WHERE status = $1 AND created_at < now() - $2 * interval '1 microsecond'
			ORDER BY created_at
			LIMIT $3
			FOR UPDATE SKIP LOCKED`, domain.StatusPending, age.Microseconds(), limit); err != nil {
			return fmt.Errorf("select orders past the deadline: %w", err)
		}
		for _, r := range rows {
			o, err := r.order()
			if err != nil {
				return err
			}
			if domain.DecideCancel(o.Status) != domain.CancelAccepted {
				continue
			}
			if _, err := requestCancel(ctx, tx, o, events.ReasonTimeout, source, now); err != nil {
				return err
			}
			ids = append(ids, o.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// requestCancel moves the locked PENDING order o to CANCELLING with reason
// and emits OrderCancelRequested in tx: the change and its announcement
// commit together, and only a transition out of PENDING announces, so the
// order has one cancel request whoever asked and however often.
func requestCancel(ctx context.Context, tx *sqlx.Tx, o domain.Order, reason, source string, now time.Time) (domain.Order, error) {
	e, err := events.New(source, o.ID, events.OrderCancelRequested{Reason: reason}, now)
	if err != nil {
		return o, fmt.Errorf("cancel order %s: %w", o.ID, err)
	}
	var r row
	err = tx.GetContext(ctx, &r, `
		UPDATE orders SET status = $2, cancel_reason = $3, cancel_requested_at = $4, updated_at = $4
		WHERE id = $1
		RETURNING `+columns, o.ID, domain.StatusCancelling, reason, now)
	if err != nil {
		return o, fmt.Errorf("cancel order %s: %w", o.ID, err)
	}
	if err := participant.Emit(ctx, tx, e); err != nil {
		return o, fmt.Errorf("cancel order %s: %w", o.ID, err)
	}
	return r.order()
}
