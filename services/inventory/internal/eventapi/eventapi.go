// Package eventapi is the inventory service's reactions to the events it
// consumes: it reserves a paid order's items, and releases them when
// shipping fails or the order is cancelled.
package eventapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// Reactions returns the inventory service's reactions. The other payment
// and shipping events (declined, refunded, scheduled) concern other
// services; the runtime acknowledges them.
func Reactions() []participant.Reaction {
	return []participant.Reaction{
		participant.On(reserve),
		participant.On(release),
		participant.On(cancel),
	}
}

// reserve reserves a paid order's items, or rejects the order when any is
// short.
func reserve(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.PaymentCompleted) error {
	// The reservation row first, then stock rows in byte order
	// (store.LockForReserve, whatever the column's collation): every
	// reaction locks in this order — release too, through store.Release —
	// so concurrent orders queue rather than deadlock, and two reactions to
	// one order run one after the other.
	skus := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		skus = append(skus, it.SKU)
	}
	existing, stock, err := store.LockForReserve(ctx, tx, e.OrderID, skus)
	if err != nil {
		return err
	}
	d := domain.DecideReserve(existing, stock, p.Items)
	r := domain.Reservation{OrderID: e.OrderID, Items: p.Items}
	switch d.Action {
	case domain.ReserveSkip:
		return nil
	case domain.Reject:
		r.Status = domain.StatusRejected
		if err := store.InsertReservation(ctx, tx, r, shortageDetail(d.Shortages)); err != nil {
			return err
		}
		return tx.Emit(ctx, events.InventoryRejected{Reason: events.ReasonOutOfStock, Shortages: d.Shortages})
	case domain.ReserveAll:
		if err := store.ReserveAndRecord(ctx, tx, e.OrderID, p.Items, d.Needed); err != nil {
			return err
		}
		return tx.Emit(ctx, events.InventoryReserved{Items: p.Items, ShippingAddress: p.ShippingAddress})
	}
	return fmt.Errorf("reserve %s: unhandled decision %v", e.OrderID, d.Action)
}

// release gives back the units of an order whose shipment failed, and
// announces it, so that payment refunds.
func release(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.ShipmentFailed) error {
	existing, err := store.LockReservation(ctx, tx, e.OrderID)
	if err != nil {
		return err
	}
	switch domain.DecideRelease(existing) {
	case domain.ReleaseSkip:
		return nil
	case domain.ReleaseTombstone:
		if err := tombstone(ctx, tx, e.OrderID, domain.NoteReleaseBeforeReserve+p.Reason); err != nil {
			return err
		}
		return tx.Emit(ctx, events.InventoryReleased{Reason: p.Reason})
	case domain.ReleaseReturn:
		if err := giveBack(ctx, tx, existing, p.Reason); err != nil {
			return err
		}
		return tx.Emit(ctx, events.InventoryReleased{Items: existing.Items, Reason: p.Reason})
	}
	return fmt.Errorf("release %s: unhandled decision", e.OrderID)
}

// cancel releases whatever the order holds, whatever the saga's step, and
// acknowledges with InventoryCancelled in the same transaction. It locks the
// reservation row first, as reserve and release do, so a cancel and a
// compensation's release of one order run one after the other, and the
// second finds RELEASED: the units go back once.
func cancel(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.OrderCancelRequested) error {
	existing, err := store.LockReservation(ctx, tx, e.OrderID)
	if err != nil {
		return err
	}
	var ack events.InventoryCancelled
	switch domain.DecideCancel(existing) {
	case domain.CancelSkip:
		tx.Log.Info("order cancel already handled")
		return nil
	case domain.CancelTombstone:
		if err := tombstone(ctx, tx, e.OrderID, domain.NoteCancelBeforeReserve+p.Reason); err != nil {
			return err
		}
	case domain.CancelAcknowledge:
		// Rejected, or released by a compensation: nothing is held.
	case domain.CancelReturn:
		if err := giveBack(ctx, tx, existing, domain.NoteCancelled+p.Reason); err != nil {
			return err
		}
		ack.Items = existing.Items
	default:
		return fmt.Errorf("cancel %s: unhandled decision", e.OrderID)
	}
	// Every action but the skip records the cancel and acknowledges it.
	if err := store.MarkReservationCancelled(ctx, tx, e.OrderID); err != nil {
		return err
	}
	return tx.Emit(ctx, ack)
}

// shortageDetail lists the shortages, already sorted by SKU, for the
// reservation's detail column, e.g. "out of stock: sku-1 requested 3
// available 1".
func shortageDetail(shortages []events.Shortage) string {
	parts := make([]string, len(shortages))
	for i, s := range shortages {
		parts[i] = fmt.Sprintf("%s requested %d available %d", s.SKU, s.Requested, s.Available)
	}
	return "out of stock: " + strings.Join(parts, "; ")
}

// tombstone records that nothing was reserved and nothing ever will be:
// the row, RELEASED with no items, makes a late reserve a no-op.
func tombstone(ctx context.Context, tx *participant.Tx, orderID, detail string) error {
	return store.InsertReservation(ctx, tx, domain.Reservation{OrderID: orderID, Status: domain.StatusReleased}, detail)
}

// giveBack returns a reservation's units to the stock and records it
// RELEASED with detail.
func giveBack(ctx context.Context, tx *participant.Tx, r *domain.Reservation, detail string) error {
	if err := store.Release(ctx, tx, domain.Quantities(r.Items)); err != nil {
		return err
	}
	return store.SetReservationStatus(ctx, tx, r.OrderID, domain.StatusReleased, detail)
}
