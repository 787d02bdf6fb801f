// This file holds the consumer's spans: one per delivery, the child of the
// span whose context its message carries, so a saga is one trace
// (TestHandlingSpanContinuesTheMessageTrace).

package participant

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the consumer span of m, the child of the span whose
// context m's headers carry.
func startSpan(ctx context.Context, service string, m *sarama.ConsumerMessage) (context.Context, trace.Span) {
	ctx = tracing.ExtractRecord(ctx, m.Headers)
	return tracing.Tracer().Start(ctx, "process "+m.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			tracing.AttrService.String(service),
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", m.Topic),
			attribute.Int("messaging.destination.partition.id", int(m.Partition)),
			attribute.Int64("messaging.kafka.offset", m.Offset),
		))
}

// endSpan names the span after the event, records how the delivery ended
// and ends it.
func endSpan(span trace.Span, d *Delivery, err error) {
	defer span.End()
	if e := d.Event; e.Type != "" {
		span.SetName("handle " + knownType(e.Type))
		span.SetAttributes(
			tracing.AttrEventType.String(e.Type),
			tracing.AttrEventID.String(e.ID),
			tracing.AttrOrderID.String(e.OrderID),
		)
	}
	outcome := d.Outcome
	if err != nil {
		outcome = outcomeRetry
		if consumer.IsPermanent(err) {
			outcome = outcomeDeadLetter
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, outcome)
	}
	span.SetAttributes(tracing.AttrOutcome.String(outcome))
}
