// This file holds the relay's tracing: each published row gets a producer
// span, the child of the span that wrote it, so one saga is one trace
// across the outbox. TestTraceContextCrossesTheOutbox shows it.

package outbox

import (
	"context"
	"errors"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

// startPublishSpans starts one producer span per message whose row stored
// a trace context, as that context's child, and puts the span's own
// context in the message's headers: the consumer's span becomes its child,
// and the trace runs unbroken from the request through the outbox to the
// next service. Rows without a trace context get no span.
func (r *Relay) startPublishSpans(msgs []*sarama.ProducerMessage) map[*sarama.ProducerMessage]trace.Span {
	spans := make(map[*sarama.ProducerMessage]trace.Span, len(msgs))
	for _, m := range msgs {
		parent := tracing.ExtractProduced(context.Background(), m.Headers)
		if !trace.SpanContextFromContext(parent).IsValid() {
			continue
		}
		attrs := []attribute.KeyValue{
			tracing.AttrService.String(r.cfg.Name),
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", m.Topic),
		}
		for _, h := range m.Headers {
			switch string(h.Key) {
			case events.HeaderEventID:
				attrs = append(attrs, tracing.AttrEventID.String(string(h.Value)))
			case events.HeaderEventType:
				attrs = append(attrs, tracing.AttrEventType.String(string(h.Value)))
			}
		}
		if key, ok := m.Key.(sarama.ByteEncoder); ok {
			attrs = append(attrs, tracing.AttrOrderID.String(string(key)))
		}
		ctx, span := tracing.Tracer().Start(parent, "publish "+m.Topic,
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		m.Headers = tracing.InjectRecord(ctx, m.Headers)
		spans[m] = span
	}
	return spans
}

// endPublishSpans ends the spans of a send that returned err, marking the
// messages that failed.
func endPublishSpans(spans map[*sarama.ProducerMessage]trace.Span, err error) {
	if len(spans) == 0 {
		return
	}
	failed := map[*sarama.ProducerMessage]error{}
	var perr sarama.ProducerErrors
	if errors.As(err, &perr) {
		for _, e := range perr {
			if e != nil {
				failed[e.Msg] = e.Err
			}
		}
	}
	for m, span := range spans {
		switch ferr, ok := failed[m]; {
		case ok:
			span.RecordError(ferr)
			span.SetStatus(codes.Error, "not published")
		case err != nil && perr == nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, "not published")
		}
		span.End()
	}
}
