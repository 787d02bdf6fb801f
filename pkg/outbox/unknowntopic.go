// This file holds the unknown-topic grace. At first a topic Kafka does not
// know is transient (being created, metadata catching up), so its rows are
// retried; once it has stayed unknown without interruption for the grace
// period it is a typo or a deleted topic, and its rows are refused.
// TestUnknownTopicIsRefusedOnlyAfterGrace and
// TestUnknownTopicGraceNeedsContinuousUnknown show why.

package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"
)

// unknownTopicGrace is how long a topic may stay unknown to Kafka, without
// interruption, before its rows are refused.
const unknownTopicGrace = 5 * time.Minute

// unknownTopic reports whether err says that Kafka does not know the topic.
func unknownTopic(err error) bool {
	var kerr sarama.KError
	return errors.As(err, &kerr) && kerr == sarama.ErrUnknownTopicOrPartition
}

// unknownTooLong starts topic's grace clock, unless it runs already, and
// reports whether the grace is over.
func (r *Relay) unknownTooLong(topic string) bool {
	now := r.cfg.Clock.Now()
	since, ok := r.unknownSince[topic]
	if !ok {
		r.unknownSince[topic] = now
		since = now
	}
	return now.Sub(since) >= unknownTopicGrace
}

// restartGrace restarts the grace clock of every topic in msgs but those
// whose message failed as unknown (failed, by row id): an acknowledged
// message shows the topic exists, and any other error means Kafka could not
// tell (a broker down, a leader moving).
func (r *Relay) restartGrace(msgs []*sarama.ProducerMessage, failed map[int64]error) {
	for _, m := range msgs {
		if err, ok := failed[m.Metadata.(int64)]; !ok || !unknownTopic(err) {
			delete(r.unknownSince, m.Topic)
		}
	}
}

// interruptGrace restarts the grace clock of every topic in msgs after
// Kafka failed the whole batch in another way than "unknown topic", unless
// the failure was the relay's own (stopping, or no longer leading).
func (r *Relay) interruptGrace(ctx context.Context, err error, msgs []*sarama.ProducerMessage) {
	if ctx.Err() != nil || errors.Is(err, errLostLeadership) {
		return
	}
	for _, m := range msgs {
		delete(r.unknownSince, m.Topic)
	}
}
