package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// WaitServed polls, with backoff, until every partition of topics has a
// leader that answers a ListOffsets and a Fetch for it without an error, or
// ctx ends. A created topic is not served at once: a fresh broker (KRaft)
// publishes the partition in its metadata before its replica manager leads
// it, and a produce in between fails with "not the leader". The leader's
// answers prove what a produce and a fetch need without writing a probe
// record, which would disturb whoever counts the topic's records or offsets
// (a test, a tool's report).
func WaitServed(ctx context.Context, conn Conn, topics ...string) error {
	cfg, err := conn.Config("wait-served")
	if err != nil {
		return err
	}
	cfg.Metadata.Retry.Max = 0 // the poll below retries, and says why it waited
	client, err := sarama.NewClient(conn.Brokers, cfg)
	if err != nil {
		return fmt.Errorf("broker: connect to wait for topics: %w", err)
	}
	defer client.Close()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := served(client, topics)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: topics %v not served: %w (last: %w)", topics, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// served returns nil if every partition of topics is led by a broker that
// answers for it, and otherwise the first reason it is not.
func served(client sarama.Client, topics []string) error {
	if err := client.RefreshMetadata(topics...); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	// One ListOffsets and one Fetch per leader, for all its partitions.
	type part struct {
		topic string
		p     int32
	}
	byLeader := map[*sarama.Broker][]part{}
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			return fmt.Errorf("partitions of %s: %w", topic, err)
		}
		if len(parts) == 0 {
			return fmt.Errorf("%s has no partitions yet", topic)
		}
		for _, p := range parts {
			leader, err := client.Leader(topic, p)
			if err != nil {
				return fmt.Errorf("leader of %s/%d: %w", topic, p, err)
			}
			byLeader[leader] = append(byLeader[leader], part{topic, p})
		}
	}
	for leader, parts := range byLeader {
		offsets := sarama.NewOffsetRequest(client.Config().Version)
		for _, x := range parts {
			offsets.AddBlock(x.topic, x.p, sarama.OffsetNewest, 1)
		}
		resp, err := leader.GetAvailableOffsets(offsets)
		if err != nil {
			return fmt.Errorf("list offsets on broker %d: %w", leader.ID(), err)
		}
		fetch := &sarama.FetchRequest{Version: 4, MaxWaitTime: 0, MinBytes: 0, MaxBytes: 1 << 10, Isolation: sarama.ReadUncommitted}
		for _, x := range parts {
			b := resp.GetBlock(x.topic, x.p)
			if b == nil {
				return fmt.Errorf("list offsets of %s/%d: no answer", x.topic, x.p)
			}
			if !errors.Is(b.Err, sarama.ErrNoError) {
				return fmt.Errorf("list offsets of %s/%d: %w", x.topic, x.p, b.Err)
			}
			fetch.AddBlock(x.topic, x.p, b.Offset, 1<<10, -1)
		}
		fresp, err := leader.Fetch(fetch)
		if err != nil {
			return fmt.Errorf("fetch on broker %d: %w", leader.ID(), err)
		}
		for _, x := range parts {
			b := fresp.GetBlock(x.topic, x.p)
			if b == nil {
				return fmt.Errorf("fetch of %s/%d: no answer", x.topic, x.p)
			}
			if !errors.Is(b.Err, sarama.ErrNoError) {
				return fmt.Errorf("fetch of %s/%d: %w", x.topic, x.p, b.Err)
			}
		}
	}
	return nil
}
