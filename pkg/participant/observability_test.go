package participant_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

// shipper is a Spec whose one reaction, to InventoryReserved, fails with
// err or else emits ShipmentScheduled.
func shipper(name string, err error) participant.Spec {
	return participant.Spec{
		Name:     name,
		Produces: events.TopicShipping,
		Reactions: []participant.Reaction{
			participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReserved) error {
				if err != nil {
					return err
				}
				return tx.Emit(ctx, events.ShipmentScheduled{Country: "JP"})
			}),
		},
	}
}

func reservedEvent(t *testing.T) events.Envelope {
	t.Helper()
	return testenv.Event(t, uuid.NewString(), events.InventoryReserved{
		Items: []events.Item{{SKU: "s", Quantity: 1, UnitPrice: 1}}, ShippingAddress: events.Address{Country: "JP"},
	})
}

// TestHandlerMetricsByOutcome: every delivery is timed under its outcome,
// and those that ended (applied, duplicate) are counted too, under the
// service label.
func TestHandlerMetricsByOutcome(t *testing.T) {
	db := testenv.DB(t)
	reserved := events.TypeInventoryReserved
	tests := []struct {
		name       string
		reaction   error
		deliveries int // of the same message
		breakMsg   bool
		eventType  string
		outcome    string
		counted    float64 // growth of choreo_events_handled_total
		timed      uint64  // growth of the histogram's count
	}{
		{"Applied", nil, 1, false, reserved, "applied", 1, 1},
		{"DuplicateSkipped", nil, 2, false, reserved, "duplicate", 1, 1},
		{"RetryIsTimedNotCounted", errors.New("driver: bad connection"), 1, false, reserved, "retry", 0, 1},
		{"DeadLetterOfAnUnknownTypeIsTimed", nil, 1, true, "unknown", "dead_letter", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			service := "metrics-" + uuid.NewString()[:8]
			h := shipper(service, tt.reaction).Handler(db, testenv.Logger(t))
			m := testenv.Message(t, reservedEvent(t))
			if tt.breakMsg {
				m.Value = []byte("{not json")
			}
			for range tt.deliveries {
				_ = h.Handle(context.Background(), m)
			}
			if got := participant.Handled(service, tt.eventType, tt.outcome); got != tt.counted {
				t.Errorf("choreo_events_handled_total{outcome=%q} = %v, want %v", tt.outcome, got, tt.counted)
			}
			if got := participant.Timed(service, tt.eventType, tt.outcome); got != tt.timed {
				t.Errorf("choreo_event_handle_duration_seconds{outcome=%q} count = %d, want %d", tt.outcome, got, tt.timed)
			}
		})
	}
}

// TestHandlingSpanContinuesTheMessageTrace: the handling span is the child
// of the span whose context the message carries, names the event, and is
// the parent stored with every event its reaction emits.
func TestHandlingSpanContinuesTheMessageTrace(t *testing.T) {
	spans, tracer := testenv.Spans(t)

	db := testenv.DB(t)
	service := "traced-" + uuid.NewString()[:8]
	e := reservedEvent(t)
	m := testenv.Message(t, e)
	pctx, publish := tracer.Start(context.Background(), "publish")
	headers := map[string]string{}
	tracing.Inject(pctx, headers)
	publish.End()
	for k, v := range headers {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}

	if err := shipper(service, nil).Handler(db, testenv.Logger(t)).Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var handle sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "handle "+e.Type {
			handle = s
		}
	}
	if handle == nil {
		t.Fatalf("no span %q among %d", "handle "+e.Type, len(spans.Ended()))
	}
	if handle.Parent().SpanID() != publish.SpanContext().SpanID() || handle.SpanContext().TraceID() != publish.SpanContext().TraceID() {
		t.Errorf("handling span's parent = %v, want the message's span %v", handle.Parent(), publish.SpanContext())
	}
	if handle.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind = %v, want consumer", handle.SpanKind())
	}
	attrs := map[string]string{}
	for _, a := range handle.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	for k, want := range map[string]string{
		string(tracing.AttrService): service, string(tracing.AttrOrderID): e.OrderID,
		string(tracing.AttrEventID): e.ID, string(tracing.AttrEventType): e.Type, string(tracing.AttrOutcome): "applied",
	} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], want)
		}
	}

	var stored string
	if err := db.Get(&stored, `SELECT headers->>'traceparent' FROM outbox WHERE key = $1`, []byte(e.OrderID)); err != nil {
		t.Fatal(err)
	}
	sc := handle.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; stored != want {
		t.Errorf("the emitted event's traceparent = %q, want the handling span's %q", stored, want)
	}
}

// TestBuildInfo: choreo_build_info is 1 for the service, labelled with the
// Go version that built the binary.
func TestBuildInfo(t *testing.T) {
	participant.SetBuildInfo("build-info-test")
	labels, m := participanttest.Gathered(t, "choreo_build_info", map[string]string{"service": "build-info-test"})
	if m == nil {
		t.Fatal("no choreo_build_info{service=\"build-info-test\"}")
	}
	if labels["go_version"] != runtime.Version() || labels["version"] == "" || labels["revision"] == "" {
		t.Errorf("labels = %v, want go_version %s and a version and revision", labels, runtime.Version())
	}
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("value = %v, want 1", v)
	}
}
