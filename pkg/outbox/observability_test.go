package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

// TestRelayLogsCarryItsName: RelayConfig.Name labels the logs, so that the
// relay of one service can be told from another's.
func TestRelayLogsCarryItsName(t *testing.T) {
	db := newDB(t)
	var buf bytes.Buffer
	r := newRelay(t, db, accept, func(c *outbox.RelayConfig) {
		c.Name = "relay-under-test"
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	add(t, db, "t", anyEvent(t))
	if _, err := r.PublishOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("the relay logged nothing")
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["relay"] != "relay-under-test" {
			t.Errorf("log line without relay=relay-under-test: %s", l)
		}
	}
}

// TestRefusedRowsGaugeCountsTheTable: the refused-rows gauge is read from the
// table, so it goes back to 0 once an operator retries the row — unlike
// choreo_outbox_refused_total, which only ever grows, and restarts at 0 with
// the process.
func TestRefusedRowsGaugeCountsTheTable(t *testing.T) {
	db := newDB(t)
	clock := newFakeClock()
	name := testenv.ID(t.Name()) // a gauge of its own under -count
	r := newRelay(t, db, &accepting{}, func(c *outbox.RelayConfig) {
		c.Name = name
		c.Clock = clock
	})
	var id int64
	if err := db.Get(&id, `INSERT INTO outbox (topic, value, headers) VALUES ('t', '', '{"n": 1}') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	settle(t, db)
	if _, err := r.PublishOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, r)
	testenv.Eventually(t, 10*time.Second, "refused rows = 1", func() bool { return outbox.RefusedRows(name) == 1 })

	// The operator fixes the row and retries it; the relay publishes it.
	if _, err := db.Exec(`UPDATE outbox SET headers = '{}', refused_at = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "refused rows back to 0", func() bool {
		clock.Advance(outbox.GaugeEvery)
		return outbox.RefusedRows(name) == 0
	})
}

// TestPublishLatencyIsObservedPerBatch: one observation per batch sent to
// Kafka, not per row.
func TestPublishLatencyIsObservedPerBatch(t *testing.T) {
	db := newDB(t)
	r := newRelay(t, db, &accepting{})
	for range 3 {
		insert(t, db, "t", anyEvent(t))
	}
	settle(t, db)
	before := outbox.PublishBatches(t.Name())
	if n, err := r.PublishOnce(context.Background()); err != nil || n != 3 {
		t.Fatalf("PublishOnce = %d, %v; want 3, nil", n, err)
	}
	if d := outbox.PublishBatches(t.Name()) - before; d != 1 {
		t.Errorf("choreo_outbox_publish_duration_seconds observed %d batches, want 1", d)
	}
}

// TestTraceContextCrossesTheOutbox: Add stores the trace context of the
// caller's span in the row, and the relay publishes the row in a span that
// is that span's child, whose own context the Kafka record carries on.
func TestTraceContextCrossesTheOutbox(t *testing.T) {
	spans, tracer := testenv.Spans(t)

	db := newDB(t)
	pub := &accepting{}
	r := newRelay(t, db, pub)
	e := anyEvent(t)

	ctx, span := tracer.Start(context.Background(), "request")
	err := pg.InTx(ctx, db.DB, func(tx *sqlx.Tx) error { return outbox.Add(ctx, tx, message(t, "t", e)) })
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	settle(t, db)
	parent := span.SpanContext()

	t.Run("the row stores the caller's span", func(t *testing.T) {
		var stored string
		if err := db.Get(&stored, `SELECT headers->>'traceparent' FROM outbox`); err != nil {
			t.Fatal(err)
		}
		want := "00-" + parent.TraceID().String() + "-" + parent.SpanID().String() + "-01"
		if stored != want {
			t.Errorf("stored traceparent = %q, want %q", stored, want)
		}
	})

	if _, err := r.PublishOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Run("the publish span is the row span's child", func(t *testing.T) {
		var publish sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			if strings.HasPrefix(s.Name(), "publish ") {
				publish = s
			}
		}
		if publish == nil {
			t.Fatalf("no publish span among %d ended spans", len(spans.Ended()))
		}
		if publish.Parent().SpanID() != parent.SpanID() || publish.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("publish span's parent = %v, want the request span %v", publish.Parent(), parent)
		}
		if publish.SpanKind() != trace.SpanKindProducer {
			t.Errorf("publish span kind = %v, want producer", publish.SpanKind())
		}
		attrs := map[string]string{}
		for _, a := range publish.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs[string(tracing.AttrOrderID)] != e.OrderID || attrs[string(tracing.AttrEventID)] != e.ID {
			t.Errorf("publish span attributes = %v, want the order and event ids", attrs)
		}

		if len(pub.sent) != 1 {
			t.Fatalf("sent %d messages, want 1", len(pub.sent))
		}
		got := trace.SpanContextFromContext(tracing.ExtractProduced(context.Background(), pub.sent[0].Headers))
		if got.SpanID() != publish.SpanContext().SpanID() || got.TraceID() != parent.TraceID() {
			t.Errorf("the Kafka record carries span %v, want the publish span %v", got, publish.SpanContext())
		}
	})
}
