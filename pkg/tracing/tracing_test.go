package tracing_test

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/tracing"
)

// TestSetupWithoutEndpointIsOff: no endpoint, no exporter — and a shutdown
// that can always be called.
func TestSetupWithoutEndpointIsOff(t *testing.T) {
	cfg := tracing.Config{ServiceName: "x"}
	if cfg.Enabled() {
		t.Fatal("Enabled() with no endpoint")
	}
	shutdown, err := tracing.Setup(context.Background(), cfg, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown = %v", err)
	}
}

// TestContextRoundTrips: what Inject writes into outbox headers, Extract
// and ExtractRecord read back, and InjectRecord replaces a record's trace
// headers rather than adding a second set.
func TestContextRoundTrips(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "s")
	defer span.End()
	want := span.SpanContext()

	headers := map[string]string{"event_id": "e1"}
	tracing.Inject(ctx, headers)
	tests := []struct {
		name string
		ctx  context.Context
	}{
		{"Extract", tracing.Extract(context.Background(), headers)},
		{"ExtractRecord", tracing.ExtractRecord(context.Background(), []*sarama.RecordHeader{
			{Key: []byte("event_id"), Value: []byte("e1")},
			{Key: []byte("traceparent"), Value: []byte(headers["traceparent"])},
		})},
		{"InjectRecordReplaces", tracing.ExtractProduced(context.Background(), tracing.InjectRecord(ctx, []sarama.RecordHeader{
			{Key: []byte("traceparent"), Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trace.SpanContextFromContext(tt.ctx)
			if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsRemote() {
				t.Errorf("span context = %v, want remote %v", got, want)
			}
		})
	}
	t.Run("NoSpanWritesNothing", func(t *testing.T) {
		h := map[string]string{"traceparent": "kept"}
		tracing.Inject(context.Background(), h)
		if h["traceparent"] != "kept" {
			t.Errorf("traceparent = %q, want the copied one kept", h["traceparent"])
		}
	})
	if n := len(tracing.InjectRecord(ctx, []sarama.RecordHeader{{Key: []byte("traceparent")}})); n != 1 {
		t.Errorf("InjectRecord left %d headers, want 1", n)
	}
}
