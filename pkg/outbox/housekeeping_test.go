package outbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestCleanupRunsDespiteBacklog: sent rows past Retention are deleted on
// their own schedule, even while rows wait (here, held back for good).
func TestCleanupRunsDespiteBacklog(t *testing.T) {
	db := newDB(t)
	if _, err := db.Exec(`INSERT INTO outbox (topic, value, sent_at) VALUES ('old', '', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, "t", anyEvent(t)) // held back behind other

	clock := newFakeClock()
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Second // cleanup every 30s
		c.Retention = time.Minute
		c.Clock = clock
	})
	run(t, r)
	oldRows := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = 'old'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, 10*time.Second, "the relay leads and waits", func() bool { return outbox.Waits(r) >= 1 })
	if n := oldRows(); n != 1 {
		t.Fatalf("old sent rows = %d before the cleanup timer fired, want 1", n)
	}
	clock.Advance(30 * time.Second)
	testenv.Eventually(t, 10*time.Second, "old sent row deleted", func() bool { return oldRows() == 0 })
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the held-back row kept", n)
	}
}

// TestBacklogGaugeGrowsWhileKafkaFails: the age of the oldest waiting row
// is the alert for an outage, so it must keep growing while no round
// succeeds.
func TestBacklogGaugeGrowsWhileKafkaFails(t *testing.T) {
	db := newDB(t)
	down := pubFunc(func([]*sarama.ProducerMessage) error {
		return errors.New("kafka: client has run out of available brokers")
	})
	clock := newFakeClock()
	name := testenv.ID(t.Name()) // a gauge of its own under -count
	r := newRelay(t, db, down, func(c *outbox.RelayConfig) {
		c.Name = name
		c.Clock = clock
	})
	gauge := func() float64 { return outbox.OldestUnsent(name) }
	// The age is the database's: make the row older there, instead of
	// waiting for it to age.
	age := func(d time.Duration) {
		if _, err := db.Exec(`UPDATE outbox SET created_at = created_at - make_interval(secs => $1)`, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	add(t, db, "t", anyEvent(t))
	age(10 * time.Minute)
	run(t, r)

	testenv.Eventually(t, 10*time.Second, "gauge ≥ 600s", func() bool { return gauge() >= 600 })
	first := gauge()
	age(time.Hour)                   // an hour on, Kafka still down
	clock.Advance(outbox.GaugeEvery) // the gauge's timer, not a successful round, refreshes it
	testenv.Eventually(t, 10*time.Second, "gauge grows by 3600s", func() bool { return gauge() >= first+3600 })
}
