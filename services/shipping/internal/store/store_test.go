package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/shipping/internal/domain"
	"github.com/choreo-saga/choreo/services/shipping/internal/saga"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

var served = map[string]bool{"JP": true, "US": true}

// testDB returns a database of the test's own with the shipping tables in
// place, dropped when the test ends.
func testDB(t *testing.T) *sqlx.DB {
	t.Helper()
	return testenv.DB(t, pg.Schema{Name: saga.Service, FS: store.Migrations, Dir: "migrations"})
}

// reserved returns an InventoryReserved for a fresh order bound for country.
func reserved(t *testing.T, orderID, country string) events.Envelope {
	t.Helper()
	e, err := events.New("inventory", orderID, events.InventoryReserved{
		Items:           []events.Item{{SKU: "sku-1", Quantity: 2, UnitPrice: 1500}},
		ShippingAddress: events.Address{Country: country, PostalCode: "100-0001"},
	}, time.Now())
	if err != nil {
		t.Fatalf("new event: %v", err)
	}
	return e
}

// deliver applies e the way the consumer does: its route and the
// processed_events marker in one transaction. It reports whether the route ran.
func deliver(ctx context.Context, db *sqlx.DB, e events.Envelope) (bool, error) {
	route := saga.Routes(time.Now, served)[e.Type]
	return idem.Handle(ctx, db, saga.Service, e.ID, func(tx *sqlx.Tx) error {
		return route(ctx, tx, e)
	})
}

type outboxRow struct {
	Topic string `db:"topic"`
	Value []byte `db:"value"`
	// SameTx is whether the row was written by the transaction that last
	// wrote the order's shipment.
	SameTx bool `db:"same_tx"`
}

// outboxRows returns every outbox row keyed by orderID, oldest first.
func outboxRows(t *testing.T, db *sqlx.DB, orderID string) []outboxRow {
	t.Helper()
	var rows []outboxRow
	err := db.SelectContext(context.Background(), &rows, `
		SELECT o.topic, o.value,
		       coalesce((SELECT s.xmin = o.txid::xid FROM shipments s WHERE s.order_id = $1), false) AS same_tx
		FROM outbox o WHERE o.key = $2 ORDER BY o.id`, orderID, []byte(orderID))
	if err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	return rows
}

func TestScheduleWritesShipmentAndOneEventInOneTransaction(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	st := store.New(db)
	orderID := uuid.NewString()

	ran, err := deliver(ctx, db, reserved(t, orderID, "jp"))
	if err != nil || !ran {
		t.Fatalf("deliver = %v, %v; want true, nil", ran, err)
	}

	got, err := st.Shipment(ctx, orderID)
	if err != nil {
		t.Fatalf("Shipment: %v", err)
	}
	want := domain.Shipment{OrderID: orderID, Status: domain.StatusScheduled, Country: "JP"}
	if got != want {
		t.Fatalf("shipment = %+v, want %+v", got, want)
	}
	rows := outboxRows(t, db, orderID)
	if len(rows) != 1 {
		t.Fatalf("%d outbox rows, want 1", len(rows))
	}
	if rows[0].Topic != events.TopicShipping {
		t.Fatalf("outbox topic = %q, want %q", rows[0].Topic, events.TopicShipping)
	}
	if !rows[0].SameTx {
		t.Fatal("outbox row and shipment were written by different transactions")
	}
	e, err := events.Decode(rows[0].Value)
	if err != nil {
		t.Fatalf("decode outbox value: %v", err)
	}
	var p events.ShipmentScheduled
	if err := e.Decode(&p); err != nil {
		t.Fatalf("decode payload: %v", err)
	}
	if e.OrderID != orderID || e.Source != saga.Service || p.Country != "JP" {
		t.Fatalf("event = %+v %+v, want ShipmentScheduled{JP} for %s from %s", e, p, orderID, saga.Service)
	}
}

func TestUnservedCountryFailsWithReason(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	orderID := uuid.NewString()

	if _, err := deliver(ctx, db, reserved(t, orderID, "BR")); err != nil {
		t.Fatalf("deliver: %v", err)
	}

	got, err := store.New(db).Shipment(ctx, orderID)
	if err != nil {
		t.Fatalf("Shipment: %v", err)
	}
	want := domain.Shipment{OrderID: orderID, Status: domain.StatusFailed, Country: "BR", Reason: events.ReasonShippingUnavailable}
	if got != want {
		t.Fatalf("shipment = %+v, want %+v", got, want)
	}
	rows := outboxRows(t, db, orderID)
	if len(rows) != 1 || rows[0].Topic != events.TopicShipping || !rows[0].SameTx {
		t.Fatalf("outbox rows = %+v, want one on %s from the shipment's transaction", rows, events.TopicShipping)
	}
	e, err := events.Decode(rows[0].Value)
	if err != nil {
		t.Fatalf("decode outbox value: %v", err)
	}
	var p events.ShipmentFailed
	if err := e.Decode(&p); err != nil {
		t.Fatalf("decode payload: %v", err)
	}
	if p != (events.ShipmentFailed{Country: "BR", Reason: events.ReasonShippingUnavailable}) {
		t.Fatalf("payload = %+v", p)
	}
}

func TestDuplicateDecisionWritesNothingMore(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	orderID := uuid.NewString()
	first := reserved(t, orderID, "US")
	if _, err := deliver(ctx, db, first); err != nil {
		t.Fatalf("first delivery: %v", err)
	}

	t.Run("RedeliveredEventIsSkipped", func(t *testing.T) {
		ran, err := deliver(ctx, db, first)
		if err != nil || ran {
			t.Fatalf("redelivery = %v, %v; want false, nil", ran, err)
		}
		if n := len(outboxRows(t, db, orderID)); n != 1 {
			t.Fatalf("%d outbox rows, want 1", n)
		}
	})
	t.Run("SecondReservationIsSkipped", func(t *testing.T) {
		// A new event id passes de-duplication; the existing shipment
		// makes the domain skip, even towards another country.
		ran, err := deliver(ctx, db, reserved(t, orderID, "BR"))
		if err != nil || !ran {
			t.Fatalf("second reservation = %v, %v; want true, nil", ran, err)
		}
		if n := len(outboxRows(t, db, orderID)); n != 1 {
			t.Fatalf("%d outbox rows, want 1", n)
		}
		got, err := store.New(db).Shipment(ctx, orderID)
		if err != nil || got.Status != domain.StatusScheduled || got.Country != "US" {
			t.Fatalf("shipment = %+v, %v; want SCHEDULED to US", got, err)
		}
	})
}

func TestConcurrentReservationsScheduleOnce(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	orderID := uuid.NewString()
	same := reserved(t, orderID, "JP")

	// Half the goroutines deliver the same event, half a fresh one for the
	// same order: processed_events stops the first kind, the shipments
	// primary key (or the lock on the row) the second.
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		e := same
		if i%2 == 1 {
			e = reserved(t, orderID, "JP")
		}
		wg.Go(func() {
			_, err := deliver(ctx, db, e)
			// The loser of the insert race rolls back on the primary key;
			// the consumer would retry it and then skip.
			var pqErr *pq.Error
			if err != nil && !(errors.As(err, &pqErr) && pqErr.Code == "23505") {
				t.Errorf("deliver: %v", err)
			}
		})
	}
	wg.Wait()

	if rows := outboxRows(t, db, orderID); len(rows) != 1 {
		t.Fatalf("%d outbox rows after concurrent deliveries, want 1", len(rows))
	}
}

func TestRolledBackDecisionLeavesNothing(t *testing.T) {
	ctx := context.Background()
	db := testDB(t)
	orderID := uuid.NewString()
	e := reserved(t, orderID, "JP")
	boom := errors.New("crash after the route")

	err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if err := saga.Routes(time.Now, served)[e.Type](ctx, tx, e); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want %v", err, boom)
	}
	if _, err := store.New(db).Shipment(ctx, orderID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Shipment after rollback = %v, want ErrNotFound", err)
	}
	if n := len(outboxRows(t, db, orderID)); n != 0 {
		t.Fatalf("%d outbox rows after rollback, want 0", n)
	}
}
