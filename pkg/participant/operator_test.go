package participant_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/web"
)

// poisoned consumes, through the batch handler, an order whose first event
// fails ("XX") and two more of its events, parked behind it, with another
// order's event between them, which is applied. It returns the spec, the
// database and the order's three messages.
func poisoned(t *testing.T) (participant.Spec, *sqlx.DB, string, []*sarama.ConsumerMessage) {
	t.Helper()
	spec, db := recorder(t)
	order := uuid.NewString()
	msgs := []*sarama.ConsumerMessage{reserved(t, order, "XX"), reserved(t, order, "JP"), reserved(t, order, "US")}
	other := reserved(t, uuid.NewString(), "GB")
	failed, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{msgs[0], msgs[1], other, msgs[2]})
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed %d, err %v; want the first event of the order to fail", len(failed), err)
	}
	if got := appliedIDs(t, db); !slices.Equal(got, []string{eventID(t, other)}) {
		t.Fatalf("applied %v, want only the other order's event", got)
	}
	return spec, db, order, msgs
}

func ids(t *testing.T, msgs ...*sarama.ConsumerMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, eventID(t, m))
	}
	return out
}

func fix(t *testing.T, db *sqlx.DB) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO fixed VALUES (true)`); err != nil {
		t.Fatal(err)
	}
}

// TestReplayAppliesAParkedOrderOnceInOrder: once the cause is fixed, a
// replay of the order applies its failed event and the ones parked behind
// it, in order, once; a second replay, and a redelivery of any of them,
// changes nothing; the order flows again.
func TestReplayAppliesAParkedOrderOnceInOrder(t *testing.T) {
	spec, db, order, msgs := poisoned(t)
	op := spec.Operator(db, testenv.Logger(t))
	ctx := context.Background()

	rows, err := op.List(ctx, order, 0)
	if err != nil || len(rows) != 3 || rows[0].Reason == nil || rows[1].Reason != nil {
		t.Fatalf("parked rows %+v (err %v), want the failure with its reason, then two parked behind it", rows, err)
	}

	// Not fixed yet: the replay fails, applies nothing, keeps the order parked.
	_, err = op.Replay(ctx, park.Target{Key: order})
	var failing *park.StillFailing
	if !errors.As(err, &failing) || failing.Row.Seq != rows[0].Seq {
		t.Fatalf("replay before the fix: err %v, want StillFailing on row %d", err, rows[0].Seq)
	}
	if got := appliedIDs(t, db); len(got) != 1 {
		t.Fatalf("a failed replay left %d applications, want the one from before", len(got))
	}
	if rows, _ := op.List(ctx, order, 0); len(rows) != 3 {
		t.Fatalf("after a failed replay %d rows parked, want 3", len(rows))
	}

	fix(t, db)
	res, err := op.Replay(ctx, park.Target{Key: order})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range res.Resolved {
		outcomes = append(outcomes, r.Outcome)
	}
	if !slices.Equal(outcomes, []string{"applied", "applied", "applied"}) {
		t.Fatalf("replay outcomes %v, want three applied", outcomes)
	}
	if got := appliedIDs(t, db)[1:]; !slices.Equal(got, ids(t, msgs...)) {
		t.Fatalf("replay applied %v, want %v: the order's events in order", got, ids(t, msgs...))
	}

	again, err := op.Replay(ctx, park.Target{Key: order})
	if err != nil || len(again.Resolved) != 0 || len(again.Already) != 3 {
		t.Fatalf("second replay: %+v, err %v; want nothing resolved, three already", again, err)
	}
	// The order flows again; a redelivery of a replayed event is a duplicate.
	next := reserved(t, order, "GB")
	if failed, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), []*sarama.ConsumerMessage{msgs[1], next}); err != nil || len(failed) != 0 {
		t.Fatalf("after the replay: failed %v, err %v", failed, err)
	}
	if got := appliedIDs(t, db)[1:]; !slices.Equal(got, ids(t, append(msgs, next)...)) {
		t.Fatalf("applied %v, want each of the order's events once, then the next", got)
	}
	wantMarked := append(ids(t, append(msgs, next)...), appliedIDs(t, db)[0])
	if got := markedIDs(t, db); !slices.Equal(got, sorted(wantMarked...)) {
		t.Errorf("marked %v, want %v", got, sorted(wantMarked...))
	}
	if rows, _ := op.List(ctx, "", 0); len(rows) != 0 {
		t.Errorf("%d rows still parked, want none", len(rows))
	}
}

// TestReleaseLetsAnOrderGoWithoutApplying: a released row is never
// applied, not even when Kafka delivers it again; a single row replays
// only from the head of its order.
func TestReleaseLetsAnOrderGoWithoutApplying(t *testing.T) {
	spec, db, order, msgs := poisoned(t)
	op := spec.Operator(db, testenv.Logger(t))
	ctx := context.Background()

	_, err := op.Replay(ctx, park.Target{EventID: eventID(t, msgs[1])})
	if !errors.Is(err, fault.Conflict) {
		t.Fatalf("replaying a row behind the failure: err %v, want a conflict", err)
	}
	if _, err := op.Release(ctx, park.Target{EventID: eventID(t, msgs[0])}); err != nil {
		t.Fatal(err)
	}
	// The ones parked behind are now at the head: replay them one by one.
	for _, m := range msgs[1:] {
		if _, err := op.Replay(ctx, park.Target{EventID: eventID(t, m)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := appliedIDs(t, db)[1:]; !slices.Equal(got, ids(t, msgs[1:]...)) {
		t.Fatalf("applied %v, want the two events parked behind, not the released one", got)
	}
	// Redelivered, the released event is a duplicate: never applied.
	if failed, err := consume(t, spec, db, spec.BatchHandler(db, testenv.Logger(t)), msgs[:1]); err != nil || len(failed) != 0 {
		t.Fatalf("redelivering the released event: failed %v, err %v", failed, err)
	}
	if got := appliedIDs(t, db)[1:]; len(got) != 2 {
		t.Fatalf("applied %v after the redelivery, want still the two events parked behind", got)
	}
	if _, err := op.Release(ctx, park.Target{Key: order}); err != nil {
		t.Fatalf("releasing an order already resolved: %v, want nothing to do", err)
	}
	if _, err := op.Replay(ctx, park.Target{Key: "never-parked"}); !errors.Is(err, fault.NotFound) {
		t.Fatalf("replaying an order never parked: err %v, want not found", err)
	}
}

// TestOneAtATimeParksBehindAParkedOrder: a batch of one (Spec.Handler, as
// with CONSUMER_BATCH=1) parks a parked order's events behind it too.
func TestOneAtATimeParksBehindAParkedOrder(t *testing.T) {
	spec, db := recorder(t)
	order := uuid.NewString()
	poison, next := reserved(t, order, "XX"), reserved(t, order, "JP")
	h := spec.Handler(db, testenv.Logger(t))
	err := h.Handle(context.Background(), poison)
	if err == nil {
		t.Fatal("the poison was applied")
	}
	if err := spec.DeadLetterTo(db)(context.Background(), poison, err); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	if got := appliedIDs(t, db); len(got) != 0 {
		t.Fatalf("applied %v, want nothing: the order is parked", got)
	}
	offsets, failed := parkedRows(t, db, order)
	if !slices.Equal(offsets, []int64{poison.Offset, next.Offset}) || !slices.Equal(failed, []bool{true, false}) {
		t.Fatalf("parked %v (failed %v), want the poison then the event parked behind it", offsets, failed)
	}
}

// TestReplayOfADeadLetterThatParkedNothing: a message dead-lettered before
// it was routed (here: given up on) parks no order, so its row has no park
// key; the replay applies it with its own message key, which the Guard
// checks against the order id, and marks it processed.
func TestReplayOfADeadLetterThatParkedNothing(t *testing.T) {
	spec, db := recorder(t)
	ctx := context.Background()
	order := uuid.NewString()
	m := reserved(t, order, "JP")
	if err := spec.DeadLetterTo(db)(ctx, m, context.DeadlineExceeded); err != nil {
		t.Fatal(err)
	}
	id := eventID(t, m)
	var parks int
	if err := db.Get(&parks, `SELECT count(*) FROM parked_events WHERE event_id = $1 AND park_key IS NULL`, id); err != nil || parks != 1 {
		t.Fatalf("%d rows without a park key for the dead letter (err %v), want 1", parks, err)
	}

	res, err := spec.Operator(db, testenv.Logger(t)).Replay(ctx, park.Target{EventID: id})
	if err != nil || len(res.Resolved) != 1 || res.Resolved[0].Outcome != "applied" {
		t.Fatalf("replay = %+v, %v; want the dead letter applied", res, err)
	}
	if got := appliedIDs(t, db); !slices.Equal(got, []string{id}) {
		t.Fatalf("applied %v, want the dead letter's event", got)
	}
	if got := markedIDs(t, db); !slices.Equal(got, []string{id}) {
		t.Fatalf("marked %v, want the dead letter's event", got)
	}
	var open int
	if err := db.Get(&open, `SELECT count(*) FROM parked_events WHERE resolved_at IS NULL`); err != nil || open != 0 {
		t.Fatalf("%d rows unresolved after the replay (err %v), want 0", open, err)
	}
}

// TestReplayFitsInTheWriteTimeout: the server answers for longer than a
// replay may hold its transaction, so a slow replay that committed is not
// cut off before choreoctl hears that it did.
func TestReplayFitsInTheWriteTimeout(t *testing.T) {
	if park.ResolveTimeout >= web.WriteTimeout {
		t.Fatalf("a replay may take %s, the server's write timeout is %s: its answer would be dropped", park.ResolveTimeout, web.WriteTimeout)
	}
}
