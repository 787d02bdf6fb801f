package testenv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Address is where a test's order ships to when the address is not what
// the test is about: in a country every test configuration serves.
var Address = events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"}

// Event wraps p in a fresh envelope for orderID, from source "test".
func Event(t testing.TB, orderID string, p events.Payload) events.Envelope {
	t.Helper()
	e, err := events.New("test", orderID, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Message is e as a consumer group hands it to a handler: on the topic its
// type is produced to, keyed by its order id.
func Message(t testing.TB, e events.Envelope) *sarama.ConsumerMessage {
	t.Helper()
	value, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	topic, ok := events.TopicOf(e.Type)
	if !ok {
		t.Fatalf("no topic for event type %q", e.Type)
	}
	return &sarama.ConsumerMessage{Topic: topic, Key: []byte(e.OrderID), Value: value, Offset: offsets.Add(1)}
}

// offsets gives every test message an offset of its own, as a partition
// would: what keeps a message by its origin (a dead letter, a parked
// event) tells two messages apart by it.
var offsets atomic.Int64

// Emitted returns the events queued in the outbox q sees for orderID,
// oldest first, failing the test unless each is on topic and from source.
func Emitted(t testing.TB, q sqlx.QueryerContext, orderID, topic, source string) []events.Envelope {
	t.Helper()
	var rows []struct {
		Topic string `db:"topic"`
		Value []byte `db:"value"`
	}
	if err := sqlx.SelectContext(context.Background(), q, &rows,
		`SELECT topic, value FROM outbox WHERE key = $1 ORDER BY id`, []byte(orderID)); err != nil {
		t.Fatal(err)
	}
	out := make([]events.Envelope, len(rows))
	for i, r := range rows {
		if r.Topic != topic {
			t.Fatalf("outbox row on topic %q, want %q", r.Topic, topic)
		}
		e, _, err := events.Decode(r.Value)
		if err != nil {
			t.Fatalf("outbox row %d: %v", i, err)
		}
		if e.Source != source || e.OrderID != orderID {
			t.Fatalf("outbox event source %q order %q, want %q %q", e.Source, e.OrderID, source, orderID)
		}
		out[i] = e
	}
	return out
}

// Payload decodes e's payload into p, failing the test on error.
func Payload(t testing.TB, e events.Envelope, p events.Payload) {
	t.Helper()
	if err := e.Decode(p); err != nil {
		t.Fatalf("decode %s: %v", e.Type, err)
	}
}

// Payloads decodes the payloads of the events in envs of P's type, in
// order, failing the test if one does not decode: e.g. the
// InventoryCancelled acknowledgements among what a reaction queued.
func Payloads[P any, PP interface {
	*P
	events.Payload
}](t testing.TB, envs []events.Envelope) []P {
	t.Helper()
	var out []P
	for _, e := range envs {
		var p P
		if e.Type != PP(&p).EventType() {
			continue
		}
		if err := e.Decode(PP(&p)); err != nil {
			t.Fatalf("decode %s: %v", e.Type, err)
		}
		out = append(out, p)
	}
	return out
}

// Last fails the test unless envs are exactly n events, the last of P's
// type, and returns that event's payload: what a reaction queued, newest
// last, when a test is about the event it queued last.
func Last[P any, PP interface {
	*P
	events.Payload
}](t testing.TB, envs []events.Envelope, n int) P {
	t.Helper()
	var p P
	if len(envs) != n || envs[n-1].Type != PP(&p).EventType() {
		types := make([]string, len(envs))
		for i, e := range envs {
			types[i] = e.Type
		}
		t.Fatalf("queued %v, want %d events, the last a %s", types, n, PP(&p).EventType())
	}
	Payload(t, envs[n-1], PP(&p))
	return p
}

// CancelRequested is the customer's cancel of orderID as the order service
// announces it (OrderCancelRequested, customer_cancelled), in a fresh
// envelope: what each participant's cancel undoes its step for. Its type
// is that of a Setup's undo, so a conformance case can pass it as one.
func CancelRequested(t *testing.T, orderID string) events.Envelope {
	t.Helper()
	return Event(t, orderID, events.OrderCancelRequested{Reason: events.ReasonCustomerCancelled})
}
