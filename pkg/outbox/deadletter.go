package outbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/idem"
)

// Headers set on a dead-lettered message, next to the original headers.
const (
	HeaderDLQReason    = "dlq_reason"
	HeaderDLQTopic     = "dlq_origin_topic"
	HeaderDLQPartition = "dlq_origin_partition"
	HeaderDLQOffset    = "dlq_origin_offset"
	HeaderDLQGroup     = "dlq_consumer_group"
	HeaderDLQFailedAt  = "dlq_failed_at"
)

// dlqNamespace derives a stable id for a (topic, partition, offset, time), so that
// a poison message redelivered after a crash is dead-lettered once.
var dlqNamespace = uuid.MustParse("6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10")

// DeadLetter returns a function that parks a message its consumer group can
// never process on topic (e.g. "payment.dlq"): the original key and value,
// the original headers, and the reason and origin as extra headers. It goes
// through the outbox like every other publish, so a dead letter is never
// lost between a failed handler and the DLQ topic, and it is recorded once
// per origin offset even if the message is delivered again. Its signature
// matches consumer.DeadLetterFunc.
func DeadLetter(db *sqlx.DB, topic, group string) func(ctx context.Context, m *sarama.ConsumerMessage, reason error) error {
	return func(ctx context.Context, m *sarama.ConsumerMessage, reason error) error {
		origin := fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
		// The timestamp tells apart a message at a reused offset of a
		// topic that was deleted and recreated.
		id := uuid.NewSHA1(dlqNamespace, fmt.Appendf(nil, "%s@%d", origin, m.Timestamp.UnixNano())).String()

		headers := make(map[string]string, len(m.Headers)+6)
		for _, h := range m.Headers {
			if h != nil {
				headers[string(h.Key)] = string(h.Value)
			}
		}
		headers[HeaderDLQReason] = reason.Error()
		headers[HeaderDLQTopic] = m.Topic
		headers[HeaderDLQPartition] = strconv.Itoa(int(m.Partition))
		headers[HeaderDLQOffset] = strconv.FormatInt(m.Offset, 10)
		headers[HeaderDLQGroup] = group
		headers[HeaderDLQFailedAt] = time.Now().UTC().Format(time.RFC3339Nano)

		value := m.Value
		if value == nil {
			value = []byte{}
		}
		_, err := idem.Handle(ctx, db, group+".dlq", id, func(tx *sqlx.Tx) error {
			return Add(ctx, tx, Message{Topic: topic, Key: m.Key, Value: value, Headers: headers})
		})
		if err != nil {
			return fmt.Errorf("outbox: dead-letter %s: %w", origin, err)
		}
		return nil
	}
}
