package tracker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// forgetBatch bounds one Forget statement, so a large backlog never holds
// long locks or a long transaction.
const forgetBatch = 5000

// forgetter keeps the tracker's tables bounded: it forgets the ended sagas
// Kafka has forgotten too (store.Forget) — Kafka's earliest offsets of
// topics tell which — once they ended more than window ago by now's clock. What it deletes, a fresh tracker reading the topics
// from their oldest offsets would not have rebuilt either.
type forgetter struct {
	st      *store.Store
	brokers []string
	topics  []string
	window  time.Duration
	now     func() time.Time
	log     *slog.Logger
}

// run forgets every interval until ctx ends; failures are logged and tried
// again at the next round.
func (f forgetter) run(ctx context.Context, every time.Duration) error {
	return participant.Every(ctx, every, func(ctx context.Context) {
		n, err := f.once(ctx)
		if n > 0 {
			forgottenSagas.WithLabelValues(Name).Add(float64(n))
			f.log.Info("ended sagas forgotten", "sagas", n)
		}
		if err != nil && ctx.Err() == nil {
			f.log.Warn("forgetting ended sagas failed; will try again", "err", err)
		}
	})
}

// once runs one round and returns how many sagas it forgot. A partition
// whose earliest offset could not be read keeps its sagas this round; the
// others are still forgotten, and the error says which failed.
func (f forgetter) once(ctx context.Context) (int64, error) {
	client, err := sarama.NewClient(f.brokers, broker.Config(Name+"-retention"))
	if err != nil {
		return 0, fmt.Errorf("retention: client: %w", err)
	}
	defer client.Close()
	earliest, errs := earliestOffsets(client, f.topics...)
	endedBefore := f.now().Add(-f.window)
	var total int64
	for ctx.Err() == nil {
		n, err := f.st.Forget(ctx, earliest, endedBefore, forgetBatch)
		total += n
		if err != nil {
			return total, errors.Join(errs, err)
		}
		if n == 0 { // fewer than a batch may still leave some: see Forget
			break
		}
	}
	return total, errs
}

// earliestOffsets returns the earliest offset Kafka still holds of every
// partition of topics: below it, no consumer can read a record again. A
// partition or topic it could not ask about is left out, and named in the
// error — for Forget, an unknown partition keeps its sagas.
func earliestOffsets(client sarama.Client, topics ...string) (map[store.TopicPartition]int64, error) {
	earliest := make(map[store.TopicPartition]int64)
	var errs error
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("retention: partitions of %s: %w", topic, err))
			continue
		}
		for _, p := range parts {
			off, err := client.GetOffset(topic, p, sarama.OffsetOldest)
			if err != nil {
				errs = errors.Join(errs, fmt.Errorf("retention: earliest offset of %s/%d: %w", topic, p, err))
				continue
			}
			earliest[store.TopicPartition{Topic: topic, Partition: p}] = off
		}
	}
	return earliest, errs
}
