// Package participanttest is the conformance suite of the runtime: the
// guarantees every service of the saga must keep, run against its Spec with
// a few of its own events.
package participanttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/participant"
)

// Case is one event that changes the service's state.
type Case struct {
	Name string
	// Setup prepares in db what the event needs (an account, stock, an
	// order) under fresh ids and returns the event to deliver.
	Setup func(t *testing.T, db *sqlx.DB) events.Envelope
	// State reads what the event changes, leaving out ids and timestamps,
	// so that the states of two Setups compare equal (reflect.DeepEqual)
	// after the same deliveries.
	State func(t *testing.T, db *sqlx.DB, e events.Envelope) any
	// Emits lists the types of the events the reaction queues, in order.
	Emits []string
}

// Suite is a service under test.
type Suite struct {
	Spec participant.Spec
	// DB returns a fresh database with the runtime's schemas and the
	// service's own applied, e.g. testenv.DB(t, spec.Schema).
	DB    func(t *testing.T) *sqlx.DB
	Cases []Case
	// Concurrency is how many goroutines deliver at once; 0 means 16.
	Concurrency int
}

// handler is the handler the checks deliver through.
func (s Suite) handler(db *sqlx.DB) consumer.Handler { return s.Spec.Handler(db, discard) }

// Run runs the suite's checks for every case. Each delivers through
// Spec.Handler, a batch of one on the path the consumer runs, on a real
// PostgreSQL database, as the consumer group hands Kafka messages over.
func Run(t *testing.T, s Suite) {
	t.Helper()
	if len(s.Cases) == 0 {
		t.Fatal("participanttest: a suite needs at least one case")
	}
	for _, c := range s.Cases {
		t.Run(c.Name, func(t *testing.T) {
			// Three deliveries change the state once, with one mark, and queue
			// each emitted event once.
			t.Run("RedeliveryAppliesOnce", func(t *testing.T) { redelivery(t, s, c) })
			// Three copies in one batch (Spec.BatchHandler) end as one
			// delivery.
			t.Run("RedeliveriesInOneBatchApplyOnce", func(t *testing.T) { redeliveryInBatch(t, s, c) })
			// Many goroutines at once end as one delivery does.
			t.Run("ConcurrentDeliveriesApplyOnce", func(t *testing.T) { concurrent(t, s, c) })
			// Fields this code does not know, in the envelope and the
			// payload, as a newer producer sends them: the event applies as
			// the plain one.
			t.Run("ForwardCompatibleEventIsApplied", func(t *testing.T) { forwardCompatible(t, s, c) })
			// A payload that does not decode changes nothing and is
			// dead-lettered once.
			t.Run("InvalidPayloadIsDeadLettered", func(t *testing.T) { invalid(t, s, c) })
			// Behind a dead-lettered poison, the order's event is parked; a
			// replay fails while the poison is there, and once it is released
			// applies the event once; a second replay and a redelivery change
			// nothing.
			t.Run("PoisonParksItsOrderUntilReplayed", func(t *testing.T) { parks(t, s, c) })
			// Event types without a reaction: acknowledged without a mark, an
			// outbox row or a change.
			t.Run("OtherServicesEventsAreAcknowledged", func(t *testing.T) { others(t, s, c) })
			// A failed commit leaves neither change, nor mark, nor emitted
			// events; the redelivery applies it.
			t.Run("ChangeMarkAndOutboxCommitTogether", func(t *testing.T) { atomic(t, s, c) })
		})
	}
}

// redeliveryInBatch hands three copies of the event to the batch handler
// at once, as a consumer catching up on a partition where the broker
// redelivered it would: the first applies, the other two are duplicates.
func redeliveryInBatch(t *testing.T, s Suite, c Case) {
	db, want, e, since := second(t, s, c)
	dups := duplicates(t, s.Spec.Name, e.Type)
	m := message(t, e)
	failed, err := s.Spec.BatchHandler(db, discard).HandleBatch(context.Background(), []*sarama.ConsumerMessage{m, m, m})
	if err != nil || failed != nil {
		t.Fatalf("batch of three copies: failed %v, err %v", failed, err)
	}
	if got := duplicates(t, s.Spec.Name, e.Type) - dups; got != 2 {
		t.Errorf("%v copies skipped as duplicates, want 2", got)
	}
	wantAppliedOnce(t, s, c, db, e, since, want, "a batch of three copies")
}

// second sets a case up on a fresh database and delivers it once, then
// sets up a second event of the case, not delivered, for a check to hand
// over in its own way (copies in a batch, at once, with added fields): it
// returns the database, the state the first delivery left — what the
// second must leave too, applied once — the second event, and the
// outbox's last id before it.
func second(t *testing.T, s Suite, c Case) (db *sqlx.DB, want any, e events.Envelope, since int64) {
	t.Helper()
	db = s.DB(t)
	first := c.Setup(t, db)
	deliver(t, s, db, first)
	want = c.State(t, db, first)
	e = c.Setup(t, db)
	return db, want, e, lastOutboxID(t, db)
}

// wantAppliedOnce fails t unless e, handed over as how says, left the
// state want (what applying it once leaves), is marked processed once,
// and queued the case's events after since.
func wantAppliedOnce(t *testing.T, s Suite, c Case, db *sqlx.DB, e events.Envelope, since int64, want any, how string) {
	t.Helper()
	if got := c.State(t, db, e); !reflect.DeepEqual(got, want) {
		t.Errorf("state after %s %+v, want %+v", how, got, want)
	}
	wantMarks(t, db, e, 1)
	wantEmitted(t, s, db, e, since, c.Emits)
}

func redelivery(t *testing.T, s Suite, c Case) {
	db := s.DB(t)
	e := c.Setup(t, db)
	since := lastOutboxID(t, db)
	before := c.State(t, db, e)
	deliver(t, s, db, e)
	once := c.State(t, db, e)
	if reflect.DeepEqual(once, before) {
		t.Fatalf("the event changed nothing: state %+v; a case must change the state it reads", once)
	}
	dups := duplicates(t, s.Spec.Name, e.Type)
	deliver(t, s, db, e)
	deliver(t, s, db, e)
	// The runtime, not only the domain's own checks, must stop them.
	if got := duplicates(t, s.Spec.Name, e.Type) - dups; got != 2 {
		t.Errorf("%v redeliveries skipped as duplicates, want 2", got)
	}
	wantAppliedOnce(t, s, c, db, e, since, once, "3 deliveries")
}

func concurrent(t *testing.T, s Suite, c Case) {
	db, want, e, since := second(t, s, c)
	n := s.Concurrency
	if n == 0 {
		n = 16
	}
	m := message(t, e)
	dups := duplicates(t, s.Spec.Name, e.Type)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{}) // all at once, not one after another
	for range n {
		wg.Add(1)
		// A handler each, as each instance of the service has its own:
		// the database, not the process, must decide.
		h := s.handler(db)
		go func() {
			defer wg.Done()
			<-start
			// A consumer retries what is not permanent (a deadlock, a
			// serialization failure); so does this one, a few times.
			var err error
			for range 5 {
				if err = h.Handle(context.Background(), m); err == nil || consumer.IsPermanent(err) {
					break
				}
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent delivery: %v", err)
		}
	}
	// One applied it; the runtime skipped every other as a duplicate.
	if got := duplicates(t, s.Spec.Name, e.Type) - dups; got != float64(n-1) {
		t.Errorf("%v of %d concurrent deliveries skipped as duplicates, want %d", got, n, n-1)
	}
	wantAppliedOnce(t, s, c, db, e, since, want, fmt.Sprintf("%d concurrent deliveries", n))
}

// forwardCompatible delivers the event as a newer producer might send it,
// with an optional field added to the envelope and to the payload (see
// docs/event-evolution.md), and wants the same outcome as a plain delivery.
func forwardCompatible(t *testing.T, s Suite, c Case) {
	db, want, e, since := second(t, s, c)
	m := message(t, e)
	m.Value = withAddedFields(t, m.Value,
		map[string]any{"trace_hint": "x"},
		map[string]any{"added_in_v1_1": true})
	if err := s.handler(db).Handle(context.Background(), m); err != nil {
		t.Fatalf("deliver %s with added fields: %v; want them ignored", e.Type, err)
	}
	wantAppliedOnce(t, s, c, db, e, since, want, "the event with added fields")
}

// withAddedFields returns the envelope value with envelope fields added to
// its top level and payload fields to its payload object; every other
// member is kept byte for byte.
func withAddedFields(t *testing.T, value []byte, envelope, payload map[string]any) []byte {
	t.Helper()
	add := func(object []byte, fields map[string]any) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(object, &m); err != nil || m == nil {
			t.Fatalf("not a JSON object: %s", object)
		}
		for k, v := range fields {
			if _, ok := m[k]; ok {
				t.Fatalf("field %q is not new to %s", k, object)
			}
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			m[k] = raw
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := add(value, envelope)
	var env map[string]json.RawMessage
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatal(err)
	}
	env["payload"] = add(env["payload"], payload)
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func invalid(t *testing.T, s Suite, c Case) {
	db := s.DB(t)
	e := c.Setup(t, db)
	since := lastOutboxID(t, db)
	before := c.State(t, db, e)
	e.Payload = json.RawMessage(`["not", "an", "object"]`)
	m := message(t, e)
	err := s.handler(db).Handle(context.Background(), m)
	if !consumer.IsPermanent(err) {
		t.Fatalf("handling an undecodable payload: err = %v, want a permanent error", err)
	}
	if got := c.State(t, db, e); !reflect.DeepEqual(got, before) {
		t.Errorf("state changed by an invalid event: %+v, was %+v", got, before)
	}
	wantMarks(t, db, e, 0)
	wantEmitted(t, s, db, e, since, nil)

	deadLetter := s.Spec.DeadLetterTo(db)
	for range 2 { // a redelivery after a crash is dead-lettered once
		if err := deadLetter(context.Background(), m, err); err != nil {
			t.Fatalf("dead-letter: %v", err)
		}
	}
	var reasons []string
	if err := db.Select(&reasons, `SELECT headers->>$2 FROM outbox WHERE topic = $1`,
		events.DeadLetterTopic(s.Spec.Name), park.HeaderDLQReason); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], events.ErrInvalid.Error()) {
		t.Errorf("dead letters on %s with reasons %q, want one saying %q",
			events.DeadLetterTopic(s.Spec.Name), reasons, events.ErrInvalid)
	}
}

func parks(t *testing.T, s Suite, c Case) {
	ctx := context.Background()
	db := s.DB(t)
	e := c.Setup(t, db)
	before := c.State(t, db, e)
	poison := e
	poison.ID = uuid.NewString()
	poison.Payload = json.RawMessage(`["not", "an", "object"]`)
	pm := message(t, poison)
	err := s.handler(db).Handle(ctx, pm)
	if !consumer.IsPermanent(err) {
		t.Fatalf("handling an undecodable payload: err = %v, want a permanent error", err)
	}
	if err := s.Spec.DeadLetterTo(db)(ctx, pm, err); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	since := lastOutboxID(t, db)

	deliver(t, s, db, e) // parked behind the poison
	if got := c.State(t, db, e); !reflect.DeepEqual(got, before) {
		t.Errorf("state changed by an event of a parked order: %+v, was %+v", got, before)
	}
	wantMarks(t, db, e, 0)
	wantEmitted(t, s, db, e, since, nil)

	op := s.Spec.Operator(db, discard)
	var failing *park.StillFailing
	if _, err := op.Replay(ctx, park.Target{Key: e.OrderID}); !errors.As(err, &failing) {
		t.Fatalf("replay with the poison at the head: err = %v, want StillFailing", err)
	}
	wantMarks(t, db, e, 0)
	if _, err := op.Release(ctx, park.Target{EventID: poison.ID}); err != nil {
		t.Fatalf("release the poison: %v", err)
	}
	res, err := op.Replay(ctx, park.Target{Key: e.OrderID})
	if err != nil || len(res.Resolved) != 1 || res.Resolved[0].Outcome != "applied" {
		t.Fatalf("replay: %+v, err %v; want the event parked behind it applied", res, err)
	}
	after := c.State(t, db, e)
	if reflect.DeepEqual(after, before) {
		t.Errorf("the replay left the state as it was: %+v", after)
	}
	wantMarks(t, db, e, 1)
	wantEmitted(t, s, db, e, since, c.Emits)

	if res, err := op.Replay(ctx, park.Target{Key: e.OrderID}); err != nil || len(res.Resolved) != 0 {
		t.Fatalf("second replay: %+v, err %v; want nothing resolved", res, err)
	}
	deliver(t, s, db, e) // a redelivery: the order flows again, the event is a duplicate
	wantAppliedOnce(t, s, c, db, e, since, after, "a second replay and a redelivery")
}

func others(t *testing.T, s Suite, c Case) {
	db := s.DB(t)
	e := c.Setup(t, db)
	since := lastOutboxID(t, db)
	before := c.State(t, db, e)
	handled := map[string]bool{}
	for _, r := range s.Spec.Reactions {
		handled[r.EventType()] = true
	}
	for _, p := range samples {
		if handled[p.EventType()] {
			continue
		}
		other, err := events.New("another-service", e.OrderID, p, e.OccurredAt)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.handler(db).Handle(context.Background(), message(t, other)); err != nil {
			t.Errorf("%s: err = %v, want it acknowledged", other.Type, err)
		}
		wantMarks(t, db, other, 0)
	}
	if got := c.State(t, db, e); !reflect.DeepEqual(got, before) {
		t.Errorf("state changed by other services' events: %+v, was %+v", got, before)
	}
	wantEmitted(t, s, db, e, since, nil)
}

func atomic(t *testing.T, s Suite, c Case) {
	db := s.DB(t)
	e := c.Setup(t, db)
	since := lastOutboxID(t, db)
	before := c.State(t, db, e)
	// A constraint trigger deferred to commit: it fails the commit after
	// the reaction made every change, as a crash or a lost connection at
	// that moment would.
	for _, q := range []string{
		`CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN RAISE EXCEPTION 'commit refused by the test'; END $$`,
		`CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON processed_events
		 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit()`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	m := message(t, e)
	err := s.handler(db).Handle(context.Background(), m)
	if err == nil || consumer.IsPermanent(err) {
		t.Fatalf("delivery with a failing commit: err = %v, want a retryable error", err)
	}
	if got := c.State(t, db, e); !reflect.DeepEqual(got, before) {
		t.Errorf("state changed although the commit failed: %+v, was %+v", got, before)
	}
	wantMarks(t, db, e, 0)
	wantEmitted(t, s, db, e, since, nil)

	if _, err := db.Exec(`DROP TRIGGER fail_commit ON processed_events`); err != nil {
		t.Fatal(err)
	}
	deliver(t, s, db, e)
	if got := c.State(t, db, e); reflect.DeepEqual(got, before) {
		t.Errorf("the redelivery after the failed commit changed nothing")
	}
	wantMarks(t, db, e, 1)
	wantEmitted(t, s, db, e, since, c.Emits)
}

// deliver hands e to the service's handler once and fails on any error.
func deliver(t *testing.T, s Suite, db *sqlx.DB, e events.Envelope) {
	t.Helper()
	if err := s.handler(db).Handle(context.Background(), message(t, e)); err != nil {
		t.Fatalf("deliver %s: %v", e.Type, err)
	}
}

// message is e as the consumer group hands it over: on its type's topic,
// keyed by its order id.
func message(t *testing.T, e events.Envelope) *sarama.ConsumerMessage {
	t.Helper()
	value, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := events.TopicOf(e.Type)
	return &sarama.ConsumerMessage{Topic: topic, Partition: 0, Offset: int64(uuid.New().ID()), Key: []byte(e.OrderID), Value: value}
}

func wantMarks(t *testing.T, db *sqlx.DB, e events.Envelope, want int) {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM processed_events WHERE event_id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d processed_events marks for %s %s, want %d", n, e.Type, e.ID, want)
	}
}

// lastOutboxID is the newest outbox row's id: what Setup queued (the order
// service's API queues OrderCreated) is not the reaction's doing.
func lastOutboxID(t *testing.T, db *sqlx.DB) int64 {
	t.Helper()
	var id int64
	if err := db.Get(&id, `SELECT coalesce(max(id), 0) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	return id
}

// wantEmitted checks the types of the events queued for e's order on the
// service's own topic since the outbox row since, oldest first.
func wantEmitted(t *testing.T, s Suite, db *sqlx.DB, e events.Envelope, since int64, want []string) {
	t.Helper()
	var got []string
	if err := db.Select(&got, `SELECT headers->>$3 FROM outbox WHERE key = $1 AND topic = $2 AND id > $4 ORDER BY id`,
		[]byte(e.OrderID), s.Spec.Produces, events.HeaderEventType, since); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("emitted %v for order %s, want %v", got, e.OrderID, want)
	}
	var elsewhere []string
	if err := db.Select(&elsewhere, `SELECT topic FROM outbox WHERE topic <> $1 AND id > $2`, s.Spec.Produces, since); err != nil {
		t.Fatal(err)
	}
	if len(elsewhere) > 0 {
		t.Errorf("queued on other topics %v: a service publishes only to %s", elsewhere, s.Spec.Produces)
	}
}

// duplicates reads the runtime's count of skipped duplicates of eventType
// for service (choreo_events_handled_total{outcome="duplicate"}).
func duplicates(t *testing.T, service, eventType string) float64 {
	t.Helper()
	_, m := Gathered(t, "choreo_events_handled_total", map[string]string{"service": service, "type": eventType, "outcome": "duplicate"})
	return m.GetCounter().GetValue() // 0 while there is none
}

// Gathered finds, in the default Prometheus registry the runtime
// registers with, the metric named name whose labels include match, and
// returns all its labels and the metric; nil when there is none. It is
// how a test outside package participant reads the runtime's metrics.
func Gathered(t *testing.T, name string, match map[string]string) (map[string]string, *dto.Metric) {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue metrics
				}
			}
			return labels, m
		}
	}
	return nil, nil
}
