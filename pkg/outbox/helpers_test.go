package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
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
	p, err := testenv.Kafka(t).NewSyncProducer("outbox-test")
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
// PublishOnce, or one wake-up of a relay whose clock stands still, to publish
// them would be flaky. Once settled, a row stays publishable.
func settle(t testing.TB, db *testDB) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "committed rows publishable, not held back by a transaction elsewhere", func() bool {
		var clear bool
		if err := db.Get(&clear, `SELECT NOT EXISTS (
			SELECT 1 FROM outbox
			WHERE sent_at IS NULL AND refused_at IS NULL
			  AND txid >= pg_snapshot_xmin(pg_current_snapshot()))`); err != nil {
			t.Fatal(err)
		}
		return clear
	})
}

// unsent counts the topic's rows waiting to be published: neither sent nor
// refused.
func unsent(t testing.TB, db *testDB, topic string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1 AND sent_at IS NULL AND refused_at IS NULL`, topic); err != nil {
		t.Fatal(err)
	}
	return n
}

// publishAll runs PublishOnce until the topic's rows are all sent, failing
// the test on any error. Rows can be held back for a moment by transactions
// still running elsewhere on the server (see Relay), hence the bounded
// wait.
func publishAll(t *testing.T, db *testDB, r *outbox.Relay, topic string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "all rows of "+topic+" sent", func() bool {
		if unsent(t, db, topic) == 0 {
			return true
		}
		if _, err := r.PublishOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		return unsent(t, db, topic) == 0
	})
}

// publishSome runs PublishOnce until it publishes something or fails. A
// relay that has just resigned ends its session, and the server releases
// its lock a moment later: until then another relay's PublishOnce rightly
// publishes nothing.
func publishSome(t *testing.T, r *outbox.Relay) (n int, err error) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "PublishOnce publishes something", func() bool {
		n, err = r.PublishOnce(context.Background())
		return err != nil || n > 0
	})
	return n, err
}

func eventIDs(msgs []*sarama.ConsumerMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = testenv.Header(m, events.HeaderEventID)
	}
	return ids
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

func equalIDs(a, b []int64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// addRaw stores m in the outbox in a transaction of its own and returns its
// row id.
func addRaw(t *testing.T, db *testDB, m outbox.Message) int64 {
	t.Helper()
	tx := db.MustBegin()
	defer tx.Rollback()
	if err := outbox.Add(context.Background(), tx, m); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.Get(&id, `SELECT currval(pg_get_serial_sequence('outbox', 'id'))`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	settle(t, db)
	return id
}

// refusedRows returns the ids of refused rows, in id order, checking that
// each says why.
func refusedRows(t *testing.T, db *testDB) []int64 {
	t.Helper()
	var rows []struct {
		ID        int64   `db:"id"`
		LastError *string `db:"last_error"`
	}
	if err := db.Select(&rows, `SELECT id, last_error FROM outbox WHERE refused_at IS NOT NULL ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		if r.LastError == nil || *r.LastError == "" {
			t.Errorf("refused row %d has no last_error", r.ID)
		}
		ids[i] = r.ID
	}
	return ids
}

// idleTimers is how many timers a running relay keeps armed at all times:
// its poll, its cleanup and its backlog gauge. One more is a retry of rows
// held back.
const idleTimers = 3

// pubFunc adapts a function to outbox.Publisher.
type pubFunc func(msgs []*sarama.ProducerMessage) error

func (f pubFunc) SendMessages(msgs []*sarama.ProducerMessage) error { return f(msgs) }

// accept acknowledges everything without a broker.
var accept = pubFunc(func([]*sarama.ProducerMessage) error { return nil })

// failTopic acknowledges every message except those for topic, which fail
// with err.
func failTopic(topic string, err error) pubFunc {
	return func(msgs []*sarama.ProducerMessage) error {
		var errs sarama.ProducerErrors
		for _, m := range msgs {
			if m.Topic == topic {
				errs = append(errs, &sarama.ProducerError{Msg: m, Err: err})
			}
		}
		if len(errs) > 0 {
			return errs
		}
		return nil
	}
}

// blocking is a publisher that hangs, as sarama does while it retries an
// unreachable cluster, until release is closed.
type blocking struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func newBlocking(t *testing.T) *blocking {
	b := &blocking{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(b.unblock)
	return b
}

func (b *blocking) SendMessages([]*sarama.ProducerMessage) error {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return nil
}

func (b *blocking) unblock() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func waitStarted(t *testing.T, b *blocking) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never started publishing")
	}
}

// recorder accepts every message and remembers the event ids, in order.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) SendMessages(msgs []*sarama.ProducerMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.ids = append(r.ids, headerOf(m, events.HeaderEventID))
	}
	return nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func headerOf(m *sarama.ProducerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// accepting is a Publisher that takes every batch and keeps it.
type accepting struct {
	mu   sync.Mutex
	sent []*sarama.ProducerMessage
}

func (a *accepting) SendMessages(msgs []*sarama.ProducerMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, msgs...)
	return nil
}
