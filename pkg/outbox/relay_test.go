package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

func TestRelayPublishesInOrderAndMarksSent(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox")
	orderID := testenv.ID("order")
	var want []string
	for range 5 {
		e := event(t, orderID)
		want = append(want, e.ID)
		add(t, db, topic, e)
	}
	publishAll(t, db, newRelay(t, db, producer(t)), topic)

	got := testenv.ReadAll(t, topic, len(want), 20*time.Second)
	if ids := eventIDs(got); !equal(ids, want) {
		t.Fatalf("published %v, want %v in order", ids, want)
	}
	for _, m := range got {
		if string(m.Key) != orderID {
			t.Fatalf("key = %q, want the order id", m.Key)
		}
	}
	if n := unsent(t, db, topic); n != 0 {
		t.Fatalf("unsent rows = %d, want 0", n)
	}
}

// TestRelayDoesNotSkipLateCommits reproduces the trap of "id > last seen"
// polling: transaction A takes a lower id but commits after B. A relay that
// published B and remembered B's id would never publish A. This relay holds
// B back while A is running, then publishes A before B.
func TestRelayDoesNotSkipLateCommits(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-late")
	ctx := context.Background()
	relay := newRelay(t, db, producer(t))
	orderID := testenv.ID("order")
	ea, eb := event(t, orderID), event(t, orderID)

	txA := db.MustBeginTx(ctx, nil)
	defer txA.Rollback()
	if err := outbox.Add(ctx, txA, message(t, topic, ea)); err != nil { // lower id, still running
		t.Fatal(err)
	}
	insert(t, db, topic, eb) // higher id, committed

	if _, err := relay.PublishOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// A's row is not visible yet; B's is, and must still be unsent.
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("while A runs: unsent rows = %d, want B held back behind A (1)", n)
	}
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	publishAll(t, db, relay, topic)

	got := eventIDs(testenv.ReadAll(t, topic, 2, 20*time.Second))
	if !equal(got, []string{ea.ID, eb.ID}) {
		t.Fatalf("published %v, want [A B] = %v", got, []string{ea.ID, eb.ID})
	}
}

// failingAfterPublish publishes, then fails the relay's round, as a crash
// between Kafka's ack and the "mark sent" statement would.
type failingAfterPublish struct {
	outbox.Publisher
}

func (f failingAfterPublish) SendMessages(msgs []*sarama.ProducerMessage) error {
	if err := f.Publisher.SendMessages(msgs); err != nil {
		return err
	}
	return errors.New("crash after publish, before mark")
}

// TestCrashBetweenPublishAndMarkRepublishes shows the relay's side of
// "nothing lost": rows whose mark was lost are published again — with the
// same event id, which consumers use to drop the duplicate.
func TestCrashBetweenPublishAndMarkRepublishes(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-crash")
	e := anyEvent(t)
	add(t, db, topic, e)
	pub := producer(t)

	crashed := newRelay(t, db, failingAfterPublish{pub})
	if _, err := crashed.PublishOnce(context.Background()); err == nil {
		t.Fatal("want the crash error")
	}
	crashed.Close() // its session ends with the process
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("unsent rows after crash = %d, want 1", n)
	}
	publishAll(t, db, newRelay(t, db, pub), topic)

	got := eventIDs(testenv.ReadAll(t, topic, 2, 20*time.Second))
	if !equal(got, []string{e.ID, e.ID}) {
		t.Fatalf("published %v, want the same event id twice", got)
	}
	if n := unsent(t, db, topic); n != 0 {
		t.Fatalf("unsent rows = %d, want 0", n)
	}
}

// TestNoTransactionOpenWhilePublishing: Kafka may take tens of seconds to
// answer, or fail to; no transaction may stay open meanwhile ("idle in
// transaction" holds back vacuum and every relay's xmin).
func TestNoTransactionOpenWhilePublishing(t *testing.T) {
	db := newDB(t)
	add(t, db, "t", anyEvent(t))
	pub := newBlocking(t)
	r := newRelay(t, db, pub)
	done := make(chan error, 1)
	go func() { _, err := r.PublishOnce(context.Background()); done <- err }() // add settled the row
	waitStarted(t, pub)

	var idle int
	if err := db.Get(&idle, `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database()
		  AND state LIKE 'idle in transaction%'
		  AND query LIKE '%pg_snapshot_xmin%'`); err != nil {
		t.Fatal(err)
	}
	if idle != 0 {
		t.Errorf("%d relay sessions idle in transaction while publishing, want 0", idle)
	}
	pub.unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := unsent(t, db, "t"); n != 0 {
		t.Fatalf("unsent = %d after the publish returned, want 0", n)
	}
}

// TestRunStopsPromptlyWhilePublishHangs: a relay asked to stop while Kafka
// does not answer returns at once; the row stays unsent, for the next
// leader.
func TestRunStopsPromptlyWhilePublishHangs(t *testing.T) {
	db := newDB(t)
	add(t, db, "t", anyEvent(t))
	pub := newBlocking(t)
	r := newRelay(t, db, pub)
	stop := testenv.Background(t, "the relay, while the publish hangs,", 3*time.Second, r.Run)
	waitStarted(t, pub)
	stop()
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the row left for the next leader", n)
	}
	// Run gave up the leadership on its way out: another relay takes over.
	if n, err := publishSome(t, newRelay(t, db, accept)); err != nil || n != 1 {
		t.Fatalf("successor PublishOnce = %d, %v; want 1, nil", n, err)
	}
}

// TestFailpointsSitBetweenAckAndMark: AfterPublish runs once Kafka has
// acknowledged a batch and before its rows are marked; BetweenBatches once
// they are marked, before the next batch. (failpoint.Hit kills the process
// there when armed; the chaos suite arms them.)
func TestFailpointsSitBetweenAckAndMark(t *testing.T) {
	db := newDB(t)
	for range 3 {
		add(t, db, "t", anyEvent(t))
	}
	pub := &recorder{}
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) { c.BatchSize = 2 })
	var got []string
	outbox.SetHook(r, func(point string) {
		got = append(got, fmt.Sprintf("%s: published %d, unsent %d", point, len(pub.seen()), unsent(t, db, "t")))
	})
	publishAll(t, db, r, "t")
	want := []string{
		"after-publish: published 2, unsent 3",
		"between-batches: published 2, unsent 1",
		"after-publish: published 3, unsent 1",
		"between-batches: published 3, unsent 0",
	}
	if !equal(got, want) {
		t.Fatalf("failpoints ran as\n%q\nwant\n%q", got, want)
	}
}
