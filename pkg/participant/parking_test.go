package participant_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/park"
)

// TestDeadLetterOfAnyKeyIsKept: a message whose key PostgreSQL text cannot
// hold is dead-lettered and kept (parking nothing), never retried
// forever.
func TestDeadLetterOfAnyKeyIsKept(t *testing.T) {
	db := testenv.DB(t)
	for i, key := range [][]byte{{0xff, 0xfe, 'x'}, []byte("a\x00b")} {
		m := &sarama.ConsumerMessage{Topic: "orders", Offset: int64(i), Timestamp: time.Now(), Key: key, Value: []byte("garbage")}
		if err := park.DeadLetter(db, "x.dlq", "payment")(context.Background(), m, context.DeadlineExceeded); err != nil {
			t.Fatalf("dead-letter of a message keyed %q: %v", key, err)
		}
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM parked_events WHERE park_key IS NULL AND msg_key IS NOT NULL`); err != nil || n != 2 {
		t.Fatalf("%d rows kept with their raw key and no park key (err %v), want 2", n, err)
	}
}

// TestOnlyARoutedEventsFailureParksItsOrder: an event of a type this code
// does not know (a newer producer's) is dead-lettered but parks nothing —
// it may be another service's — so the order's next event applies.
func TestOnlyARoutedEventsFailureParksItsOrder(t *testing.T) {
	spec, db := recorder(t)
	order := uuid.NewString()
	raw := map[string]any{}
	if err := json.Unmarshal(reserved(t, order, "JP").Value, &raw); err != nil {
		t.Fatal(err)
	}
	raw["id"], raw["type"] = uuid.NewString(), "InventoryAudited"
	v, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	future := &sarama.ConsumerMessage{Topic: events.TopicInventory, Key: []byte(order), Value: v, Offset: 1 << 40}
	next := reserved(t, order, "JP")
	failed, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{future, next})
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed %d, err %v; want the unknown type dead-lettered", len(failed), err)
	}
	if got := appliedIDs(t, db); !slices.Equal(got, []string{eventID(t, next)}) {
		t.Fatalf("applied %v, want the order's own event: an unknown type parks nothing", got)
	}
}

// TestAnEventParkedAtAReusedOffsetIsKept: a topic deleted and created
// again reuses offsets; an event parked at an offset an old, resolved row holds
// is kept all the same, and the replay applies it.
func TestAnEventParkedAtAReusedOffsetIsKept(t *testing.T) {
	spec, db := recorder(t)
	ctx := context.Background()
	op := spec.Operator(db, testenv.Logger(t))
	old := reserved(t, uuid.NewString(), "XX")
	if _, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{old}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Release(ctx, park.Target{Key: string(old.Key)}); err != nil {
		t.Fatal(err)
	}
	order := uuid.NewString()
	next := reserved(t, order, "JP")
	next.Offset = old.Offset
	if _, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{reserved(t, order, "XX"), next}); err != nil {
		t.Fatal(err)
	}
	fix(t, db)
	if _, err := op.Replay(ctx, park.Target{Key: order}); err != nil {
		t.Fatal(err)
	}
	if got := appliedIDs(t, db); !slices.Contains(got, eventID(t, next)) {
		t.Fatalf("applied %v: the event parked at a reused offset was lost", got)
	}
}

// TestACopyOfAnAppliedEventIsNotParked: behind a parked order, a copy of
// an event applied before the failure is a duplicate, not a parked row — a
// replay much later, once its mark is pruned, cannot apply it again.
func TestACopyOfAnAppliedEventIsNotParked(t *testing.T) {
	spec, db := recorder(t)
	order := uuid.NewString()
	applied, poison := reserved(t, order, "JP"), reserved(t, order, "XX")
	copied, again := *applied, *applied // published again by a relay
	copied.Offset, again.Offset = poison.Offset+1000, poison.Offset+2000
	if _, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{applied, poison, &copied}); err != nil {
		t.Fatal(err)
	}
	// One transaction per event: the same.
	if err := spec.Handler(db, testenv.Logger(t)).Handle(context.Background(), &again); err != nil {
		t.Fatal(err)
	}
	offsets, _ := parkedRows(t, db, order)
	if !slices.Equal(offsets, []int64{poison.Offset}) {
		t.Fatalf("parked offsets %v, want the poison alone: the copy of an applied event is a duplicate", offsets)
	}
}

// TestReleaseThroughLeavesLaterRowsParked: releasing the rows an operator
// saw leaves one parked since parked.
func TestReleaseThroughLeavesLaterRowsParked(t *testing.T) {
	spec, db, order, _ := poisoned(t)
	ctx := context.Background()
	op := spec.Operator(db, testenv.Logger(t))
	seen, err := op.List(ctx, order, 0)
	if err != nil || len(seen) != 3 {
		t.Fatalf("listed %d rows, err %v", len(seen), err)
	}
	later := reserved(t, order, "GB")
	if _, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{later}); err != nil {
		t.Fatal(err)
	}
	res, err := op.Release(ctx, park.Target{Key: order, Through: seen[2].Seq})
	if err != nil || len(res.Resolved) != 3 {
		t.Fatalf("released %+v, err %v; want the three rows seen", res, err)
	}
	left, err := op.List(ctx, order, 0)
	if err != nil || len(left) != 1 || *left[0].EventID != eventID(t, later) {
		t.Fatalf("left parked %+v, err %v; want the row parked after the listing", left, err)
	}
}

// TestABatchWaitsForAResolutionInProgress: a batch that finds an order
// parked while an operator is resolving its rows waits for the operator's
// transaction, then sees the order flowing again and applies the event
// instead of holding it behind rows already resolved.
func TestABatchWaitsForAResolutionInProgress(t *testing.T) {
	spec, db, order, _ := poisoned(t)
	ctx := context.Background()
	rows, err := spec.Operator(db, testenv.Logger(t)).List(ctx, order, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range rows {
		seqs = append(seqs, r.Seq)
	}
	// The operator's transaction: the order's lock, its rows resolved, not
	// committed yet.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := park.Lock(ctx, tx, spec.Name, order); err != nil {
		t.Fatal(err)
	}
	if err := park.Resolve(ctx, tx, seqs, park.Released); err != nil {
		t.Fatal(err)
	}

	next := reserved(t, order, "GB")
	done := make(chan error, 1)
	go func() {
		_, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{next})
		done <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the batch waits for the order's lock", func() bool {
		var waiting int
		if err := db.Get(&waiting, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	select {
	case err := <-done:
		t.Fatalf("the batch ended (err %v) while the order's rows were being resolved", err)
	default:
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := appliedIDs(t, db); !slices.Contains(got, eventID(t, next)) {
		t.Fatalf("applied %v: the event was parked behind rows already resolved", got)
	}
	if offsets, _ := parkedRows(t, db, order); len(offsets) != 0 {
		t.Fatalf("still parked: %v", offsets)
	}
}
