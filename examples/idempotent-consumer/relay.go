package consumer

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/lib/pq"
)

// Relay publishes the outbox's unsent rows in id order and then marks them
// sent, until ctx ends. The producer should come from NewProducer. Run one
// relay per database: two would publish rows twice (pkg/outbox elects a
// leader). A crash between the publish and the mark publishes those rows
// again after the restart; their event ids are unchanged, which is why
// Handle can skip them.
func Relay(ctx context.Context, db *sql.DB, producer sarama.SyncProducer) error {
	for {
		n, err := relayOnce(ctx, db, producer)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if n > 0 {
			continue // there may be more
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond): // pkg/outbox is woken by NOTIFY instead
		}
	}
}

// relayOnce publishes up to 100 unsent rows and marks them sent, returning
// how many it published.
func relayOnce(ctx context.Context, db *sql.DB, producer sarama.SyncProducer) (int, error) {
	// The limit of this minimal relay: an id is taken from the sequence at
	// INSERT, not at COMMIT, so a transaction holding id 7 can commit after
	// id 8 was published. Marking rows, this relay still publishes 7, after
	// 8; one that remembered the last id sent (WHERE id > $last) would skip
	// it for ever. pkg/outbox keeps the order too: each row records its
	// transaction's xid8, and its relay reads only rows below
	// pg_snapshot_xmin, whose transactions have all ended, in (txid, id)
	// order.
	rows, err := db.QueryContext(ctx, `SELECT id, topic, key, value FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT 100`)
	if err != nil {
		return 0, fmt.Errorf("select outbox: %w", err)
	}
	var ids []int64
	var msgs []*sarama.ProducerMessage
	for rows.Next() {
		var id int64
		var topic, key string
		var value []byte
		if err := rows.Scan(&id, &topic, &key, &value); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan outbox: %w", err)
		}
		ids = append(ids, id)
		// The key picks the partition, so one account's events keep their order.
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value)})
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	// SendMessages returns once every message is acknowledged by all in-sync
	// replicas, or with an error; then nothing is marked and all are resent.
	if err := producer.SendMessages(msgs); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE outbox SET sent_at = now() WHERE id = ANY($1)`, pq.Array(ids)); err != nil {
		return 0, fmt.Errorf("mark sent: %w", err)
	}
	return len(msgs), nil
}

// NewProducer returns the producer Relay needs: acks=all, idempotent, one
// request in flight (see Config).
func NewProducer(k Kafka) (sarama.SyncProducer, error) {
	p, err := sarama.NewSyncProducer(k.Brokers, k.Config())
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p, nil
}
