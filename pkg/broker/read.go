package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// MessagesFor returns every message on topic whose key is key, in offset
// order. It reads only the key's partition (the producers hash keys), from
// the oldest retained offset up to the end as of the call. Tools and tests
// use it to find one order's events, e.g. to redeliver them.
func MessagesFor(ctx context.Context, conn Conn, topic, key string) ([]*sarama.ConsumerMessage, error) {
	client, parts, err := connect(conn, topic)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	p, err := sarama.NewMurmur2Partitioner(topic).Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, int32(len(parts)))
	if err != nil {
		return nil, fmt.Errorf("broker: partition for %q: %w", key, err)
	}
	return readPartition(ctx, client, topic, p, func(m *sarama.ConsumerMessage) bool { return string(m.Key) == key })
}

// Messages returns every message on topic, by partition, in offset order:
// each partition from its oldest retained offset up to its end as of the
// call. A partition that holds none is left out. Tools use it to read a
// topic of their own whole.
func Messages(ctx context.Context, conn Conn, topic string) (map[int32][]*sarama.ConsumerMessage, error) {
	client, parts, err := connect(conn, topic)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	out := map[int32][]*sarama.ConsumerMessage{}
	for _, p := range parts {
		msgs, err := readPartition(ctx, client, topic, p, func(*sarama.ConsumerMessage) bool { return true })
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			out[p] = msgs
		}
	}
	return out, nil
}

// connect returns a client, which the caller closes, and the partitions
// of topic.
func connect(conn Conn, topic string) (sarama.Client, []int32, error) {
	client, err := conn.NewClient("reader")
	if err != nil {
		return nil, nil, fmt.Errorf("broker: connect: %w", err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("broker: partitions of %s: %w", topic, err)
	}
	return client, parts, nil
}

// readPartition returns the messages of topic/p that keep accepts, from the
// oldest retained offset up to the end as of the call. On an error it
// returns what it read so far with it.
func readPartition(ctx context.Context, client sarama.Client, topic string, p int32, keep func(*sarama.ConsumerMessage) bool) ([]*sarama.ConsumerMessage, error) {
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
	// Errors are drained as they come, so a full error channel cannot stall
	// the partition consumer; the last one explains why reading stopped.
	var lastErr error
	errs := pc.Errors()
	for {
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				// The partition consumer gave up, e.g. on an offset that
				// retention deleted meanwhile. Its errors say why.
				for cerr := range pc.Errors() {
					lastErr = cerr
				}
				if lastErr == nil {
					lastErr = errors.New("partition consumer closed")
				}
				return out, fmt.Errorf("broker: reading %s/%d stopped before offset %d: %w", topic, p, end, lastErr)
			}
			if keep(m) {
				out = append(out, m)
			}
			if m.Offset >= end-1 {
				return out, nil
			}
		case cerr, ok := <-errs:
			if !ok {
				errs = nil // closed with Messages, which reports it
				continue
			}
			// Most errors are retried by the consumer itself; keep reading
			// until it gives up or ctx ends.
			lastErr = cerr
		case <-ctx.Done():
			if lastErr != nil {
				return out, fmt.Errorf("broker: reading %s/%d up to offset %d: %w (last consumer error: %v)", topic, p, end, ctx.Err(), lastErr)
			}
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
