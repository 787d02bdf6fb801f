package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// BenchmarkRelay measures the relay's throughput to a real broker: b.N rows,
// each committed in its own transaction, are published (acks=all) and marked
// sent by Flush in batches of 256.
//
//	go test -run '^$' -bench Relay -benchtime 5000x ./pkg/outbox
func BenchmarkRelay(b *testing.B) {
	db := testenv.DB(b)
	topic := testenv.Topic(b, "bench")
	relay := newRelay(b, db, producer(b))
	ctx := context.Background()
	e, err := events.New("bench", uuid.NewString(), events.ShipmentScheduled{Country: "JP"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
			e.ID = uuid.NewString()
			return outbox.AddEvent(ctx, tx, topic, e)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	published := 0
	for published < b.N {
		n, err := relay.Flush(ctx)
		if err != nil {
			b.Fatal(err)
		}
		published += n
	}
	b.ReportMetric(float64(published)/b.Elapsed().Seconds(), "msgs/s")
}
