package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

func countOrders(t *testing.T, db *sqlx.DB, where string, arg any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM orders WHERE `+where, arg); err != nil {
		t.Fatalf("count orders: %v", err)
	}
	return n
}

func countOutbox(t *testing.T, db *sqlx.DB, orderIDs ...string) int {
	t.Helper()
	var n int
	for _, id := range orderIDs {
		var c int
		if err := db.Get(&c, `SELECT count(*) FROM outbox WHERE topic = $1 AND key = $2`, events.TopicOrder, []byte(id)); err != nil {
			t.Fatalf("count outbox: %v", err)
		}
		n += c
	}
	return n
}

// announce returns o's OrderCreated envelope, as the handler builds it.
func announce(t *testing.T, o domain.Order) events.Envelope {
	t.Helper()
	e, err := events.New(order.Name, o.ID, o.Created(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// keyedCreate opens a test of Create under an idempotency key: the store
// on a database of the test's own, a fresh key, and a draft of quantity
// units for a fresh customer.
func keyedCreate(t *testing.T, quantity int64) (*sqlx.DB, *store.Store, string, domain.Draft) {
	t.Helper()
	db, st := testenv.Store(t, order.Schema, store.New)
	return db, st, testenv.ID("test"), ordertest.Draft(t, quantity)
}

// keyed returns a new order for d under Idempotency-Key key, with the id
// the handler gives it.
func keyed(t *testing.T, d domain.Draft, key string) domain.Order {
	t.Helper()
	o, _ := ordertest.New(t, d)
	o.ID = domain.IdempotentOrderID(d.CustomerID, key)
	return o
}

func TestCreateWritesOrderAndItsEventInOneTransaction(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	ctx := context.Background()
	d := ordertest.Draft(t, 2)
	o, e := ordertest.New(t, d)

	got, replayed, err := st.Create(ctx, o, "", e)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if replayed {
		t.Fatal("first create reported as replayed")
	}
	if got.ID != o.ID || got.Status != domain.StatusPending || got.TotalAmount != 5000 ||
		got.Currency != "JPY" || got.ShippingAddress.Country != "JP" || got.CancelReason != "" {
		t.Fatalf("Create returned %+v", got)
	}
	if got.CreatedAt.IsZero() || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("created_at = %v, want a UTC time", got.CreatedAt)
	}

	read, err := st.Order(ctx, o.ID)
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if read.ID != o.ID || len(read.Items) != 1 || read.Items[0] != d.Items[0] || read.RequestHash != d.Hash() {
		t.Fatalf("Order = %+v", read)
	}

	if n := countOutbox(t, db, o.ID); n != 1 {
		t.Fatalf("outbox rows for order = %d, want 1", n)
	}
	var value []byte
	if err := db.Get(&value, `SELECT value FROM outbox WHERE key = $1`, []byte(o.ID)); err != nil {
		t.Fatal(err)
	}
	env, payload, err := events.Decode(value)
	if err != nil {
		t.Fatalf("outbox value does not decode: %v", err)
	}
	p, ok := payload.(events.OrderCreated)
	if !ok {
		t.Fatalf("outbox value carries a %T, want OrderCreated", payload)
	}
	if env.ID != e.ID || env.OrderID != o.ID || env.Source != order.Name || p.TotalAmount != 5000 || p.CustomerID != d.CustomerID {
		t.Fatalf("outbox event = %+v %+v", env, p)
	}

	// Both rows carry the id of the transaction that wrote them: equal ids
	// prove the order and its event were committed together.
	var sameTx bool
	if err := db.Get(&sameTx, `
		SELECT o.xmin = xid(x.txid)
		FROM orders o, outbox x
		WHERE o.id = $1 AND x.key = $2`, o.ID, []byte(o.ID)); err != nil {
		t.Fatal(err)
	}
	if !sameTx {
		t.Fatal("order and outbox row were written by different transactions")
	}
}

func TestCreateWithoutKeyAlwaysCreates(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	d := ordertest.Draft(t, 1)
	o1, e1 := ordertest.New(t, d)
	o2, e2 := ordertest.New(t, d)
	for _, c := range []struct {
		o domain.Order
		e events.Envelope
	}{{o1, e1}, {o2, e2}} {
		if _, replayed, err := st.Create(context.Background(), c.o, "", c.e); err != nil || replayed {
			t.Fatalf("Create = replayed %v, %v", replayed, err)
		}
	}
	if n := countOrders(t, db, "customer_id = $1", d.CustomerID); n != 2 {
		t.Fatalf("orders = %d, want 2: without a key, equal requests are distinct orders", n)
	}
}

func TestCreateConcurrentSameKeyCreatesOneOrderAndOneSaga(t *testing.T) {
	db, st, key, d := keyedCreate(t, 3)
	ctx := context.Background()

	const racers = 20
	type result struct {
		candidate string
		got       domain.Order
		replayed  bool
		err       error
	}
	results := make([]result, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		// Each request generates its own id, as the handler does; only
		// one of them may survive.
		o, e := ordertest.New(t, d)
		results[i].candidate = o.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i].got, results[i].replayed, results[i].err = st.Create(ctx, o, key, e)
		}()
	}
	close(start)
	wg.Wait()

	created := 0
	var candidates []string
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("racer %d: %v", i, r.err)
		}
		if r.got.ID != results[0].got.ID {
			t.Fatalf("racer %d got order %s, racer 0 got %s", i, r.got.ID, results[0].got.ID)
		}
		if !r.replayed {
			created++
		}
		candidates = append(candidates, r.candidate)
	}
	if created != 1 {
		t.Fatalf("%d racers created the order, want exactly 1", created)
	}
	if n := countOrders(t, db, "idempotency_key = $1", key); n != 1 {
		t.Fatalf("orders with the key = %d, want 1", n)
	}
	if n := countOrders(t, db, "customer_id = $1", d.CustomerID); n != 1 {
		t.Fatalf("orders of the customer = %d, want 1", n)
	}
	if n := countOutbox(t, db, candidates...); n != 1 {
		t.Fatalf("OrderCreated rows over all candidate ids = %d, want 1 (one saga)", n)
	}
	if n := countOutbox(t, db, results[0].got.ID); n != 1 {
		t.Fatalf("OrderCreated rows for the winning order = %d, want 1", n)
	}
}

func TestCreateSameKeyDifferentRequestIsRejected(t *testing.T) {
	db, st, key, d := keyedCreate(t, 1)
	ctx := context.Background()

	first, e := ordertest.New(t, d)
	if _, _, err := st.Create(ctx, first, key, e); err != nil {
		t.Fatalf("first Create: %v", err)
	}

	// A replay of the same request returns the first order.
	again, e := ordertest.New(t, d)
	got, replayed, err := st.Create(ctx, again, key, e)
	if err != nil || !replayed || got.ID != first.ID {
		t.Fatalf("replay = %s replayed %v, %v; want %s replayed", got.ID, replayed, err, first.ID)
	}

	// Another request under the same key is refused.
	changed := d
	changed.Items = []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}}
	changed.TotalAmount = 5000
	other, e := ordertest.New(t, changed)
	_, _, err = st.Create(ctx, other, key, e)
	var fe *fault.Error
	if !errors.Is(err, fault.Invalid) || !errors.As(err, &fe) || !strings.Contains(fe.Detail(), "Idempotency-Key") || strings.Contains(fe.Detail(), first.ID) {
		t.Fatalf("Create with reused key = %v, want a fault.Invalid naming the Idempotency-Key, not the order it belongs to", err)
	}
	if n := countOrders(t, db, "idempotency_key = $1", key); n != 1 {
		t.Fatalf("orders with the key = %d, want 1", n)
	}
	if n := countOutbox(t, db, first.ID, again.ID, other.ID); n != 1 {
		t.Fatalf("OrderCreated rows = %d, want 1", n)
	}
}

func TestCreateKeyIsScopedPerCustomer(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	ctx := context.Background()
	key := testenv.ID("test")
	d1, d2 := ordertest.Draft(t, 1), ordertest.Draft(t, 1)
	var ids []string
	for _, d := range []domain.Draft{d1, d2} {
		o := keyed(t, d, key)
		got, replayed, err := st.Create(ctx, o, key, announce(t, o))
		if err != nil || replayed {
			t.Fatalf("Create for %s = replayed %v, %v; want a new order", d.CustomerID, replayed, err)
		}
		if got.ID != domain.IdempotentOrderID(d.CustomerID, key) {
			t.Fatalf("order id = %s, want the one derived from (%s, %s)", got.ID, d.CustomerID, key)
		}
		ids = append(ids, got.ID)
	}
	if ids[0] == ids[1] {
		t.Fatal("two customers' orders under one key share an id")
	}
	if n := countOrders(t, db, "idempotency_key = $1", key); n != 2 {
		t.Fatalf("orders with the key = %d, want 2: one per customer", n)
	}
	if n := countOutbox(t, db, ids...); n != 2 {
		t.Fatalf("OrderCreated rows = %d, want 2: two sagas", n)
	}
}

func TestCreateReplayReturnsTheDerivedID(t *testing.T) {
	db, st, key, d := keyedCreate(t, 2)
	ctx := context.Background()
	want := domain.IdempotentOrderID(d.CustomerID, key)

	first := keyed(t, d, key)
	got, replayed, err := st.Create(ctx, first, key, announce(t, first))
	if err != nil || replayed || got.ID != want {
		t.Fatalf("first Create = %s replayed %v, %v; want %s", got.ID, replayed, err, want)
	}
	// The retry after a crash — the first response lost — builds the same
	// order, with the same id and a new OrderCreated envelope.
	again := keyed(t, d, key)
	got, replayed, err = st.Create(ctx, again, key, announce(t, again))
	if err != nil || !replayed || got.ID != want {
		t.Fatalf("replay = %s replayed %v, %v; want %s replayed", got.ID, replayed, err, want)
	}
	if n := countOrders(t, db, "customer_id = $1", d.CustomerID); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	if n := countOutbox(t, db, want); n != 1 {
		t.Fatalf("OrderCreated rows = %d, want 1", n)
	}
}

func TestCreateRejectsMismatchedAnnouncement(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	o, _ := ordertest.New(t, ordertest.Draft(t, 1))
	_, wrong := ordertest.New(t, ordertest.Draft(t, 1))
	if _, _, err := st.Create(context.Background(), o, "", wrong); err == nil {
		t.Fatal("Create accepted the OrderCreated of another order")
	}
	if n := countOrders(t, db, "id = $1", o.ID); n != 0 {
		t.Fatalf("orders = %d, want 0", n)
	}
}

func TestOrderNotFound(t *testing.T) {
	_, st := testenv.Store(t, order.Schema, store.New)
	for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
		if _, err := st.Order(context.Background(), id); !errors.Is(err, fault.NotFound) {
			t.Errorf("Order(%q) = %v, want fault.NotFound", id, err)
		}
	}
}

func TestLockOrderAndSetStatus(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	ctx := context.Background()
	o, e := ordertest.New(t, ordertest.Draft(t, 1))
	if _, _, err := st.Create(ctx, o, "", e); err != nil {
		t.Fatal(err)
	}

	// The reaction's clock (participant.Tx.Now), not the database's, stamps
	// the change.
	at := time.Now().Add(time.Minute).Truncate(time.Microsecond).UTC()
	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
			got, err := store.LockOrder(ctx, tx, id)
			if err != nil || got != nil {
				t.Errorf("LockOrder(%q) = %v, %v; want nil, nil", id, got, err)
			}
		}
		locked, err := store.LockOrder(ctx, tx, o.ID)
		if err != nil {
			return err
		}
		if locked == nil || locked.Status != domain.StatusPending {
			t.Fatalf("LockOrder = %+v", locked)
		}
		return store.SetState(ctx, tx, o.ID, domain.State{Status: domain.StatusCancelled, Reason: events.ReasonOutOfStock}, at)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Order(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.StatusCancelled || got.CancelReason != events.ReasonOutOfStock || !got.UpdatedAt.Equal(at) || !got.UpdatedAt.After(got.CreatedAt) {
		t.Fatalf("after SetState: %+v", got)
	}
}

// created stores a new PENDING order as POST /orders does and returns it.
func created(t *testing.T, st *store.Store) domain.Order {
	t.Helper()
	o, e := ordertest.New(t, ordertest.Draft(t, 1))
	got, _, err := st.Create(context.Background(), o, "", e)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// cancelRequests returns the reasons of the OrderCancelRequested events
// queued for the order.
func cancelRequests(t *testing.T, db *sqlx.DB, id string) []string {
	t.Helper()
	var reasons []string
	for _, e := range testenv.Emitted(t, db, id, events.TopicOrder, order.Name) {
		if e.Type == events.TypeOrderCancelRequested {
			var p events.OrderCancelRequested
			testenv.Payload(t, e, &p)
			reasons = append(reasons, p.Reason)
		}
	}
	return reasons
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	db, st := testenv.Store(t, order.Schema, store.New)

	t.Run("PendingBecomesCancellingAndQueuesOneRequest", func(t *testing.T) {
		o := created(t, st)
		got, err := st.Cancel(ctx, o.ID, events.ReasonCustomerCancelled, order.Name, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != domain.StatusCancelling || got.CancelReason != events.ReasonCustomerCancelled {
			t.Fatalf("Cancel = %s %q, want CANCELLING customer_cancelled", got.Status, got.CancelReason)
		}
		// A repeated cancel, even for another reason, answers the same
		// and queues nothing more.
		again, err := st.Cancel(ctx, o.ID, events.ReasonTimeout, order.Name, time.Now())
		if err != nil || again.Status != domain.StatusCancelling || again.CancelReason != events.ReasonCustomerCancelled {
			t.Fatalf("repeated Cancel = %+v, %v", again, err)
		}
		if r := cancelRequests(t, db, o.ID); len(r) != 1 || r[0] != events.ReasonCustomerCancelled {
			t.Fatalf("cancel requests queued = %v, want one customer_cancelled", r)
		}
	})
	t.Run("TerminalIsAConflict", func(t *testing.T) {
		for _, end := range []domain.State{{Status: domain.StatusCompleted}, {Status: domain.StatusCancelled, Reason: events.ReasonOutOfStock}} {
			o := created(t, st)
			if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error { return store.SetState(ctx, tx, o.ID, end, time.Now()) }); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Cancel(ctx, o.ID, events.ReasonCustomerCancelled, order.Name, time.Now()); !errors.Is(err, fault.Conflict) {
				t.Fatalf("Cancel of a %s order = %v, want fault.Conflict", end.Status, err)
			}
			if r := cancelRequests(t, db, o.ID); len(r) != 0 {
				t.Fatalf("cancel requests queued for a %s order: %v", end.Status, r)
			}
		}
	})
	t.Run("UnknownIsNotFound", func(t *testing.T) {
		if _, err := st.Cancel(ctx, uuid.NewString(), events.ReasonCustomerCancelled, order.Name, time.Now()); !errors.Is(err, fault.NotFound) {
			t.Fatalf("Cancel of no order = %v, want fault.NotFound", err)
		}
	})
}

// TestTimeOut: only PENDING orders older than the age are cancelled,
// with reason timeout; concurrent sweeps (several order instances) request
// each cancel once between them.
func TestTimeOut(t *testing.T) {
	ctx := context.Background()
	db, st := testenv.Store(t, order.Schema, store.New)
	var old []string
	for range 12 {
		old = append(old, created(t, st).ID)
	}
	cancelling := created(t, st)
	if _, err := st.Cancel(ctx, cancelling.ID, events.ReasonCustomerCancelled, order.Name, time.Now()); err != nil {
		t.Fatal(err)
	}
	completed := created(t, st)
	if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		return store.SetState(ctx, tx, completed.ID, domain.State{Status: domain.StatusCompleted}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}

	// Two hours old by the database's clock, which measures the age.
	if _, err := db.Exec(`UPDATE orders SET created_at = created_at - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	// Before the deadline, nothing times out.
	if ids, err := st.TimeOut(ctx, 3*time.Hour, 100, order.Name, time.Now()); err != nil || len(ids) != 0 {
		t.Fatalf("TimeOut before the deadline = %v, %v; want none", ids, err)
	}

	young := created(t, st) // younger than the age below
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all []string
	)
	for range 4 {
		wg.Go(func() {
			for {
				ids, err := st.TimeOut(ctx, time.Hour, 3, order.Name, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
				if len(ids) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(all) != len(old) {
		t.Fatalf("sweeps cancelled %d orders, want the %d old PENDING ones: %v", len(all), len(old), all)
	}
	ordertest.WantTimedOut(t, st, old...)
	for _, id := range old {
		if r := cancelRequests(t, db, id); len(r) != 1 || r[0] != events.ReasonTimeout {
			t.Errorf("order %s cancel requests = %v, want one timeout", id, r)
		}
	}
	for id, want := range map[string]domain.Status{cancelling.ID: domain.StatusCancelling, completed.ID: domain.StatusCompleted, young.ID: domain.StatusPending} {
		o, err := st.Order(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != want || o.CancelReason == events.ReasonTimeout {
			t.Errorf("order %s = %s %q, want %s and no timeout", id, o.Status, o.CancelReason, want)
		}
	}
}
