'use strict';
/**
 * Tracing for the plugin host: OpenTelemetry JS, W3C trace context.
 *
 * The framework sends the W3C trace context of the span a request belongs to in
 * `CycleContext.trace_context` ("traceparent", optionally "tracestate") on every cycle-scoped
 * request, and as gRPC metadata on unary calls. The host extracts it and starts the plugin's spans
 * as children, so they join the pod's trace.
 *
 * Spans are exported with OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT (service name from
 * OTEL_SERVICE_NAME, default "outrigger-node-plugin") when that variable is set, unless
 * OTEL_TRACES_EXPORTER is set without "otlp" (e.g. "none"); otherwise nothing is set up and every span
 * is the API's no-op span (no cost, nothing exported).
 *
 * Span names and attributes follow the Python host's (pluginhost/tracing.py): one SERVER span
 * `outrigger.v1.Plugin/<Point>` per call, and per node batch on Filter/Score streams.
 */

const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');

const propagator = new W3CTraceContextPropagator();
const DEFAULT_SERVICE_NAME = 'outrigger-node-plugin';

let provider = null;

/**
 * Sets up the tracer provider and the OTLP exporter if OTEL_EXPORTER_OTLP_ENDPOINT is set.
 * @returns {boolean} whether spans are exported
 */
function setupTracing(env = process.env) {
  if (provider !== null) return true;
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return false;
  const exporters = (env.OTEL_TRACES_EXPORTER || '').split(',').map((e) => e.trim().toLowerCase()).filter(Boolean);
  if (exporters.length && !exporters.includes('otlp')) return false; // e.g. "none"
  // Loaded only when exporting: the exporter and SDK are not needed otherwise.
  const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
  const { resourceFromAttributes } = require('@opentelemetry/resources');
  const { ATTR_SERVICE_NAME } = require('@opentelemetry/semantic-conventions');
  const resource = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME || DEFAULT_SERVICE_NAME,
  });
  // The exporter reads the endpoint (and OTEL_EXPORTER_OTLP_* options) from the environment; the
  // batch processor reads OTEL_BSP_SCHEDULE_DELAY and friends.
  provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  api.trace.setGlobalTracerProvider(provider);
  api.propagation.setGlobalPropagator(propagator);
  return true;
}

/** Flushes and stops the exporter (on shutdown). */
async function shutdownTracing() {
  if (provider === null) return;
  const p = provider;
  provider = null;
  try {
    await p.shutdown();
  } catch (err) {
    console.error(`flushing spans failed: ${err && err.message}`);
  }
}

const getter = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/**
 * The parent context of a request: `trace_context` of its CycleContext when it has one, else the
 * gRPC metadata of a unary call, else none (a root span).
 * @param {Record<string,string>|undefined} traceContext CycleContext.trace_context
 * @param {import('@grpc/grpc-js').Metadata|undefined} metadata the call's metadata
 */
function parentContext(traceContext, metadata) {
  let carrier = {};
  if (traceContext && traceContext.traceparent) {
    carrier = traceContext;
  } else if (metadata) {
    const tp = metadata.get('traceparent');
    if (tp.length) {
      carrier = { traceparent: String(tp[0]) };
      const ts = metadata.get('tracestate');
      if (ts.length) carrier.tracestate = String(ts[0]);
    }
  }
  return propagator.extract(api.ROOT_CONTEXT, carrier, getter);
}

const RPC_SERVICE = 'outrigger.v1.Plugin';
const NO_SPAN = api.trace.wrapSpanContext(api.INVALID_SPAN_CONTEXT);

/**
 * The server span of one plugin call (or one node batch of a stream): `outrigger.v1.Plugin/<Point>`,
 * a child of `parent`, named and described like the Python host's. A request without a trace context
 * gets no span (a non-recording one), as there is no trace to join.
 * @returns {import('@opentelemetry/api').Span}
 */
function startCallSpan(point, parent, attributes) {
  if (!api.trace.getSpanContext(parent)) return NO_SPAN;
  const tracer = api.trace.getTracer('outrigger-node-plugin-host');
  const attrs = { 'rpc.system': 'grpc', 'rpc.service': RPC_SERVICE, 'rpc.method': point, ...attributes };
  return tracer.startSpan(`${RPC_SERVICE}/${point}`, { kind: api.SpanKind.SERVER, attributes: attrs }, parent);
}

module.exports = { setupTracing, shutdownTracing, parentContext, startCallSpan, api };
