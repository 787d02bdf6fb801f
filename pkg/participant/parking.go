package participant

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
)

// Per-key parking. A message that fails permanently parks its order (the
// Kafka key): DeadLetter keeps it in parked_events with the reason, beside
// publishing it to the dead-letter topic, and from then on every routed
// event of that order is held there too (Hold), in order, instead of being
// applied — while every other order keeps flowing. An operator replays or
// releases the order's rows (Operator, choreoctl) once the cause is fixed.
// The consumer ends a batch at its failure (consumer.BatchHandler), so the
// events behind the failed one find the order parked.

// Outcome of a delivery held behind a parked order.
const outcomeHeld = "held"

// Hold is the middleware, inside the transaction, that keeps the event of
// a parked order aside instead of passing it on: it is stored in the
// order's parked rows, unmarked, and acknowledged.
func Hold(service string) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, d *Delivery) error {
			key := string(d.Msg.Key)
			parked, err := park.Parked(ctx, d.Tx, service, []string{key})
			if err != nil {
				return err
			}
			if !parked[key] {
				return next(ctx, d)
			}
			if err := park.Add(ctx, d.Tx, service, entry(d.Msg, "")); err != nil {
				return err
			}
			d.Log.Warn("order is parked: event held until an operator replays or releases it")
			d.Outcome = outcomeHeld
			return nil
		}
	}
}

// hold keeps, within tx, the deliveries of parked orders aside (see Hold)
// and returns the others.
func hold(ctx context.Context, tx sqlx.ExtContext, service string, ds []*delivery) ([]*delivery, error) {
	keys := make([]string, 0, len(ds))
	for _, d := range ds {
		keys = append(keys, string(d.Msg.Key))
	}
	parked, err := park.Parked(ctx, tx, service, keys)
	if err != nil || len(parked) == 0 {
		return ds, err
	}
	kept := ds[:0:0]
	for _, d := range ds {
		if !parked[string(d.Msg.Key)] {
			kept = append(kept, d)
			continue
		}
		if err := park.Add(ctx, tx, service, entry(d.Msg, "")); err != nil {
			return nil, err
		}
		d.Log.Warn("order is parked: event held until an operator replays or releases it")
		d.Outcome = outcomeHeld
	}
	return kept, nil
}

// entry is m as parked_events keeps it: the envelope's id and type when it
// decodes, and why it failed (empty for a message held behind a failure).
func entry(m *sarama.ConsumerMessage, reason string) park.Entry {
	e := park.Entry{
		Key: string(m.Key), Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
		Value: m.Value, Headers: storableHeaders(m.Headers), Reason: reason,
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
