package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/tick"
)

// pruneEvery is how often a service prunes its processed_events marks.
const pruneEvery = time.Minute

// pruneBatch bounds one DELETE, so pruning a large backlog never holds
// long locks or a long transaction.
const pruneBatch = 5000

// Pruner keeps processed_events bounded without forgetting a mark Kafka
// could still test. For each partition the service's group consumes, it
// deletes the marks of events read below both the group's committed offset
// (the group will not read them again) and the partition's earliest offset
// (Kafka no longer holds them: no reset of the group's offsets can bring
// them back — Kafka drops whole segments, so a record can outlive
// retention.ms by a segment's span), and processed longer ago than the
// topic's retention.ms or Window, whichever is longer (a copy of an event
// re-produced at a new offset is still recognised while the original
// could be). A mark any of these keeps is one a delivery could still need.
type Pruner struct {
	Group  string      // the consumer group, which is also the marks' consumer
	Kafka  broker.Conn // where the group consumes
	DB     *sqlx.DB
	Window time.Duration
	Log    *slog.Logger
}

// Run prunes every pruneEvery until ctx ends; failures are logged and
// tried again at the next round.
func (p Pruner) Run(ctx context.Context) error {
	return tick.Every(ctx, pruneEvery, func(ctx context.Context) {
		if n, err := p.Once(ctx); err != nil {
			p.Log.Warn("pruning processed_events failed; will try again", "err", err)
		} else if n > 0 {
			p.Log.Info("processed_events pruned", "marks", n)
		}
	})
}

// Once runs one round and returns how many marks it deleted.
func (p Pruner) Once(ctx context.Context) (int64, error) {
	admin, err := p.Kafka.NewClusterAdmin(p.Group + "-retention")
	if err != nil {
		return 0, fmt.Errorf("retention: admin: %w", err)
	}
	defer admin.Close()
	committed, err := admin.ListConsumerGroupOffsets(p.Group, nil)
	if err != nil {
		return 0, fmt.Errorf("retention: committed offsets of %s: %w", p.Group, err)
	}
	client, err := p.Kafka.NewClient(p.Group + "-retention")
	if err != nil {
		return 0, fmt.Errorf("retention: client: %w", err)
	}
	defer client.Close()
	var total int64
	var errs error
	for topic, parts := range committed.Blocks {
		window, ok, err := p.window(admin, topic)
		if err != nil {
			errs = errors.Join(errs, err) // the other topics are still pruned
			continue
		}
		if !ok {
			continue // infinite retention: any offset may come back
		}
		for partition, b := range parts {
			if b.Err != sarama.ErrNoError || b.Offset < 0 {
				continue // nothing committed: nothing known to be behind
			}
			earliest, err := client.GetOffset(topic, partition, sarama.OffsetOldest)
			if err != nil {
				errs = errors.Join(errs, fmt.Errorf("retention: earliest offset of %s/%d: %w", topic, partition, err))
				continue
			}
			below := min(b.Offset, earliest)
			// The dead-letter scope keeps marks by the same offsets.
			for _, consumer := range []string{p.Group, p.Group + ".dlq"} {
				for {
					n, err := Prune(ctx, p.DB, consumer, topic, partition, below, window, pruneBatch)
					if err != nil {
						return total, err
					}
					total += n
					if n < pruneBatch {
						break
					}
				}
			}
		}
	}
	return total, errs
}

// window is how old a mark of topic must be to go: the topic's retention,
// or Window if longer; ok is false for a topic kept forever.
func (p Pruner) window(admin sarama.ClusterAdmin, topic string) (time.Duration, bool, error) {
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
	if err != nil {
		return 0, false, fmt.Errorf("retention: describe %s: %w", topic, err)
	}
	for _, e := range entries {
		if e.Name != "retention.ms" {
			continue
		}
		ms, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("retention: %s retention.ms %q: %w", topic, e.Value, err)
		}
		if ms < 0 {
			return 0, false, nil
		}
		return max(p.Window, time.Duration(ms)*time.Millisecond), true, nil
	}
	return p.Window, true, nil
}
