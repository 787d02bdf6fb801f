package participant

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// Headers set on a dead-lettered message, next to the original headers.
const (
	HeaderDLQReason    = "dlq_reason"
	HeaderDLQTopic     = "dlq_origin_topic"
	HeaderDLQPartition = "dlq_origin_partition"
	HeaderDLQOffset    = "dlq_origin_offset"
	HeaderDLQGroup     = "dlq_consumer_group"
	HeaderDLQFailedAt  = "dlq_failed_at"
	// HeaderDLQValueTruncated is "true" when the value was cut to
	// MaxDeadLetterValue bytes; HeaderDLQValueBytes then holds its
	// original length.
	HeaderDLQValueTruncated = "dlq_value_truncated"
	HeaderDLQValueBytes     = "dlq_value_bytes"
)

// Base64Suffix marks a header whose value is not valid UTF-8 or contains a
// NUL byte, neither of which the outbox's jsonb column can hold: the dead
// letter carries it base64-encoded (standard encoding) under its key plus
// this suffix instead. For the reason, the readable dlq_reason stays, with
// such characters replaced by U+FFFD.
const Base64Suffix = "_base64"

// Size limits of a dead letter. Kafka and sarama refuse messages over about
// 1 MiB, and a poison message may be close to that before the DLQ headers
// are added; a reason may quote the whole message.
const (
	MaxDeadLetterValue  = 512 << 10
	maxDeadLetterReason = 4 << 10
)

// dlqNamespace derives a stable id for a (topic, partition, offset, time), so that
// a poison message redelivered after a crash is dead-lettered once.
var dlqNamespace = uuid.MustParse("6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10")

// DeadLetter returns a function that dead-letters a message its consumer
// group can never process: it keeps the message and the reason in
// parked_events, for an operator to replay or release — parking its order
// if the failure was of an event the service routes (see Hold) — and
// publishes it on topic (e.g. "payment.dlq"),
// where alerts and tools watch: the original key and value, the original
// headers, and the reason and origin as extra headers. Both happen in one
// transaction. The publish goes
// through the outbox like every other publish, so a dead letter is never
// lost between a failed handler and the DLQ topic, and it is recorded once
// per origin offset even if the message is delivered again. Its signature
// matches consumer.DeadLetterFunc.
//
// Whatever the message holds, the dead letter can be stored and published —
// otherwise the path meant to unblock a consumer would block it: header
// values PostgreSQL cannot store are base64-encoded (see Base64Suffix), a
// value over MaxDeadLetterValue is truncated (see HeaderDLQValueTruncated),
// and the reason is cut to a few KiB.
func DeadLetter(db *sqlx.DB, topic, group string) func(ctx context.Context, m *sarama.ConsumerMessage, reason error) error {
	return func(ctx context.Context, m *sarama.ConsumerMessage, reason error) error {
		origin := fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)
		// The timestamp tells apart a message at a reused offset of a
		// topic that was deleted and recreated.
		id := uuid.NewSHA1(dlqNamespace, fmt.Appendf(nil, "%s@%d", origin, m.Timestamp.UnixNano())).String()

		headers := storableHeaders(m.Headers)

		why := "unknown"
		if reason != nil {
			why = reason.Error()
		}
		if len(why) > maxDeadLetterReason {
			cut := maxDeadLetterReason
			for cut > 0 && !utf8.RuneStart(why[cut]) {
				cut--
			}
			why = fmt.Sprintf("%s… (truncated from %d bytes)", why[:cut], len(why))
		}
		text, altered := outbox.StorableText(why)
		headers[HeaderDLQReason] = text
		if altered {
			headers[HeaderDLQReason+Base64Suffix] = base64.StdEncoding.EncodeToString([]byte(why))
		}
		headers[HeaderDLQTopic] = m.Topic
		headers[HeaderDLQPartition] = strconv.Itoa(int(m.Partition))
		headers[HeaderDLQOffset] = strconv.FormatInt(m.Offset, 10)
		headers[HeaderDLQGroup] = group
		headers[HeaderDLQFailedAt] = time.Now().UTC().Format(time.RFC3339Nano)

		value := m.Value
		if value == nil {
			value = []byte{}
		}
		if len(value) > MaxDeadLetterValue {
			headers[HeaderDLQValueTruncated] = "true"
			headers[HeaderDLQValueBytes] = strconv.Itoa(len(value))
			value = value[:MaxDeadLetterValue]
		}
		err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
			// The message's order is parked from now on, if this service
			// routes it (see Hold); the row keeps the message whole.
			if err := park.Add(ctx, tx, group, entry(m, text, parks(reason))); err != nil {
				return err
			}
			if first, err := idem.Mark(ctx, tx, group+".dlq", id, idem.Origin{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}); err != nil || !first {
				return err
			}
			return outbox.Add(ctx, tx, outbox.Message{Topic: topic, Key: m.Key, Value: value, Headers: headers})
		})
		if err != nil {
			return fmt.Errorf("dead-letter %s: %w", origin, err)
		}
		return nil
	}
}
