package testenv

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// Rest is what must be quiet before a test counts: outboxes whose unsent
// rows must all be published, and consumer groups (by id) whose committed
// offsets must reach the end of the topics each consumes.
type Rest struct {
	Kafka    broker.Conn
	Outboxes []*sqlx.DB
	Groups   map[string][]string
}

// AtRest waits, up to bound, until r is at rest: no unsent outbox row, and
// every group has committed the end of its topics. A test checks "exactly
// one" only then; right after "at least one" a duplicate may still be on
// its way (a republish after a crash, a redelivery behind the first).
//
// One round reads the outboxes, the topics' ends and the groups' offsets,
// then the outboxes and the ends again: a row a consumer wrote meanwhile is
// either still unsent or has moved an end, so it fails the round.
func AtRest(t testing.TB, bound time.Duration, r Rest) {
	t.Helper()
	admin, err := r.Kafka.NewClusterAdmin("test-at-rest")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	defer admin.Close()
	client, err := r.Kafka.NewClient("test-at-rest")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	defer client.Close()
	deadline := time.Now().Add(bound)
	marks := make([]outbox.SweepMark, len(r.Outboxes))
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		why := restless(client, admin, r, marks)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not at rest within %v: %s", bound, why)
		}
		time.Sleep(wait)
	}
}

// restless returns "" if r is at rest and otherwise what is not.
func restless(client sarama.Client, admin sarama.ClusterAdmin, r Rest, marks []outbox.SweepMark) string {
	before, why := unsent(r.Outboxes, marks)
	if why != "" {
		return why
	}
	if before > 0 {
		return fmt.Sprintf("%d outbox rows unsent", before)
	}
	var topics []string
	for _, ts := range r.Groups {
		for _, topic := range ts {
			if !slices.Contains(topics, topic) {
				topics = append(topics, topic)
			}
		}
	}
	ends, why := topicEnds(client, topics)
	if why != "" {
		return why
	}
	for group, ts := range r.Groups {
		if why := caughtUp(client, admin, group, ts, ends); why != "" {
			return why
		}
	}
	if after, why := unsent(r.Outboxes, marks); why != "" || after > 0 {
		return fmt.Sprintf("outbox rows written meanwhile (%d) %s", after, why)
	}
	again, why := topicEnds(client, topics)
	if why != "" {
		return why
	}
	for tp, end := range ends {
		if again[tp] != end {
			return fmt.Sprintf("%s/%d grew meanwhile", tp.topic, tp.partition)
		}
	}
	return ""
}

type topicPartition struct {
	topic     string
	partition int32
}

// unsent counts the outboxes' rows that are neither sent nor refused.
// Under Debezium (outbox.DebeziumPublishes) a published row stays
// until the service sweeps it: there it counts the rows the database's
// slot has not confirmed (outbox.Unconfirmed, under marks[i], which a
// second call in the round keeps: it then asks what was written since).
func unsent(dbs []*sqlx.DB, marks []outbox.SweepMark) (int, string) {
	total := 0
	for i, db := range dbs {
		debezium, err := outbox.DebeziumPublishes(context.Background(), db)
		if err != nil {
			return 0, err.Error()
		}
		if debezium {
			// One service, one slot: with another, which one says what
			// the connector has published would be a guess.
			var slots []string
			if err := db.Select(&slots, `SELECT slot_name FROM pg_replication_slots WHERE database = current_database() AND slot_type = 'logical'`); err != nil {
				return 0, fmt.Sprintf("look up the slot: %v", err)
			}
			if len(slots) != 1 {
				return 0, fmt.Sprintf("%d logical slots in the database (%v), want Debezium's one", len(slots), slots)
			}
			slot := slots[0]
			n, err := outbox.Unconfirmed(context.Background(), db, slot, &marks[i])
			if err != nil {
				return 0, fmt.Sprintf("unconfirmed rows: %v", err)
			}
			total += n
			continue
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND refused_at IS NULL`); err != nil {
			return 0, fmt.Sprintf("count unsent outbox rows: %v", err)
		}
		total += n
	}
	return total, ""
}

// topicEnds reads the end offset of every partition of topics.
func topicEnds(client sarama.Client, topics []string) (map[topicPartition]int64, string) {
	ends := map[topicPartition]int64{}
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			return nil, fmt.Sprintf("partitions of %s: %v", topic, err)
		}
		for _, p := range parts {
			end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				return nil, fmt.Sprintf("end of %s/%d: %v", topic, p, err)
			}
			ends[topicPartition{topic, p}] = end
		}
	}
	return ends, ""
}

// caughtUp returns "" if group has committed at least ends on every
// partition of topics holding records, and otherwise where it lags.
func caughtUp(client sarama.Client, admin sarama.ClusterAdmin, group string, topics []string, ends map[topicPartition]int64) string {
	parts := map[string][]int32{}
	for tp := range ends {
		if slices.Contains(topics, tp.topic) {
			parts[tp.topic] = append(parts[tp.topic], tp.partition)
		}
	}
	resp, err := admin.ListConsumerGroupOffsets(group, parts)
	if err != nil {
		return fmt.Sprintf("offsets of %s: %v", group, err)
	}
	for tp, end := range ends {
		if !slices.Contains(topics, tp.topic) {
			continue
		}
		b := resp.GetBlock(tp.topic, tp.partition)
		switch {
		case b == nil:
			return fmt.Sprintf("%s has no offset for %s/%d", group, tp.topic, tp.partition)
		case b.Err != sarama.ErrNoError:
			return fmt.Sprintf("offset of %s on %s/%d: %v", group, tp.topic, tp.partition, b.Err)
		case b.Offset == -1 && end > 0:
			// A partition the group never committed is caught up only if
			// it never held a record since; one that did must be read.
			if oldest, err := client.GetOffset(tp.topic, tp.partition, sarama.OffsetOldest); err != nil || oldest < end {
				return fmt.Sprintf("%s has committed nothing on %s/%d (end %d)", group, tp.topic, tp.partition, end)
			}
		case b.Offset >= 0 && b.Offset < end:
			return fmt.Sprintf("%s at %d of %d on %s/%d", group, b.Offset, end, tp.topic, tp.partition)
		}
	}
	return ""
}

// Consumed waits, up to bound, until group has committed on every
// partition of topics at least the end it had when Consumed was called:
// everything published before has been read. Unlike AtRest it holds on a
// topic that other tests keep writing to.
func Consumed(t testing.TB, bound time.Duration, group string, topics ...string) {
	t.Helper()
	admin, err := Kafka(t).NewClusterAdmin("test-consumed")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	defer admin.Close()
	client, err := Kafka(t).NewClient("test-consumed")
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	defer client.Close()
	ends, why := topicEnds(client, topics)
	if why != "" {
		t.Fatal(why)
	}
	deadline := time.Now().Add(bound)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		why := caughtUp(client, admin, group, topics, ends)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not consumed within %v: %s", bound, why)
		}
		time.Sleep(wait)
	}
}
