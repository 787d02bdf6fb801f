package park

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
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

// DeadLetter returns the consumer.DeadLetterFunc of group. In one
// transaction it keeps the message and its reason in parked_events, for an
// operator to replay or release (parking its order, see ParksOrder), and
// puts it in the outbox for topic (e.g. "payment.dlq"), with the reason and
// origin as headers, once per origin offset. Whatever the message holds, it
// can be stored, or the path meant to unblock a consumer would block it:
// headers PostgreSQL cannot store go base64 (Base64Suffix), a value over
// MaxDeadLetterValue is truncated, the reason cut to a few KiB.
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
			// routes it (see ParksOrder); the row keeps the message whole.
			if err := Add(ctx, tx, group, deadEntry(m, text, reason)); err != nil {
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

// ParksOrder marks err, a permanent failure of an event the service routes
// (its payload invalid, or its reaction refusing it), as one whose dead
// letter parks its order. A message refused before it is routed parks
// nothing: it may be another service's event, and holding its order here
// would stop a saga this service has no part in.
func ParksOrder(err error) error { return orderFailure{err} }

type orderFailure struct{ error }

func (e orderFailure) Unwrap() error { return e.error }

// parksOrder reports whether a dead letter for reason parks its order.
func parksOrder(reason error) bool {
	var f orderFailure
	return errors.As(reason, &f)
}

// deadEntry is the parked row of a dead letter for reason.
func deadEntry(m *sarama.ConsumerMessage, reason string, cause error) Entry {
	e := EntryOf(m, reason)
	if !parksOrder(cause) {
		e.Key = ""
	}
	return e
}

// EntryOf is m as parked_events keeps it: the envelope's id and type when
// it decodes, why it failed (empty for a message parked behind a failure),
// and the order it parks. A key PostgreSQL text cannot hold parks nothing:
// no valid event carries one, and the path that unblocks a partition must
// never fail.
func EntryOf(m *sarama.ConsumerMessage, reason string) Entry {
	e := Entry{
		MsgKey: m.Key, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
		Value: m.Value, Headers: storableHeaders(m.Headers), Reason: reason,
	}
	if key := string(m.Key); utf8.ValidString(key) && !strings.ContainsRune(key, 0) {
		e.Key = key
	}
	if env, err := events.DecodeEnvelope(m.Value); err == nil {
		e.EventID, e.EventType = env.ID, env.Type
	}
	return e
}

// storableHeaders returns hs as text a jsonb column can hold: a header
// whose key or value is not valid UTF-8 or holds a NUL byte is kept
// base64-encoded under its key plus Base64Suffix.
func storableHeaders(hs []*sarama.RecordHeader) map[string]string {
	headers := make(map[string]string, len(hs))
	for _, h := range hs {
		if h == nil {
			continue
		}
		key, keyAltered := outbox.StorableText(string(h.Key))
		value, valueAltered := outbox.StorableText(string(h.Value))
		if keyAltered || valueAltered {
			headers[key+Base64Suffix] = base64.StdEncoding.EncodeToString(h.Value)
			continue
		}
		headers[key] = value
	}
	return headers
}

// recordHeaders is the inverse of storableHeaders, for a replay.
func recordHeaders(headers map[string]string) []*sarama.RecordHeader {
	hs := make([]*sarama.RecordHeader, 0, len(headers))
	for k, v := range headers {
		if name, ok := strings.CutSuffix(k, Base64Suffix); ok {
			if raw, err := base64.StdEncoding.DecodeString(v); err == nil {
				hs = append(hs, &sarama.RecordHeader{Key: []byte(name), Value: raw})
				continue
			}
		}
		hs = append(hs, &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return hs
}
