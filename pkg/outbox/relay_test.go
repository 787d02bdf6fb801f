package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

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

// parkedRows returns the ids of parked rows, in id order, checking that
// each says why.
func parkedRows(t *testing.T, db *testDB) []int64 {
	t.Helper()
	var rows []struct {
		ID        int64   `db:"id"`
		LastError *string `db:"last_error"`
	}
	if err := db.Select(&rows, `SELECT id, last_error FROM outbox WHERE parked_at IS NOT NULL ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		if r.LastError == nil || *r.LastError == "" {
			t.Errorf("parked row %d has no last_error", r.ID)
		}
		ids[i] = r.ID
	}
	return ids
}

func equalIDs(a, b []int64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// flushSome runs Flush until it publishes something or fails. A relay that
// has just resigned ends its session, and the server releases its lock a
// moment later: until then another relay's Flush rightly publishes nothing.
func flushSome(t *testing.T, r *outbox.Relay) (n int, err error) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "Flush publishes something", func() bool {
		n, err = r.Flush(context.Background())
		return err != nil || n > 0
	})
	return n, err
}

// idleTimers is how many timers a running relay keeps armed at all times:
// its poll, its cleanup and its backlog gauge. One more is a retry of rows
// held back.
const idleTimers = 3

// TestNoTransactionOpenWhilePublishing: Kafka may take tens of seconds to
// answer, or fail to; no transaction may stay open meanwhile ("idle in
// transaction" holds back vacuum and every relay's xmin).
func TestNoTransactionOpenWhilePublishing(t *testing.T) {
	db := newDB(t)
	add(t, db, "t", anyEvent(t))
	pub := newBlocking(t)
	r := newRelay(t, db, pub)
	done := make(chan error, 1)
	go func() { _, err := r.Flush(context.Background()); done <- err }() // add settled the row
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
	if n, err := flushSome(t, newRelay(t, db, accept)); err != nil || n != 1 {
		t.Fatalf("successor Flush = %d, %v; want 1, nil", n, err)
	}
}

// TestLeaderReelectsAfterConnectionDies: the leadership lives in the
// leader's session. When that session dies, a standby takes over, and the
// old leader notices on its next round and stands by.
func TestLeaderReelectsAfterConnectionDies(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	r1, r2 := newRelay(t, db, accept), newRelay(t, db, accept)

	add(t, db, "t", anyEvent(t))
	if n, err := flushSome(t, r1); err != nil || n != 1 {
		t.Fatalf("r1 Flush = %d, %v; want 1, nil", n, err)
	}
	add(t, db, "t", anyEvent(t))
	if n, err := r2.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("r2 Flush while r1 leads = %d, %v; want 0, nil", n, err)
	}

	pid, err := outbox.LeaderPID(r1)
	if err != nil || pid == 0 {
		t.Fatalf("r1 leader pid = %d, %v", pid, err)
	}
	if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "r2 takes over", func() bool {
		n, err := r2.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	add(t, db, "t", anyEvent(t))
	if n, err := r1.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("r1 Flush after losing its session = %d, %v; want 0, nil (r2 leads)", n, err)
	}
	r2.Close()
	if n, err := flushSome(t, r1); err != nil || n != 1 {
		t.Fatalf("r1 Flush after r2 resigned = %d, %v; want 1, nil", n, err)
	}
}

// TestRunPublishesWhileListenCannotConnect: LISTEN blocks while its
// connection cannot be made; the poll must publish meanwhile, and Run must
// still stop when asked.
func TestRunPublishesWhileListenCannotConnect(t *testing.T) {
	db := newDB(t)
	got := make(chan string, 10)
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		for _, m := range msgs {
			got <- m.Topic
		}
		return nil
	})
	clock := newFakeClock()
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) {
		c.DatabaseURL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=1"
		c.PollInterval = 50 * time.Millisecond
		c.Clock = clock
	})
	stop := testenv.Background(t, "the relay", 5*time.Second, r.Run)

	testenv.Eventually(t, 10*time.Second, "the first round over", func() bool { return outbox.Waits(r) >= 1 })
	add(t, db, "t", anyEvent(t))         // no NOTIFY reaches the relay
	clock.Advance(50 * time.Millisecond) // the poll
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published within 10s of the poll: the poll does not run while LISTEN waits")
	}
	stop()
}

// TestPermanentFailuresAreParkedAndTheRestFlows: rows Kafka will never
// accept — too large, for an invalid topic name, with headers the relay
// cannot read — are parked, with the reason, and counted; the others are
// published, in order, and the round reports no error to back off on.
func TestPermanentFailuresAreParkedAndTheRestFlows(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-park")
	orderID := testenv.ID("order")
	a1, a2, a3 := event(t, orderID), event(t, orderID), event(t, orderID)

	add(t, db, topic, a1)
	huge := addRaw(t, db, outbox.Message{Topic: topic, Key: []byte(orderID), Value: make([]byte, 1100<<10)})
	add(t, db, topic, a2)
	badTopic := addRaw(t, db, outbox.Message{Topic: "no such topic!", Key: []byte(orderID), Value: []byte("{}")})
	var badHeaders int64
	if err := db.Get(&badHeaders, `INSERT INTO outbox (topic, value, headers) VALUES ($1, '', '{"n": 1}') RETURNING id`, topic); err != nil {
		t.Fatal(err)
	}
	add(t, db, topic, a3)

	r := newRelay(t, db, producer(t))
	before := outbox.Parked(t.Name())
	flushAll(t, db, r, topic) // fails the test on any error

	if ids := parkedRows(t, db); !equalIDs(ids, []int64{huge, badTopic, badHeaders}) {
		t.Fatalf("parked rows = %v, want [%d %d %d]", ids, huge, badTopic, badHeaders)
	}
	if d := outbox.Parked(t.Name()) - before; d != 3 {
		t.Errorf("choreo_outbox_parked_total grew by %v, want 3", d)
	}
	got := eventIDs(testenv.ReadAll(t, topic, 3, 20*time.Second))
	if want := []string{a1.ID, a2.ID, a3.ID}; !equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	// Parked rows stay parked: later rounds neither publish nor error.
	if n, err := r.Flush(context.Background()); err != nil || n != 0 {
		t.Fatalf("Flush with only parked rows left = %d, %v; want 0, nil", n, err)
	}
}

// TestBatchRejectionParksOnlyTheOffendingRow: Kafka rejects a whole
// partition batch when one message in it is too large for the topic. The
// relay sends the rejected rows alone to find the culprit, parks it, and
// publishes the others.
func TestBatchRejectionParksOnlyTheOffendingRow(t *testing.T) {
	db := newDB(t)
	topic := testenv.ID("test.outbox-small")
	limit := "1000"
	testenv.TopicWith(t, topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"max.message.bytes": &limit}})

	orderID := testenv.ID("order")
	var want []string
	var big int64
	for i, size := range []int{600, 600, 2000, 600} {
		e := event(t, orderID)
		value := bytes.Repeat([]byte("x"), size)
		id := addRaw(t, db, outbox.Message{Topic: topic, Key: []byte(orderID), Value: value,
			Headers: map[string]string{events.HeaderEventID: e.ID}})
		if i == 2 {
			big = id
		} else {
			want = append(want, e.ID)
		}
	}
	flushAll(t, db, newRelay(t, db, producer(t)), topic)

	if ids := parkedRows(t, db); !equalIDs(ids, []int64{big}) {
		t.Fatalf("parked rows = %v, want only the 2000-byte row [%d]", ids, big)
	}
	got := map[string]bool{}
	for _, id := range eventIDs(testenv.ReadAll(t, topic, len(want), 20*time.Second)) {
		got[id] = true
	}
	for _, id := range want {
		if !got[id] {
			t.Errorf("event %s not published", id)
		}
	}
}

// TestUnknownTopicIsParkedOnlyAfterGrace: a topic unknown to Kafka may be
// being created; its rows are retried for a while, then parked.
func TestUnknownTopicIsParkedOnlyAfterGrace(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	gone := addRaw(t, db, outbox.Message{Topic: "gone", Value: []byte("{}")})
	add(t, db, "here", anyEvent(t))

	clock := newFakeClock()
	r := newRelay(t, db, failTopic("gone", sarama.ErrUnknownTopicOrPartition), func(c *outbox.RelayConfig) {
		c.Clock = clock
	})
	n, err := r.Flush(ctx)
	if err == nil || n != 1 {
		t.Fatalf("first Flush = %d, %v; want 1 and the unknown topic reported", n, err)
	}
	if ids := parkedRows(t, db); len(ids) != 0 {
		t.Fatalf("parked %v at once, want the row retried during the grace period", ids)
	}
	clock.Advance(outbox.UnknownTopicGrace - time.Second)
	if n, err := r.Flush(ctx); err == nil || n != 0 {
		t.Fatalf("Flush within the grace period = %d, %v; want 0 and the unknown topic reported", n, err)
	}
	if ids := parkedRows(t, db); len(ids) != 0 {
		t.Fatalf("parked %v within the grace period, want the row retried", ids)
	}
	clock.Advance(time.Second) // the grace is over, counted from the first failure
	if n, err := r.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("Flush after the grace period = %d, %v; want 0, nil", n, err)
	}
	if ids := parkedRows(t, db); !equalIDs(ids, []int64{gone}) {
		t.Fatalf("parked rows = %v, want [%d]", ids, gone)
	}
}

// TestProgressSkipsFailureBackoff: a row that keeps failing must not slow
// down the rows behind it. Every round here publishes one row and fails the
// same other one; the relay's clock stands still, so a single failure
// backoff would stop it for good.
func TestProgressSkipsFailureBackoff(t *testing.T) {
	db := newDB(t)
	add(t, db, "stuck", anyEvent(t))
	for range 8 {
		add(t, db, "flowing", anyEvent(t))
	}
	r := newRelay(t, db, failTopic("stuck", sarama.ErrNotLeaderForPartition), func(c *outbox.RelayConfig) {
		c.BatchSize = 2
		c.Clock = newFakeClock()
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "all flowing rows published", func() bool { return unsent(t, db, "flowing") == 0 })
	if n := unsent(t, db, "stuck"); n != 1 {
		t.Fatalf("stuck rows = %d, want 1 (failing, retried, not parked)", n)
	}
}

// TestRunBacksOffWhileRowsAreHeldBack: a row held back behind a long
// transaction elsewhere is retried soon, then less and less often — not
// every 10ms for as long as the transaction runs.
func TestRunBacksOffWhileRowsAreHeldBack(t *testing.T) {
	db := newDB(t)
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, "t", anyEvent(t))

	clock := newFakeClock()
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, r)
	// Move the clock through two seconds, timer by timer, each time once the
	// relay has armed its next retry.
	const window = 2 * time.Second
	for elapsed := time.Duration(0); ; {
		testenv.Eventually(t, 10*time.Second, "the relay waits to retry the held-back row", func() bool {
			return clock.Pending() == idleTimers+1
		})
		d, _ := clock.Next()
		if elapsed+d > window {
			break
		}
		clock.Advance(d)
		elapsed += d
	}
	// 10ms doubling: 7 retries in 2s (at 10, 30, 70, ... 1270ms); a fixed
	// 10ms retry makes 200.
	t.Logf("%d retries, %d waits in %v", outbox.HeldBackRetries(r), outbox.Waits(r), window)
	if n := outbox.HeldBackRetries(r); n < 2 || n > 12 {
		t.Fatalf("%d held-back retries in 2s, want a backoff from 10ms (2 to 12)", n)
	}
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d while held back, want 1", n)
	}
}

// TestStandbyRelayDoesNotSpin: a relay that does not lead leaves unsent
// rows to the leader and waits for its next wake-up.
func TestStandbyRelayDoesNotSpin(t *testing.T) {
	db := newDB(t)
	leader := newRelay(t, db, accept)
	if _, err := leader.Flush(context.Background()); err != nil { // elected; not running
		t.Fatal(err)
	}
	clock := newFakeClock()
	standby := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, standby)
	testenv.Eventually(t, 10*time.Second, "the standby listens and waits", func() bool {
		return outbox.Listening(standby) && outbox.Waits(standby) >= 1
	})
	add(t, db, "t", anyEvent(t)) // its NOTIFY wakes the standby
	testenv.Eventually(t, 10*time.Second, "the standby, woken, waits again", func() bool { return outbox.Waits(standby) >= 2 })
	if n := clock.Pending(); n != idleTimers {
		t.Fatalf("the standby armed %d timers, want only its %d own: it would retry rows it cannot publish", n, idleTimers)
	}
	clock.Advance(time.Second)
	t.Logf("%d standby waits, %d retries in 1s", outbox.Waits(standby), outbox.HeldBackRetries(standby))
	if n := outbox.HeldBackRetries(standby); n != 0 {
		t.Fatalf("standby retried %d times in 1s, want it to wait for a wake-up", n)
	}
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the row left to the leader", n)
	}
}

// TestCleanupRunsDespiteBacklog: sent rows past Retention are deleted on
// their own schedule, even while rows wait (here, held back for good).
func TestCleanupRunsDespiteBacklog(t *testing.T) {
	db := newDB(t)
	if _, err := db.Exec(`INSERT INTO outbox (topic, value, sent_at) VALUES ('old', '', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, "t", anyEvent(t)) // held back behind other

	clock := newFakeClock()
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Second // cleanup every 30s
		c.Retention = time.Minute
		c.Clock = clock
	})
	run(t, r)
	oldRows := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = 'old'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, 10*time.Second, "the relay leads and waits", func() bool { return outbox.Waits(r) >= 1 })
	if n := oldRows(); n != 1 {
		t.Fatalf("old sent rows = %d before the cleanup timer fired, want 1", n)
	}
	clock.Advance(30 * time.Second)
	testenv.Eventually(t, 10*time.Second, "old sent row deleted", func() bool { return oldRows() == 0 })
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the held-back row kept", n)
	}
}

// TestBacklogGaugeGrowsWhileKafkaFails: the age of the oldest waiting row
// is the alert for an outage, so it must keep growing while no round
// succeeds.
func TestBacklogGaugeGrowsWhileKafkaFails(t *testing.T) {
	db := newDB(t)
	down := pubFunc(func([]*sarama.ProducerMessage) error {
		return errors.New("kafka: client has run out of available brokers")
	})
	clock := newFakeClock()
	name := testenv.ID(t.Name()) // a gauge of its own under -count
	r := newRelay(t, db, down, func(c *outbox.RelayConfig) {
		c.Name = name
		c.Clock = clock
	})
	gauge := func() float64 { return outbox.OldestUnsent(name) }
	// The age is the database's: make the row older there, instead of
	// waiting for it to age.
	age := func(d time.Duration) {
		if _, err := db.Exec(`UPDATE outbox SET created_at = created_at - make_interval(secs => $1)`, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	add(t, db, "t", anyEvent(t))
	age(10 * time.Minute)
	run(t, r)

	testenv.Eventually(t, 10*time.Second, "gauge ≥ 600s", func() bool { return gauge() >= 600 })
	first := gauge()
	age(time.Hour)                   // an hour on, Kafka still down
	clock.Advance(outbox.GaugeEvery) // the gauge's timer, not a successful round, refreshes it
	testenv.Eventually(t, 10*time.Second, "gauge grows by 3600s", func() bool { return gauge() >= first+3600 })
}

// TestRelayLogsCarryItsName: RelayConfig.Name labels the logs, so that the
// relay of one service can be told from another's.
func TestRelayLogsCarryItsName(t *testing.T) {
	db := newDB(t)
	var buf bytes.Buffer
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.Name = "relay-under-test"
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	add(t, db, "t", anyEvent(t))
	if _, err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("the relay logged nothing")
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["relay"] != "relay-under-test" {
			t.Errorf("log line without relay=relay-under-test: %s", l)
		}
	}
}

// TestParkedMigrationIsIdempotent: applying 00002 again, as a hand-run
// repair might, changes nothing, and leaves the relay's index covering only
// publishable rows.
func TestParkedMigrationIsIdempotent(t *testing.T) {
	db := newDB(t)
	src, err := fs.ReadFile(outbox.Migrations, "migrations/00002_outbox_parked.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, _, _ := strings.Cut(string(src), "-- +goose Down")
	if _, err := db.Exec(up); err != nil {
		t.Fatalf("applying 00002 again: %v", err)
	}
	var defs []string
	if err := db.Select(&defs, `SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'outbox' ORDER BY indexname`); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(defs, "\n")
	if strings.Contains(joined, "outbox_unsent") {
		t.Errorf("old index outbox_unsent still there:\n%s", joined)
	}
	if !strings.Contains(joined, "outbox_publishable") || !strings.Contains(joined, "parked_at IS NULL") {
		t.Errorf("no index on publishable rows excluding parked ones:\n%s", joined)
	}
}

// TestNoRowWaitsForThePoll: writers Add rows — one to three a
// transaction, some outside one, a tenth rolled back — while the relay
// runs with an hourly poll, so that only its wake-ups (a NOTIFY, or the
// rounds it runs while awake) can publish them: every committed row is
// published, however the writers' commits fall against the relay going to
// sleep — with a standby relay, and, in Failover, the leader's session
// killed again and again.
func TestNoRowWaitsForThePoll(t *testing.T) {
	for _, failover := range []bool{false, true} {
		name := map[bool]string{false: "OneLeader", true: "Failover"}[failover]
		t.Run(name, func(t *testing.T) { noRowWaits(t, failover) })
	}
}

func noRowWaits(t *testing.T, failover bool) {
	db := newDB(t)
	var mu sync.Mutex
	published := map[string]bool{}
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			for _, h := range m.Headers {
				if string(h.Key) == events.HeaderEventID {
					published[string(h.Value)] = true
				}
			}
		}
		return nil
	})
	hourly := func(c *outbox.RelayConfig) { c.PollInterval, c.Lease = time.Hour, 3*time.Hour }
	r := newRelay(t, db, pub, hourly)
	run(t, r)
	standby := newRelay(t, db, pub, hourly, func(c *outbox.RelayConfig) { c.Name = t.Name() + "-standby" })
	run(t, standby)
	testenv.Eventually(t, 10*time.Second, "the relay listens", func() bool { return outbox.Listening(r) })

	ctx := context.Background()
	var cmu sync.Mutex
	var committed []string
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if rand.IntN(4) == 0 { // now and then, a quiet spell: the relay dozes
					time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
				}
				if rand.IntN(5) == 0 { // outside a transaction
					e := anyEvent(t)
					if err := outbox.Add(ctx, db.DB, message(t, "t", e)); err != nil {
						t.Error(err)
						return
					}
					cmu.Lock()
					committed = append(committed, e.ID)
					cmu.Unlock()
					continue
				}
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				var ids []string
				for range 1 + rand.IntN(3) {
					e := anyEvent(t)
					if err := outbox.Add(ctx, tx, message(t, "t", e)); err != nil {
						t.Error(err)
						tx.Rollback()
						return
					}
					ids = append(ids, e.ID)
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				}
				if rand.IntN(10) == 0 {
					tx.Rollback()
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				cmu.Lock()
				committed = append(committed, ids...)
				cmu.Unlock()
			}
		})
	}
	if failover {
		wg.Go(func() {
			for time.Now().Before(stop) {
				time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
				for _, rr := range []*outbox.Relay{r, standby} {
					if pid, err := outbox.LeaderPID(rr); err == nil && pid != 0 {
						db.Exec(`SELECT pg_terminate_backend($1)`, pid)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() { // before the relays stop: what a stall left behind
		if !t.Failed() {
			return
		}
		var unsent int
		db.Get(&unsent, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`)
		var locks []string
		db.Select(&locks, `SELECT format('pid %s objid %s %s granted %s', pid, objid, mode, granted)
			FROM pg_locks WHERE locktype = 'advisory'`)
		for name, rr := range map[string]*outbox.Relay{"relay": r, "standby": standby} {
			pid, err := outbox.LeaderPID(rr)
			t.Logf("%s: leader pid %d (%v), listening %v, waits %d, retries %d",
				name, pid, err, outbox.Listening(rr), outbox.Waits(rr), outbox.HeldBackRetries(rr))
		}
		t.Logf("unsent rows %d; advisory locks %v", unsent, locks)
	})
	testenv.Eventually(t, 20*time.Second, "every committed row published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range committed {
			if !published[id] {
				return false
			}
		}
		return true
	})
}

// TestARoundReadsABoundedNumberOfBytes: however large the rows, a round
// reads and publishes at most about 32 MiB of values (and at least one
// row), and the rounds go on until all are sent.
func TestARoundReadsABoundedNumberOfBytes(t *testing.T) {
	db := newDB(t)
	big := make([]byte, 1<<20)
	for i := range 40 {
		big[0] = byte(i)
		if _, err := db.Exec(`INSERT INTO outbox (topic, key, value) VALUES ('t', 'k', $1)`, big); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var sizes []int // bytes of values per publish
	sent := 0
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range msgs {
			n += m.Value.Length()
		}
		sizes, sent = append(sizes, n), sent+len(msgs)
		return nil
	})
	run(t, newRelay(t, db, pub))
	testenv.Eventually(t, 30*time.Second, "all 40 rows published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sent >= 40
	})
	mu.Lock()
	defer mu.Unlock()
	for _, n := range sizes {
		if n > 33<<20 {
			t.Fatalf("a round published %d MiB of values; want at most 32 MiB and one row", n>>20)
		}
	}
	if len(sizes) < 2 {
		t.Fatalf("%d rounds for 40 MiB, want more than one", len(sizes))
	}
}
