package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/IBM/sarama"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

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
	n, err := sarama.NewMurmur2Partitioner(m.Topic).Partition(m, p.partitions)
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
// the blocked rows in order.
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
		r.PublishOnce(ctx) //nolint:errcheck // the failures are the point
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
		if _, err := r.PublishOnce(ctx); err != nil {
			t.Fatalf("PublishOnce once Kafka is whole: %v", err)
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
