package main

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
)

// SagaTopics are the four topics the saga's events travel on.
var SagaTopics = []string{events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping}

// Offsets are the next offset of every partition of the saga topics.
type Offsets map[string]map[int32]int64

// NewestOffsets returns where every saga topic's partitions end now, so
// that the duplicating pass re-produces this run's messages only.
// Topics that do not exist yet start at 0.
func NewestOffsets(ctx context.Context, conn broker.Conn) (Offsets, error) {
	client, err := conn.NewClient("chaos-offsets")
	if err != nil {
		return nil, fmt.Errorf("kafka: connect: %w", err)
	}
	defer client.Close()
	out := Offsets{}
	for _, t := range SagaTopics {
		out[t] = map[int32]int64{}
		parts, err := client.Partitions(t)
		if err != nil {
			continue // not created yet: everything in it is this run's
		}
		for _, p := range parts {
			off, err := client.GetOffset(t, p, sarama.OffsetNewest)
			if err != nil {
				return nil, fmt.Errorf("kafka: offset of %s/%d: %w", t, p, err)
			}
			out[t][p] = off
		}
	}
	return out, nil
}

// PartitionLeader returns the id of the broker that leads topic/partition.
func PartitionLeader(ctx context.Context, conn broker.Conn, topic string, partition int32) (int32, error) {
	client, err := conn.NewClient("chaos-leader")
	if err != nil {
		return 0, fmt.Errorf("kafka: connect: %w", err)
	}
	defer client.Close()
	if err := client.RefreshMetadata(topic); err != nil {
		return 0, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	b, err := client.Leader(topic, partition)
	if err != nil {
		return 0, fmt.Errorf("kafka: leader of %s/%d: %w", topic, partition, err)
	}
	return b.ID(), nil
}

// Duplicate re-produces every message of the saga topics from the offsets
// in from up to where each partition ends now — unchanged, same key, same
// event id — as a broker does after an acknowledgement is lost. It
// returns how many of each event type it produced.
func Duplicate(ctx context.Context, conn broker.Conn, from Offsets) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Another fault may have a broker down: the read is tried again, whole,
	// until it gets through (nothing is produced before it has).
	var again []*sarama.ProducerMessage
	var types []string
	for {
		var err error
		if again, types, err = readSaga(ctx, conn, from); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
	copies := map[string]int{}
	if len(again) == 0 {
		return copies, nil
	}
	prod, err := conn.NewSyncProducer("chaos-duplicate")
	if err != nil {
		return copies, err
	}
	defer prod.Close()
	for i := 0; i < len(again); i += 500 {
		end := min(i+500, len(again))
		if err := prod.SendMessages(again[i:end]); err != nil {
			// Some of this batch may be on the topics: uncounted copies
			// only raise the duplicates above what is wanted of them.
			return copies, fmt.Errorf("kafka: produce: %w", err)
		}
		for _, t := range types[i:end] {
			copies[t]++
		}
	}
	return copies, nil
}

// readSaga reads every message of the saga topics from the offsets in
// from up to where each partition ends now, as Duplicate re-produces them,
// with each one's event type.
func readSaga(ctx context.Context, conn broker.Conn, from Offsets) ([]*sarama.ProducerMessage, []string, error) {
	client, err := conn.NewClient("chaos-duplicate")
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: connect: %w", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: consumer: %w", err)
	}
	defer consumer.Close()
	var again []*sarama.ProducerMessage
	var types []string
	for _, t := range SagaTopics {
		parts, err := client.Partitions(t)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: partitions of %s: %w", t, err)
		}
		for _, p := range parts {
			end, err := client.GetOffset(t, p, sarama.OffsetNewest)
			if err != nil {
				return nil, nil, fmt.Errorf("kafka: offset of %s/%d: %w", t, p, err)
			}
			start := from[t][p]
			if start >= end {
				continue
			}
			pc, err := consumer.ConsumePartition(t, p, start)
			if err != nil {
				return nil, nil, fmt.Errorf("kafka: consume %s/%d: %w", t, p, err)
			}
			for done := false; !done; {
				select {
				case m := <-pc.Messages():
					again = append(again, broker.Redelivery(m))
					types = append(types, eventType(m))
					done = m.Offset >= end-1
				case <-time.After(5 * time.Second):
					done = true // a gap at the end (e.g. a control record): nothing more to read
				case <-pc.Errors():
					// A broker killed by another fault: the partition
					// consumer finds the new leader and goes on.
					continue
				case <-ctx.Done():
					pc.Close()
					return nil, nil, fmt.Errorf("kafka: consume %s/%d: %w", t, p, ctx.Err())
				}
			}
			pc.Close()
		}
	}
	return again, types, nil
}

// eventType is m's event type, from its header or else its envelope.
func eventType(m *sarama.ConsumerMessage) string {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == events.HeaderEventType {
			return string(h.Value)
		}
	}
	e, err := events.DecodeEnvelope(m.Value)
	if err != nil {
		return "undecodable"
	}
	return e.Type
}
