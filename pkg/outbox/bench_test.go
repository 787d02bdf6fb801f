package outbox_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// BenchmarkRelay measures the relay's throughput to a real broker: b.N rows,
// each committed in its own transaction, are published (acks=all) and marked
// sent by PublishOnce in batches of 256.
//
//	go test -run '^$' -bench Relay -benchtime 5000x ./pkg/outbox
func BenchmarkRelay(b *testing.B) {
	db := newDB(b)
	topic := testenv.Topic(b, "bench")
	relay := newRelay(b, db, producer(b))
	ctx := context.Background()
	e := event(b, uuid.NewString())
	for range b.N {
		if err := pg.InTx(ctx, db.DB, func(tx *sqlx.Tx) error {
			e.ID = uuid.NewString()
			return outbox.Add(ctx, tx, message(b, topic, e))
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	published := 0
	for published < b.N {
		n, err := relay.PublishOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		published += n
	}
	b.ReportMetric(float64(published)/b.Elapsed().Seconds(), "msgs/s")
}
