package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
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
func addRaw(t *testing.T, db *sqlx.DB, m outbox.Message) int64 {
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
func parkedRows(t *testing.T, db *sqlx.DB) []int64 {
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

// flushSome runs Flush until it publishes something, fails, or ten seconds
// pass. A fresh row can be held back for a moment by any transaction running
// in the cluster — other test packages' included — and Flush then rightly
// publishes nothing yet.
func flushSome(r *outbox.Relay) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := r.Flush(context.Background())
		if err != nil || n > 0 || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoTransactionOpenWhilePublishing: Kafka may take tens of seconds to
// answer, or fail to; no transaction may stay open meanwhile ("idle in
// transaction" holds back vacuum and every relay's xmin).
func TestNoTransactionOpenWhilePublishing(t *testing.T) {
	db := testenv.DB(t)
	add(t, db, "t", event(t, uuid.NewString()))
	pub := newBlocking(t)
	r := newRelay(t, db, pub)
	done := make(chan error, 1)
	go func() { _, err := flushSome(r); done <- err }()
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
	db := testenv.DB(t)
	add(t, db, "t", event(t, uuid.NewString()))
	pub := newBlocking(t)
	r := newRelay(t, db, pub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitStarted(t, pub)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run still running 3s after its context ended, while the publish hangs")
	}
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the row left for the next leader", n)
	}
	// Run gave up the leadership on its way out: another relay takes over.
	if n, err := flushSome(newRelay(t, db, accept)); err != nil || n != 1 {
		t.Fatalf("successor Flush = %d, %v; want 1, nil", n, err)
	}
}

// TestLeaderReelectsAfterConnectionDies: the leadership lives in the
// leader's session. When that session dies, a standby takes over, and the
// old leader notices on its next round and stands by.
func TestLeaderReelectsAfterConnectionDies(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	r1, r2 := newRelay(t, db, accept), newRelay(t, db, accept)

	add(t, db, "t", event(t, uuid.NewString()))
	if n, err := flushSome(r1); err != nil || n != 1 {
		t.Fatalf("r1 Flush = %d, %v; want 1, nil", n, err)
	}
	add(t, db, "t", event(t, uuid.NewString()))
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
	eventually(t, 10*time.Second, "r2 takes over", func() bool {
		n, err := r2.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	add(t, db, "t", event(t, uuid.NewString()))
	if n, err := r1.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("r1 Flush after losing its session = %d, %v; want 0, nil (r2 leads)", n, err)
	}
	r2.Close()
	if n, err := flushSome(r1); err != nil || n != 1 {
		t.Fatalf("r1 Flush after r2 resigned = %d, %v; want 1, nil", n, err)
	}
}

// TestRunPublishesWhileListenCannotConnect: LISTEN blocks while its
// connection cannot be made; the poll must publish meanwhile, and Run must
// still stop when asked.
func TestRunPublishesWhileListenCannotConnect(t *testing.T) {
	db := testenv.DB(t)
	got := make(chan string, 10)
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		for _, m := range msgs {
			got <- m.Topic
		}
		return nil
	})
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) {
		c.DatabaseURL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=1"
		c.PollInterval = 50 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	add(t, db, "t", event(t, uuid.NewString()))
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published within 10s: the poll does not run while LISTEN waits")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5s after its context ended")
	}
}

// TestPermanentFailuresAreParkedAndTheRestFlows: rows Kafka will never
// accept — too large, for an invalid topic name, with headers the relay
// cannot read — are parked, with the reason, and counted; the others are
// published, in order, and the round reports no error to back off on.
func TestPermanentFailuresAreParkedAndTheRestFlows(t *testing.T) {
	db := testenv.DB(t)
	topic := testenv.Topic(t, "outbox-park")
	orderID := uuid.NewString()
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
	db := testenv.DB(t)
	topic := fmt.Sprintf("test.outbox-small.%s", uuid.NewString()[:8])
	admin, err := sarama.NewClusterAdmin(testenv.Brokers(t), broker.Config("test"))
	if err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	limit := "1000"
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"max.message.bytes": &limit}}, false)
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}

	orderID := uuid.NewString()
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
	db := testenv.DB(t)
	ctx := context.Background()
	gone := addRaw(t, db, outbox.Message{Topic: "gone", Value: []byte("{}")})
	add(t, db, "here", event(t, uuid.NewString()))

	r := newRelay(t, db, failTopic("gone", sarama.ErrUnknownTopicOrPartition))
	outbox.SetUnknownTopicGrace(r, 300*time.Millisecond)
	start := time.Now()
	n, err := r.Flush(ctx)
	if err == nil || n != 1 {
		t.Fatalf("first Flush = %d, %v; want 1 and the unknown topic reported", n, err)
	}
	if ids := parkedRows(t, db); len(ids) != 0 {
		t.Fatalf("parked %v at once, want the row retried during the grace period", ids)
	}
	time.Sleep(400*time.Millisecond - time.Since(start)) // past the grace, counted from the first failure
	if n, err := r.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("Flush after the grace period = %d, %v; want 0, nil", n, err)
	}
	if ids := parkedRows(t, db); !equalIDs(ids, []int64{gone}) {
		t.Fatalf("parked rows = %v, want [%d]", ids, gone)
	}
}

// TestProgressSkipsFailureBackoff: a row that keeps failing must not slow
// down the rows behind it. Every round here publishes one row and fails the
// same other one; the failure backoff (up to 3s) would take many seconds.
func TestProgressSkipsFailureBackoff(t *testing.T) {
	db := testenv.DB(t)
	add(t, db, "stuck", event(t, uuid.NewString()))
	for range 8 {
		add(t, db, "flowing", event(t, uuid.NewString()))
	}
	r := newRelay(t, db, failTopic("stuck", sarama.ErrNotLeaderForPartition), func(c *outbox.RelayConfig) {
		c.BatchSize = 2
	})
	run(t, r)
	eventually(t, 3*time.Second, "all flowing rows published", func() bool { return unsent(t, db, "flowing") == 0 })
	if n := unsent(t, db, "stuck"); n != 1 {
		t.Fatalf("stuck rows = %d, want 1 (failing, retried, not parked)", n)
	}
}

// TestRunBacksOffWhileRowsAreHeldBack: a row held back behind a long
// transaction elsewhere is retried soon, then less and less often — not
// every 10ms for as long as the transaction runs.
func TestRunBacksOffWhileRowsAreHeldBack(t *testing.T) {
	db := testenv.DB(t)
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	add(t, db, "t", event(t, uuid.NewString()))

	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) { c.PollInterval = time.Hour })
	run(t, r)
	time.Sleep(2 * time.Second)
	// 10ms doubling: about 8 retries in 2s; a fixed 10ms retry makes about
	// 200. (NOTIFYs from other tests sharing the database wake it too; those
	// rounds are not retries and are not counted.)
	t.Logf("%d retries, %d rounds in 2s", outbox.HeldBackRetries(r), outbox.Rounds(r))
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
	db := testenv.DB(t)
	leader := newRelay(t, db, accept)
	if _, err := leader.Flush(context.Background()); err != nil { // elected; not running
		t.Fatal(err)
	}
	standby := newRelay(t, db, accept, func(c *outbox.RelayConfig) { c.PollInterval = time.Hour })
	run(t, standby)
	add(t, db, "t", event(t, uuid.NewString()))
	time.Sleep(time.Second)
	t.Logf("%d standby rounds, %d retries in 1s", outbox.Rounds(standby), outbox.HeldBackRetries(standby))
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
	db := testenv.DB(t)
	if _, err := db.Exec(`INSERT INTO outbox (topic, value, sent_at) VALUES ('old', '', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	add(t, db, "t", event(t, uuid.NewString())) // held back behind other

	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = 20 * time.Millisecond // cleanup every 600ms
		c.Retention = time.Minute
	})
	run(t, r)
	eventually(t, 10*time.Second, "old sent row deleted", func() bool {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = 'old'`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the held-back row kept", n)
	}
}

// TestBacklogGaugeGrowsWhileKafkaFails: the age of the oldest waiting row
// is the alert for an outage, so it must keep growing while no round
// succeeds.
func TestBacklogGaugeGrowsWhileKafkaFails(t *testing.T) {
	db := testenv.DB(t)
	down := pubFunc(func([]*sarama.ProducerMessage) error {
		return errors.New("kafka: client has run out of available brokers")
	})
	r := newRelay(t, db, down)
	outbox.SetGaugeInterval(r, 50*time.Millisecond)
	gauge := func() float64 { return outbox.OldestUnsent(t.Name()) }
	add(t, db, "t", event(t, uuid.NewString()))
	run(t, r)

	eventually(t, 10*time.Second, "gauge ≥ 0.3s", func() bool { return gauge() >= 0.3 })
	first := gauge()
	eventually(t, 10*time.Second, "gauge grows by 0.5s", func() bool { return gauge() >= first+0.5 })
}

// TestRelayLogsCarryItsName: RelayConfig.Name labels the logs, so that the
// relay of one service can be told from another's.
func TestRelayLogsCarryItsName(t *testing.T) {
	db := testenv.DB(t)
	var buf bytes.Buffer
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.Name = "relay-under-test"
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	add(t, db, "t", event(t, uuid.NewString()))
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
	db := testenv.DB(t)
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
