package outbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestDebeziumRefusesRowsForTopicsTheConnectorCannotWrite: the worker's
// producer writes as the service's Kafka user, which may write only its
// topic and its dead-letter topic; a row for any other topic, or one no
// topic may be named, would fail the connector's task on every restart
// and stall every later event. The trigger refuses it at insert, naming
// the topic and those allowed, and the slot never decodes it; a retry is
// refused again, saying so, until a hand-over allows its topic.
func TestDebeziumRefusesRowsForTopicsTheConnectorCannotWrite(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	slot := newSlot(t, db, "topics")
	own, dlq := "svc.events", events.DeadLetterTopic("svc")
	if _, err := outbox.HandOver(ctx, db.DB, own, dlq); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, topic, refusal string
	}{
		{"TheServicesTopicFlows", own, ""},
		{"ItsDeadLetterTopicFlows", dlq, ""},
		{"AnotherTopicIsRefused", "nope.events", `topic "nope.events" is not one this service's Debezium connector may write (svc.events, svc.dlq)`},
		{"AnIllegalNameIsRefused", "no such topic!", `"no such topic!" is not a legal Kafka topic name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := outbox.Message{Topic: tc.topic, Value: []byte("v"), Headers: map[string]string{"event_id": tc.name}}
			if err := outbox.Add(ctx, db, m); err != nil {
				t.Fatal(err)
			}
			var lastError string
			if err := db.GetContext(ctx, &lastError, `SELECT coalesce(last_error, '') FROM outbox WHERE headers->>'event_id' = $1`, tc.name); err != nil {
				t.Fatal(err)
			}
			if tc.refusal == "" && lastError != "" {
				t.Errorf("row for %s refused: %s", tc.topic, lastError)
			}
			if tc.refusal != "" && !strings.Contains(lastError, tc.refusal) {
				t.Errorf("row for %s: last_error %q, want it refused: %s", tc.topic, lastError, tc.refusal)
			}
		})
	}
	if got, want := inserts(decoded(t, db, slot), "outbox", "topic"), []string{own, dlq}; !slices.Equal(got, want) {
		t.Errorf("the slot decoded rows for %q, want %q", got, want)
	}

	var id int64
	if err := db.GetContext(ctx, &id, `SELECT id FROM outbox WHERE topic = 'nope.events'`); err != nil {
		t.Fatal(err)
	}
	ok, err := outbox.Retry(ctx, db.DB, id)
	var again *outbox.RefusedAgainError
	if !errors.As(err, &again) || ok || !strings.Contains(again.Reason, `topic "nope.events" is not one`) {
		t.Errorf("retry of the row for nope.events: %v, %v; want it refused again, saying why", ok, err)
	}
	if _, err := outbox.HandOver(ctx, db.DB, own, dlq, "nope.events"); err != nil { // its grant added
		t.Fatal(err)
	}
	if ok, err := outbox.Retry(ctx, db.DB, id); err != nil || !ok { // the same id: the refused retry changed nothing
		t.Fatalf("retry row %d once its topic is allowed: %v, %v", id, ok, err)
	}
	var refusal string
	if err := db.GetContext(ctx, &refusal, `SELECT coalesce(last_error, '') FROM outbox WHERE id = (SELECT max(id) FROM outbox WHERE topic = 'nope.events')`); err != nil {
		t.Fatal(err)
	}
	if refusal != "" {
		t.Errorf("row for nope.events retried once its topic is allowed: refused %q", refusal)
	}
}
