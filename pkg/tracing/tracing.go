// Package tracing carries one saga's trace across every hop it makes, the
// outbox row included, and exports it over OTLP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
package tracing

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes every Choreo span may carry, so that one saga's spans
// can be found by its order id whichever service recorded them.
const (
	AttrService   = attribute.Key("choreo.service")
	AttrOrderID   = attribute.Key("choreo.order_id")
	AttrEventID   = attribute.Key("choreo.event_id")
	AttrEventType = attribute.Key("choreo.event_type")
	AttrOutcome   = attribute.Key("choreo.outcome")
)

// instrumentation names the tracer of this repository's spans.
const instrumentation = "github.com/choreo-saga/choreo"

// propagator is W3C Trace Context: the traceparent (and tracestate)
// header. It is fixed rather than read from the global propagator, because
// the header is stored in outbox rows and must mean the same thing to
// every service that reads them.
var propagator = propagation.TraceContext{}

// Tracer returns the tracer of Choreo's spans, from the global provider:
// a no-op until Setup (or a test) installs one.
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Config says where spans go. Main reads it from the standard variables;
// the exporter reads the rest of them (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, OTEL_BSP_*, …) itself.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL, e.g.
	// http://jaeger:4318; spans go to its /v1/traces (unless
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names another URL). Empty: no
	// tracing.
	Endpoint string `envconfig:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	// ServiceName is the resource's service.name; default the service's
	// own name.
	ServiceName string `envconfig:"OTEL_SERVICE_NAME"`
}

// Enabled reports whether spans are exported.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// Setup installs the global TracerProvider cfg describes, exporting in
// batches over OTLP/HTTP as service (unless OTEL_SERVICE_NAME names it
// otherwise), and the W3C propagator. It returns the function that flushes
// the spans still buffered and stops the exporter; call it on exit. When
// tracing is off it installs nothing and returns a no-op.
func Setup(ctx context.Context, cfg Config, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagator)
	if !cfg.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_* itself
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = service
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("tracing: resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Inject writes the trace context of ctx's span into headers (traceparent,
// and tracestate if any). It writes nothing when ctx has no valid span, so
// headers copied from elsewhere keep theirs. outbox.Add stores it in the
// row, so the relay's publish, long after and maybe in another process,
// continues the writer's trace.
func Inject(ctx context.Context, headers map[string]string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.MapCarrier(headers))
}

// Extract returns ctx with the remote span context stored in headers, as
// Inject wrote it; ctx unchanged if they hold none.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	return propagator.Extract(ctx, propagation.MapCarrier(headers))
}

// ExtractRecord returns ctx with the remote span context carried by a Kafka
// record's headers.
func ExtractRecord(ctx context.Context, headers []*sarama.RecordHeader) context.Context {
	m := make(map[string]string, 2)
	for _, h := range headers {
		if h == nil {
			continue
		}
		if k := string(h.Key); k == "traceparent" || k == "tracestate" {
			m[k] = string(h.Value)
		}
	}
	if len(m) == 0 {
		return ctx
	}
	return Extract(ctx, m)
}

// ExtractProduced returns ctx with the remote span context carried by the
// headers of a record about to be produced.
func ExtractProduced(ctx context.Context, headers []sarama.RecordHeader) context.Context {
	ptrs := make([]*sarama.RecordHeader, len(headers))
	for i := range headers {
		ptrs[i] = &headers[i]
	}
	return ExtractRecord(ctx, ptrs)
}

// InjectRecord returns a Kafka record's headers with the trace context of
// ctx's span in place of any they carried.
func InjectRecord(ctx context.Context, headers []sarama.RecordHeader) []sarama.RecordHeader {
	m := map[string]string{}
	Inject(ctx, m)
	if len(m) == 0 {
		return headers
	}
	out := make([]sarama.RecordHeader, 0, len(headers)+len(m))
	for _, h := range headers {
		if k := string(h.Key); k != "traceparent" && k != "tracestate" {
			out = append(out, h)
		}
	}
	for k, v := range m {
		out = append(out, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return out
}
