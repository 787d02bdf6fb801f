package participant

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
)

// Per-key parking. An event this service routes that fails permanently —
// its payload invalid, or its reaction refusing it — parks its order:
// DeadLetter keeps it in parked_events with the reason, beside publishing
// it to the dead-letter topic, and from then on every routed event of that
// order is held there too (hold, in transact), in order, instead of being applied —
// while every other order keeps flowing. An operator replays or releases
// the order's rows (Operator, choreoctl) once the cause is fixed. The
// consumer ends a batch at its failure (consumer.BatchHandler), so the
// events behind the failed one find the order parked.
//
// A message refused before it is routed (it does not decode, its type is
// unknown here, its key is not its order) is kept as a row too, for replay
// or release, but parks nothing: it may be another service's event, of a
// type a newer producer added, and holding its order here would stop a
// saga this service has no part in.
//
// Within one partition the hand-over is exact. Across topics it is not: an
// event of the order on another partition, applied between the failure's
// batch and the dead letter's commit, is applied, as it would have been a
// moment earlier. The saga's reactions tolerate events of one order from
// different topics in either order, so this reorders nothing they rely on.

// Outcome of a delivery held behind a parked order.
const outcomeHeld = "held"

// routedFailure is a permanent failure of an event this service routes:
// DeadLetter parks its order.
type routedFailure struct{ error }

func (e routedFailure) Unwrap() error { return e.error }

// parks reports whether a dead letter for reason parks its order.
func parks(reason error) bool {
	var rf routedFailure
	return errors.As(reason, &rf)
}

// hold keeps, within tx, the deliveries of parked orders aside: each is
// stored in its order's parked rows, unmarked, and acknowledged. A copy of
// an event already applied is a duplicate, as ever: it is not held, so a
// replay never meets it. It returns the others, in order.
func hold(ctx context.Context, tx sqlx.ExtContext, service string, ds []*Delivery) ([]*Delivery, error) {
	keys := make([]string, 0, len(ds))
	for _, d := range ds {
		keys = append(keys, string(d.Msg.Key))
	}
	parked, err := park.Parked(ctx, tx, service, keys)
	if err != nil || len(parked) == 0 {
		return ds, err
	}
	var ids []string
	for _, d := range ds {
		if parked[string(d.Msg.Key)] {
			ids = append(ids, d.Event.ID)
		}
	}
	applied, err := idem.Processed(ctx, tx, service, ids)
	if err != nil {
		return nil, err
	}
	kept := ds[:0:0]
	for _, d := range ds {
		switch {
		case !parked[string(d.Msg.Key)]:
			kept = append(kept, d)
		case applied[d.Event.ID]:
			d.Log.Info("duplicate event skipped")
			d.Outcome = "duplicate"
		default:
			if err := park.Add(ctx, tx, service, entry(d.Msg, "", true)); err != nil {
				return nil, err
			}
			d.Log.Warn("order is parked: event held until an operator replays or releases it")
			d.Outcome = outcomeHeld
		}
	}
	return kept, nil
}

// entry is m as parked_events keeps it: the envelope's id and type when it
// decodes, why it failed (empty for a message held behind a failure), and
// the order it parks, if parksOrder. A key PostgreSQL text cannot hold
// parks nothing: no valid event carries one, and the path that unblocks a
// partition must never fail.
func entry(m *sarama.ConsumerMessage, reason string, parksOrder bool) park.Entry {
	e := park.Entry{
		MsgKey: m.Key, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
		Value: m.Value, Headers: storableHeaders(m.Headers), Reason: reason,
	}
	if key := string(m.Key); parksOrder && utf8.ValidString(key) && !strings.ContainsRune(key, 0) {
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
