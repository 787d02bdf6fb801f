package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// recorder accepts every message and remembers the event ids, in order.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) SendMessages(msgs []*sarama.ProducerMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.ids = append(r.ids, headerOf(m, events.HeaderEventID))
	}
	return nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func headerOf(m *sarama.ProducerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
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
	if n, err := standby.Flush(context.Background()); err != nil || n != 0 {
		t.Fatalf("standby Flush = %d, %v", n, err)
	}
	var v string
	if err := db.Get(&v, `SELECT current_setting('idle_session_timeout')`); err != nil || v != "0" {
		t.Fatalf("pooled session idle_session_timeout = %q, %v; want 0", v, err)
	}
}

// partitionDown is a publisher whose partition down (of partitions, by
// sarama's hash partitioner) is unavailable while down is set; it also
// fails once each event id in flaky. It records what it accepted, in order.
type partitionDown struct {
	partitions int32
	down       int32
	up         atomic.Bool
	mu         sync.Mutex
	flaky      map[string]bool
	accepted   []string
	attempted  map[string]int
}

func (p *partitionDown) partition(m *sarama.ProducerMessage) int32 {
	n, err := sarama.NewHashPartitioner(m.Topic).Partition(m, p.partitions)
	if err != nil {
		panic(err)
	}
	return n
}

func (p *partitionDown) SendMessages(msgs []*sarama.ProducerMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs sarama.ProducerErrors
	for _, m := range msgs {
		id := headerOf(m, events.HeaderEventID)
		p.attempted[id]++
		switch {
		case !p.up.Load() && p.partition(m) == p.down:
			errs = append(errs, &sarama.ProducerError{Msg: m, Err: sarama.ErrLeaderNotAvailable})
		case p.flaky[id]:
			delete(p.flaky, id)
			errs = append(errs, &sarama.ProducerError{Msg: m, Err: sarama.ErrNotLeaderForPartition})
		default:
			p.accepted = append(p.accepted, id)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// TestUnavailablePartitionDoesNotBlockOthers: the oldest rows all belong to
// a partition whose leader is unavailable. The relay must still publish the
// rows of the other partitions behind them, never publish a later row of a
// key whose earlier row failed, and, once the partition is back, publish
// the held rows in order.
func TestUnavailablePartitionDoesNotBlockOthers(t *testing.T) {
	db := newDB(t)
	const topic = "orders"
	pub := &partitionDown{partitions: 4, down: 2, flaky: map[string]bool{}, attempted: map[string]int{}}
	// Order ids by partition: three on the unavailable one, three others.
	var badKeys, goodKeys []string
	for len(badKeys) < 3 || len(goodKeys) < 3 {
		k := testenv.ID("order")
		if pub.partition(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k)}) == pub.down {
			if len(badKeys) < 3 {
				badKeys = append(badKeys, k)
			}
		} else if len(goodKeys) < 3 {
			goodKeys = append(goodKeys, k)
		}
	}
	want := map[string][]string{} // order id -> its event ids, in order
	addFor := func(orderID string) events.Envelope {
		e := event(t, orderID)
		insert(t, db, topic, e)
		want[orderID] = append(want[orderID], e.ID)
		return e
	}
	// Batches of four: the first is the unavailable partition's only; a
	// healthy key's first row fails once (f1), its second (f2) comes later.
	flakyKey := goodKeys[2]
	addFor(badKeys[0])
	addFor(badKeys[1])
	addFor(badKeys[2])
	f1 := addFor(flakyKey)
	pub.flaky[f1.ID] = true
	for _, k := range goodKeys[:2] {
		addFor(k)
		addFor(k)
	}
	f2 := addFor(flakyKey)
	for _, k := range badKeys {
		addFor(k)
	}
	for _, k := range goodKeys[:2] {
		addFor(k)
	}
	settle(t, db)

	clock := newFakeClock() // stands still: blocked keys are not retried
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) {
		c.BatchSize = 4
		c.Clock = clock
	})
	ctx := context.Background()
	healthyLeft := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND key <> ALL($1::bytea[])`,
			byteas(append(append([]string(nil), badKeys...), flakyKey))); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := 0; i < 10 && healthyLeft() > 0; i++ {
		r.Flush(ctx) //nolint:errcheck // the failures are the point
	}
	if n := healthyLeft(); n != 0 {
		t.Fatalf("%d rows of healthy partitions unsent after 10 rounds: the unavailable partition blocks them", n)
	}
	pub.mu.Lock()
	for _, k := range badKeys {
		if n := pub.attempted[want[k][1]]; n != 0 {
			t.Errorf("a later row of blocked key %s was sent %d times while its first row failed", k[:8], n)
		}
	}
	if pub.attempted[f2.ID] != 0 {
		t.Errorf("f2 was sent before f1 went through")
	}
	pub.mu.Unlock()
	if n := outbox.Blocked(r); n != 4 {
		t.Errorf("%d keys blocked, want 4 (three on the unavailable partition, and the flaky one)", n)
	}

	pub.up.Store(true) // the partition has a leader again
	for i := 0; i < 20 && unsent(t, db, topic) > 0; i++ {
		clock.Advance(outbox.ProbeMax)
		if _, err := r.Flush(ctx); err != nil {
			t.Fatalf("Flush once Kafka is whole: %v", err)
		}
	}
	if n := unsent(t, db, topic); n != 0 {
		t.Fatalf("%d rows unsent after the partition came back", n)
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	pos := map[string]int{}
	for i, id := range pub.accepted {
		if _, dup := pos[id]; dup {
			t.Errorf("event %s accepted twice", id)
		}
		pos[id] = i
	}
	for k, ids := range want {
		for i := 1; i < len(ids); i++ {
			if pos[ids[i-1]] > pos[ids[i]] {
				t.Errorf("order %s: its events went out as %v, want %v", k[:8], pub.accepted, ids)
			}
		}
	}
	if n := outbox.Blocked(r); n != 0 {
		t.Errorf("%d keys still blocked", n)
	}
}

func byteas(ss []string) any {
	b := make([][]byte, len(ss))
	for i, s := range ss {
		b[i] = []byte(s)
	}
	return pq.Array(b)
}

// switchable fails every message with the error it is set to.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) set(err error) { s.err.Store(&err) }

func (s *switchable) SendMessages(msgs []*sarama.ProducerMessage) error {
	var errs sarama.ProducerErrors
	for _, m := range msgs {
		errs = append(errs, &sarama.ProducerError{Msg: m, Err: *s.err.Load()})
	}
	return errs
}

// TestUnknownTopicGraceNeedsContinuousUnknown: one unknown-topic error, a
// broker outage longer than the grace period, and one more unknown-topic
// error do not park the row: the outage interrupted the evidence. Unknown
// without interruption for the whole grace period does.
func TestUnknownTopicGraceNeedsContinuousUnknown(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	gone := addRaw(t, db, outbox.Message{Topic: "gone", Value: []byte("{}")})
	pub := &switchable{}
	clock := newFakeClock()
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) { c.Clock = clock })
	flush := func(what string) {
		t.Helper()
		if n, err := r.Flush(ctx); err == nil || n != 0 {
			t.Fatalf("Flush (%s) = %d, %v; want 0 and the failure reported", what, n, err)
		}
		if ids := parkedRows(t, db); len(ids) != 0 {
			t.Fatalf("parked %v after %s, want the row retried", ids, what)
		}
	}

	pub.set(sarama.ErrUnknownTopicOrPartition)
	flush("one unknown-topic error")
	pub.set(sarama.ErrOutOfBrokers)
	for elapsed := time.Duration(0); elapsed <= outbox.UnknownTopicGrace; elapsed += time.Minute {
		clock.Advance(time.Minute)
		flush(fmt.Sprintf("%v of broker outage", elapsed+time.Minute))
	}
	pub.set(sarama.ErrUnknownTopicOrPartition)
	clock.Advance(time.Minute) // the row's retry is due
	flush("an unknown-topic error after an outage longer than the grace period")

	// From here the topic stays unknown: parked once the grace is over.
	for elapsed := time.Minute; elapsed < outbox.UnknownTopicGrace; elapsed += time.Minute {
		clock.Advance(time.Minute)
		flush(fmt.Sprintf("%v of continuous unknown-topic errors", elapsed))
	}
	clock.Advance(time.Minute)
	if n, err := r.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("Flush after the grace period = %d, %v; want 0, nil", n, err)
	}
	if ids := parkedRows(t, db); !equalIDs(ids, []int64{gone}) {
		t.Fatalf("parked rows = %v, want [%d] after %v of continuous unknown-topic errors", ids, gone, outbox.UnknownTopicGrace)
	}
}

// TestFailpointsSitBetweenAckAndMark: AfterPublish runs once Kafka has
// acknowledged a batch and before its rows are marked; BetweenBatches once
// they are marked, before the next batch. (failpoint.Hit kills the process
// there when armed; the chaos suite arms them.)
func TestFailpointsSitBetweenAckAndMark(t *testing.T) {
	db := newDB(t)
	for range 3 {
		add(t, db, "t", anyEvent(t))
	}
	pub := &recorder{}
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) { c.BatchSize = 2 })
	var got []string
	outbox.SetHook(r, func(point string) {
		got = append(got, fmt.Sprintf("%s: published %d, unsent %d", point, len(pub.seen()), unsent(t, db, "t")))
	})
	flushAll(t, db, r, "t")
	want := []string{
		"after-publish: published 2, unsent 3",
		"between-batches: published 2, unsent 1",
		"after-publish: published 3, unsent 1",
		"between-batches: published 3, unsent 0",
	}
	if !equal(got, want) {
		t.Fatalf("failpoints ran as\n%q\nwant\n%q", got, want)
	}
}
