package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
	"github.com/jmoiron/sqlx"
)

// announce returns o's OrderCreated envelope, as the handler builds it.
func announce(t *testing.T, o domain.Order) events.Envelope {
	t.Helper()
	e, err := events.New(order.Name, o.ID, o.Created(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// keyed returns a new order for d under Idempotency-Key key, with the id
// the handler gives it.
// keyedCreate opens a test of Create under an idempotency key: the store
// on a database of the test's own, a fresh key, and a draft of quantity
// units for a fresh customer.
func keyedCreate(t *testing.T, quantity int64) (*sqlx.DB, *store.Store, string, domain.Draft) {
	t.Helper()
	db, st := testenv.Store(t, order.Schema, store.New)
	return db, st, testenv.ID("test"), ordertest.Draft(t, quantity)
}

func keyed(t *testing.T, d domain.Draft, key string) domain.Order {
	t.Helper()
	o, _ := ordertest.New(t, d)
	o.ID = domain.IdempotentOrderID(d.CustomerID, key)
	return o
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
