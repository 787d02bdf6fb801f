package outbox_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestBatchRejectionRefusesOnlyTheOffendingRow: Kafka rejects a whole
// partition batch when one message in it is too large for the topic. The
// relay sends the rejected rows alone to find the culprit, refuses it, and
// publishes the others.
func TestBatchRejectionRefusesOnlyTheOffendingRow(t *testing.T) {
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
	publishAll(t, db, newRelay(t, db, producer(t)), topic)

	if ids := refusedRows(t, db); !equalIDs(ids, []int64{big}) {
		t.Fatalf("refused rows = %v, want only the 2000-byte row [%d]", ids, big)
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
// those: leaving a2 unmarked would publish it twice (a2, a1, a2), not in order.
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
	n, err := newRelay(t, db, failFirst{}).PublishOnce(context.Background())
	if err == nil {
		t.Fatal("want the partial failure reported")
	}
	if n != 2 {
		t.Fatalf("PublishOnce published %d, want 2", n)
	}
	var unsentIDs []string
	if err := db.Select(&unsentIDs, `SELECT headers->>'event_id' FROM outbox WHERE topic = $1 AND sent_at IS NULL AND refused_at IS NULL ORDER BY id`, topic); err != nil {
		t.Fatal(err)
	}
	if !equal(unsentIDs, []string{a1.ID}) {
		t.Fatalf("unsent = %v, want only the failed a1 [%s]", unsentIDs, a1.ID)
	}
}
