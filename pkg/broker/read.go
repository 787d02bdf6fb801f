package broker

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
)

// MessagesFor returns every message on topic whose key is key, in offset
// order. It reads only the key's partition (the producers hash keys), from
// the oldest retained offset up to the end as of the call. Tools and tests
// use it to find one order's events, e.g. to redeliver them.
func MessagesFor(ctx context.Context, brokers []string, topic, key string) ([]*sarama.ConsumerMessage, error) {
	client, err := sarama.NewClient(brokers, Config("reader"))
	if err != nil {
		return nil, fmt.Errorf("broker: connect: %w", err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("broker: partitions of %s: %w", topic, err)
	}
	p, err := sarama.NewHashPartitioner(topic).Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, int32(len(parts)))
	if err != nil {
		return nil, fmt.Errorf("broker: partition for %q: %w", key, err)
	}
	end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
	if err != nil {
		return nil, fmt.Errorf("broker: end of %s/%d: %w", topic, p, err)
	}
	oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("broker: start of %s/%d: %w", topic, p, err)
	}
	if end <= oldest {
		return nil, nil
	}
	c, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("broker: consumer: %w", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, p, oldest)
	if err != nil {
		return nil, fmt.Errorf("broker: consume %s/%d: %w", topic, p, err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	for {
		select {
		case m := <-pc.Messages():
			if string(m.Key) == key {
				out = append(out, m)
			}
			if m.Offset >= end-1 {
				return out, nil
			}
		case <-ctx.Done():
			return out, fmt.Errorf("broker: reading %s/%d up to offset %d: %w", topic, p, end, ctx.Err())
		}
	}
}

// Redelivery returns a producer message identical to m — same topic, key,
// value and headers — as a broker redelivering it after a lost ack would
// present it to consumers.
func Redelivery(m *sarama.ConsumerMessage) *sarama.ProducerMessage {
	pm := &sarama.ProducerMessage{Topic: m.Topic, Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value)}
	for _, h := range m.Headers {
		if h != nil {
			pm.Headers = append(pm.Headers, *h)
		}
	}
	return pm
}
