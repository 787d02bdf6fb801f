package outbox_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestRunWakesOnCommit checks that Run publishes a new row well before its
// poll interval, through LISTEN/NOTIFY.
func TestRunWakesOnCommit(t *testing.T) {
	db := newDB(t)
	topic := testenv.Topic(t, "outbox-notify")
	r := newRelay(t, db, producer(t), func(c *outbox.RelayConfig) {
		c.PollInterval = time.Hour
		c.Lease = 3 * time.Hour // else the heartbeat, every Lease/3, would find the row
	})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "LISTEN active", func() bool { return outbox.Listening(r) })

	e := anyEvent(t)
	add(t, db, topic, e)
	got := eventIDs(testenv.ReadAll(t, topic, 1, 30*time.Second))
	if len(got) != 1 || got[0] != e.ID {
		t.Fatalf("published %v, want %s (woken by NOTIFY, not the hourly poll)", got, e.ID)
	}
}

// TestRunPublishesWhileListenCannotConnect: LISTEN blocks while its
// connection cannot be made; the poll must publish meanwhile, and Run must
// still stop when asked.
func TestRunPublishesWhileListenCannotConnect(t *testing.T) {
	db := newDB(t)
	got := make(chan string, 10)
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		for _, m := range msgs {
			got <- m.Topic
		}
		return nil
	})
	clock := newFakeClock()
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) {
		c.DatabaseURL = "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=1"
		c.PollInterval = 50 * time.Millisecond
		c.Clock = clock
	})
	stop := testenv.Background(t, "the relay", 5*time.Second, r.Run)

	testenv.Eventually(t, 10*time.Second, "the first round over", func() bool { return outbox.Waits(r) >= 1 })
	add(t, db, "t", anyEvent(t))         // no NOTIFY reaches the relay
	clock.Advance(50 * time.Millisecond) // the poll
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published within 10s of the poll: the poll does not run while LISTEN waits")
	}
	stop()
}

// TestAddNotifiesUnlessTheRelayIsAwake: while the leader is awake, a
// transaction's Add sends no NOTIFY, and the leader cannot go to sleep
// until that transaction has ended, so its unannounced row is seen by the
// leader's last round; once the leader sleeps, Adds notify again.
func TestAddNotifiesUnlessTheRelayIsAwake(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	r := newRelay(t, db, accept)
	if _, err := r.PublishOnce(ctx); err != nil { // elected
		t.Fatal(err)
	}
	l := pq.NewListener(db.url, 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { l.Close() })
	if err := l.Listen(outbox.Channel); err != nil {
		t.Fatal(err)
	}
	// notified commits a sentinel NOTIFY and reports whether an Add's
	// came before it: one transaction's notifications arrive before those
	// of any that committed later.
	notified := func() bool {
		t.Helper()
		if _, err := db.Exec(`SELECT pg_notify($1, 'sentinel')`, outbox.Channel); err != nil {
			t.Fatal(err)
		}
		added := false
		for {
			select {
			case n := <-l.Notify:
				if n == nil { // reconnected: notifications may be lost
					t.Fatal("the listener reconnected")
				}
				if n.Extra == "sentinel" {
					return added
				}
				added = true
			case <-time.After(30 * time.Second):
				t.Fatal("no sentinel notification within 30s")
			}
		}
	}
	addIn := func(tx *sqlx.Tx) {
		t.Helper()
		if err := outbox.Add(ctx, tx, message(t, "t", anyEvent(t))); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("AwakeNoNotify", func(t *testing.T) {
		if err := outbox.Awaken(r); err != nil {
			t.Fatal(err)
		}
		tx := db.MustBegin()
		defer tx.Rollback()
		addIn(tx)
		if alone, err := outbox.Doze(r); err != nil || alone {
			t.Fatalf("doze = %v, %v while a writer that saw the relay awake runs; want false", alone, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if notified() {
			t.Fatal("an Add notified while the relay was awake")
		}
	})
	t.Run("AsleepNotify", func(t *testing.T) {
		if alone, err := outbox.Doze(r); err != nil || !alone {
			t.Fatalf("doze = %v, %v with no writer running; want true", alone, err)
		}
		tx := db.MustBegin()
		defer tx.Rollback()
		addIn(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if !notified() {
			t.Fatal("an Add did not notify while the relay slept")
		}
	})
}

// TestNoRowWaitsForThePoll: writers Add rows — one to three a
// transaction, some outside one, a tenth rolled back — while the relay
// runs with an hourly poll, so that only its wake-ups (a NOTIFY, or the
// rounds it runs while awake) can publish them: every committed row is
// published, however the writers' commits fall against the relay going to
// sleep — with a standby relay, and, in Failover, the leader's session
// killed again and again.
func TestNoRowWaitsForThePoll(t *testing.T) {
	for _, failover := range []bool{false, true} {
		name := map[bool]string{false: "OneLeader", true: "Failover"}[failover]
		t.Run(name, func(t *testing.T) { noRowWaits(t, failover) })
	}
}

func noRowWaits(t *testing.T, failover bool) {
	db := newDB(t)
	var mu sync.Mutex
	published := map[string]bool{}
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			for _, h := range m.Headers {
				if string(h.Key) == events.HeaderEventID {
					published[string(h.Value)] = true
				}
			}
		}
		return nil
	})
	hourly := func(c *outbox.RelayConfig) { c.PollInterval, c.Lease = time.Hour, 3*time.Hour }
	r := newRelay(t, db, pub, hourly)
	run(t, r)
	standby := newRelay(t, db, pub, hourly, func(c *outbox.RelayConfig) { c.Name = t.Name() + "-standby" })
	run(t, standby)
	testenv.Eventually(t, 10*time.Second, "the relay listens", func() bool { return outbox.Listening(r) })

	ctx := context.Background()
	var cmu sync.Mutex
	var committed []string
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if rand.IntN(4) == 0 { // now and then, a quiet spell: the relay dozes
					time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
				}
				if rand.IntN(5) == 0 { // outside a transaction
					e := anyEvent(t)
					if err := outbox.Add(ctx, db.DB, message(t, "t", e)); err != nil {
						t.Error(err)
						return
					}
					cmu.Lock()
					committed = append(committed, e.ID)
					cmu.Unlock()
					continue
				}
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				var ids []string
				for range 1 + rand.IntN(3) {
					e := anyEvent(t)
					if err := outbox.Add(ctx, tx, message(t, "t", e)); err != nil {
						t.Error(err)
						tx.Rollback()
						return
					}
					ids = append(ids, e.ID)
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				}
				if rand.IntN(10) == 0 {
					tx.Rollback()
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				cmu.Lock()
				committed = append(committed, ids...)
				cmu.Unlock()
			}
		})
	}
	if failover {
		wg.Go(func() {
			for time.Now().Before(stop) {
				time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
				for _, rr := range []*outbox.Relay{r, standby} {
					if pid, err := outbox.LeaderPID(rr); err == nil && pid != 0 {
						db.Exec(`SELECT pg_terminate_backend($1)`, pid)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() { // before the relays stop: what a stall left behind
		if !t.Failed() {
			return
		}
		var unsent int
		db.Get(&unsent, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`)
		var locks []string
		db.Select(&locks, `SELECT format('pid %s objid %s %s granted %s', pid, objid, mode, granted)
			FROM pg_locks WHERE locktype = 'advisory'`)
		for name, rr := range map[string]*outbox.Relay{"relay": r, "standby": standby} {
			pid, err := outbox.LeaderPID(rr)
			t.Logf("%s: leader pid %d (%v), listening %v, waits %d, retries %d",
				name, pid, err, outbox.Listening(rr), outbox.Waits(rr), outbox.HeldBackRetries(rr))
		}
		t.Logf("unsent rows %d; advisory locks %v", unsent, locks)
	})
	testenv.Eventually(t, 20*time.Second, "every committed row published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range committed {
			if !published[id] {
				return false
			}
		}
		return true
	})
}
