package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
)

type batchFunc func(ctx context.Context, msgs []*sarama.ConsumerMessage) (*consumer.Failure, error)

func (f batchFunc) HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (*consumer.Failure, error) {
	return f(ctx, msgs)
}

// TestBatchesKeepOrderRetryWholeAndDeadLetterFailures: a backlog is
// handed over in batches no larger than MaxBatch, in offset order; a batch
// that fails is retried whole; a failure ends its batch, is dead-lettered,
// and the messages after it come again as the next batch; and the group's
// committed offset ends after the last message.
func TestBatchesKeepOrderRetryWholeAndDeadLetterFailures(t *testing.T) {
	topic := testenv.Topic(t, "consumer-batch")
	var values []string
	for i := range 40 {
		values = append(values, fmt.Sprintf("m%02d", i))
	}
	// The backlog is there before the group starts, so batches fill up.
	produce(t, topic, values...)

	var mu sync.Mutex
	var handled []string
	var sizes []int
	var after []string // the first message of the batch after the failure
	failedLast := false
	var partition int32 // the key's
	failedOnce := false
	done := make(chan struct{})
	h := batchFunc(func(ctx context.Context, msgs []*sarama.ConsumerMessage) (*consumer.Failure, error) {
		mu.Lock()
		defer mu.Unlock()
		var failed *consumer.Failure
		var ok []string
		partition = msgs[0].Partition
		if failedLast {
			after = append(after, string(msgs[0].Value))
		}
	loop:
		for _, m := range msgs {
			switch v := string(m.Value); v {
			case "m10":
				if !failedOnce { // the database away once: the whole batch again
					failedOnce = true
					return nil, errors.New("database is down")
				}
				ok = append(ok, v)
			case "m20":
				failed = &consumer.Failure{Msg: m, Err: consumer.Permanent(errors.New("poison"))}
				failedLast = true
				break loop
			default:
				ok = append(ok, v)
			}
		}
		if failed == nil {
			failedLast = false
		}
		handled = append(handled, ok...)
		sizes = append(sizes, len(msgs))
		if slices.Contains(ok, "m39") {
			close(done)
		}
		return failed, nil
	})
	rec := newRecorder()
	group := testenv.ID("g")
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: group, Topics: []string{topic},
		Batch: h, MaxBatch: 8, DeadLetter: rec.deadLetter, Logger: testenv.Logger(t), MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Background(t, "the consumer group", time.Minute, g.Run)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the backlog was not handled in 60s")
	}
	stop()

	mu.Lock()
	defer mu.Unlock()
	want := slices.DeleteFunc(slices.Clone(values), func(v string) bool { return v == "m20" })
	if !slices.Equal(handled, want) {
		t.Fatalf("handled %v, want every message but the poison once, in order", handled)
	}
	if rec.dead["m20"] != "poison" || len(rec.dead) != 1 {
		t.Fatalf("dead letters %v, want m20 alone", rec.dead)
	}
	if !slices.Equal(after, []string{"m21"}) {
		t.Errorf("after the failure the next batch began at %v, want m21: the rest of the failed batch, handed over again", after)
	}
	if slices.Max(sizes) > 8 || slices.Max(sizes) < 2 {
		t.Errorf("batch sizes %v, want batches of more than one and at most MaxBatch (8)", sizes)
	}
	if got := committed(t, group, topic, partition); got != int64(len(values)) {
		t.Errorf("committed offset %d, want %d (after the last message)", got, len(values))
	}
}

// committed is the group's committed offset of a partition of topic.
func committed(t *testing.T, group, topic string, partition int32) int64 {
	t.Helper()
	resp, err := testenv.Admin(t).ListConsumerGroupOffsets(group, map[string][]int32{topic: {partition}})
	if err != nil {
		t.Fatal(err)
	}
	b := resp.GetBlock(topic, partition)
	if b == nil {
		t.Fatal("no committed offset")
	}
	return b.Offset
}
