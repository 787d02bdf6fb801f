// Package broker holds the Kafka client settings every service shares: the
// sarama configuration that the saga's guarantees rely on, topic creation and
// a readiness probe.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v5"
)

// Partitions is the partition count of every topic the services create.
// Ordering is per key (order id), so any count works; three lets a consumer
// group spread over up to three instances.
const Partitions = 3

// Config returns the sarama configuration for clientID:
//   - producer: acks from all in-sync replicas, idempotent (no duplicates
//     from the producer's own retries), one request in flight so retries
//     cannot reorder a partition, hash partitioning on the key;
//   - consumer: start from the oldest offset when the group has none, and
//     commit only offsets the handler marked (after its transaction).
func Config(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V3_6_0_0

	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 10
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewHashPartitioner

	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = 500 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}

	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Net.DialTimeout = 5 * time.Second
	return c
}

// EnsureTopics creates each topic that does not exist yet, waiting with
// backoff up to a minute for the cluster to answer. It is safe to call from
// several services at once: "already exists" is success.
func EnsureTopics(ctx context.Context, brokers []string, clientID string, topics ...string) error {
	create := func() (struct{}, error) {
		admin, err := sarama.NewClusterAdmin(brokers, Config(clientID))
		if err != nil {
			return struct{}{}, fmt.Errorf("connect admin: %w", err)
		}
		defer admin.Close()
		for _, t := range topics {
			err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: Partitions, ReplicationFactor: 1}, false)
			if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
				return struct{}{}, fmt.Errorf("create topic %s: %w", t, err)
			}
		}
		return struct{}{}, nil
	}
	if _, err := backoff.Retry(ctx, create, backoff.WithMaxElapsedTime(time.Minute)); err != nil {
		return fmt.Errorf("broker: ensure topics: %w", err)
	}
	return nil
}

// ValidateAddrs checks a broker list such as KAFKA_BROKERS: at least one
// entry, each host:port.
func ValidateAddrs(addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("no brokers given")
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(strings.TrimSpace(a))
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("broker address %q is not host:port", a)
		}
	}
	return nil
}

// NewSyncProducer returns a producer with Config's guarantees.
func NewSyncProducer(brokers []string, clientID string) (sarama.SyncProducer, error) {
	p, err := sarama.NewSyncProducer(brokers, Config(clientID))
	if err != nil {
		return nil, fmt.Errorf("broker: producer: %w", err)
	}
	return p, nil
}

// Ping reports whether a broker answers a metadata request before ctx ends.
// It opens a short-lived client without retries, so a readiness probe
// reflects the broker's state now rather than after a retry schedule.
func Ping(ctx context.Context, brokers []string) error {
	cfg := Config("readiness-probe")
	cfg.Metadata.Retry.Max = 0
	cfg.Net.DialTimeout = time.Second
	done := make(chan error, 1)
	go func() {
		c, err := sarama.NewClient(brokers, cfg)
		if err == nil {
			err = c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: %w", ctx.Err())
	}
}

// Probe is a readiness check of the brokers that remembers its last answer
// for a while, so that frequent probes (a load balancer, a container
// healthcheck) do not each open a connection to Kafka.
type Probe struct {
	brokers []string
	ttl     time.Duration

	mu      sync.Mutex
	checked time.Time
	last    error
}

// NewProbe returns a Probe of brokers whose answers are reused for ttl.
func NewProbe(brokers []string, ttl time.Duration) *Probe {
	return &Probe{brokers: brokers, ttl: ttl}
}

// Check returns Ping's answer, at most ttl old. Concurrent callers share
// one Ping.
func (p *Probe) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && time.Since(p.checked) < p.ttl {
		return p.last
	}
	p.last = Ping(ctx, p.brokers)
	p.checked = time.Now()
	return p.last
}
