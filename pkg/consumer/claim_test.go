package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
)

// endedSession is a group session whose context has already ended, as it
// has once shutdown or a rebalance begins. Only the methods ConsumeClaim
// uses are implemented.
type endedSession struct {
	sarama.ConsumerGroupSession
	ctx    context.Context
	marked atomic.Int32
}

func (s *endedSession) Context() context.Context                    { return s.ctx }
func (s *endedSession) MarkMessage(*sarama.ConsumerMessage, string) { s.marked.Add(1) }

// bufferedClaim is a claim of partition 0 of topic t with messages already
// fetched and waiting.
type bufferedClaim struct {
	sarama.ConsumerGroupClaim
	msgs chan *sarama.ConsumerMessage
}

func (c bufferedClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }
func (c bufferedClaim) Topic() string                            { return "t" }
func (c bufferedClaim) Partition() int32                         { return 0 }

// TestEndedSessionStartsNoMessage: when the session has ended and messages
// are buffered, both select cases in ConsumeClaim are ready and Go picks
// one at random. ConsumeClaim must still start none of them. Twenty rounds
// make a coin-flip implementation fail with probability 1 - 2^-20.
func TestEndedSessionStartsNoMessage(t *testing.T) {
	var handled atomic.Int32
	g, err := consumer.New(consumer.Config{
		Kafka: broker.Conn{Brokers: []string{"unused:9092"}}, GroupID: "g", Topics: []string{"t"},
		Handler: consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error {
			handled.Add(1)
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		s := &endedSession{ctx: ctx}
		c := bufferedClaim{msgs: make(chan *sarama.ConsumerMessage, 10)}
		for i := range 10 {
			c.msgs <- &sarama.ConsumerMessage{Topic: "t", Offset: int64(i), Value: []byte("m")}
		}
		if err := g.ConsumeClaim(s, c); err != nil {
			t.Fatalf("ConsumeClaim = %v", err)
		}
		if n := s.marked.Load(); n != 0 {
			t.Fatalf("%d offsets marked after the session ended", n)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("handler started %d messages after the session ended, want 0", n)
	}
}
