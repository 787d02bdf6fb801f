package tracker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/tick"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// forgetBatch bounds one Forget statement, so a large backlog never holds
// long locks or a long transaction.
const forgetBatch = 5000

// forgetBatches bounds one round: 100,000 sagas a minute, well above what
// the saga runs, so a first round over a tracker that never forgot works
// through its backlog over many minutes instead of all at once.
const forgetBatches = 20

// forever is a retention Kafka settings may name instead of -1
// (Long.MAX_VALUE ms, and anything else past a Duration's range): a
// century is as good as forever for the tracker.
const forever = 100 * 365 * 24 * time.Hour

// forgetter keeps the tracker's tables bounded: it forgets the ended sagas
// (store.Forget) it has not seen an event of for longer than Kafka may keep
// one, plus margin. What it deletes, no replay of the topics can bring
// back, in part or whole.
type forgetter struct {
	st     *store.Store
	kafka  broker.Conn
	topics []string
	margin time.Duration // TRACKER_RETENTION
	log    *slog.Logger
}

// run forgets every interval until ctx ends; failures are logged and tried
// again at the next round.
func (f forgetter) run(ctx context.Context, every time.Duration) error {
	return tick.Every(ctx, every, func(ctx context.Context) {
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

// once runs one round and returns how many sagas it forgot.
func (f forgetter) once(ctx context.Context) (int64, error) {
	admin, err := f.kafka.NewClusterAdmin(Name + "-retention")
	if err != nil {
		return 0, fmt.Errorf("retention: admin: %w", err)
	}
	defer admin.Close()
	keep, keptForever, err := kafkaKeeps(admin, f.topics)
	if err != nil {
		return 0, err
	}
	if keptForever != "" {
		f.log.Debug("no saga is forgotten: a topic keeps its records forever", "topic", keptForever)
		return 0, nil
	}
	var total int64
	for range forgetBatches {
		n, err := f.st.Forget(ctx, keep+f.margin, forgetBatch)
		total += n
		if err != nil || n < forgetBatch || ctx.Err() != nil {
			return total, err
		}
	}
	return total, nil
}

// kafkaKeeps returns the longest Kafka may keep a record of any of topics
// after it was written, or the first topic that keeps records forever.
func kafkaKeeps(admin sarama.ClusterAdmin, topics []string) (time.Duration, string, error) {
	var longest time.Duration
	for _, topic := range topics {
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic,
			ConfigNames: []string{"retention.ms", "segment.ms", "cleanup.policy"}})
		if err != nil {
			return 0, "", fmt.Errorf("retention: describe %s: %w", topic, err)
		}
		config := make(map[string]string, len(entries))
		for _, e := range entries {
			config[e.Name] = e.Value
		}
		keep, ok, err := keeps(config)
		if err != nil {
			return 0, "", fmt.Errorf("retention: %s: %w", topic, err)
		}
		if !ok {
			return 0, topic, nil
		}
		longest = max(longest, keep)
	}
	return longest, "", nil
}

// keeps returns the longest a topic with config keeps a record, or false
// if it may keep one forever. Kafka deletes a whole segment once its
// newest record is older than retention.ms, and a segment takes records
// for up to segment.ms: a record may outlive retention.ms by that much. A
// compacted topic keeps a key's last record however old.
func keeps(config map[string]string) (time.Duration, bool, error) {
	if slices.Contains(strings.Split(config["cleanup.policy"], ","), "compact") {
		return 0, false, nil
	}
	ms := func(name string) (int64, error) {
		v, err := strconv.ParseInt(config[name], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, config[name], err)
		}
		return v, nil
	}
	retention, err := ms("retention.ms")
	if err != nil {
		return 0, false, err
	}
	segment, err := ms("segment.ms")
	if err != nil {
		return 0, false, err
	}
	limit := forever.Milliseconds()
	if retention < 0 || retention >= limit || segment < 0 || segment >= limit {
		return 0, false, nil
	}
	return time.Duration(retention+segment) * time.Millisecond, true, nil
}
