package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestProgressSkipsFailureBackoff: a row that keeps failing must not slow
// down the rows behind it. Every round here publishes one row and fails the
// same other one; the relay's clock stands still, so a single failure
// backoff would stop it for good.
func TestProgressSkipsFailureBackoff(t *testing.T) {
	db := newDB(t)
	add(t, db, "stuck", anyEvent(t))
	for range 8 {
		add(t, db, "flowing", anyEvent(t))
	}
	r := newRelay(t, db, failTopic("stuck", sarama.ErrNotLeaderForPartition), func(c *outbox.RelayConfig) {
		c.BatchSize = 2
		c.Clock = newFakeClock()
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "all flowing rows published", func() bool { return unsent(t, db, "flowing") == 0 })
	if n := unsent(t, db, "stuck"); n != 1 {
		t.Fatalf("stuck rows = %d, want 1 (failing, retried, not refused)", n)
	}
}

// TestRunRetriesRowsHeldBack: a transaction that never touches the outbox
// (another service's, or another relay's) holds a row back. When it ends
// there is no NOTIFY, yet Run must publish the row promptly, not at its next
// poll an hour later.
func TestRunRetriesRowsHeldBack(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-held")
	ctx := context.Background()

	other := db.MustBeginTx(ctx, nil)
	defer other.Rollback()
	var xid string
	if err := other.Get(&xid, `SELECT pg_current_xact_id()::text`); err != nil { // takes a txid
		t.Fatal(err)
	}
	e := anyEvent(t)
	insert(t, db, topic, e) // held back behind other

	clock := newFakeClock()
	r := newRelay(t, db, producer(t), func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, r)
	// Once Run waits, its first round has looked, held the row back and
	// armed the retry.
	testenv.Eventually(t, 10*time.Second, "the relay waits after its first round", func() bool { return outbox.Waits(r) >= 1 })
	if n := unsent(t, db, topic); n != 1 {
		t.Fatalf("unsent rows while held back = %d, want 1", n)
	}
	if n := clock.Pending(); n != idleTimers+1 {
		t.Fatalf("%d timers armed, want %d: the relay's own and a retry of the held-back row", n, idleTimers+1)
	}
	if err := other.Commit(); err != nil { // no NOTIFY
		t.Fatal(err)
	}
	settle(t, db)                       // nor does a transaction elsewhere hold it back
	clock.Advance(outbox.HeldBackRetry) // the first retry; the poll is an hour away
	got := eventIDs(testenv.ReadAll(t, topic, 1, 15*time.Second))
	if len(got) != 1 || got[0] != e.ID {
		t.Fatalf("published %v, want %s soon after the holding transaction ended", got, e.ID)
	}
}

// TestRunBacksOffWhileRowsAreHeldBack: a row held back behind a long
// transaction elsewhere is retried soon, then less and less often — not
// every 10ms for as long as the transaction runs.
func TestRunBacksOffWhileRowsAreHeldBack(t *testing.T) {
	db := newDB(t)
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, "t", anyEvent(t))

	clock := newFakeClock()
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, r)
	// Move the clock through two seconds, timer by timer, each time once the
	// relay has armed its next retry.
	const window = 2 * time.Second
	for elapsed := time.Duration(0); ; {
		testenv.Eventually(t, 10*time.Second, "the relay waits to retry the held-back row", func() bool {
			return clock.Pending() == idleTimers+1
		})
		d, _ := clock.Next()
		if elapsed+d > window {
			break
		}
		clock.Advance(d)
		elapsed += d
	}
	// 10ms doubling: 7 retries in 2s (at 10, 30, 70, ... 1270ms); a fixed
	// 10ms retry makes 200.
	t.Logf("%d retries, %d waits in %v", outbox.HeldBackRetries(r), outbox.Waits(r), window)
	if n := outbox.HeldBackRetries(r); n < 2 || n > 12 {
		t.Fatalf("%d held-back retries in 2s, want a backoff from 10ms (2 to 12)", n)
	}
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d while held back, want 1", n)
	}
}

// TestHeldBackRetryBacksOffOnlyByItsOwnRetries: while a transaction
// elsewhere holds rows back, rounds that other wake-ups start (here a
// NOTIFY per commit) must not lengthen the held-back retry: once the
// transaction ends, the rows go out at the next short retry, not after a
// wait grown by every round in between (up to the hourly poll here).
func TestHeldBackRetryBacksOffOnlyByItsOwnRetries(t *testing.T) {
	db := newDB(t)
	other := db.MustBegin()
	defer other.Rollback()
	if _, err := other.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Lease = 3 * time.Hour // the poll and the heartbeat stay an hour away
		c.Clock = clock
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "the relay listens and waits", func() bool {
		return outbox.Listening(r) && outbox.Waits(r) >= 1
	})
	for i := range 10 { // each commit's NOTIFY starts a round that finds its row held back
		waits := outbox.Waits(r)
		insert(t, db, "t", anyEvent(t))
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("round %d, woken by a NOTIFY, over", i), func() bool {
			return outbox.Waits(r) > waits && clock.Pending() == idleTimers+1
		})
	}
	if n := unsent(t, db, "t"); n != 10 {
		t.Fatalf("unsent = %d while held back, want 10", n)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	settle(t, db)
	clock.Advance(outbox.HeldBackRetry)
	testenv.Eventually(t, 10*time.Second, "the held-back rows published at the first retry after the holding transaction ended", func() bool {
		return unsent(t, db, "t") == 0
	})
}
