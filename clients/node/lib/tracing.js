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
 * OTEL_SERVICE_NAME, default "outrigger-node-plugin") when that variable is set (and
 * OTEL_TRACES_EXPORTER does not say "none"); otherwise nothing is set up and every span is the API's
 * no-op span (no cost, nothing exported).
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
  if ((env.OTEL_TRACES_EXPORTER || '').split(',').map((e) => e.trim()).includes('none')) return false;
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

/**
 * Starts a server span named `name` as a child of `parent`.
 * @returns {import('@opentelemetry/api').Span}
 */
function startSpan(name, parent, attributes) {
  const tracer = api.trace.getTracer('outrigger-node-plugin-host');
  return tracer.startSpan(name, { kind: api.SpanKind.SERVER, attributes }, parent);
}

module.exports = { setupTracing, shutdownTracing, parentContext, startSpan, api };
