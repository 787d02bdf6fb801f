package participant_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// The child process of TestCrashAfterCommitIsSkippedOnRedelivery reads its
// part from these variables.
const (
	childDB    = "AFTER_COMMIT_CHILD_DB"
	childTopic = "AFTER_COMMIT_CHILD_TOPIC"
	childGroup = "AFTER_COMMIT_CHILD_GROUP"
	childBatch = "AFTER_COMMIT_CHILD_BATCH"
	childOrder = "AFTER_COMMIT_CHILD_ORDER"
)

// TestCrashAfterCommitIsSkippedOnRedelivery pins the consumer's
// after-commit window (failpoint.AfterCommit) in both paths Run can take:
// the batch handler, which runs by default (CONSUMER_BATCH=32), and one
// transaction per event (CONSUMER_BATCH=1). A child process consumes one
// event with the point armed and is killed by it: the event's effect and
// its processed_events mark are committed, its offset is not. A new member
// of the group gets the event again and skips it as a duplicate: the
// effect stays applied once, the mark stays one, the duplicate counter
// rises, and the offset then passes the event.
func TestCrashAfterCommitIsSkippedOnRedelivery(t *testing.T) {
	if os.Getenv(childDB) != "" {
		crashChild(t)
		return
	}
	tests := []struct {
		name  string
		batch int
	}{
		{name: "BatchHandlerTheDefault", batch: participant.DefaultConfig("").ConsumerBatch},
		{name: "OneEventPerTransaction", batch: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := testenv.DB(t)
			if _, err := db.Exec(`CREATE TABLE applied (event_id uuid NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			service := testenv.ID("crasher")
			// The runtime's Guard takes an event only from its own topic,
			// which other tests write to as well: the group starts at its
			// end and handles only this test's order (onlyOrder).
			topic := events.TopicInventory
			testenv.StartAtEnd(t, service, topic)
			e := testenv.Event(t, testenv.ID("order"), events.InventoryReserved{
				Items: []events.Item{{SKU: "s", Quantity: 1, UnitPrice: 1}}, ShippingAddress: events.Address{Country: "JP"},
			})
			value, err := e.Encode()
			if err != nil {
				t.Fatal(err)
			}
			partition := testenv.Produce(t, topic, e.OrderID, string(value))
			offset := committed(t, service, topic, partition) // the event's: StartAtEnd committed the end

			child := exec.Command(os.Args[0], "-test.run=^TestCrashAfterCommitIsSkippedOnRedelivery$", "-test.v="+strconv.FormatBool(testing.Verbose()))
			// The child uses this process's Kafka and PostgreSQL, whichever,
			// and leaves reporting them (testenv.Report) to this process.
			child.Env = append(append(os.Environ(), testenv.Infra(t).Env()...), testenv.ReportEnv+"=", childDB+"="+schemaURL(t, db), childTopic+"="+topic,
				childGroup+"="+service, childBatch+"="+strconv.Itoa(tt.batch), childOrder+"="+e.OrderID)
			child.Stdout, child.Stderr = t.Output(), t.Output()
			err = child.Run()
			if ws, _ := child.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed by the after-commit point: %v", err)
			}
			wantApplied(t, db, e.ID, "after the crash")
			if got := committed(t, service, topic, partition); got != offset {
				t.Fatalf("after the crash the group's offset is %d, want %d: the kill did not fall between the commit and the mark", got, offset)
			}

			before := participant.Handled(service, events.TypeInventoryReserved, "duplicate")
			stop := consumeAgain(t, db, service, topic, e.OrderID, tt.batch)
			testenv.Eventually(t, time.Minute, "the redelivery skipped as a duplicate", func() bool {
				return participant.Handled(service, events.TypeInventoryReserved, "duplicate") == before+1
			})
			testenv.Consumed(t, time.Minute, service, topic) // the offset passes the event
			stop()
			wantApplied(t, db, e.ID, "after the redelivery")
			if got := participant.Handled(service, events.TypeInventoryReserved, "duplicate"); got != before+1 {
				t.Errorf("duplicates counted: %v, want %v", got-before, 1)
			}
		})
	}
}

// crashChild consumes the test's topic with the after-commit point armed.
// The point kills it at the first commit; returning is a failure.
func crashChild(t *testing.T) {
	if err := failpoint.Enable(failpoint.AfterCommit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db, err := pg.Open(ctx, os.Getenv(childDB), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := strconv.Atoi(os.Getenv(childBatch))
	if err != nil {
		t.Fatal(err)
	}
	group, err := consumer.New(groupConfig(t, db, os.Getenv(childGroup), os.Getenv(childTopic), os.Getenv(childOrder), batch))
	if err != nil {
		t.Fatal(err)
	}
	err = group.Run(ctx)
	t.Fatalf("the child was not killed at the commit: the group returned %v", err)
}

// consumeAgain runs the group in this process, as Run wires it, until stop.
func consumeAgain(t *testing.T, db *sqlx.DB, service, topic, orderID string, batch int) (stop func()) {
	t.Helper()
	group, err := consumer.New(groupConfig(t, db, service, topic, orderID, batch))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- group.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// groupConfig is the group participant.Run starts for a service that
// records each InventoryReserved it applies, consuming topic with batch
// events per transaction (1: Spec.Handler; more: Spec.BatchHandler), for
// the events of orderID only.
func groupConfig(t *testing.T, db *sqlx.DB, service, topic, orderID string, batch int) consumer.Config {
	log := testenv.Logger(t)
	spec := participant.Spec{
		Name:     service,
		Produces: events.TopicShipping,
		Reactions: []participant.Reaction{
			participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, _ events.InventoryReserved) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO applied (event_id) VALUES ($1)`, e.ID)
				return err
			}),
		},
	}
	cfg := consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: service, Topics: []string{topic},
		MaxBatch: batch, DeadLetter: spec.DeadLetterTo(db), Logger: log,
	}
	if batch > 1 {
		cfg.Batch = onlyOrder{orderID, spec.BatchHandler(db, log)}
	} else {
		h := spec.Handler(db, log)
		cfg.Handler = consumer.HandlerFunc(func(ctx context.Context, m *sarama.ConsumerMessage) error {
			if string(m.Key) != orderID {
				return nil // another test's
			}
			return h.Handle(ctx, m)
		})
	}
	return cfg
}

// onlyOrder hands next the messages of one order and acknowledges the
// others untouched: they are other tests', and would reach the commit (and
// the armed point) before this test's event.
type onlyOrder struct {
	orderID string
	next    consumer.BatchHandler
}

func (o onlyOrder) HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (*consumer.Failure, error) {
	mine := slices.DeleteFunc(slices.Clone(msgs), func(m *sarama.ConsumerMessage) bool { return string(m.Key) != o.orderID })
	if len(mine) == 0 {
		return nil, nil
	}
	return o.next.HandleBatch(ctx, mine)
}

// wantApplied fails unless the event was applied once and marked once.
func wantApplied(t *testing.T, db *sqlx.DB, eventID, when string) {
	t.Helper()
	var applied, marks int
	if err := db.Get(&applied, `SELECT count(*) FROM applied WHERE event_id = $1`, eventID); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&marks, `SELECT count(*) FROM processed_events WHERE event_id = $1`, eventID); err != nil {
		t.Fatal(err)
	}
	if applied != 1 || marks != 1 {
		t.Fatalf("%s: applied %d times, %d processed_events marks; want 1 and 1", when, applied, marks)
	}
}

// committed is group's committed offset on topic/partition (-1: none).
func committed(t *testing.T, group, topic string, partition int32) int64 {
	t.Helper()
	resp, err := testenv.Admin(t).ListConsumerGroupOffsets(group, map[string][]int32{topic: {partition}})
	if err != nil {
		t.Fatal(err)
	}
	b := resp.GetBlock(topic, partition)
	if b == nil || b.Err != sarama.ErrNoError {
		t.Fatalf("offset of %s on %s/%d: %+v", group, topic, partition, b)
	}
	return b.Offset
}

// schemaURL is the test database's URL with db's schema as search_path,
// for another process to see the same tables.
func schemaURL(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var schema string
	if err := db.Get(&schema, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
