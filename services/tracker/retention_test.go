package tracker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/tracker"
)

func TestKeeps(t *testing.T) {
	tests := []struct {
		name        string
		config      map[string]string
		want        time.Duration
		wantForever bool
		wantErr     bool
	}{
		{name: "KafkasDefaultsKeepTwoWeeks", config: map[string]string{"retention.ms": "604800000", "segment.ms": "604800000", "cleanup.policy": "delete"}, want: 14 * 24 * time.Hour},
		{name: "ARecordOutlivesRetentionByASegment", config: map[string]string{"retention.ms": "3600000", "segment.ms": "600000", "cleanup.policy": "delete"}, want: 70 * time.Minute},
		{name: "InfiniteRetentionKeepsForever", config: map[string]string{"retention.ms": "-1", "segment.ms": "600000", "cleanup.policy": "delete"}, wantForever: true},
		{name: "LongMaxValueKeepsForever", config: map[string]string{"retention.ms": "9223372036854775807", "segment.ms": "604800000", "cleanup.policy": "delete"}, wantForever: true},
		{name: "RetentionPastADurationKeepsForever", config: map[string]string{"retention.ms": "10000000000000", "segment.ms": "604800000", "cleanup.policy": "delete"}, wantForever: true},
		{name: "CompactionKeepsForever", config: map[string]string{"retention.ms": "3600000", "segment.ms": "600000", "cleanup.policy": "compact"}, wantForever: true},
		{name: "CompactionWithDeletionKeepsForever", config: map[string]string{"retention.ms": "3600000", "segment.ms": "600000", "cleanup.policy": "compact,delete"}, wantForever: true},
		{name: "AnUnreadableSettingFails", config: map[string]string{"retention.ms": "a week", "segment.ms": "600000", "cleanup.policy": "delete"}, wantErr: true},
		{name: "AMissingSettingFails", config: map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := tracker.Keeps(tt.config)
			switch {
			case tt.wantErr:
				if err == nil {
					t.Errorf("Keeps = %s, %v, nil; want an error", got, ok)
				}
			case err != nil || ok == tt.wantForever || (ok && got != tt.want):
				t.Errorf("Keeps = %s, %v, %v; want %s, %v, nil", got, ok, err, tt.want, !tt.wantForever)
			}
		})
	}
}

// topicKeeping creates a topic of the test's own whose records Kafka keeps
// for retention.ms and segment.ms as given.
func topicKeeping(t *testing.T, retentionMs, segmentMs string) string {
	t.Helper()
	name := "test.tracker-retention." + uuid.NewString()[:8]
	testenv.TopicWith(t, name, &sarama.TopicDetail{NumPartitions: broker.Partitions, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retentionMs, "segment.ms": &segmentMs}})
	return name
}

// TestKafkaKeepsReadsTheTopics: the longest any of the tracker's topics
// keeps a record is read from Kafka's settings of each; one topic kept
// forever keeps every saga.
func TestKafkaKeepsReadsTheTopics(t *testing.T) {
	hour := topicKeeping(t, "3600000", "600000")      // 1h10m
	twoHours := topicKeeping(t, "7200000", "3600000") // 3h
	forever := topicKeeping(t, "-1", "600000")
	admin := testenv.Admin(t)

	got, keptForever, err := tracker.KafkaKeeps(admin, []string{hour, twoHours})
	if err != nil || keptForever != "" || got != 3*time.Hour {
		t.Errorf("KafkaKeeps = %s, %q, %v; want 3h0m0s, none forever, nil", got, keptForever, err)
	}
	_, keptForever, err = tracker.KafkaKeeps(admin, []string{hour, forever, twoHours})
	if err != nil || keptForever != forever {
		t.Errorf("KafkaKeeps with a topic kept forever: %q, %v; want %q, nil", keptForever, err, forever)
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

// TestTrackerForgetsEndedSagas runs the tracker over topics of the test's
// own that Kafka keeps records of for two seconds at the most (retention.ms
// and segment.ms of one second): an ended saga goes once unseen for that
// long, with all its events, and is counted; a running saga as old stays.
func TestTrackerForgetsEndedSagas(t *testing.T) {
	orders, payments := topicKeeping(t, "1000", "1000"), topicKeeping(t, "1000", "1000")
	r := startTracker(t, func(c *tracker.Config) {
		tracker.ReadTopics(c, orders, payments)
		c.Retention = time.Millisecond
		c.ForgetEvery = 100 * time.Millisecond
	})
	if m := get(t, r.base+"/metrics"); !metricAtLeast(m, `choreo_tracker_forgotten_sagas_total{service="tracker"}`, 0) {
		t.Errorf("the forgotten sagas' counter is not shown from the start:\n%s", m)
	}
	now := time.Now()
	gone, kept := uuid.NewString(), uuid.NewString()
	publishTo(t, orders, envelope(gone, "OrderCreated", "order", now), envelope(kept, "OrderCreated", "order", now))
	publishTo(t, payments, envelope(gone, "PaymentCompleted", "payment", now), envelope(kept, "PaymentCompleted", "payment", now))
	publishTo(t, orders, envelope(gone, "OrderCompleted", "order", now))
	r.waitSaga(t, kept, "kept is under way", func(s saga) bool { return len(s.Events) == 2 })

	testenv.Eventually(t, 60*time.Second, "the ended saga is forgotten", func() bool {
		res, err := r.getSaga(gone)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusNotFound
	})
	r.waitSaga(t, kept, "the running saga is kept whole", func(s saga) bool { return s.State != "completed" && len(s.Events) == 2 })
	if m := get(t, r.base+"/metrics"); !metricAtLeast(m, `choreo_tracker_forgotten_sagas_total{service="tracker"}`, 1) {
		t.Errorf("metrics do not count the forgotten saga:\n%s", m)
	}
}
