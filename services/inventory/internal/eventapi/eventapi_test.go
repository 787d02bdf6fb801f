package eventapi_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/inventory/internal/domain"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// The runtime's guarantees (redelivery, concurrent deliveries of one event,
// dead letters, one transaction) are checked by the conformance suite in
// inventory_test; these tests pin what the inventory service decides and
// emits: shortages, multi-SKU orders, compensations overtaking their step,
// competing orders and the lock order.

// fixture is one test's view of the service: its reactions on a database
// of their own (testenv.Reactions) and its store.
type fixture struct {
	*testenv.Reactions
	t  *testing.T
	st *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := testenv.NewReactions(t, inventory.Spec, inventory.DefaultConfig())
	return &fixture{Reactions: r, t: t, st: store.New(r.DB)}
}

// sku creates a SKU with available units.
func (f *fixture) sku(available int64) string {
	f.t.Helper()
	sku := testenv.ID("sku")
	if _, err := f.st.PutStock(context.Background(), sku, available, store.Precondition{CreateOnly: true}); err != nil {
		f.t.Fatal(err)
	}
	return sku
}

// order returns a fresh order id.
func (f *fixture) order() string { return testenv.ID("ord") }

func (f *fixture) paid(orderID string, items ...events.Item) events.Envelope {
	return f.Event(orderID, events.PaymentCompleted{
		CustomerID: "c-1", Amount: 1000, Currency: "JPY", Items: items, ShippingAddress: testenv.Address,
	})
}

func (f *fixture) shipmentFailed(orderID string) events.Envelope {
	return f.Event(orderID, events.ShipmentFailed{Country: "AQ", Reason: events.ReasonShippingUnavailable})
}

func (f *fixture) mustStock(sku string, available, reserved int64) {
	f.t.Helper()
	got, err := f.st.Stock(context.Background(), sku)
	if err != nil {
		f.t.Fatalf("stock %s: %v", sku, err)
	}
	if got.Available != available || got.Reserved != reserved {
		f.t.Fatalf("stock %s = %d available, %d reserved; want %d, %d", sku, got.Available, got.Reserved, available, reserved)
	}
}

// mustReservation fails the test unless the order's reservation has
// status and holds items, in the order's line order.
func (f *fixture) mustReservation(orderID string, status domain.Status, items []events.Item) {
	f.t.Helper()
	if r := f.reservation(orderID); r.Status != status || !reflect.DeepEqual(r.Items, items) {
		f.t.Fatalf("reservation = %+v, want %s with items %+v", r, status, items)
	}
}

func (f *fixture) reservation(orderID string) domain.Reservation {
	f.t.Helper()
	r, err := f.st.Reservation(context.Background(), orderID)
	if err != nil {
		f.t.Fatalf("reservation %s: %v", orderID, err)
	}
	return r
}

func TestReserveMovesUnitsAndEmitsOneEvent(t *testing.T) {
	f := newFixture(t)
	a, b := f.sku(5), f.sku(2)
	id := f.order()
	items := []events.Item{{SKU: a, Quantity: 2, UnitPrice: 100}, {SKU: b, Quantity: 1, UnitPrice: 300}, {SKU: a, Quantity: 1, UnitPrice: 100}}

	f.MustDeliver(f.paid(id, items...))

	f.mustStock(a, 2, 3)
	f.mustStock(b, 1, 1)
	f.mustReservation(id, domain.StatusReserved, items)
	p := testenv.Last[events.InventoryReserved](t, f.Emitted(id), 1)
	if !reflect.DeepEqual(p.Items, items) || p.ShippingAddress != testenv.Address {
		t.Fatalf("InventoryReserved = %+v, want the PaymentCompleted items and address", p)
	}
}

func TestRejectChangesNoStock(t *testing.T) {
	f := newFixture(t)
	a, b := f.sku(1), f.sku(10)
	ghost := testenv.ID("ghost")
	id := f.order()
	items := []events.Item{{SKU: b, Quantity: 3}, {SKU: a, Quantity: 2}, {SKU: ghost, Quantity: 1}}

	f.MustDeliver(f.paid(id, items...))

	f.mustStock(a, 1, 0)
	f.mustStock(b, 10, 0)
	if _, err := f.st.Stock(context.Background(), ghost); !errors.Is(err, fault.NotFound) {
		t.Fatalf("unknown sku was created: err = %v", err)
	}
	f.mustReservation(id, domain.StatusRejected, items)
	p := testenv.Last[events.InventoryRejected](t, f.Emitted(id), 1)
	want := []events.Shortage{{SKU: a, Requested: 2, Available: 1}, {SKU: ghost, Requested: 1, Available: 0}}
	if a > ghost {
		want[0], want[1] = want[1], want[0]
	}
	if p.Reason != events.ReasonOutOfStock || !reflect.DeepEqual(p.Shortages, want) {
		t.Fatalf("InventoryRejected = %+v, want reason %q shortages %+v", p, events.ReasonOutOfStock, want)
	}
	var detail string
	if err := f.DB.Get(&detail, `SELECT detail FROM reservations WHERE order_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if detail == "" {
		t.Error("rejected reservation has no detail")
	}
}

func TestReleaseReturnsUnits(t *testing.T) {
	f := newFixture(t)
	a := f.sku(5)
	id := f.order()
	items := []events.Item{{SKU: a, Quantity: 2}, {SKU: a, Quantity: 1}}
	f.MustDeliver(f.paid(id, items...))
	f.mustStock(a, 2, 3)

	f.MustDeliver(f.shipmentFailed(id))

	f.mustStock(a, 5, 0)
	f.mustReservation(id, domain.StatusReleased, items)
	p := testenv.Last[events.InventoryReleased](t, f.Emitted(id), 2)
	if !reflect.DeepEqual(p.Items, items) || p.Reason != events.ReasonShippingUnavailable {
		t.Fatalf("InventoryReleased = %+v", p)
	}

	t.Run("SecondReleaseIsNoop", func(t *testing.T) {
		f.MustDeliver(f.shipmentFailed(id))
		f.mustStock(a, 5, 0)
		if n := len(f.Emitted(id)); n != 2 {
			t.Fatalf("%d events after a second release, want still 2", n)
		}
	})
}

func TestReleaseBeforeReserveLeavesTombstone(t *testing.T) {
	f := newFixture(t)
	a := f.sku(5)
	id := f.order()

	f.MustDeliver(f.shipmentFailed(id))

	r := f.reservation(id)
	if r.Status != domain.StatusReleased || r.Items == nil || len(r.Items) != 0 {
		t.Fatalf("reservation = %#v, want RELEASED with no items", r)
	}
	p := testenv.Last[events.InventoryReleased](t, f.Emitted(id), 1)
	if len(p.Items) != 0 || p.Reason != events.ReasonShippingUnavailable {
		t.Fatalf("InventoryReleased = %+v, want no items", p)
	}

	t.Run("LatePaymentIsNoop", func(t *testing.T) {
		f.MustDeliver(f.paid(id, events.Item{SKU: a, Quantity: 1}))
		f.mustStock(a, 5, 0)
		if n := len(f.Emitted(id)); n != 1 {
			t.Fatalf("%d events after the late payment, want still 1", n)
		}
		if r := f.reservation(id); r.Status != domain.StatusReleased {
			t.Fatalf("status = %s, want RELEASED", r.Status)
		}
	})
}

func TestRejectedOrderReleaseIsNoop(t *testing.T) {
	f := newFixture(t)
	a := f.sku(0)
	id := f.order()
	f.MustDeliver(f.paid(id, events.Item{SKU: a, Quantity: 1}))
	f.MustDeliver(f.shipmentFailed(id))
	f.mustStock(a, 0, 0)
	if r := f.reservation(id); r.Status != domain.StatusRejected {
		t.Fatalf("status = %s, want REJECTED", r.Status)
	}
	if n := len(f.Emitted(id)); n != 1 {
		t.Fatalf("%d events, want only the InventoryRejected", n)
	}
}

func TestConcurrentOrdersNeverOversell(t *testing.T) {
	f := newFixture(t)
	a := f.sku(3)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = f.order()
	}
	envs := make([]events.Envelope, len(ids))
	for i, id := range ids {
		envs[i] = f.paid(id, events.Item{SKU: a, Quantity: 1})
	}
	f.DeliverAll(envs...)
	f.mustStock(a, 0, 3)
	count := map[domain.Status]int{}
	for _, id := range ids {
		count[f.reservation(id).Status]++
	}
	if count[domain.StatusReserved] != 3 || count[domain.StatusRejected] != 7 {
		t.Fatalf("outcomes %v, want 3 RESERVED and 7 REJECTED", count)
	}
}

// TestOpposingLineOrdersDoNotDeadlock sends orders naming the same two SKUs
// in opposite line orders at once; locking in SKU order means none of them
// is aborted as a deadlock victim.
func TestOpposingLineOrdersDoNotDeadlock(t *testing.T) {
	f := newFixture(t)
	x, y := f.sku(1000), f.sku(1000)
	const n = 40
	envs := make([]events.Envelope, n)
	for i := range envs {
		lines := []events.Item{{SKU: x, Quantity: 1}, {SKU: y, Quantity: 1}}
		if i%2 == 1 {
			lines[0], lines[1] = lines[1], lines[0]
		}
		envs[i] = f.paid(f.order(), lines...)
	}
	f.DeliverAll(envs...)
	f.mustStock(x, 1000-n, n)
	f.mustStock(y, 1000-n, n)
}

// TestReserveAndReleaseShareOneLockOrder runs reserves and releases of
// orders naming the same SKUs, in shuffled line orders, at once, with the
// sku column under an ICU collation, where "a_1" sorts before "A-1" while
// Go (and COLLATE "C") puts "A-1" first. Every path must lock stock rows in
// one order — byte order — or a reserve and a release wait for each other
// and one is aborted as a deadlock victim (40P01). The consumer would retry
// the victim, so the test looks at each delivery's first attempt.
func TestReserveAndReleaseShareOneLockOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const collation = "en-US-x-icu"
	var found bool
	if err := f.DB.GetContext(ctx, &found, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = $1)`, collation); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Skipf("PostgreSQL has no ICU collation %q", collation)
	}
	if _, err := f.DB.ExecContext(ctx, `ALTER TABLE stock ALTER COLUMN sku TYPE text COLLATE "`+collation+`"`); err != nil {
		t.Fatal(err)
	}
	// The test's schema is its own, so these plain names clash with nobody.
	skus := []string{"a-1", "a_1", "A-1", "A_1", "b"}
	var icu []string
	if err := f.DB.SelectContext(ctx, &icu, `SELECT sku FROM unnest($1::text[]) AS sku ORDER BY sku COLLATE "`+collation+`"`, pq.Array(skus)); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(icu, []string{"A-1", "A_1", "a-1", "a_1", "b"}) {
		t.Fatalf("collation %s orders %v as bytes do; the test needs an order that differs", collation, icu)
	}
	const initial = 1_000_000
	for _, sku := range skus {
		if _, err := f.st.PutStock(ctx, sku, initial, store.Precondition{CreateOnly: true}); err != nil {
			t.Fatal(err)
		}
	}

	rng := rand.New(rand.NewPCG(6, 5))
	lines := func() []events.Item {
		items := make([]events.Item, len(skus))
		for i, j := range rng.Perm(len(skus)) {
			items[i] = events.Item{SKU: skus[j], Quantity: int64(1 + rng.IntN(3)), UnitPrice: 100}
		}
		return items
	}

	// A lock-order cycle is not always detected (40P01) at once: a cycle
	// through row-lock queues can hold every party until the transaction's
	// timeout. An attempt gets stuckAfter, far more than a round needs when
	// the rows are locked in one order.
	const rounds, perRound, stuckAfter = 4, 8, 5 * time.Second
	reserved := map[string]int64{}
	var held, fresh []string
	for round := range rounds {
		// Orders whose units are held, to be released during the round.
		var deliveries []events.Envelope
		for range perRound {
			id := f.order()
			f.MustDeliver(f.paid(id, lines()...))
			held = append(held, id)
			deliveries = append(deliveries, f.shipmentFailed(id))
		}
		// New orders reserving the same SKUs meanwhile.
		for range perRound {
			id := f.order()
			items := lines()
			for _, it := range items {
				reserved[it.SKU] += it.Quantity
			}
			fresh = append(fresh, id)
			deliveries = append(deliveries, f.paid(id, items...))
		}
		first := make([]error, len(deliveries))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, e := range deliveries {
			wg.Go(func() {
				<-start
				// As the consumer does: retry what is not permanent.
				for attempt := 0; attempt < 10; attempt++ {
					actx, cancel := context.WithTimeout(ctx, stuckAfter)
					err := f.Handler.Handle(actx, testenv.Message(t, e))
					cancel()
					if attempt == 0 {
						first[i] = err
					}
					if err == nil || consumer.IsPermanent(err) {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		var deadlocks, stuck, other []error
		for _, err := range first {
			var pqErr *pq.Error
			switch {
			case err == nil:
			case errors.As(err, &pqErr) && pqErr.Code == "40P01":
				deadlocks = append(deadlocks, err)
			case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &pqErr) && pqErr.Code == "57014":
				stuck = append(stuck, err)
			default:
				other = append(other, err)
			}
		}
		for what, errs := range map[string][]error{"deadlock victims (40P01)": deadlocks, "stuck past " + stuckAfter.String(): stuck, "failed otherwise": other} {
			if len(errs) > 0 {
				t.Errorf("round %d: %d of %d first attempts were %s, e.g. %v", round, len(errs), len(deliveries), what, errs[0])
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	// Whatever the interleaving, the end state is the same.
	for _, id := range held {
		if r := f.reservation(id); r.Status != domain.StatusReleased {
			t.Errorf("held order %s is %s, want RELEASED", id, r.Status)
		}
	}
	for _, id := range fresh {
		if r := f.reservation(id); r.Status != domain.StatusReserved {
			t.Errorf("new order %s is %s, want RESERVED", id, r.Status)
		}
	}
	for _, sku := range skus {
		f.mustStock(sku, initial-reserved[sku], reserved[sku])
	}
}

// cancelAcks returns the InventoryCancelled events queued for the order.
func (f *fixture) cancelAcks(orderID string) []events.InventoryCancelled {
	f.t.Helper()
	return testenv.Payloads[events.InventoryCancelled](f.t, f.Emitted(orderID))
}

// TestCancel: the order's cancel returns whatever the order holds, whatever
// step the saga reached, acknowledges once with what it returned, and never
// returns units twice — neither a second cancel request nor a failed
// shipment's release around it — while a reserve arriving after it holds
// nothing.
func TestCancel(t *testing.T) {
	tests := []struct {
		name       string
		before     func(f *fixture, orderID, sku string)
		after      func(f *fixture, orderID, sku string)
		wantStatus domain.Status
		wantAcked  int // items InventoryCancelled reports
	}{
		{"ReservedIsReturned", func(f *fixture, o, s string) { f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 2})) }, nil,
			domain.StatusReleased, 1},
		{"RejectedIsOnlyAcknowledged", func(f *fixture, o, s string) { f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 9})) }, nil,
			domain.StatusRejected, 0},
		{"CancelBeforeReserveLeavesTombstone", nil, func(f *fixture, o, s string) { f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 2})) },
			domain.StatusReleased, 0},
		{"ReleaseThenCancelReturnsOnce", func(f *fixture, o, s string) {
			f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 2}))
			f.MustDeliver(f.shipmentFailed(o))
		}, nil, domain.StatusReleased, 0},
		{"CancelThenReleaseReturnsOnce", func(f *fixture, o, s string) { f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 2})) },
			func(f *fixture, o, s string) { f.MustDeliver(f.shipmentFailed(o)) }, domain.StatusReleased, 1},
		{"SecondCancelRequestChangesNothing", func(f *fixture, o, s string) { f.MustDeliver(f.paid(o, events.Item{SKU: s, Quantity: 2})) },
			func(f *fixture, o, s string) { f.MustDeliver(testenv.CancelRequested(f.t, o)) }, domain.StatusReleased, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			sku, id := f.sku(5), f.order()
			if tt.before != nil {
				tt.before(f, id, sku)
			}
			f.MustDeliver(testenv.CancelRequested(f.t, id))
			if tt.after != nil {
				tt.after(f, id, sku)
			}
			f.mustStock(sku, 5, 0)
			if r := f.reservation(id); r.Status != tt.wantStatus {
				t.Fatalf("reservation = %+v, want %s", r, tt.wantStatus)
			}
			acks := f.cancelAcks(id)
			if len(acks) != 1 || len(acks[0].Items) != tt.wantAcked {
				t.Fatalf("InventoryCancelled = %+v, want one with %d items", acks, tt.wantAcked)
			}
		})
	}
}
