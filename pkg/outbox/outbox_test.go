package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// Each test gets a database of its own (testenv.OwnDatabase) and its own
// topic, so a relay under test sees and publishes only the test's rows and
// hears only the test's NOTIFYs.

// testDB is a test's own database, with the outbox schema applied, and the
// URL a relay LISTENs on.
type testDB struct {
	*sqlx.DB
	url string
}

func newDB(t testing.TB) *testDB {
	t.Helper()
	url := testenv.OwnDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pg.Open(ctx, url, 10*time.Second)
	if err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	t.Cleanup(func() { db.Close() })
	if err := pg.Migrate(ctx, db, testenv.Logger(t), outbox.Schema); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return &testDB{DB: db, url: url}
}

func producer(t testing.TB) sarama.SyncProducer {
	t.Helper()
	p, err := broker.NewSyncProducer(testenv.Brokers(t), "outbox-test")
	if err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newRelay returns a relay for db, adjusted by opts, that gives up its
// leadership when the test ends.
func newRelay(t testing.TB, db *testDB, pub outbox.Publisher, opts ...func(*outbox.RelayConfig)) *outbox.Relay {
	t.Helper()
	cfg := outbox.RelayConfig{
		Name: t.Name(), DB: db.DB, DatabaseURL: db.url, Publisher: pub, Logger: testenv.Logger(t),
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// run runs r until the test ends, and fails the test if Run does not
// return promptly then.
func run(t testing.TB, r *outbox.Relay) {
	t.Helper()
	testenv.Background(t, "the relay", 10*time.Second, r.Run)
}

func event(t testing.TB, orderID string) events.Envelope {
	t.Helper()
	return testenv.Event(t, orderID, events.ShipmentScheduled{Country: "JP"})
}

// anyEvent is an event of an order of its own: for a row whose order the
// test does not look at.
func anyEvent(t testing.TB) events.Envelope {
	t.Helper()
	return event(t, testenv.ID("order"))
}

// message is e as a service stores it in the outbox, on topic.
func message(t testing.TB, topic string, e events.Envelope) outbox.Message {
	t.Helper()
	m, err := outbox.EventMessage(topic, e)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// add stores e for topic in a transaction of its own and waits until the
// row is publishable.
func add(t *testing.T, db *testDB, topic string, e events.Envelope) {
	t.Helper()
	insert(t, db, topic, e)
	settle(t, db)
}

// insert stores e for topic in a transaction of its own, without waiting:
// for rows a test holds back on purpose.
func insert(t *testing.T, db *testDB, topic string, e events.Envelope) {
	t.Helper()
	err := pg.InTx(context.Background(), db.DB, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, message(t, topic, e))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// settle waits until no committed row is held back. The relay's xmin rule
// spans the server — every database on it, so a database of the test's
// own does not help — and transactions of test packages running in
// parallel hold fresh rows back for a moment; a test that then expects one
// Flush, or one wake-up of a relay whose clock stands still, to publish
// them would be flaky. Once settled, a row stays publishable.
func settle(t testing.TB, db *testDB) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "committed rows publishable, not held back by a transaction elsewhere", func() bool {
		var clear bool
		if err := db.Get(&clear, `SELECT NOT EXISTS (
			SELECT 1 FROM outbox
			WHERE sent_at IS NULL AND parked_at IS NULL
			  AND txid >= pg_snapshot_xmin(pg_current_snapshot()))`); err != nil {
			t.Fatal(err)
		}
		return clear
	})
}

// unsent counts the topic's rows waiting to be published: neither sent nor
// parked.
func unsent(t testing.TB, db *testDB, topic string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1 AND sent_at IS NULL AND parked_at IS NULL`, topic); err != nil {
		t.Fatal(err)
	}
	return n
}

// flushAll runs Flush until the topic's rows are all sent, failing the test
// on any error. Rows can be held back for a moment by transactions still
// running elsewhere on the server (see Relay), hence the bounded wait.
func flushAll(t *testing.T, db *testDB, r *outbox.Relay, topic string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "all rows of "+topic+" sent", func() bool {
		if unsent(t, db, topic) == 0 {
			return true
		}
		if _, err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		return unsent(t, db, topic) == 0
	})
}

func eventIDs(msgs []*sarama.ConsumerMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = testenv.Header(m, events.HeaderEventID)
	}
	return ids
}

func TestAddRollsBackWithTheTransaction(t *testing.T) {
	db := newDB(t)
	topic := testenv.ID("never")
	err := pg.InTx(context.Background(), db.DB, func(tx *sqlx.Tx) error {
		if err := outbox.Add(context.Background(), tx, message(t, topic, anyEvent(t))); err != nil {
			return err
		}
		return errors.New("business change failed")
	})
	if err == nil {
		t.Fatal("want the transaction's error")
	}
	var n int
	db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1`, topic)
	if n != 0 {
		t.Fatalf("outbox rows = %d after rollback, want 0", n)
	}
}

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
	flushAll(t, db, newRelay(t, db, producer(t)), topic)

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

	if _, err := relay.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A's row is not visible yet; B's is, and must still be unsent.
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("while A runs: unsent rows = %d, want B held back behind A (1)", n)
	}
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	flushAll(t, db, relay, topic)

	got := eventIDs(testenv.ReadAll(t, topic, 2, 20*time.Second))
	if !equal(got, []string{ea.ID, eb.ID}) {
		t.Fatalf("published %v, want [A B] = %v", got, []string{ea.ID, eb.ID})
	}
}

// exclusive fails the test if two relays publish at once.
type exclusive struct {
	outbox.Publisher
	t        *testing.T
	inFlight *atomic.Int32
}

func (e exclusive) SendMessages(msgs []*sarama.ProducerMessage) error {
	if e.inFlight.Add(1) > 1 {
		e.t.Error("two relays publishing at once")
	}
	defer e.inFlight.Add(-1)
	return e.Publisher.SendMessages(msgs) // a round trip to Kafka: the window an overlap needs
}

// TestTwoRelaysPublishEachRowOnce runs two relays against one database, as
// two replicas of a service would, and makes the leadership change hands
// between rounds: never do both publish at once, and every row goes out
// exactly once.
func TestTwoRelaysPublishEachRowOnce(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-two")
	const n = 200
	for range n {
		insert(t, db, topic, anyEvent(t))
	}
	settle(t, db)
	pub := producer(t)
	var inFlight atomic.Int32
	small := func(c *outbox.RelayConfig) { c.BatchSize = 10 }
	r1 := newRelay(t, db, exclusive{pub, t, &inFlight}, small)
	r2 := newRelay(t, db, exclusive{pub, t, &inFlight}, small)
	var wg sync.WaitGroup
	for _, r := range []*outbox.Relay{r1, r2} {
		wg.Go(func() {
			for i := 0; unsent(t, db, topic) > 0; i++ {
				if _, err := r.Flush(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 2 {
					r.Close() // let the other one lead for a while
				}
			}
		})
	}
	wg.Wait()

	got := eventIDs(testenv.ReadAll(t, topic, n, 30*time.Second))
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	if len(got) != n || len(seen) != n {
		t.Fatalf("published %d messages with %d distinct ids, want %d each", len(got), len(seen), n)
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
	if _, err := crashed.Flush(context.Background()); err == nil {
		t.Fatal("want the crash error")
	}
	crashed.Close() // its session ends with the process
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("unsent rows after crash = %d, want 1", n)
	}
	flushAll(t, db, newRelay(t, db, pub), topic)

	got := eventIDs(testenv.ReadAll(t, topic, 2, 20*time.Second))
	if !equal(got, []string{e.ID, e.ID}) {
		t.Fatalf("published %v, want the same event id twice", got)
	}
	if n := unsent(t, db, topic); n != 0 {
		t.Fatalf("unsent rows = %d, want 0", n)
	}
}

// TestRunWakesOnCommit checks that Run publishes a new row well before its
// poll interval, through LISTEN/NOTIFY.
func TestRunWakesOnCommit(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-notify")
	r := newRelay(t, db, producer(t), func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Lease = 3 * time.Hour // else the heartbeat, every Lease/3, would find the row
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "LISTEN active", func() bool { return outbox.Listening(r) })

	e := anyEvent(t)
	add(t, db, topic, e)
	got := eventIDs(testenv.ReadAll(t, topic, 1, 30*time.Second))
	if len(got) != 1 || got[0] != e.ID {
		t.Fatalf("published %v, want %s (woken by NOTIFY, not the hourly poll)", got, e.ID)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// failFirst fails the first message it is given, with an error that may
// pass, and accepts the rest, as a produce request that fails for one
// partition would.
type failFirst struct{}

func (failFirst) SendMessages(msgs []*sarama.ProducerMessage) error {
	return sarama.ProducerErrors{{Msg: msgs[0], Err: sarama.ErrNotLeaderForPartition}}
}

// TestPartialFailureMarksExactlyWhatKafkaAcknowledged: when one message of a
// batch fails, the producer has sent the others — later messages of the same
// order included — so the relay marks every acknowledged row sent, and only
// those: holding back a2 would publish it twice (a2, a1, a2), not in order.
// The failure is reported, and the failed row stays publishable.
func TestPartialFailureMarksExactlyWhatKafkaAcknowledged(t *testing.T) {
	db := newDB(t)
	topic := testenv.ID("partial")
	a, b := testenv.ID("order"), testenv.ID("order")
	a1, a2, b1 := event(t, a), event(t, a), event(t, b)
	for _, e := range []events.Envelope{a1, a2, b1} {
		insert(t, db, topic, e)
	}
	settle(t, db)
	n, err := newRelay(t, db, failFirst{}).Flush(context.Background())
	if err == nil {
		t.Fatal("want the partial failure reported")
	}
	if n != 2 {
		t.Fatalf("Flush published %d, want 2", n)
	}
	var unsentIDs []string
	if err := db.Select(&unsentIDs, `SELECT headers->>'event_id' FROM outbox WHERE topic = $1 AND sent_at IS NULL AND parked_at IS NULL ORDER BY id`, topic); err != nil {
		t.Fatal(err)
	}
	if !equal(unsentIDs, []string{a1.ID}) {
		t.Fatalf("unsent = %v, want only the failed a1 [%s]", unsentIDs, a1.ID)
	}
}

// TestRunRetriesRowsHeldBack: a transaction that never touches the outbox
// (another service's, or another relay's) holds a row back. When it ends
// there is no NOTIFY, yet Run must publish the row promptly, not at its next
// poll an hour later.
func TestRunRetriesRowsHeldBack(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-held")
	ctx := context.Background()

	other := db.MustBeginTx(ctx, nil)
	defer other.Rollback()
	var xid string
	if err := other.Get(&xid, `SELECT pg_current_xact_id()::text`); err != nil { // takes a txid
		t.Fatal(err)
	}
	e := anyEvent(t)
	insert(t, db, topic, e) // held back behind other

	clock := newFakeClock()
	r := newRelay(t, db, producer(t), func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, r)
	// Once Run waits, its first round has looked, held the row back and
	// armed the retry.
	testenv.Eventually(t, 10*time.Second, "the relay waits after its first round", func() bool { return outbox.Waits(r) >= 1 })
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("unsent rows while held back = %d, want 1", n)
	}
	if n := clock.Pending(); n != idleTimers+1 {
		t.Fatalf("%d timers armed, want %d: the relay's own and a retry of the held-back row", n, idleTimers+1)
	}
	if err := other.Commit(); err != nil { // no NOTIFY
		t.Fatal(err)
	}
	settle(t, db)                       // nor does a transaction elsewhere hold it back
	clock.Advance(outbox.HeldBackRetry) // the first retry; the poll is an hour away
	got := eventIDs(testenv.ReadAll(t, topic, 1, 15*time.Second))
	if len(got) != 1 || got[0] != e.ID {
		t.Fatalf("published %v, want %s soon after the holding transaction ended", got, e.ID)
	}
}

// TestAddNotifiesUnlessTheRelayIsAwake: while the leader is awake, a
// transaction's Add sends no NOTIFY, and the leader cannot go to sleep
// until that transaction has ended, so its unannounced row is seen by the
// leader's last round; once the leader sleeps, Adds notify again.
func TestAddNotifiesUnlessTheRelayIsAwake(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	r := newRelay(t, db, accept)
	if _, err := r.Flush(ctx); err != nil { // elected
		t.Fatal(err)
	}
	l := pq.NewListener(db.url, 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { l.Close() })
	if err := l.Listen(outbox.Channel); err != nil {
		t.Fatal(err)
	}
	// notified commits a sentinel NOTIFY and reports whether an Add's
	// came before it: one transaction's notifications arrive before those
	// of any that committed later.
	notified := func() bool {
		t.Helper()
		if _, err := db.Exec(`SELECT pg_notify($1, 'sentinel')`, outbox.Channel); err != nil {
			t.Fatal(err)
		}
		added := false
		for {
			select {
			case n := <-l.Notify:
				if n == nil { // reconnected: notifications may be lost
					t.Fatal("the listener reconnected")
				}
				if n.Extra == "sentinel" {
					return added
				}
				added = true
			case <-time.After(30 * time.Second):
				t.Fatal("no sentinel notification within 30s")
			}
		}
	}
	addIn := func(tx *sqlx.Tx) {
		t.Helper()
		if err := outbox.Add(ctx, tx, message(t, "t", anyEvent(t))); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("AwakeNoNotify", func(t *testing.T) {
		if err := outbox.Awaken(r); err != nil {
			t.Fatal(err)
		}
		tx := db.MustBegin()
		defer tx.Rollback()
		addIn(tx)
		if alone, err := outbox.Doze(r); err != nil || alone {
			t.Fatalf("doze = %v, %v while a writer that saw the relay awake runs; want false", alone, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if notified() {
			t.Fatal("an Add notified while the relay was awake")
		}
	})
	t.Run("AsleepNotify", func(t *testing.T) {
		if alone, err := outbox.Doze(r); err != nil || !alone {
			t.Fatalf("doze = %v, %v with no writer running; want true", alone, err)
		}
		tx := db.MustBegin()
		defer tx.Rollback()
		addIn(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if !notified() {
			t.Fatal("an Add did not notify while the relay slept")
		}
	})
}

// TestPendingFlushesInOrderWithOneStatement: messages queued on a Pending
// are stored by Flush in the order queued — one key's rows keep their
// order for the relay — byte for byte (a nil key stays NULL, an empty one
// empty; values with NUL and invalid UTF-8; headers with the characters an
// array literal quotes), and a Flush with nothing queued sends nothing.
// Flushes of different sizes run one statement text, so a connection
// prepares it once.
func TestPendingFlushesInOrderWithOneStatement(t *testing.T) {
	db := testenv.DB(t)
	db.SetMaxOpenConns(1) // pg_prepared_statements below is this connection's
	ctx := context.Background()
	var p outbox.Pending
	if err := p.Flush(ctx, failingExecer{}); err != nil {
		t.Fatalf("an empty Flush sent a statement: %v", err)
	}
	msgs := []outbox.Message{
		{Topic: "t", Key: []byte("k"), Value: []byte("a"), Headers: map[string]string{"n": "0"}},
		{Topic: "t", Key: nil, Value: []byte{0, 'b', 0xff, 0}, Headers: map[string]string{"n": `1 "q" {x,y} \ NULL`}},
		{Topic: "t", Key: []byte{}, Value: []byte{}, Headers: map[string]string{"n": "2"}},
		{Topic: "t", Key: []byte{0xfe, 0}, Value: bytes.Repeat([]byte{0xc3}, 3000), Headers: map[string]string{"n": "3"}},
	}
	// Two transactions, of three messages and of one: two sizes.
	for _, batch := range [][]outbox.Message{msgs[:3], msgs[3:]} {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range batch {
			if err := p.Add(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if p.Len() != len(batch) {
			t.Fatalf("Len = %d, want %d", p.Len(), len(batch))
		}
		if err := p.Flush(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if p.Len() != 0 {
			t.Fatalf("Len after Flush = %d, want 0", p.Len())
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var rows []struct {
		Key   []byte `db:"key"`
		Null  bool   `db:"null_key"`
		Value []byte `db:"value"`
		N     string `db:"n"`
	}
	if err := db.Select(&rows, `SELECT key, key IS NULL AS null_key, value, headers->>'n' AS n FROM outbox WHERE topic = 't' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(msgs) {
		t.Fatalf("%d rows stored, want %d", len(rows), len(msgs))
	}
	for i, r := range rows {
		m := msgs[i]
		if r.Null != (m.Key == nil) || !bytes.Equal(r.Key, m.Key) || !bytes.Equal(r.Value, m.Value) || r.N != m.Headers["n"] {
			t.Errorf("row %d = key %q (null %v) value %q n %q; want message %d as queued: key %q value %q n %q",
				i, r.Key, r.Null, r.Value, r.N, i, m.Key, m.Value, m.Headers["n"])
		}
	}
	var shapes int
	if err := db.Get(&shapes, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO outbox%'
		AND statement NOT LIKE '%pg_prepared_statements%'`); err != nil {
		t.Fatal(err)
	}
	if shapes != 1 {
		t.Errorf("flushes of 3 and 1 messages prepared %d statements, want 1", shapes)
	}
}

// failingExecer fails every statement.
type failingExecer struct{}

func (failingExecer) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("no statement expected")
}
