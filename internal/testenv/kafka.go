package testenv

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
)

// Produce writes values to topic under one key, so they share a partition
// and keep their order, and returns that partition: how a test puts
// records in front of a consumer, a pruner or a reader without a service.
func Produce(t testing.TB, topic, key string, values ...string) int32 {
	t.Helper()
	// A topic made a moment ago, by the test or by a service it started,
	// may not be led yet on a fresh broker; the producer's own retries
	// are too short to outlast that.
	ctx, cancel := context.WithTimeout(context.Background(), topicsBound)
	defer cancel()
	if err := WaitTopics(ctx, Kafka(t), topic); err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	p, err := Kafka(t).NewSyncProducer("test-producer")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	defer p.Close()
	var partition int32
	for _, v := range values {
		if partition, _, err = p.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(v),
		}); err != nil {
			t.Fatal(err)
		}
	}
	return partition
}

// Admin returns a cluster admin of the test's Kafka, closed when the test
// ends: what a test reads a group's committed offsets or a topic's
// settings with, or makes a topic of its own settings or drops records
// with, as an operator or retention would.
func Admin(t testing.TB) sarama.ClusterAdmin {
	t.Helper()
	admin, err := Kafka(t).NewClusterAdmin("test-admin")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}
