package consumer_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

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
// fetched and waiting, starting at offset initial, with hwm the
// partition's high-water mark.
type bufferedClaim struct {
	sarama.ConsumerGroupClaim
	msgs    chan *sarama.ConsumerMessage
	initial int64
	hwm     *atomic.Int64 // nil: 0
}

func (c bufferedClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }
func (c bufferedClaim) Topic() string                            { return "t" }
func (c bufferedClaim) Partition() int32                         { return 0 }
func (c bufferedClaim) InitialOffset() int64                     { return c.initial }
func (c bufferedClaim) HighWaterMarkOffset() int64 {
	if c.hwm == nil {
		return 0
	}
	return c.hwm.Load()
}

func highWaterMark(v int64) *atomic.Int64 {
	var a atomic.Int64
	a.Store(v)
	return &a
}

// TestEndedSessionStartsNoMessage: when the session has ended and messages
// are buffered, both select cases in ConsumeClaim are ready and Go picks
// one at random. ConsumeClaim must still start none of them. Twenty rounds
// make a coin-flip implementation fail with probability 1 - 2^-20.
func TestEndedSessionStartsNoMessage(t *testing.T) {
	var handled atomic.Int32
	g, err := consumer.New(consumer.Config{
		Brokers: []string{"unused:9092"}, GroupID: "g", Topics: []string{"t"},
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

// TestLagFollowsTheClaim: the partition's lag is the high-water mark minus
// the next offset to consume, set when the claim starts and after every
// message, so it reaches 0 once the backlog is handled.
func TestLagFollowsTheClaim(t *testing.T) {
	const group = "lag-group"
	var seen []float64 // the lag while each message is handled
	g, err := consumer.New(consumer.Config{
		Brokers: []string{"unused:9092"}, GroupID: group, Topics: []string{"t"},
		Handler: consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error {
			seen = append(seen, consumer.Lag(group, "t", 0))
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	c := bufferedClaim{msgs: make(chan *sarama.ConsumerMessage, 3), initial: 7, hwm: highWaterMark(10)}
	for off := int64(7); off < 10; off++ {
		c.msgs <- &sarama.ConsumerMessage{Topic: "t", Offset: off, Value: []byte("m")}
	}
	close(c.msgs)
	if err := g.ConsumeClaim(&endedSession{ctx: context.Background()}, c); err != nil {
		t.Fatalf("ConsumeClaim = %v", err)
	}
	if want := []float64{3, 2, 1}; !slices.Equal(seen, want) {
		t.Errorf("lag while handling offsets 7, 8, 9 = %v, want %v", seen, want)
	}
	if got := consumer.Lag(group, "t", 0); got != 0 {
		t.Errorf("lag after the backlog = %v, want 0", got)
	}
}

// TestLagGrowsWhileAMessageIsRetried: a caught-up partition whose next
// message keeps failing must not go on reporting its last lag: while the
// message is retried, the lag follows the high-water mark, so the
// documented lag alert sees the partition fall behind.
func TestLagGrowsWhileAMessageIsRetried(t *testing.T) {
	const group = "stuck-group"
	hwm := highWaterMark(1)
	attempts := 0
	var seen float64
	g, err := consumer.New(consumer.Config{
		Brokers: []string{"unused:9092"}, GroupID: group, Topics: []string{"t"},
		Handler: consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error {
			attempts++
			if attempts < 3 {
				hwm.Store(50) // producers go on while the message fails
				return errors.New("database is down")
			}
			seen = consumer.Lag(group, "t", 0)
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
		MaxBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := bufferedClaim{msgs: make(chan *sarama.ConsumerMessage, 1), initial: 0, hwm: hwm}
	c.msgs <- &sarama.ConsumerMessage{Topic: "t", Offset: 0, Value: []byte("m")}
	close(c.msgs)
	if err := g.ConsumeClaim(&endedSession{ctx: context.Background()}, c); err != nil {
		t.Fatalf("ConsumeClaim = %v", err)
	}
	if seen != 50 {
		t.Errorf("lag while the message at offset 0 was retried = %v, want 50 (the high-water mark)", seen)
	}
}
