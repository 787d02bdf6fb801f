package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// topicsBound is how long a test waits for its topics to be served. A broker
// started a moment ago elects the leaders of a new topic within seconds;
// far longer means it is not running.
const topicsBound = time.Minute

// Topics creates each of topics that does not exist yet with the services'
// defaults and waits until every partition can be written and read (see
// WaitTopics). Every test that makes topics goes through it or TopicsOn or
// TopicWith, so a broker started a moment ago never fails a test.
func Topics(t testing.TB, topics ...string) {
	t.Helper()
	TopicsOn(t, Kafka(t), broker.DefaultTopicSettings(), topics...)
}

// TopicsOn is Topics on a Kafka of the test's own (brokers) with settings s.
func TopicsOn(t testing.TB, conn broker.Conn, s broker.TopicSettings, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topicsBound)
	defer cancel()
	if err := broker.EnsureTopicsWith(ctx, conn, "test", s, topics...); err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	if err := WaitTopics(ctx, conn, topics...); err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
}

// TopicWith creates topic with a detail of the test's own (its retention,
// its partitions), if it does not exist, and waits until it is served, as
// Topics does.
func TopicWith(t testing.TB, topic string, detail *sarama.TopicDetail) {
	t.Helper()
	// An existing topic (a fixed name from an earlier run) is kept as it is.
	if err := Admin(t).CreateTopic(topic, detail, false); err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), topicsBound)
	defer cancel()
	if err := WaitTopics(ctx, Kafka(t), topic); err != nil {
		t.Fatal(err)
	}
}

// WaitTopics waits until every partition of topics can be written and read
// (broker.WaitServed), or ctx ends: for a test that made its topics itself,
// or a TestMain.
func WaitTopics(ctx context.Context, conn broker.Conn, topics ...string) error {
	return broker.WaitServed(ctx, conn, topics...)
}
