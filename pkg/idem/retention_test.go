package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/idem"
)

// TestPrunerFollowsTheCommittedOffsetAndTheTopicsRetention runs a round of
// the Pruner against real Kafka: marks read below both the group's
// committed offset and the partition's earliest offset, and older than
// the topic's retention (7 days by default, longer than the configured
// window), go; the rest stay — recent ones, ones of records Kafka still
// holds (a reset of the group's offsets would deliver them again), and
// ones the group has not committed past.
func TestPrunerFollowsTheCommittedOffsetAndTheTopicsRetention(t *testing.T) {
	db := testenv.DB(t)
	topic := testenv.Topic(t, "retention")
	group := testenv.ID("retention")
	// one key: one partition, offsets 0..9
	partition := testenv.Produce(t, topic, "k", "v", "v", "v", "v", "v", "v", "v", "v", "v", "v")
	testenv.StartAtEnd(t, group, topic) // committed: 10 on the key's partition
	// Kafka has dropped offsets 0-4, as retention drops old segments.
	if err := testenv.Admin(t).DeleteRecords(topic, map[int32]int64{partition: 5}); err != nil {
		t.Fatal(err)
	}

	mark := func(consumer string, offset int64, age time.Duration) string {
		id := uuid.NewString()
		if _, err := db.Exec(`INSERT INTO processed_events (consumer, event_id, topic, kafka_partition, kafka_offset, processed_at)
			VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6))`, consumer, id, topic, partition, offset, age.Seconds()); err != nil {
			t.Fatal(err)
		}
		return id
	}
	week := 7 * 24 * time.Hour
	gone := []string{mark(group, 2, week+time.Hour), mark(group+".dlq", 3, week+time.Hour)}
	kept := []string{
		mark(group, 4, week-time.Hour),  // inside the topic's retention, though past the window
		mark(group, 6, week+time.Hour),  // old, but Kafka still holds offset 6
		mark(group, 10, week+time.Hour), // at the committed offset
		mark(group, 11, week+time.Hour), // beyond it
	}
	n, err := idem.Pruner{Group: group, Kafka: testenv.Kafka(t), DB: db, Window: time.Hour, Log: testenv.Logger(t)}.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(gone)) {
		t.Errorf("pruned %d marks, want %d", n, len(gone))
	}
	count := func(id string) (n int) {
		if err := db.Get(&n, `SELECT count(*) FROM processed_events WHERE event_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, id := range gone {
		if count(id) != 0 {
			t.Errorf("mark %s is past both bounds but was kept", id)
		}
	}
	for _, id := range kept {
		if count(id) != 1 {
			t.Errorf("mark %s could still be tested by a delivery but was pruned", id)
		}
	}
}
