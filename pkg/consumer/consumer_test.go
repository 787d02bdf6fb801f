package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
)

// produce writes values to topic under one key, so they share a partition
// and keep their order.
func produce(t *testing.T, topic string, values ...string) {
	t.Helper()
	testenv.Produce(t, topic, "k", values...)
}

// recorder collects what a handler and dead-letter function saw.
type recorder struct {
	mu       sync.Mutex
	attempts map[string]int
	done     []string
	dead     map[string]string
	seen     chan string
}

func newRecorder() *recorder {
	return &recorder{attempts: map[string]int{}, dead: map[string]string{}, seen: make(chan string, 100)}
}

func (r *recorder) deadLetter(ctx context.Context, m *sarama.ConsumerMessage, reason error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dead[string(m.Value)] = reason.Error()
	r.seen <- "dead:" + string(m.Value)
	return nil
}

// run starts a group with h until the returned stop function is called.
func run(t *testing.T, group, topic string, h consumer.HandlerFunc, dl consumer.DeadLetterFunc) (stop func()) {
	t.Helper()
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: group, Topics: []string{topic},
		Handler: h, DeadLetter: dl, Logger: testenv.Logger(t), MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Background(t, "the consumer group", time.Minute, g.Run)
}

// nextMemberSees starts the next member of group, which accepts every
// message, waits until it has seen want, in order, from where the group's
// committed offsets put it, and stops it.
func nextMemberSees(t *testing.T, group, topic string, want ...string) {
	t.Helper()
	rec := newRecorder()
	stop := run(t, group, topic, func(ctx context.Context, m *sarama.ConsumerMessage) error {
		rec.seen <- string(m.Value)
		return nil
	}, rec.deadLetter)
	defer stop()
	waitFor(t, rec.seen, want...)
}

func waitFor(t *testing.T, seen <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-seen:
			if got != w {
				t.Fatalf("saw %q, want %q", got, w)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("timed out waiting for %q", w)
		}
	}
}

func TestTransientErrorsAreRetriedInOrderNeverSkipped(t *testing.T) {
	topic := testenv.Topic(t, "consumer-retry")
	rec := newRecorder()
	stop := run(t, testenv.ID("g"), topic, func(ctx context.Context, m *sarama.ConsumerMessage) error {
		v := string(m.Value)
		rec.mu.Lock()
		rec.attempts[v]++
		n := rec.attempts[v]
		rec.mu.Unlock()
		if v == "m1" && n < 4 {
			return errors.New("database is down")
		}
		rec.seen <- v
		return nil
	}, rec.deadLetter)
	defer stop()

	produce(t, topic, "m1", "m2", "m3")
	waitFor(t, rec.seen, "m1", "m2", "m3")
	if rec.attempts["m1"] != 4 {
		t.Fatalf("m1 attempts = %d, want 4", rec.attempts["m1"])
	}
}

func TestPermanentFailureIsDeadLetteredAndConsumptionContinues(t *testing.T) {
	topic := testenv.Topic(t, "consumer-dlq")
	rec := newRecorder()
	stop := run(t, testenv.ID("g"), topic, func(ctx context.Context, m *sarama.ConsumerMessage) error {
		if string(m.Value) == "poison" {
			return consumer.Permanent(fmt.Errorf("undecodable"))
		}
		rec.seen <- string(m.Value)
		return nil
	}, rec.deadLetter)
	defer stop()

	produce(t, topic, "before", "poison", "after")
	waitFor(t, rec.seen, "before", "dead:poison", "after")
	if rec.dead["poison"] != "undecodable" {
		t.Fatalf("dead-letter reason = %q", rec.dead["poison"])
	}
}

// TestOffsetIsCommittedOnlyAfterSuccess stops a member while a message keeps
// failing; the next member of the group starts at that message, not after
// it, and not before the one that succeeded.
func TestOffsetIsCommittedOnlyAfterSuccess(t *testing.T) {
	topic := testenv.Topic(t, "consumer-offsets")
	group := testenv.ID("g")
	rec := newRecorder()
	stop := run(t, group, topic, func(ctx context.Context, m *sarama.ConsumerMessage) error {
		if string(m.Value) == "m2" {
			rec.seen <- "failing:m2"
			return errors.New("still down")
		}
		rec.seen <- string(m.Value)
		return nil
	}, rec.deadLetter)
	produce(t, topic, "m1", "m2", "m3")
	waitFor(t, rec.seen, "m1", "failing:m2")
	stop()

	nextMemberSees(t, group, topic, "m2", "m3")
}

// TestShutdownFinishesTheMessageInHand cancels the group while a handler is
// working; the handler completes, its offset is committed, and the next
// member does not see the message again.
func TestShutdownFinishesTheMessageInHand(t *testing.T) {
	topic := testenv.Topic(t, "consumer-shutdown")
	group := testenv.ID("g")
	started := make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(1)
	stop := run(t, group, topic, func(ctx context.Context, m *sarama.ConsumerMessage) error {
		if string(m.Value) == "slow" {
			close(started)
			time.Sleep(time.Second)
			if ctx.Err() != nil {
				return ctx.Err() // would leave it unmarked
			}
			finished.Done()
		}
		return nil
	}, newRecorder().deadLetter)
	produce(t, topic, "slow")
	<-started
	stop() // while "slow" is in the handler
	finished.Wait()

	produce(t, topic, "next")
	nextMemberSees(t, group, topic, "next")
}
