package outrigger

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	pb "outrigger.dev/clients/go/gen/outrigger/v1"
)

// DefaultServiceName is the OTEL_SERVICE_NAME the host's spans carry unless one is set.
const DefaultServiceName = "outrigger-go-plugin"

const rpcService = "outrigger.v1.Plugin"

var propagator = propagation.TraceContext{}

// SetupTracing exports spans with OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) under OTEL_SERVICE_NAME, like the other hosts: nothing is set up
// without an endpoint, or when OTEL_TRACES_EXPORTER is set without "otlp" (e.g. "none"). The returned
// function flushes and stops the exporter (nil when tracing is off). Plugin authors' own spans, from
// otel.Tracer(...) under a Call's context, are exported too.
func SetupTracing(ctx context.Context) (func(context.Context) error, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if exporters := os.Getenv("OTEL_TRACES_EXPORTER"); exporters != "" {
		otlp := false
		for _, e := range strings.Split(exporters, ",") {
			otlp = otlp || strings.EqualFold(strings.TrimSpace(e), "otlp")
		}
		if !otlp {
			return nil, nil
		}
	}
	exporter, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	service := os.Getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = DefaultServiceName
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagator)
	return provider.Shutdown, nil
}

// parentOf is the context of the framework span a request belongs to: CycleContext.trace_context when
// it has a traceparent, else the call's gRPC metadata; without either, no trace to join.
func parentOf(ctx context.Context, traceContext map[string]string) (context.Context, bool) {
	carrier := propagation.MapCarrier{}
	if traceContext["traceparent"] != "" {
		for k, v := range traceContext {
			carrier[k] = v
		}
	} else if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, k := range []string{"traceparent", "tracestate"} {
			if v := md.Get(k); len(v) > 0 {
				carrier[k] = v[0]
			}
		}
	}
	if carrier["traceparent"] == "" {
		return ctx, false
	}
	parent := propagator.Extract(ctx, carrier)
	return parent, trace.SpanContextFromContext(parent).IsValid()
}

// startSpan opens the SERVER span of one call (or one node batch) `outrigger.v1.Plugin/<Point>` as a
// child of the request's trace context, named and described like the Python host's; a request without
// one gets no span.
func startSpan(ctx context.Context, point string, traceContext map[string]string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent, ok := parentOf(ctx, traceContext)
	if !ok {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span
	}
	all := append([]attribute.KeyValue{
		attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", rpcService), attribute.String("rpc.method", point),
	}, attrs...)
	return otel.Tracer("outrigger.dev/clients/go").Start(parent, rpcService+"/"+point,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(all...))
}

func cycleAttrs(plugin string, c *pb.CycleContext) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("outrigger.plugin", plugin), attribute.String("outrigger.profile", c.GetProfile())}
	if c.GetCycleId() != "" {
		attrs = append(attrs, attribute.String("outrigger.cycle_id", c.GetCycleId()),
			attribute.Int64("outrigger.attempt", int64(c.GetAttempt())),
			attribute.Int64("outrigger.snapshot.generation", int64(c.GetSnapshotGeneration())))
	}
	if c.GetPod() != nil {
		attrs = append(attrs, attribute.String("outrigger.pod", PodKey(c.GetPod())))
	}
	return attrs
}

// PodKey is "namespace/name".
func PodKey(p *pb.Pod) string {
	return p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName()
}
