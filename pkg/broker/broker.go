// Package broker holds the Kafka client settings every service shares: the
// sarama configuration that the saga's guarantees rely on, topic creation and
// a readiness probe.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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

// Settings returns the sarama configuration for clientID without the
// connection's security (Conn.Config adds it; no client is built from
// Settings alone):
//   - producer: acks from all in-sync replicas, idempotent (no duplicates
//     from the producer's own retries), one request in flight so retries
//     cannot reorder a partition, hash partitioning on the key;
//   - consumer: start from the oldest offset when the group has none, and
//     commit only offsets the handler marked (after its transaction).
func Settings(clientID string) *sarama.Config {
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
	// Kafka's Java client's partitioner (murmur2), so that a key lands on
	// the same partition whoever produces it: the built-in relay or a Kafka
	// Connect worker (OUTBOX_RELAY=debezium).
	c.Producer.Partitioner = sarama.NewMurmur2Partitioner

	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = 500 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	// A member learns of a rebalance from its next heartbeat, so this
	// bounds how long a departing instance's partitions wait for the rest.
	c.Consumer.Group.Heartbeat.Interval = time.Second

	// Topics are created by EnsureTopics with the settings the guarantees
	// need, never by a metadata request with the broker's defaults.
	c.Metadata.AllowAutoTopicCreation = false

	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Net.DialTimeout = 5 * time.Second
	return c
}

// TopicSettings is how the services create their topics. The durability
// pair comes from the environment (KAFKA_REPLICATION_FACTOR and
// KAFKA_MIN_INSYNC_REPLICAS): with replication factor R and
// min.insync.replicas M, a write acknowledged with acks=all (see Config) is on
// at least M brokers, so it survives the loss of M-1 of them, and a partition
// keeps accepting writes while R-M of its replicas are down. A production
// cluster uses R=3, M=2; the defaults (1 and 1) suit a single local broker.
//
// The envconfig tags let a service embed TopicSettings in its own config
// (envconfig.Process("", &cfg) reads the variables named here).
type TopicSettings struct {
	// Partitions of each new topic; see Partitions.
	Partitions int32 `envconfig:"KAFKA_PARTITIONS"`
	// ReplicationFactor: how many brokers hold a copy of each partition.
	ReplicationFactor int16 `envconfig:"KAFKA_REPLICATION_FACTOR"`
	// MinInsyncReplicas is set as the topic's min.insync.replicas: how
	// many replicas must have a write before an acks=all produce succeeds.
	MinInsyncReplicas int16 `envconfig:"KAFKA_MIN_INSYNC_REPLICAS"`
}

// DefaultTopicSettings returns what EnsureTopics uses: Partitions
// partitions, replication factor 1, min.insync.replicas 1 (a single broker).
func DefaultTopicSettings() TopicSettings {
	return TopicSettings{Partitions: Partitions, ReplicationFactor: 1, MinInsyncReplicas: 1}
}

// Validate checks 1 <= min.insync.replicas <= replication factor and at
// least one partition; its errors name the environment variables.
func (s TopicSettings) Validate() error {
	var errs []error
	if s.Partitions < 1 {
		errs = append(errs, fmt.Errorf("KAFKA_PARTITIONS=%d: a topic needs at least 1 partition", s.Partitions))
	}
	if s.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("KAFKA_REPLICATION_FACTOR=%d: must be at least 1", s.ReplicationFactor))
	}
	switch {
	case s.MinInsyncReplicas < 1:
		errs = append(errs, fmt.Errorf("KAFKA_MIN_INSYNC_REPLICAS=%d: must be at least 1", s.MinInsyncReplicas))
	case s.ReplicationFactor >= 1 && s.MinInsyncReplicas > s.ReplicationFactor:
		errs = append(errs, fmt.Errorf("KAFKA_MIN_INSYNC_REPLICAS=%d exceeds KAFKA_REPLICATION_FACTOR=%d: no acks=all write could ever succeed",
			s.MinInsyncReplicas, s.ReplicationFactor))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: topic settings: %w", err)
	}
	return nil
}

// detail is the CreateTopics request for s.
func (s TopicSettings) detail() *sarama.TopicDetail {
	minISR := strconv.Itoa(int(s.MinInsyncReplicas))
	return &sarama.TopicDetail{
		NumPartitions:     s.Partitions,
		ReplicationFactor: s.ReplicationFactor,
		ConfigEntries:     map[string]*string{"min.insync.replicas": &minISR},
	}
}

// EnsureTopics is EnsureTopicsWith(DefaultTopicSettings()).
func EnsureTopics(ctx context.Context, conn Conn, clientID string, topics ...string) error {
	return EnsureTopicsWith(ctx, conn, clientID, DefaultTopicSettings(), topics...)
}

// EnsureTopicsWith creates each topic that does not exist yet with the given
// settings, waiting with backoff up to a minute for the cluster to answer
// (a cluster still starting up may refuse a replication factor larger than
// the brokers registered so far; that is retried too). It is safe to call
// from several services at once: "already exists" is success, and an
// existing topic is left as it is, whatever its settings — changing a live
// topic's replication is an operator's reassignment, not a start-up step.
func EnsureTopicsWith(ctx context.Context, conn Conn, clientID string, s TopicSettings, topics ...string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	var last error // the last attempt's error, kept when ctx ends the retries
	create := func() (struct{}, error) {
		admin, err := conn.NewClusterAdmin(clientID)
		if err != nil {
			last = fmt.Errorf("connect admin: %w", err)
			return struct{}{}, last
		}
		defer admin.Close()
		for _, t := range topics {
			err := admin.CreateTopic(t, s.detail(), false)
			if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
				last = fmt.Errorf("create topic %s (replication factor %d, min.insync.replicas %d): %w",
					t, s.ReplicationFactor, s.MinInsyncReplicas, err)
				return struct{}{}, last
			}
		}
		return struct{}{}, nil
	}
	if _, err := backoff.Retry(ctx, create, backoff.WithMaxElapsedTime(time.Minute)); err != nil {
		if last != nil && !errors.Is(err, last) {
			return fmt.Errorf("broker: ensure topics: %w (last attempt: %w)", err, last)
		}
		return fmt.Errorf("broker: ensure topics: %w", err)
	}
	return nil
}

// Addrs is a broker list read from one variable such as KAFKA_BROKERS:
// comma-separated host:port entries. Decode trims the spaces around each
// entry, so "a:9092, b:9092" means two brokers rather than a second one
// named " b:9092" that validation would pass and the client could not dial.
type Addrs []string

// Decode implements envconfig.Decoder.
func (a *Addrs) Decode(value string) error {
	*a = nil
	if strings.TrimSpace(value) == "" {
		return nil
	}
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return fmt.Errorf("empty broker address in %q", value)
		}
		*a = append(*a, s)
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
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" || strings.TrimSpace(a) != a {
			return fmt.Errorf("broker address %q is not host:port", a)
		}
	}
	return nil
}

// Ping reports whether a broker answers a metadata request before ctx ends.
// It opens a short-lived client without retries, so a readiness probe
// reflects the broker's state now rather than after a retry schedule.
func Ping(ctx context.Context, conn Conn) error {
	cfg, err := conn.Config("readiness-probe")
	if err != nil {
		return err
	}
	cfg.Metadata.Retry.Max = 0
	cfg.Net.DialTimeout = time.Second
	done := make(chan error, 1)
	go func() {
		c, err := sarama.NewClient(conn.Brokers, cfg)
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
	conn Conn
	ttl  time.Duration

	mu      sync.Mutex
	checked time.Time
	last    error
}

// NewProbe returns a Probe of brokers whose answers are reused for ttl.
func NewProbe(conn Conn, ttl time.Duration) *Probe {
	return &Probe{conn: conn, ttl: ttl}
}

// Check returns Ping's answer, at most ttl old. Concurrent callers share
// one Ping.
func (p *Probe) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && time.Since(p.checked) < p.ttl {
		return p.last
	}
	p.last = Ping(ctx, p.conn)
	p.checked = time.Now()
	return p.last
}
