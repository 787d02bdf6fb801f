package tracker_test

import (
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/tracker"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// client returns a Kafka client of the test's broker, closed when the test
// ends.
func client(t *testing.T) sarama.Client {
	t.Helper()
	c, err := sarama.NewClient(testenv.Brokers(t), broker.Config("tracker-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dropAll deletes every record topic holds so far, as retention would:
// its partitions' earliest offsets move up to their ends. Only ever on a
// test's own topic: other packages' tests share the saga's topics.
func dropAll(t *testing.T, topic string) {
	t.Helper()
	c := client(t)
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	end := make(map[int32]int64, len(parts))
	for _, p := range parts {
		if end[p], err = c.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			t.Fatal(err)
		}
	}
	if err := testenv.Admin(t).DeleteRecords(topic, end); err != nil {
		t.Fatalf("delete records of %s: %v", topic, err)
	}
}

// publishTo sends each envelope to topic keyed by its order id.
func publishTo(t *testing.T, topic string, envs ...events.Envelope) {
	t.Helper()
	for _, e := range envs {
		value, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		testenv.Produce(t, topic, e.OrderID, string(value))
	}
}

func TestEarliestOffsetsFollowDeletedRecords(t *testing.T) {
	topic := testenv.Topic(t, "tracker-earliest")
	p := testenv.Produce(t, topic, "order-1", "a", "b", "c", "d", "e")
	c := client(t)
	fresh := map[store.TopicPartition]int64{}
	for q := range int32(broker.Partitions) {
		fresh[store.TopicPartition{Topic: topic, Partition: q}] = 0
	}

	got, err := tracker.EarliestOffsets(c, topic)
	if err != nil || !maps.Equal(got, fresh) {
		t.Fatalf("EarliestOffsets of a fresh topic = %v, %v; want %v, nil", got, err, fresh)
	}
	if err := testenv.Admin(t).DeleteRecords(topic, map[int32]int64{p: 3}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	want := maps.Clone(fresh)
	want[store.TopicPartition{Topic: topic, Partition: p}] = 3
	got, err = tracker.EarliestOffsets(c, topic)
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("EarliestOffsets after deleting 3 records of partition %d = %v, %v; want %v, nil", p, got, err, want)
	}
}

// TestTrackerForgetsSagasKafkaForgot runs the tracker over topics of the
// test's own, drops their records as retention would, and checks that it
// forgets an ended saga whose every event is gone from Kafka, and keeps
// one that ended as long ago but whose last event Kafka still holds.
func TestTrackerForgetsSagasKafkaForgot(t *testing.T) {
	orders, payments := testenv.Topic(t, "tracker-orders"), testenv.Topic(t, "tracker-payments")
	r := startTracker(t, func(c *tracker.Config) {
		tracker.ReadTopics(c, orders, payments)
		c.Retention = time.Hour
		c.ForgetEvery = 100 * time.Millisecond
	})
	ended := time.Now().Add(-3 * time.Hour) // long past Retention
	gone, kept, last := uuid.NewString(), uuid.NewString(), uuid.NewString()

	// gone ends, and kept is under way, before Kafka drops their records.
	publishTo(t, orders, envelope(gone, "OrderCreated", "order", ended), envelope(kept, "OrderCreated", "order", ended))
	publishTo(t, payments, envelope(gone, "PaymentCompleted", "payment", ended), envelope(kept, "PaymentCompleted", "payment", ended))
	publishTo(t, orders, envelope(gone, "OrderCompleted", "order", ended))
	r.waitSaga(t, gone, "gone completes", func(s saga) bool { return s.State == "completed" && len(s.Events) == 3 })
	r.waitSaga(t, kept, "kept is under way", func(s saga) bool { return len(s.Events) == 2 })
	dropAll(t, orders)
	dropAll(t, payments)

	// kept ends after: Kafka still holds its last event.
	publishTo(t, orders, envelope(kept, "OrderCompleted", "order", ended))
	r.waitSaga(t, kept, "kept completes", func(s saga) bool { return s.State == "completed" && len(s.Events) == 3 })
	r.waitForgotten(t, gone)

	// last, recorded after kept ended and then dropped, is forgotten by a
	// round that saw kept ended: kept must survive it.
	publishTo(t, payments, envelope(last, "PaymentDeclined", "payment", ended))
	r.waitSaga(t, last, "last is cancelled", func(s saga) bool { return s.State == "cancelled" })
	dropAll(t, payments)
	r.waitForgotten(t, last)
	r.waitSaga(t, kept, "kept is still there, whole", func(s saga) bool { return s.State == "completed" && len(s.Events) == 3 })

	m := get(t, r.base+"/metrics")
	if !metricAtLeast(m, `choreo_tracker_forgotten_sagas_total{service="tracker"}`, 2) {
		t.Errorf("metrics do not count the two forgotten sagas:\n%s", m)
	}
}

// waitForgotten polls GET /sagas/{order} until it is 404.
func (r running) waitForgotten(t *testing.T, order string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "saga "+order+" is forgotten", func() bool {
		res, err := http.Get(r.base + "/sagas/" + order)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusNotFound
	})
}
