package outbox_test

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
)

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
