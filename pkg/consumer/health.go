package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// What tells the truth when nothing is consumed: a member that holds no
// session, a subscribed topic that is gone, and a lag that is read from
// the group's committed offsets, so it stays visible (and grows) when no
// member holds the partition at all.
var (
	lag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_consumer_lag",
		Help: "Messages of a partition the service's group has not committed: the high-water mark minus the committed offset. Every instance reports it; read it with max by (service, topic, partition).",
	}, []string{"service", "topic", "partition"})
	joined = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_consumer_group_joined",
		Help: "1 while this instance is a member of its group's current generation, 0 while it is not (starting, rebalancing, or unable to join).",
	}, []string{"service"})
	missingTopics = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_consumer_missing_topics",
		Help: "Subscribed topics that do not exist. One is enough to stop all of the service's consumption.",
	}, []string{"service"})
)

// joinGrace is how long a member may be out of a session (a rebalance, a
// broker restart) before Ready says so.
const joinGrace = 20 * time.Second

// Ready is a readiness check: it fails while the member has not joined its
// group, or has been out of a session for longer than a rebalance takes, so
// a service that serves HTTP but consumes nothing does not look healthy.
func (g *Group) Ready(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.inSession:
		return nil
	case g.lastSession.IsZero():
		return fmt.Errorf("consumer group %s not joined yet%s", g.cfg.GroupID, g.why())
	case time.Since(g.lastSession) > joinGrace:
		return fmt.Errorf("consumer group %s left %s ago%s", g.cfg.GroupID, time.Since(g.lastSession).Round(time.Second), g.why())
	}
	return nil
}

// why is the last reason a session could not start, for Ready's answer.
func (g *Group) why() string {
	if g.missing > 0 {
		return fmt.Sprintf(": %d subscribed topics missing", g.missing)
	}
	if g.lastErr != nil {
		return ": " + g.lastErr.Error()
	}
	return ""
}

// watch sets the lag and missing-topic gauges every cfg.WatchEvery until
// ctx ends, and re-creates a subscribed topic that has gone (cfg.Ensure).
func (g *Group) watch(ctx context.Context) {
	t := time.NewTicker(g.cfg.WatchEvery)
	defer t.Stop()
	for {
		if c, err := g.cluster(); err == nil {
			if err := g.measure(ctx, c.client, c.admin); err != nil {
				// A broker outage shows on /readyz; the gauges keep their
				// last values until a round can read them.
				g.log.Debug("consumer lag not measured", "err", err)
				if errors.Is(err, sarama.ErrClosedClient) || errors.Is(err, sarama.ErrOutOfBrokers) {
					g.dropCluster()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clusterConn is the group's own connection for admin requests: the
// gauges' reads, and the removal of a static member at shutdown, which
// then needs no new connection or coordinator lookup.
type clusterConn struct {
	client sarama.Client
	admin  sarama.ClusterAdmin // closing it closes client
}

// cluster returns the group's clusterConn, dialling it if there is none.
func (g *Group) cluster() (*clusterConn, error) {
	g.connMu.Lock()
	defer g.connMu.Unlock()
	if g.conn != nil {
		return g.conn, nil
	}
	c, err := g.cfg.Kafka.NewClient(g.cfg.GroupID + "-admin")
	if err != nil {
		return nil, err
	}
	a, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	g.conn = &clusterConn{client: c, admin: a}
	return g.conn, nil
}

// dropCluster closes the group's clusterConn; the next use dials anew.
func (g *Group) dropCluster() {
	g.connMu.Lock()
	defer g.connMu.Unlock()
	if g.conn != nil {
		g.conn.admin.Close()
		g.conn = nil
	}
}

// measure is one round of watch.
func (g *Group) measure(ctx context.Context, client sarama.Client, admin sarama.ClusterAdmin) error {
	var missing []string
	for _, topic := range g.cfg.Topics {
		if err := client.RefreshMetadata(topic); errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			missing = append(missing, topic)
		} else if err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.missing = len(missing)
	g.mu.Unlock()
	missingTopics.WithLabelValues(g.cfg.GroupID).Set(float64(len(missing)))
	if len(missing) > 0 {
		// sarama refreshes the metadata of every subscribed topic, so one
		// deleted topic stops the consumption of all of them.
		g.log.Error("subscribed topics are missing: nothing is consumed until they exist", "missing", missing)
		if g.cfg.Ensure != nil {
			if err := g.cfg.Ensure(ctx, missing); err != nil {
				return fmt.Errorf("consumer: re-create topics %v: %w", missing, err)
			}
			g.log.Warn("subscribed topics re-created", "topics", missing)
		}
	}

	parts := map[string][]int32{}
	for _, topic := range g.cfg.Topics {
		if ps, err := client.Partitions(topic); err == nil { // missing: counted above
			parts[topic] = ps
		}
	}
	committed, err := admin.ListConsumerGroupOffsets(g.cfg.GroupID, parts)
	if err != nil {
		return err
	}
	for topic, ps := range parts {
		for _, p := range ps {
			hwm, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				return err
			}
			next := int64(-1)
			if b := committed.GetBlock(topic, p); b != nil && b.Err == sarama.ErrNoError {
				next = b.Offset
			}
			if next < 0 { // nothing committed: the group starts at the oldest
				if next, err = client.GetOffset(topic, p, sarama.OffsetOldest); err != nil {
					return err
				}
			}
			lag.WithLabelValues(g.cfg.GroupID, topic, strconv.Itoa(int(p))).Set(float64(max(hwm-next, 0)))
		}
	}
	return nil
}
