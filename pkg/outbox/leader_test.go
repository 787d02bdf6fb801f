package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// exclusive fails the test if two relays publish at once.
type exclusive struct {
	outbox.Publisher
	t        *testing.T
	inFlight *atomic.Int32
}

func (e exclusive) SendMessages(msgs []*sarama.ProducerMessage) error {
	if e.inFlight.Add(1) > 1 {
		e.t.Error("two relays publishing at once")
	}
	defer e.inFlight.Add(-1)
	return e.Publisher.SendMessages(msgs) // a round trip to Kafka: the window an overlap needs
}

// TestTwoRelaysPublishEachRowOnce runs two relays against one database, as
// two replicas of a service would, and makes the leadership change hands
// between rounds: never do both publish at once, and every row goes out
// exactly once.
func TestTwoRelaysPublishEachRowOnce(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-two")
	const n = 200
	for range n {
		insert(t, db, topic, anyEvent(t))
	}
	settle(t, db)
	pub := producer(t)
	var inFlight atomic.Int32
	small := func(c *outbox.RelayConfig) { c.BatchSize = 10 }
	r1 := newRelay(t, db, exclusive{pub, t, &inFlight}, small)
	r2 := newRelay(t, db, exclusive{pub, t, &inFlight}, small)
	var wg sync.WaitGroup
	for _, r := range []*outbox.Relay{r1, r2} {
		wg.Go(func() {
			for i := 0; unsent(t, db, topic) > 0; i++ {
				if _, err := r.PublishOnce(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 2 {
					r.Close() // let the other one lead for a while
				}
			}
		})
	}
	wg.Wait()

	got := eventIDs(testenv.ReadAll(t, topic, n, 30*time.Second))
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	if len(got) != n || len(seen) != n {
		t.Fatalf("published %d messages with %d distinct ids, want %d each", len(got), len(seen), n)
	}
}

// TestLeaderReelectsAfterConnectionDies: the leadership lives in the
// leader's session. When that session dies, a standby takes over, and the
// old leader notices on its next round and stands by.
func TestLeaderReelectsAfterConnectionDies(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	r1, r2 := newRelay(t, db, accept), newRelay(t, db, accept)

	add(t, db, "t", anyEvent(t))
	if n, err := publishSome(t, r1); err != nil || n != 1 {
		t.Fatalf("r1 PublishOnce = %d, %v; want 1, nil", n, err)
	}
	add(t, db, "t", anyEvent(t))
	if n, err := r2.PublishOnce(ctx); err != nil || n != 0 {
		t.Fatalf("r2 PublishOnce while r1 leads = %d, %v; want 0, nil", n, err)
	}

	pid, err := outbox.LeaderPID(r1)
	if err != nil || pid == 0 {
		t.Fatalf("r1 leader pid = %d, %v", pid, err)
	}
	if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "r2 takes over", func() bool {
		n, err := r2.PublishOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	add(t, db, "t", anyEvent(t))
	if n, err := r1.PublishOnce(ctx); err != nil || n != 0 {
		t.Fatalf("r1 PublishOnce after losing its session = %d, %v; want 0, nil (r2 leads)", n, err)
	}
	r2.Close()
	if n, err := publishSome(t, r1); err != nil || n != 1 {
		t.Fatalf("r1 PublishOnce after r2 resigned = %d, %v; want 1, nil", n, err)
	}
}

// TestStandbyRelayDoesNotSpin: a relay that does not lead leaves unsent
// rows to the leader and waits for its next wake-up.
func TestStandbyRelayDoesNotSpin(t *testing.T) {
	db := newDB(t)
	leader := newRelay(t, db, accept)
	if _, err := leader.PublishOnce(context.Background()); err != nil { // elected; not running
		t.Fatal(err)
	}
	clock := newFakeClock()
	standby := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Clock = clock
	})
	run(t, standby)
	testenv.Eventually(t, 10*time.Second, "the standby listens and waits", func() bool {
		return outbox.Listening(standby) && outbox.Waits(standby) >= 1
	})
	add(t, db, "t", anyEvent(t)) // its NOTIFY wakes the standby
	testenv.Eventually(t, 10*time.Second, "the standby, woken, waits again", func() bool { return outbox.Waits(standby) >= 2 })
	if n := clock.Pending(); n != idleTimers {
		t.Fatalf("the standby armed %d timers, want only its %d own: it would retry rows it cannot publish", n, idleTimers)
	}
	clock.Advance(time.Second)
	t.Logf("%d standby waits, %d retries in 1s", outbox.Waits(standby), outbox.HeldBackRetries(standby))
	if n := outbox.HeldBackRetries(standby); n != 0 {
		t.Fatalf("standby retried %d times in 1s, want it to wait for a wake-up", n)
	}
	if n := unsent(t, db, "t"); n != 1 {
		t.Fatalf("unsent = %d, want the row left to the leader", n)
	}
}

// TestFrozenLeaderIsReplacedWithinLease: a leader frozen between Kafka's ack
// and its mark — its process stopped, its session open and idle, exactly as
// under SIGSTOP — loses its session to idle_session_timeout after the Lease;
// a standby takes over and publishes a fresh row within Lease + a standby
// round; the old leader, woken, marks nothing and resigns. The lease is the
// server's, in real time, so this test runs on the real clock, with the
// defaults, and logs the takeover time it measured.
func TestFrozenLeaderIsReplacedWithinLease(t *testing.T) {
	db := newDB(t)
	oldName, newName := testenv.ID("frozen"), testenv.ID("standby") // metrics of their own under -count
	oldPub, newPub := &recorder{}, &recorder{}

	old := newRelay(t, db, oldPub, func(c *outbox.RelayConfig) { c.Name = oldName })
	var freeze atomic.Bool
	frozen, thaw := make(chan struct{}), make(chan struct{})
	outbox.SetHook(old, func(point string) {
		if point == failpoint.AfterPublish && freeze.CompareAndSwap(true, false) {
			close(frozen)
			<-thaw // SIGSTOP
		}
	})
	run(t, old)
	var thawOnce sync.Once
	unfreeze := func() { thawOnce.Do(func() { close(thaw) }) }
	t.Cleanup(unfreeze) // before run's cleanup stops the relay
	testenv.Eventually(t, 10*time.Second, "the first relay leads", func() bool { return outbox.Leader(oldName) == 1 })

	standby := newRelay(t, db, newPub, func(c *outbox.RelayConfig) { c.Name = newName })
	run(t, standby)
	testenv.Eventually(t, 10*time.Second, "the standby waits", func() bool { return outbox.Waits(standby) >= 1 })
	if outbox.Leader(newName) != 0 {
		t.Fatal("the standby leads while the first relay does")
	}

	freeze.Store(true)
	a := anyEvent(t)
	add(t, db, "t", a) // the leader publishes it, and freezes before marking it
	select {
	case <-frozen:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader never published the row")
	}
	frozenAt := time.Now()
	b := anyEvent(t)
	add(t, db, "t", b) // a fresh row, for whoever leads

	testenv.Eventually(t, 60*time.Second, "the standby takes over and publishes both rows", func() bool {
		return unsent(t, db, "t") == 0
	})
	took := time.Since(frozenAt)
	bound := outbox.DefaultLease + 2*time.Second // Lease + the standby's round (PollInterval)
	t.Logf("takeover: a standby published the fresh row %v after the leader froze (bound %v)", took.Round(10*time.Millisecond), bound)
	if took > bound+3*time.Second {
		t.Errorf("takeover took %v, want within Lease + PollInterval = %v (+3s slack)", took, bound)
	}
	if got := newPub.seen(); !equal(got, []string{a.ID, b.ID}) {
		t.Errorf("the new leader published %v, want [a b] = %v (a again: the frozen one never marked it)", got, []string{a.ID, b.ID})
	}
	if outbox.Leader(newName) != 1 {
		t.Errorf("choreo_outbox_leader{relay=%s} = %v, want 1", newName, outbox.Leader(newName))
	}

	unfreeze()
	testenv.Eventually(t, 20*time.Second, "the old leader resigns", func() bool {
		pid, err := outbox.LeaderPID(old)
		return err == nil && pid == 0 && outbox.Leader(oldName) == 0
	})
	if n := outbox.Published(oldName); n != 0 {
		t.Errorf("the frozen leader marked %v rows after it woke, want 0: its session is gone", n)
	}
	if got := oldPub.seen(); !equal(got, []string{a.ID}) {
		t.Errorf("the frozen leader published %v, want only a", got)
	}
	if outbox.Leader(newName) != 1 {
		t.Errorf("the new leader lost the leadership to the woken one")
	}
}

// TestIdleLeaderKeepsItsLease: the leader's session runs with
// idle_session_timeout = Lease, and a running leader with nothing to
// publish heartbeats often enough to keep it through many leases.
func TestIdleLeaderKeepsItsLease(t *testing.T) {
	db := newDB(t)
	name := testenv.ID("idle")
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.Name = name
		c.Lease = time.Second // a round every 333ms
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "the relay leads", func() bool { return outbox.Leader(name) == 1 })
	if v, err := outbox.LeaderSetting(r, "idle_session_timeout"); err != nil || v != "1s" {
		t.Fatalf("leader session idle_session_timeout = %q, %v; want 1s", v, err)
	}
	pid, err := outbox.LeaderPID(r)
	if err != nil || pid == 0 {
		t.Fatalf("leader pid = %d, %v", pid, err)
	}
	start := outbox.Waits(r)
	testenv.Eventually(t, 30*time.Second, "ten idle rounds, over three leases", func() bool { return outbox.Waits(r) >= start+10 })
	if now, err := outbox.LeaderPID(r); err != nil || now != pid {
		t.Fatalf("leader session %d, %v after three idle leases; want the same session %d", now, err, pid)
	}

	// A pooled session, from a standby's lost bid, carries no lease.
	standby := newRelay(t, db, accept)
	if n, err := standby.PublishOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("standby PublishOnce = %d, %v", n, err)
	}
	var v string
	if err := db.Get(&v, `SELECT current_setting('idle_session_timeout')`); err != nil || v != "0" {
		t.Fatalf("pooled session idle_session_timeout = %q, %v; want 0", v, err)
	}
}
