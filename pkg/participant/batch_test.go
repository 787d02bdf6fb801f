package participant_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
)

// recorder is a service whose reaction to InventoryReserved records the
// event in applied, in order, and then does what the event's country
// asks: "XX" fails permanently after writing, until the cause is fixed (a
// row in the table fixed), "DB" fails as a lost
// connection would (retried), "D1" fails as a deadlock would, on its first
// attempt only.
func recorder(t *testing.T) (participant.Spec, *sqlx.DB) {
	t.Helper()
	db := testenv.DB(t)
	if _, err := db.Exec(`CREATE TABLE applied (seq bigserial PRIMARY KEY, event_id uuid NOT NULL, order_id text NOT NULL);
		CREATE TABLE fixed (ok bool)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	spec := participant.Spec{
		Name:     "recorder",
		Produces: events.TopicShipping,
		Reactions: []participant.Reaction{
			participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReserved) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO applied (event_id, order_id) VALUES ($1, $2)`, e.ID, e.OrderID); err != nil {
					return err
				}
				switch p.ShippingAddress.Country {
				case "XX":
					var fixed bool
					if err := sqlx.GetContext(ctx, tx, &fixed, `SELECT EXISTS (SELECT FROM fixed)`); err != nil || !fixed {
						return fmt.Errorf("refused: %w", errors.Join(events.ErrInvalid, err))
					}
				case "DB":
					return errors.New("driver: bad connection")
				case "D1":
					mu.Lock()
					attempts[e.ID]++
					first := attempts[e.ID] == 1
					mu.Unlock()
					if first {
						return &pq.Error{Code: "40P01", Message: "deadlock detected"}
					}
				}
				return tx.Emit(ctx, events.ShipmentScheduled{Country: p.ShippingAddress.Country})
			}),
		},
	}
	return spec, db
}

// reserved is an InventoryReserved event of order, shipping to country.
func reserved(t *testing.T, order, country string) *sarama.ConsumerMessage {
	t.Helper()
	return testenv.Message(t, testenv.Event(t, order, events.InventoryReserved{
		Items: []events.Item{{SKU: "s", Quantity: 1, UnitPrice: 1}}, ShippingAddress: events.Address{Country: country},
	}))
}

func eventID(t *testing.T, m *sarama.ConsumerMessage) string {
	t.Helper()
	e, err := events.DecodeEnvelope(m.Value)
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// appliedIDs lists the events the reaction applied (and committed), in
// the order it applied them.
func appliedIDs(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var ids []string
	if err := db.Select(&ids, `SELECT event_id FROM applied ORDER BY seq`); err != nil {
		t.Fatal(err)
	}
	return ids
}

func markedIDs(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var ids []string
	if err := db.Select(&ids, `SELECT event_id FROM processed_events WHERE consumer = 'recorder' ORDER BY event_id`); err != nil {
		t.Fatal(err)
	}
	return ids
}

func sorted(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

// consume hands msgs to h as the consumer does: a failure ends its batch
// and is dead-lettered, and the messages after it are handed over again.
// It returns the failures, in order.
func consume(t *testing.T, spec participant.Spec, db *sqlx.DB, h consumer.BatchHandler, msgs []*sarama.ConsumerMessage) ([]*sarama.ConsumerMessage, error) {
	t.Helper()
	var failed []*sarama.ConsumerMessage
	for len(msgs) > 0 {
		f, err := h.HandleBatch(context.Background(), msgs)
		if err != nil {
			return failed, err
		}
		if f == nil {
			return failed, nil
		}
		if !consumer.IsPermanent(f.Err) {
			t.Errorf("failure %v is not permanent", f.Err)
		}
		if err := spec.DeadLetterTo(db)(context.Background(), f.Msg, f.Err); err != nil {
			t.Fatal(err)
		}
		failed = append(failed, f.Msg)
		msgs = msgs[slices.Index(msgs, f.Msg)+1:]
	}
	return failed, nil
}

// parkedRows lists the messages parked for an order: failed ones with their
// reason, the ones parked behind them without, in the order they were
// parked.
func parkedRows(t *testing.T, db *sqlx.DB, order string) (offsets []int64, failed []bool) {
	t.Helper()
	var rows []struct {
		Offset int64 `db:"offset"`
		Failed bool  `db:"failed"`
	}
	if err := db.Select(&rows, `SELECT "offset", reason IS NOT NULL AS failed FROM parked_events WHERE park_key = $1 AND resolved_at IS NULL ORDER BY seq`, order); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		offsets, failed = append(offsets, r.Offset), append(failed, r.Failed)
	}
	return offsets, failed
}

func TestBatchAppliesEachEventOnceInOrder(t *testing.T) {
	order := uuid.NewString()
	a, b, c := reserved(t, order, "JP"), reserved(t, order, "US"), reserved(t, uuid.NewString(), "GB")
	poisoned := uuid.NewString() // an order whose first event fails
	p1, p2 := reserved(t, poisoned, "XX"), reserved(t, poisoned, "JP")
	junk := &sarama.ConsumerMessage{Topic: events.TopicInventory, Key: []byte("k"), Value: []byte("{not json")}
	poison := reserved(t, uuid.NewString(), "XX")
	dbDown := reserved(t, uuid.NewString(), "DB")
	deadlockOnce := reserved(t, uuid.NewString(), "D1")
	shipments := func(t *testing.T, db *sqlx.DB) int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1`, events.TopicShipping); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		name        string
		before      []*sarama.ConsumerMessage // handled in an earlier batch
		batch       []*sarama.ConsumerMessage
		retry       bool                      // the batch fails as a whole
		wantFailed  []*sarama.ConsumerMessage // to dead-letter
		wantApplied []*sarama.ConsumerMessage // by this batch, in order
		wantMarked  []*sarama.ConsumerMessage // in the end
		wantParked  []*sarama.ConsumerMessage // parked behind a failure of their order
	}{
		{name: "InOffsetOrderOneOrderAfterAnother",
			batch: []*sarama.ConsumerMessage{a, b, c}, wantApplied: []*sarama.ConsumerMessage{a, b, c}, wantMarked: []*sarama.ConsumerMessage{a, b, c}},
		{name: "CopiesInOneBatchApplyOnce",
			batch: []*sarama.ConsumerMessage{a, a, c, a}, wantApplied: []*sarama.ConsumerMessage{a, c}, wantMarked: []*sarama.ConsumerMessage{a, c}},
		{name: "AlreadyProcessedAreSkipped", before: []*sarama.ConsumerMessage{a},
			batch: []*sarama.ConsumerMessage{a, c}, wantApplied: []*sarama.ConsumerMessage{c}, wantMarked: []*sarama.ConsumerMessage{a, c}},
		{name: "UndecodableMessageIsLeftOutAlone",
			batch: []*sarama.ConsumerMessage{a, junk, c}, wantFailed: []*sarama.ConsumerMessage{junk}, wantApplied: []*sarama.ConsumerMessage{a, c}, wantMarked: []*sarama.ConsumerMessage{a, c}},
		{name: "PermanentReactionFailureRollsBackOnlyItsEvent",
			batch: []*sarama.ConsumerMessage{a, poison, c}, wantFailed: []*sarama.ConsumerMessage{poison}, wantApplied: []*sarama.ConsumerMessage{a, c}, wantMarked: []*sarama.ConsumerMessage{a, c}},
		// The failure parks its order: the order's later events, in this
		// batch or the next, are parked behind it, not applied; other
		// orders flow.
		{name: "FailureParksItsOrderOthersFlow",
			batch: []*sarama.ConsumerMessage{p1, a, p2, c}, wantFailed: []*sarama.ConsumerMessage{p1}, wantApplied: []*sarama.ConsumerMessage{a, c}, wantMarked: []*sarama.ConsumerMessage{a, c}, wantParked: []*sarama.ConsumerMessage{p2}},
		{name: "ParkedBehindInALaterBatch", before: []*sarama.ConsumerMessage{p1},
			batch: []*sarama.ConsumerMessage{a, p2}, wantFailed: []*sarama.ConsumerMessage{p1}, wantApplied: []*sarama.ConsumerMessage{a}, wantMarked: []*sarama.ConsumerMessage{a}, wantParked: []*sarama.ConsumerMessage{p2}},
		{name: "TransientFailureRetriesTheWholeBatch",
			batch: []*sarama.ConsumerMessage{a, dbDown, c}, retry: true},
		// A deadlock between batches is broken by applying the batch again
		// one event per transaction, in order.
		{name: "LockConflictSplitsTheBatch",
			batch: []*sarama.ConsumerMessage{a, deadlockOnce, c}, wantApplied: []*sarama.ConsumerMessage{a, deadlockOnce, c}, wantMarked: []*sarama.ConsumerMessage{a, deadlockOnce, c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, db := recorder(t)
			h := spec.BatchHandler(db, testenv.Logger(t))
			var gotFailed []*sarama.ConsumerMessage
			if tt.before != nil {
				f, err := consume(t, spec, db, h, tt.before)
				if err != nil {
					t.Fatal(err)
				}
				gotFailed = f
			}
			skip := len(appliedIDs(t, db))
			failed, err := consume(t, spec, db, h, tt.batch)
			if tt.retry {
				if err == nil || consumer.IsPermanent(err) {
					t.Fatalf("err = %v, want a retryable error", err)
				}
				if got := appliedIDs(t, db); len(got) != skip || len(markedIDs(t, db)) != 0 || shipments(t, db) != 0 {
					t.Fatalf("a failed batch left %v applied, %v marked, %d events queued; want nothing", got, markedIDs(t, db), shipments(t, db))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotFailed = append(gotFailed, failed...)
			if !slices.Equal(gotFailed, tt.wantFailed) {
				t.Errorf("failed %d messages, want %d", len(gotFailed), len(tt.wantFailed))
			}
			var want, wantMarks []string
			for _, m := range tt.wantApplied {
				want = append(want, eventID(t, m))
			}
			for _, m := range tt.wantMarked {
				wantMarks = append(wantMarks, eventID(t, m))
			}
			if got := appliedIDs(t, db)[skip:]; !slices.Equal(got, want) {
				t.Errorf("applied %v, want %v", got, want)
			}
			if got := markedIDs(t, db); !slices.Equal(got, sorted(wantMarks...)) {
				t.Errorf("marked %v, want %v", got, sorted(wantMarks...))
			}
			if got := shipments(t, db); got != len(tt.wantMarked) {
				t.Errorf("%d ShipmentScheduled queued, want one per applied event (%d)", got, len(tt.wantMarked))
			}
			for _, f := range tt.wantFailed {
				if f == junk {
					// Refused before it was routed: kept, but parking
					// nothing (TestOnlyARoutedEventsFailureParksItsOrder).
					if offsets, _ := parkedRows(t, db, string(f.Key)); len(offsets) != 0 {
						t.Errorf("undecodable message parked its key: %v", offsets)
					}
					continue
				}
				offsets, failed := parkedRows(t, db, string(f.Key))
				want, wantFailed := []int64{f.Offset}, []bool{true}
				for _, h := range tt.wantParked {
					if string(h.Key) == string(f.Key) {
						want, wantFailed = append(want, h.Offset), append(wantFailed, false)
					}
				}
				if !slices.Equal(offsets, want) || !slices.Equal(failed, wantFailed) {
					t.Errorf("order %s parked offsets %v (failed %v), want %v (failed %v): the failure, then what it holds, in order", f.Key, offsets, failed, want, wantFailed)
				}
			}
		})
	}
}

// TestConcurrentBatchesApplyOnce: the same batch handed to several
// instances at once — members briefly owning one partition during a
// rebalance — applies each event once.
func TestConcurrentBatchesApplyOnce(t *testing.T) {
	spec, db := recorder(t)
	var batch []*sarama.ConsumerMessage
	for range 10 {
		batch = append(batch, reserved(t, uuid.NewString(), "JP"))
	}
	instances := make([]func() error, 8)
	for i := range instances {
		// A handler each: eight instances, whose batches only the
		// database keeps apart.
		h := spec.BatchHandler(db, testenv.Logger(t))
		instances[i] = func() error {
			var err error
			for range 10 { // a consumer retries a deadlock or a serialization failure
				if _, err = h.HandleBatch(context.Background(), batch); err == nil {
					break
				}
			}
			return err
		}
	}
	testenv.AllSucceed(t, instances...)
	if got := appliedIDs(t, db); len(got) != len(batch) {
		t.Fatalf("%d applications of %d events by 8 concurrent batches, want one each", len(got), len(batch))
	}
}

// TestPermanentFailuresDoNotReapplyTheBatchOverAndOver: each permanent
// failure rolls the batch back; what came before it is committed at once
// and the rest is handed over again, so no reaction runs more than twice
// however many fail — and a copy of a failed event, even after a deadlock
// split the batch, is parked behind it, not a second dead letter.
func TestPermanentFailuresDoNotReapplyTheBatchOverAndOver(t *testing.T) {
	db := testenv.DB(t)
	var mu sync.Mutex
	runs := map[string]int{}
	deadlocked := false
	spec := participant.Spec{
		Name:     "counter",
		Produces: events.TopicShipping,
		Reactions: []participant.Reaction{
			participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReserved) error {
				mu.Lock()
				runs[e.ID]++
				first := !deadlocked
				mu.Unlock()
				switch p.ShippingAddress.Country {
				case "XX":
					return fmt.Errorf("refused: %w", events.ErrInvalid)
				case "D1":
					if first {
						mu.Lock()
						deadlocked = true
						mu.Unlock()
						return &pq.Error{Code: "40P01", Message: "deadlock detected"}
					}
				}
				return nil
			}),
		},
	}
	h := spec.BatchHandler(db, testenv.Logger(t))

	var batch []*sarama.ConsumerMessage
	for i := range 12 {
		country := "JP"
		if i%2 == 1 {
			country = "XX" // every other one fails
		}
		batch = append(batch, reserved(t, uuid.NewString(), country))
	}
	failed, err := consume(t, spec, db, h, batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 6 {
		t.Fatalf("%d failures, want the 6 poisoned", len(failed))
	}
	for id, n := range runs {
		if n > 2 {
			t.Errorf("event %s reacted to %d times, want at most 2", id, n)
		}
	}

	// A deadlock splits the batch; the poison's copy stays a duplicate.
	poison := reserved(t, uuid.NewString(), "XX")
	failed, err = consume(t, spec, db, h, []*sarama.ConsumerMessage{reserved(t, uuid.NewString(), "D1"), poison, poison})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 {
		t.Fatalf("%d failures after a split, want 1 (the poison, its copy parked behind it)", len(failed))
	}
}
