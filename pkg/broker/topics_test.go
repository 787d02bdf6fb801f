package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestTopicSettingsValidate(t *testing.T) {
	tests := []struct {
		name     string
		s        broker.TopicSettings
		wantVars []string // every one must be named in the error; none: valid
	}{
		{"Default", broker.DefaultTopicSettings(), nil},
		{"Cluster", broker.TopicSettings{Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2}, nil},
		{"MinISREqualsRF", broker.TopicSettings{Partitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 3}, nil},
		{"RFZero", broker.TopicSettings{Partitions: 3, ReplicationFactor: 0, MinInsyncReplicas: 1},
			[]string{"KAFKA_REPLICATION_FACTOR"}},
		{"MinISRZero", broker.TopicSettings{Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 0},
			[]string{"KAFKA_MIN_INSYNC_REPLICAS"}},
		{"MinISRAboveRF", broker.TopicSettings{Partitions: 3, ReplicationFactor: 2, MinInsyncReplicas: 3},
			[]string{"KAFKA_MIN_INSYNC_REPLICAS", "KAFKA_REPLICATION_FACTOR"}},
		{"NoPartitions", broker.TopicSettings{Partitions: 0, ReplicationFactor: 1, MinInsyncReplicas: 1},
			[]string{"KAFKA_PARTITIONS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if (err == nil) != (len(tt.wantVars) == 0) {
				t.Fatalf("Validate(%+v) = %v, want error naming %v", tt.s, err, tt.wantVars)
			}
			for _, v := range tt.wantVars {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("Validate(%+v) = %q, does not name %s", tt.s, err, v)
				}
			}
		})
	}
}

// TestEnsureTopicsWithRefusesInvalidSettingsUpFront: invalid settings fail
// at once, naming the variable, without a minute of retries or a broker.
func TestEnsureTopicsWithRefusesInvalidSettingsUpFront(t *testing.T) {
	start := time.Now()
	err := broker.EnsureTopicsWith(context.Background(), broker.Conn{Brokers: []string{"127.0.0.1:1"}, Insecure: true}, "test",
		broker.TopicSettings{Partitions: 3, ReplicationFactor: 1, MinInsyncReplicas: 2}, "never")
	if err == nil || !strings.Contains(err.Error(), "KAFKA_MIN_INSYNC_REPLICAS") {
		t.Fatalf("EnsureTopicsWith = %v, want an error naming KAFKA_MIN_INSYNC_REPLICAS", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("EnsureTopicsWith took %v to refuse invalid settings", d)
	}
}

// describeTopic returns the topic's partition count, the replica count of
// each partition, and its min.insync.replicas with the config's source.
func describeTopic(t *testing.T, topic string) (partitions int, replicas []int, minISR string, source sarama.ConfigSource) {
	t.Helper()
	admin := testenv.Admin(t)
	// A topic just created may not be in every broker's metadata yet.
	var md []*sarama.TopicMetadata
	var err error
	testenv.Eventually(t, 30*time.Second, "topic "+topic+" described", func() bool {
		md, err = admin.DescribeTopics([]string{topic})
		return err == nil && len(md) == 1 && errors.Is(md[0].Err, sarama.ErrNoError) && len(md[0].Partitions) > 0
	})
	for _, p := range md[0].Partitions {
		replicas = append(replicas, len(p.Replicas))
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"},
	})
	if err != nil {
		t.Fatalf("describe config of %s: %v", topic, err)
	}
	for _, e := range entries {
		if e.Name == "min.insync.replicas" {
			return len(md[0].Partitions), replicas, e.Value, e.Source
		}
	}
	t.Fatalf("describe config of %s: no min.insync.replicas in %+v", topic, entries)
	return
}

// TestEnsureTopicsWithSetsReplicationAndMinISR creates a topic on the real
// broker and reads back what the broker recorded: the partition count, one
// replica per partition, and min.insync.replicas set on the topic itself
// (source TOPIC_CONFIG, not inherited from the broker's default). A second
// call for the same topic, even with other settings, succeeds and changes
// nothing.
func TestEnsureTopicsWithSetsReplicationAndMinISR(t *testing.T) {
	topic := testenv.ID("test.settings")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := broker.TopicSettings{Partitions: 2, ReplicationFactor: 1, MinInsyncReplicas: 1}
	if err := broker.EnsureTopicsWith(ctx, testenv.Kafka(t), "test", s, topic); err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	if err := testenv.WaitTopics(ctx, testenv.Kafka(t), topic); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		n, replicas, minISR, source := describeTopic(t, topic)
		if n != 2 {
			t.Errorf("%s: %d partitions, want 2", when, n)
		}
		for i, r := range replicas {
			if r != 1 {
				t.Errorf("%s: partition %d has %d replicas, want 1", when, i, r)
			}
		}
		if minISR != "1" || source != sarama.SourceTopic {
			t.Errorf("%s: min.insync.replicas = %s from %v, want 1 set on the topic (%v)",
				when, minISR, source, sarama.SourceTopic)
		}
	}
	check("created")

	// Already exists: success, and the existing topic is left alone.
	other := broker.TopicSettings{Partitions: 5, ReplicationFactor: 1, MinInsyncReplicas: 1}
	if err := broker.EnsureTopicsWith(ctx, testenv.Kafka(t), "test", other, topic); err != nil {
		t.Fatalf("second EnsureTopicsWith on an existing topic: %v", err)
	}
	check("after a second call")
}

// TestEnsureTopicsKeepsTheDefaults: the old entry point still creates
// Partitions partitions with one replica and min.insync.replicas 1.
func TestEnsureTopicsKeepsTheDefaults(t *testing.T) {
	topic := testenv.ID("test.defaults")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := broker.EnsureTopics(ctx, testenv.Kafka(t), "test", topic); err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	if err := testenv.WaitTopics(ctx, testenv.Kafka(t), topic); err != nil {
		t.Fatal(err)
	}
	n, replicas, minISR, _ := describeTopic(t, topic)
	if got := fmt.Sprint(n, replicas, minISR); got != fmt.Sprint(broker.Partitions, []int{1, 1, 1}, "1") {
		t.Fatalf("EnsureTopics created partitions, replicas, min.insync.replicas = %s", got)
	}
}

// TestEnsureTopicsWithReportsTheBrokersRefusal: a replication factor the
// cluster cannot place (3 on a single broker) is retried until ctx ends, and
// the error then carries the broker's reason, not only "deadline exceeded".
func TestEnsureTopicsWithReportsTheBrokersRefusal(t *testing.T) {
	topic := testenv.ID("test.rf3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s := broker.TopicSettings{Partitions: 1, ReplicationFactor: 3, MinInsyncReplicas: 2}
	err := broker.EnsureTopicsWith(ctx, testenv.Kafka(t), "test", s, topic)
	if !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
		t.Fatalf("EnsureTopicsWith(RF 3) on one broker = %v, want %v", err, sarama.ErrInvalidReplicationFactor)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EnsureTopicsWith(RF 3) = %v, want it to say the context ended", err)
	}
}

// TestWaitServed: a topic that exists is served once its leaders answer; one
// that was never made is waited for until ctx ends, and the error names the
// reason of the last attempt.
func TestWaitServed(t *testing.T) {
	made := testenv.Topic(t, "served")
	tests := []struct {
		name    string
		topic   string
		wantErr error
	}{
		{name: "ACreatedTopicIsServed", topic: made},
		{name: "AMissingTopicIsNot", topic: testenv.ID("test.never-made"), wantErr: sarama.ErrUnknownTopicOrPartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := broker.WaitServed(ctx, testenv.Kafka(t), tt.topic)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("WaitServed(%s) = %v, want nil", tt.topic, err)
			}
			if tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("WaitServed(%s) = %v, want %v after the deadline", tt.topic, err, tt.wantErr)
			}
		})
	}
}
