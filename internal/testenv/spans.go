package testenv

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Spans records the spans ended while the test runs: it makes a tracer
// provider recording into the returned recorder the global one, and puts
// the previous one back when the test ends. The code under test takes its
// tracer from the global provider, as in production; the tracer returned
// is the test's own, for a caller's span.
func Spans(t testing.TB) (*tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return spans, tp.Tracer("test")
}
