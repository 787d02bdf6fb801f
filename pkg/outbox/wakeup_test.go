package outbox_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

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
					e := event(t, uuid.NewString())
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
					e := event(t, uuid.NewString())
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

// TestARoundReadsABoundedNumberOfBytes: however large the rows, a round
// reads and publishes at most about 32 MiB of values (and at least one
// row), and the rounds go on until all are sent.
func TestARoundReadsABoundedNumberOfBytes(t *testing.T) {
	db := newDB(t)
	big := make([]byte, 1<<20)
	for i := range 40 {
		big[0] = byte(i)
		if _, err := db.Exec(`INSERT INTO outbox (topic, key, value) VALUES ('t', 'k', $1)`, big); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var sizes []int // bytes of values per publish
	sent := 0
	pub := pubFunc(func(msgs []*sarama.ProducerMessage) error {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range msgs {
			n += m.Value.Length()
		}
		sizes, sent = append(sizes, n), sent+len(msgs)
		return nil
	})
	run(t, newRelay(t, db, pub))
	testenv.Eventually(t, 30*time.Second, "all 40 rows published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sent >= 40
	})
	mu.Lock()
	defer mu.Unlock()
	for _, n := range sizes {
		if n > 33<<20 {
			t.Fatalf("a round published %d MiB of values; want at most 32 MiB and one row", n>>20)
		}
	}
	if len(sizes) < 2 {
		t.Fatalf("%d rounds for 40 MiB, want more than one", len(sizes))
	}
}
