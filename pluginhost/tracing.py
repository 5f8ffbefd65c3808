"""Tracing in a plugin host: each plugin call is a server span, a child of the framework's span for the
call, so the pod's trace covers the plugin host too; a plugin author's own spans nest under it::

    from opentelemetry import trace

    tracer = trace.get_tracer("mypkg.gang")

    async def permit(self, state, pod, node_name):
        with tracer.start_as_current_span("count siblings"):
            ...

The parent comes from ``CycleContext.trace_context`` (W3C ``traceparent``/``tracestate``), or from the
call's gRPC metadata when the request has no context. A call with neither gets no span. The host reads
the standard variables (:func:`configure_from_env`): ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``,
``none``; off when unset), ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME`` (default
``outrigger-plugin-host``), ``OTEL_TRACES_SAMPLER``/``_ARG`` (a parent-based sampler follows the
framework's decision). With tracing off a call pays one ``None`` check.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pluginhost.context import CallContext, _current

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "TraceMetadataInterceptor",
    "configure",
    "configure_from_env",
    "enabled",
    "enter",
    "leave",
]

log = logging.getLogger("outrigger.pluginhost.tracing")

DEFAULT_SERVICE_NAME = "outrigger-plugin-host"
RPC_SERVICE = "outrigger.v1.Plugin"
_propagator = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None
# The trace context of the running call's gRPC metadata (set by TraceMetadataInterceptor).
_metadata: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "outrigger_trace_metadata", default=None
)


def configure(provider: TracerProvider | None) -> None:
    """Trace plugin calls with ``provider`` (None: stop tracing)."""
    global _tracer
    _tracer = provider.get_tracer("outrigger.pluginhost", "0.1.0") if provider is not None else None


def enabled() -> bool:
    return _tracer is not None


def configure_from_env(env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """Set up tracing from the ``OTEL_*`` variables (see the module docstring): the global tracer
    provider (so plugin authors' spans are exported too) and the host's call spans. None when off."""
    env = os.environ if env is None else env
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "none").split(",") if e.strip()]
    exporters = [e for e in exporters if e != "none"]
    unknown = [e for e in exporters if e not in ("otlp", "console")]
    if unknown:
        raise ValueError(f"unknown trace exporter {unknown[0]!r} in OTEL_TRACES_EXPORTER (otlp, console or none)")
    if not exporters:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    service = env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    provider = SdkTracerProvider(resource=Resource.create({"service.name": service}))
    for name in exporters:
        exporter: SpanExporter
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            insecure = True if endpoint and "://" not in endpoint else None
            exporter = OTLPSpanExporter(endpoint=endpoint, insecure=insecure)
        else:
            exporter = ConsoleSpanExporter(service_name=service)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    configure(provider)
    return provider


class _Traced:
    """What :func:`enter` hands back when it opened a span."""

    __slots__ = ("otel_token", "span", "token")

    def __init__(self, token: contextvars.Token[CallContext], span: Any, otel_token: object) -> None:
        self.token = token
        self.span = span
        self.otel_token = otel_token


def enter(ctx: CallContext) -> Any:
    """Make ``ctx`` the current call (:func:`pluginhost.context`) and, when tracing, open its span."""
    token = _current.set(ctx)
    tracer = _tracer
    if tracer is None:
        return token
    carrier = ctx.trace_context if ctx.trace_context else _metadata.get()
    if not carrier or "traceparent" not in carrier:
        return token
    parent = _propagator.extract(carrier)
    attrs: dict[str, Any] = {
        "rpc.system": "grpc",
        "rpc.service": RPC_SERVICE,
        "rpc.method": ctx.point,
        "outrigger.plugin": ctx.plugin,
        "outrigger.profile": ctx.profile,
    }
    if ctx.cycle_id:
        attrs["outrigger.cycle_id"] = ctx.cycle_id
        attrs["outrigger.attempt"] = ctx.attempt
        attrs["outrigger.snapshot.generation"] = ctx.snapshot_generation
    if ctx.pod is not None:
        attrs["outrigger.pod"] = ctx.pod.key
    span = tracer.start_span(f"{RPC_SERVICE}/{ctx.point}", parent, kind=SpanKind.SERVER, attributes=attrs)
    otel_token = otel_context.attach(trace.set_span_in_context(span, parent))
    return _Traced(token, span, otel_token)


def leave(token: Any) -> None:
    """End what :func:`enter` began."""
    if isinstance(token, _Traced):
        otel_context.detach(token.otel_token)  # type: ignore[arg-type]
        token.span.end()
        _current.reset(token.token)
    else:
        _current.reset(token)


class TraceMetadataInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Keeps the ``traceparent``/``tracestate`` metadata of unary calls for :func:`enter` (for callers
    that send the trace context only as metadata)."""

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: Any
    ) -> Any:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        carrier = {k: v for k, v in (details.invocation_metadata or ()) if k in ("traceparent", "tracestate")}
        if not carrier:
            return handler
        inner = handler.unary_unary

        async def call(request: Any, context: Any) -> Any:
            _metadata.set(carrier)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
