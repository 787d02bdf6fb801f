package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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

// TestAMovedRowRefusedAtTheHandOverIsLogged: a row pending from before the
// slot, for a topic the connector may not write, is refused as the
// hand-over moves it; the sweep's log of refused rows starts after the
// hand-over, so the hand-over says it.
func TestAMovedRowRefusedAtTheHandOverIsLogged(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	addRaw(t, db, outbox.Message{Topic: "nope.events", Value: []byte("v"), Headers: map[string]string{"event_id": "stray"}})
	addRaw(t, db, outbox.Message{Topic: "svc.events", Value: []byte("v"), Headers: map[string]string{"event_id": "fine"}})
	var buf bytes.Buffer
	moved, err := outbox.HandOverLogged(ctx, db.DB, slog.New(slog.NewTextHandler(&buf, nil)), "svc.events")
	if err != nil || moved != 2 {
		t.Fatalf("hand-over moved %d rows, %v; want 2, nil", moved, err)
	}
	if log := buf.String(); strings.Count(log, "outbox row refused") != 1 || !strings.Contains(log, "event_id=stray") {
		t.Errorf("the hand-over's log says, of refused rows:\n%s\nwant the stray row, once", log)
	}
}

// TestAHandOverNeverNarrowsTheTopics: in a rolling upgrade the trigger is
// the last starter's; an instance of an older version, which writes fewer
// topics, must not refuse the rows of a topic a newer instance writes.
func TestAHandOverNeverNarrowsTheTopics(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	if _, err := outbox.HandOver(ctx, db.DB, "svc.events", "svc.new"); err != nil { // the newer version
		t.Fatal(err)
	}
	if _, err := outbox.HandOver(ctx, db.DB, "svc.events"); err != nil { // an older one restarts
		t.Fatal(err)
	}
	for _, topic := range []string{"svc.events", "svc.new", "other.events"} {
		addRaw(t, db, outbox.Message{Topic: topic, Value: []byte("v"), Headers: map[string]string{"event_id": topic}})
	}
	var refused []string
	if err := db.Select(&refused, `SELECT topic FROM outbox WHERE refused_at IS NOT NULL ORDER BY topic`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refused, []string{"other.events"}) {
		t.Errorf("refused rows for %v, want only other.events's", refused)
	}
}
