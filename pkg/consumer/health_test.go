package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
)

// TestLagIsReadFromTheGroupsCommittedOffsets: the lag of a partition is
// its high-water mark minus the group's committed offset, so it is there
// and grows while a message fails and nothing is committed, and it falls
// to 0 once the backlog is handled.
func TestLagIsReadFromTheGroupsCommittedOffsets(t *testing.T) {
	topic := testenv.Topic(t, "lag")
	group := testenv.ID("lag")
	p := testenv.Produce(t, topic, "k", "1", "2", "3")
	var healthy atomic.Bool
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: group, Topics: []string{topic},
		Handler: consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error {
			if !healthy.Load() {
				return errors.New("database is down")
			}
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
		Logger:     testenv.Logger(t), MaxBackoff: 50 * time.Millisecond, WatchEvery: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Background(t, "the consumer group", time.Minute, g.Run)()
	lagIs := func(want float64) func() bool {
		return func() bool { return consumer.Lag(group, topic, p) == want }
	}
	testenv.Eventually(t, 30*time.Second, "lag 3 while the first message fails", lagIs(3))
	testenv.Produce(t, topic, "k", "4", "5")
	testenv.Eventually(t, 30*time.Second, "lag 5 once producers go on", lagIs(5))
	healthy.Store(true)
	testenv.Eventually(t, 30*time.Second, "lag 0 once the backlog is handled", lagIs(0))
}

// TestReadyOnlyWhileJoined: /readyz's consumer check fails until the member
// has joined its group, so a service that serves HTTP but consumes nothing
// does not look ready.
func TestReadyOnlyWhileJoined(t *testing.T) {
	topic := testenv.Topic(t, "ready")
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: testenv.ID("ready"), Topics: []string{topic},
		Handler:    consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error { return nil }),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
		Logger:     testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "not joined") {
		t.Fatalf("Ready before Run = %v, want a not-joined error", err)
	}
	defer testenv.Background(t, "the consumer group", time.Minute, g.Run)()
	testenv.Eventually(t, 60*time.Second, "ready once joined", func() bool { return g.Ready(context.Background()) == nil })
}

// TestMissingTopicIsReportedAndCreatedAgain: sarama refreshes every
// subscribed topic's metadata, so one deleted topic stops all of a
// service's consumption. The group reports it (gauge and Ready) and, given
// Ensure, creates it again, after which the other topic flows again.
func TestMissingTopicIsReportedAndCreatedAgain(t *testing.T) {
	kept, doomed := testenv.Topic(t, "kept"), testenv.Topic(t, "doomed")
	group := testenv.ID("missing")
	var ensured atomic.Int32
	seen := make(chan string, 10)
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: group, Topics: []string{kept, doomed},
		Handler: consumer.HandlerFunc(func(_ context.Context, m *sarama.ConsumerMessage) error {
			seen <- string(m.Value)
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
		Ensure: func(ctx context.Context, topics []string) error {
			if len(topics) != 1 || topics[0] != doomed {
				t.Errorf("Ensure(%v), want only the missing topic %s", topics, doomed)
			}
			ensured.Add(1)
			return broker.EnsureTopics(ctx, testenv.Kafka(t), "test", topics...)
		},
		Logger: testenv.Logger(t), WatchEvery: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Background(t, "the consumer group", time.Minute, g.Run)()
	testenv.Produce(t, kept, "k", "before")
	waitFor(t, seen, "before")

	if err := testenv.Admin(t).DeleteTopic(doomed); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the deleted topic reported and created again", func() bool {
		return ensured.Load() > 0
	})
	testenv.Produce(t, kept, "k", "after")
	waitFor(t, seen, "after")
	testenv.Eventually(t, 30*time.Second, "no topic reported missing once it exists again", func() bool {
		return consumer.MissingTopics(group) == 0
	})
}
