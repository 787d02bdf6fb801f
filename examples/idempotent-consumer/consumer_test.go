package consumer_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	consumer "github.com/choreo-saga/choreo/examples/idempotent-consumer"
	"github.com/choreo-saga/choreo/internal/testenv"
)

// TestMain runs the test binary as the crashing consumer when a test starts
// it as a child process (see startChild), and as the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv("EXAMPLE_CHILD") != "" {
		os.Exit(child())
	}
	os.Exit(testenv.Main(m))
}

// state is what a delivery can change: the balance, and the rows of the
// two other tables.
type state struct{ balance, processed, outbox int64 }

var (
	before = state{balance: 100}                         // nothing applied
	once   = state{balance: 90, processed: 1, outbox: 1} // one debit of 10
)

// TestHandleAppliesOnce calls Handle as redeliveries and a rebalance would:
// the same message again, and the same message many times at once.
func TestHandleAppliesOnce(t *testing.T) {
	tests := []struct {
		name       string
		deliveries int
		concurrent bool
	}{
		// Fails if Handle goes on after a duplicate mark (delete the
		// `if n == 0` block after the INSERT): balance 80, two outbox rows.
		{name: "RedeliveryAppliesOnce", deliveries: 2},
		// Fails if the mark is a SELECT EXISTS before a plain INSERT,
		// which the redelivery above does not notice: deliveries that
		// both saw no row fail with a unique violation (20 runs of 20).
		{name: "SixteenConcurrentDeliveriesApplyOnce", deliveries: 16, concurrent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := newDB(t)
			msg := &sarama.ConsumerMessage{Value: request(t, uuid.NewString())}
			errs := make([]error, tt.deliveries)
			if tt.concurrent {
				warm(t, db, tt.deliveries)
				var start, done sync.WaitGroup
				start.Add(1)
				for i := range errs {
					done.Go(func() { start.Wait(); errs[i] = consumer.Handle(t.Context(), db, msg) })
				}
				start.Done() // all at once
				done.Wait()
			} else {
				for i := range errs {
					errs[i] = consumer.Handle(t.Context(), db, msg)
				}
			}
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("a delivery was not acknowledged: %v", err)
			}
			if got := read(t, db); got != once {
				t.Fatalf("after %d deliveries: %+v, want %+v", tt.deliveries, got, once)
			}
		})
	}
}

// TestHandleAppliesDistinctEvents keeps the de-duplication honest: it is by
// event id, so two payments of the same amount are two debits.
// Fails if the mark is keyed by anything else (in.Account for in.EventID).
func TestHandleAppliesDistinctEvents(t *testing.T) {
	db, _ := newDB(t)
	for range 2 {
		if err := consumer.Handle(t.Context(), db, &sarama.ConsumerMessage{Value: request(t, uuid.NewString())}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := read(t, db), (state{balance: 80, processed: 2, outbox: 2}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestHandleRefusesEventWithoutID: an event without an id is not applied,
// for if it were marked as "", every later such event would be skipped.
// Fails if the event_id check in Handle is deleted.
func TestHandleRefusesEventWithoutID(t *testing.T) {
	db, _ := newDB(t)
	if err := consumer.Handle(t.Context(), db, &sarama.ConsumerMessage{Value: request(t, "")}); err == nil {
		t.Fatal("Handle accepted an event without event_id")
	}
	if got := read(t, db); got != before {
		t.Fatalf("got %+v, want %+v", got, before)
	}
}

// TestCrashLosesNothing kills a consumer process with SIGKILL at a point in
// a message's handling, checks what the crash left, then runs a consumer
// of the same group again and checks that the message was redelivered (the
// restarted group commits its offset) and applied exactly once.
//
// The child is this test binary running the example's unmodified Consumer
// and Run. SIGKILL is the honest crash: no deferred code runs and sarama
// cannot commit on the way out, which an in-process cancel would let it do.
func TestCrashLosesNothing(t *testing.T) {
	tests := []struct {
		name string
		// crash starts a child and kills it, returning what the test
		// expects the crash to have left in the database.
		crash func(t *testing.T, db *sql.DB, env []string) state
	}{
		// The child's session kills the process when the Consumer calls
		// MarkMessage, i.e. after Handle committed and before any offset
		// reaches Kafka. Fails if the Consumer marks before Handle (the
		// crash then leaves nothing), or if Handle skips no duplicate
		// (the redelivery debits again).
		{name: "AfterCommitBeforeOffsetCommit", crash: func(t *testing.T, db *sql.DB, env []string) state {
			cmd := startChild(t, append(env, "EXAMPLE_CHILD=kill-at-mark"))
			waitKilled(t, cmd)
			return once
		}},
		// The test holds the account's row lock, so the child's
		// transaction has marked the event and waits in the debit; then
		// the child is killed and its transaction never commits. Fails if
		// the mark is not in the debit's transaction (run it on db, not
		// tx): the mark survives, and the redelivery is skipped as done.
		{name: "BeforeCommit", crash: func(t *testing.T, db *sql.DB, env []string) state {
			lock, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback()
			if _, err := lock.Exec(`SELECT 1 FROM accounts WHERE id = 'alice' FOR UPDATE`); err != nil {
				t.Fatal(err)
			}
			cmd := startChild(t, append(env, "EXAMPLE_CHILD=run"))
			testenv.Eventually(t, time.Minute, "the child's debit waits for the lock", func() bool {
				var n int
				err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
				return err == nil && n == 1
			})
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			waitKilled(t, cmd)
			return before
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, url := newDB(t)
			topic, group := testenv.Topic(t, "example"), "example-"+uuid.NewString()
			partition, offset := produce(t, topic, request(t, uuid.NewString()))
			env := append(os.Environ(), "EXAMPLE_DATABASE_URL="+url, "EXAMPLE_GROUP="+group, "EXAMPLE_TOPIC="+topic,
				"EXAMPLE_BROKERS="+strings.Join(kafka(t).Brokers, ","), "EXAMPLE_KAFKA_USER="+kafka(t).User, "EXAMPLE_KAFKA_PASSWORD="+kafka(t).Password)

			left := tt.crash(t, db, env)
			if got := read(t, db); got != left {
				t.Fatalf("after the crash: %+v, want %+v", got, left)
			}
			if got := committed(t, group, topic, partition); got != -1 {
				t.Fatalf("after the crash the group has committed offset %d, want none", got)
			}

			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- consumer.Run(ctx, kafka(t), group, topic, consumer.Consumer{DB: db}) }()
			testenv.Eventually(t, 2*time.Minute, "the restarted consumer commits past the message", func() bool {
				return committed(t, group, topic, partition) == offset+1
			})
			cancel()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			if got := read(t, db); got != once {
				t.Fatalf("after the restart: %+v, want %+v", got, once)
			}
		})
	}
}

// TestRelayPublishesOnce runs Relay over an outbox row that Handle wrote:
// the event is published once and its row marked sent. Fails if the relay
// does not mark rows (delete the UPDATE in relayOnce): the row stays unsent
// and each round publishes it again.
func TestRelayPublishesOnce(t *testing.T) {
	db, _ := newDB(t)
	cause := uuid.NewString()
	if err := consumer.Handle(t.Context(), db, &sarama.ConsumerMessage{Value: request(t, cause)}); err != nil {
		t.Fatal(err)
	}
	testenv.TopicWith(t, consumer.CompletedTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1})
	from := newest(t, consumer.CompletedTopic) // other runs' events are older

	producer, err := consumer.NewProducer(kafka(t))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- consumer.Relay(ctx, db, producer) }()
	testenv.Eventually(t, time.Minute, "the outbox row is marked sent", func() bool {
		var unsent int
		return db.QueryRow(`SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&unsent) == nil && unsent == 0
	})
	time.Sleep(500 * time.Millisecond) // five more rounds, to publish again if they would
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	var published int
	for _, m := range readFrom(t, consumer.CompletedTopic, from) {
		var ev consumer.PaymentCompleted
		if json.Unmarshal(m.Value, &ev) == nil && ev.Cause == cause {
			published++
		}
	}
	if published != 1 {
		t.Fatalf("PaymentCompleted for %s published %d times, want 1", cause, published)
	}
}

// newDB returns a database of the test's own with the schema applied and
// alice's account holding 100, and its URL.
func newDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	url := testenv.OwnDatabase(t)
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := consumer.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO accounts (id, balance) VALUES ('alice', 100)`); err != nil {
		t.Fatal(err)
	}
	return db, url
}

// warm opens n connections and keeps them idle in db's pool, so that n
// deliveries begin their transactions at once rather than one per
// connection set up.
func warm(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	db.SetMaxIdleConns(n)
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Close()
	}
}

// request encodes a PaymentRequested of 10 from alice.
func request(t *testing.T, eventID string) []byte {
	t.Helper()
	b, err := json.Marshal(consumer.PaymentRequested{EventID: eventID, Account: "alice", Amount: 10})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// read returns the database's state.
func read(t *testing.T, db *sql.DB) state {
	t.Helper()
	var s state
	if err := db.QueryRow(`SELECT (SELECT balance FROM accounts WHERE id = 'alice'),
		(SELECT count(*) FROM processed_events), (SELECT count(*) FROM outbox)`).Scan(&s.balance, &s.processed, &s.outbox); err != nil {
		t.Fatal(err)
	}
	return s
}

// produce publishes value to topic and returns where it was stored.
func produce(t *testing.T, topic string, value []byte) (int32, int64) {
	t.Helper()
	p, err := consumer.NewProducer(kafka(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	partition, offset, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("alice"), Value: sarama.ByteEncoder(value)})
	if err != nil {
		t.Fatal(err)
	}
	return partition, offset
}

// committed returns group's committed offset of the partition, -1 if none.
func committed(t *testing.T, group, topic string, partition int32) int64 {
	t.Helper()
	resp, err := testenv.Admin(t).ListConsumerGroupOffsets(group, map[string][]int32{topic: {partition}})
	if err != nil {
		t.Fatal(err)
	}
	if b := resp.GetBlock(topic, partition); b != nil {
		return b.Offset
	}
	return -1
}

// newest returns the next offset of the single-partition topic.
func newest(t *testing.T, topic string) int64 {
	t.Helper()
	c, err := sarama.NewClient(kafka(t).Brokers, kafka(t).Config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := c.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readFrom returns what partition 0 of topic holds from offset on.
func readFrom(t *testing.T, topic string, offset int64) []*sarama.ConsumerMessage {
	t.Helper()
	end := newest(t, topic)
	c, err := sarama.NewConsumer(kafka(t).Brokers, kafka(t).Config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	for offset < end {
		select {
		case m := <-pc.Messages():
			out, offset = append(out, m), m.Offset+1
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: read up to offset %d of %d", topic, offset, end)
		}
	}
	return out
}

// startChild runs this test binary as a consumer (see child) with env.
func startChild(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // if a step before the crash failed
	return cmd
}

// waitKilled waits for cmd to end and fails unless SIGKILL ended it.
func waitKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the child did not reach its crash point")
	}
}

// child is the crashing consumer: the example's Consumer and Run, with
// EXAMPLE_CHILD=kill-at-mark a session whose MarkMessage kills the process.
func child() int {
	db, err := sql.Open("postgres", os.Getenv("EXAMPLE_DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var h sarama.ConsumerGroupHandler = consumer.Consumer{DB: db}
	if os.Getenv("EXAMPLE_CHILD") == "kill-at-mark" {
		h = killAtMark{h}
	}
	k := consumer.Kafka{Brokers: strings.Split(os.Getenv("EXAMPLE_BROKERS"), ","), User: os.Getenv("EXAMPLE_KAFKA_USER"), Password: os.Getenv("EXAMPLE_KAFKA_PASSWORD")}
	err = consumer.Run(context.Background(), k, os.Getenv("EXAMPLE_GROUP"), os.Getenv("EXAMPLE_TOPIC"), h)
	fmt.Fprintln(os.Stderr, "child: Run returned:", err)
	return 1
}

// killAtMark hands the Consumer a session that dies on MarkMessage.
type killAtMark struct{ sarama.ConsumerGroupHandler }

func (k killAtMark) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	return k.ConsumerGroupHandler.ConsumeClaim(killingSession{s}, c)
}

type killingSession struct{ sarama.ConsumerGroupSession }

func (killingSession) MarkMessage(*sarama.ConsumerMessage, string) {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal arrives; nothing after the mark runs
}

// kafka is the test broker as the administrator.
func kafka(t *testing.T) consumer.Kafka {
	t.Helper()
	c := testenv.Kafka(t)
	pw, err := c.Secret()
	if err != nil {
		t.Fatal(err)
	}
	return consumer.Kafka{Brokers: c.Brokers, User: c.Username, Password: pw}
}
