package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
)

// cancel sends POST /orders/{id}/cancel and returns the status and, for
// 202, the order.
func cancel(t *testing.T, id string) (int, http.Header, order) {
	t.Helper()
	status, h, body := do(t, http.MethodPost, services["order"].baseURL+"/orders/"+id+"/cancel", "", nil, nil)
	var o order
	if status == http.StatusAccepted {
		if err := json.Unmarshal(body, &o); err != nil {
			t.Fatalf("POST /orders/%s/cancel: %v: %s", id, err, body)
		}
	}
	return status, h, o
}

// mustCancel cancels the order, which must be accepted — twice, since a
// repeated cancel answers the same — and be CANCELLING with reason.
func mustCancel(t *testing.T, id, reason string) {
	t.Helper()
	for range 2 {
		status, _, o := cancel(t, id)
		if status != http.StatusAccepted || o.Status != "CANCELLING" || o.CancelReason != reason {
			t.Fatalf("cancel %s = %d %s/%q, want 202 CANCELLING/%q", id, status, o.Status, o.CancelReason, reason)
		}
	}
}

// stopService stops a service gracefully, as if it were down, and returns
// the function that starts it again; the test's cleanup starts it if the test
// did not.
func stopService(t *testing.T, name string) (restart func()) {
	t.Helper()
	s := services[name]
	s.stop(syscall.SIGTERM)
	started := false
	restart = func() {
		if started {
			return
		}
		started = true
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		if err := s.waitReady(90 * time.Second); err != nil {
			t.Fatalf("%v\n%s", err, s.logTail(30))
		}
	}
	t.Cleanup(restart)
	return restart
}

// waitRecord polls a service's record of an order until its status is want.
func waitRecord(t *testing.T, svc, path, want string) {
	t.Helper()
	eventually(t, 90*time.Second, func() error {
		var r struct{ Status string }
		if code := get(t, svc, path, &r); code != http.StatusOK {
			return fmt.Errorf("GET %s %s = %d", svc, path, code)
		}
		if r.Status != want {
			return fmt.Errorf("%s %s is %s, want %s", svc, path, r.Status, want)
		}
		return nil
	})
}

// orderStatus returns the order's current status and reason.
func orderStatus(t *testing.T, id string) order {
	t.Helper()
	return mustGet[order](t, "order", "/orders/"+id)
}

// wantUndone waits for the order to end CANCELLED with reason and checks
// every service's record: the balance and stock as they were before the
// order, the payment REFUNDED, the reservation RELEASED and the shipment
// CANCELLED — never SCHEDULED. Terminal means it is all visible already.
func wantUndone(t *testing.T, f fixture, id, reason string, balanceBefore, stockBefore int64) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "order "+id+" ends", func() bool {
		o := orderStatus(t, id)
		return o.Status == "COMPLETED" || o.Status == "CANCELLED"
	})
	o := orderStatus(t, id)
	if o.Status != "CANCELLED" || o.CancelReason != reason {
		t.Fatalf("order %s = %s/%q, want CANCELLED/%q", id, o.Status, o.CancelReason, reason)
	}
	assertEqual(t, "balance", balance(t, f.customer), balanceBefore)
	assertEqual(t, "stock", stock(t, f.sku), stockLevel{SKU: f.sku, Available: stockBefore})
	var p paymentRecord
	checkRecord(t, "payment", "/payments/"+id, &p, "REFUNDED", func() string { return p.Status })
	var r reservation
	checkRecord(t, "inventory", "/reservations/"+id, &r, "RELEASED", func() string { return r.Status })
	var sh shipment
	checkRecord(t, "shipping", "/shipments/"+id, &sh, "CANCELLED", func() string { return sh.Status })
	// Each resource answers the cancel's reason code, as its API documents.
	assertEqual(t, "payment reason", p.Reason, reason)
	assertEqual(t, "reservation reason", r.Reason, reason)
	assertEqual(t, "shipment reason", sh.Reason, reason)
}

// cancelWhileDown is a step of TestCancel: with svc stopped, it creates
// an order for a fresh customer and SKU (balance, stock), runs during —
// which cancels it at the step before svc and checks what has been undone
// so far — and wants the order still CANCELLING, waiting for svc; then it
// brings svc back and wants every effect undone, customer_cancelled.
func cancelWhileDown(t *testing.T, svc string, balance, stock int64, during func(f fixture, id string)) {
	t.Helper()
	f := newFixture(t, balance, stock)
	restart := stopService(t, svc)
	o := createOrder(t, f.order(2, 2500, "JP"))
	during(f, o.ID)
	assertEqual(t, "status while "+svc+" is down", orderStatus(t, o.ID).Status, "CANCELLING")
	restart()
	wantUndone(t, f, o.ID, "customer_cancelled", balance, stock)
}

// TestCancel cancels an order at each step of its saga — stopping the next
// step's service, so the cancel lands exactly there — and requires
// it to end CANCELLED customer_cancelled with every effect undone in every
// service, even for a step that arrives after the cancel.
func TestCancel(t *testing.T) {
	const balance0, stock0 = 10000, 10

	t.Run("BeforePayment", func(t *testing.T) {
		cancelWhileDown(t, "payment", balance0, stock0, func(f fixture, id string) {
			mustCancel(t, id, "customer_cancelled")
			// Inventory and shipping have undone (nothing) and acknowledged;
			// the order waits for payment.
			waitRecord(t, "inventory", "/reservations/"+id, "RELEASED")
			waitRecord(t, "shipping", "/shipments/"+id, "CANCELLED")
		})
		// Back up, payment charges (OrderCreated comes first on its
		// partition), then refunds; the late PaymentCompleted finds
		// inventory's tombstone and reserves nothing.
	})

	t.Run("AfterPayment", func(t *testing.T) {
		cancelWhileDown(t, "inventory", balance0, stock0, func(f fixture, id string) {
			waitRecord(t, "payment", "/payments/"+id, "COMPLETED")
			mustCancel(t, id, "customer_cancelled")
			waitRecord(t, "payment", "/payments/"+id, "REFUNDED")
			assertEqual(t, "balance while inventory is down", balance(t, f.customer), int64(balance0))
		})
	})

	t.Run("AfterReservationWithShippingDown", func(t *testing.T) {
		cancelWhileDown(t, "shipping", balance0, stock0, func(f fixture, id string) {
			waitRecord(t, "inventory", "/reservations/"+id, "RESERVED")
			mustCancel(t, id, "customer_cancelled")
			waitRecord(t, "payment", "/payments/"+id, "REFUNDED")
			waitRecord(t, "inventory", "/reservations/"+id, "RELEASED")
			assertEqual(t, "stock while shipping is down", stock(t, f.sku), stockLevel{SKU: f.sku, Available: stock0})
		})
		// Back up, shipping holds both the InventoryReserved and the
		// cancel; whichever it takes first, no shipment stays SCHEDULED
		// and the order never completes.
	})

	t.Run("RacingTheSaga", func(t *testing.T) {
		// All services up: the cancel races the whole saga. A 202 must end
		// CANCELLED with everything undone, a 409 only a completed order.
		for range 3 {
			f := newFixture(t, balance0, stock0)
			o := createOrder(t, f.order(2, 2500, "JP"))
			switch status, _, _ := cancel(t, o.ID); status {
			case http.StatusAccepted:
				wantUndone(t, f, o.ID, "customer_cancelled", balance0, stock0)
			case http.StatusConflict:
				wantOrder(t, o.ID, "COMPLETED", "")
				assertEqual(t, "balance", balance(t, f.customer), int64(balance0-5000))
			default:
				t.Fatalf("cancel = %d, want 202 or 409", status)
			}
		}
	})

	t.Run("EndedIsAConflict", func(t *testing.T) {
		f := newFixture(t, balance0, stock0)
		done := createOrder(t, f.order(1, 1000, "JP"))
		wantOrder(t, done.ID, "COMPLETED", "")
		status, h, _ := cancel(t, done.ID)
		if status != http.StatusConflict || !problemJSON(h) {
			t.Fatalf("cancel of a COMPLETED order = %d %s, want 409 problem", status, h.Get("Content-Type"))
		}
		failed := createOrder(t, f.order(1, 1000, "BR"))
		wantOrder(t, failed.ID, "CANCELLED", "shipping_unavailable")
		if status, _, _ := cancel(t, failed.ID); status != http.StatusConflict {
			t.Fatalf("cancel of a CANCELLED order = %d, want 409", status)
		}
		if status, h, _ := cancel(t, uuid.NewString()); status != http.StatusNotFound || !problemJSON(h) {
			t.Fatalf("cancel of no order = %d, want 404 problem", status)
		}
		assertEqual(t, "balance", balance(t, f.customer), int64(balance0-1000))
		assertEqual(t, "stock", stock(t, f.sku), stockLevel{SKU: f.sku, Available: stock0 - 1, Reserved: 1})
	})
}

// TestDeadline runs the order service with a 2-second ORDER_DEADLINE and
// shipping down: the order, paid and reserved, outlives the deadline, is
// cancelled as a customer would cancel it, and ends CANCELLED timeout with
// every effect undone once shipping is back.
func TestDeadline(t *testing.T) {
	s := services["order"]
	orig := s.env
	s.env = append(append([]string(nil), orig...), "ORDER_DEADLINE=2s", "ORDER_DEADLINE_SWEEP=200ms")
	s.restart(t, syscall.SIGTERM)
	t.Cleanup(func() {
		s.env = orig
		s.restart(t, syscall.SIGTERM)
	})
	timedOutBefore := metric(t, "order", "choreo_orders_timed_out_total", nil)

	f := newFixture(t, 10000, 10)
	restart := stopService(t, "shipping")
	o := createOrder(t, f.order(2, 2500, "JP"))
	eventually(t, 60*time.Second, func() error {
		if got := orderStatus(t, o.ID); got.Status != "CANCELLING" || got.CancelReason != "timeout" {
			return fmt.Errorf("order is %s/%q, want CANCELLING/timeout", got.Status, got.CancelReason)
		}
		return nil
	})
	if got := metric(t, "order", "choreo_orders_timed_out_total", nil) - timedOutBefore; got < 1 {
		t.Fatalf("choreo_orders_timed_out_total rose by %v, want at least 1", got)
	}
	restart()
	wantUndone(t, f, o.ID, "timeout", 10000, 10)
}
