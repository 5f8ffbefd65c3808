"""An OTLP/gRPC trace receiver for the console (``serve --console-otlp HOST:PORT``): plugin hosts export
their spans here (``OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:PORT``), so a cycle's waterfall shows the
hosts' own spans under the framework's plugin calls. A collector that fans out to Jaeger and here works
the same. Spans are kept in the console's :class:`~framework.console.spans.SpanRing` (bounded) while
someone looks, and dropped otherwise."""

from __future__ import annotations

import logging
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from .spans import SpanRing, kind_name

__all__ = ["OtlpReceiver"]

log = logging.getLogger("outrigger.console")

_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
#: Largest export request accepted (bytes); the SDK's batches are far smaller.
MAX_MESSAGE = 8 * 1024 * 1024


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self, ring: SpanRing) -> None:
        self.ring = ring

    async def Export(self, request: Any, context: Any) -> Any:
        if not self.ring.watching():
            return trace_service_pb2.ExportTraceServiceResponse()
        for rs in request.resource_spans:
            service = ""
            for kv in rs.resource.attributes:
                if kv.key == "service.name":
                    service = str(_value(kv.value))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.ring.add(int.from_bytes(s.trace_id, "big"), {
                        "spanId": s.span_id.hex(), "parentSpanId": s.parent_span_id.hex(), "name": s.name,
                        "service": service or "unknown", "kind": kind_name(s.kind),
                        "start": int(s.start_time_unix_nano), "end": int(s.end_time_unix_nano),
                        "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                        "status": _STATUS.get(s.status.code, "UNSET"), "message": s.status.message,
                    })
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """The receiver's gRPC server (plain text: bind it to loopback or a pod-local address)."""

    def __init__(self, ring: SpanRing) -> None:
        self.ring = ring
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self, listen: str) -> OtlpReceiver:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_MESSAGE)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(self.ring), server)
        try:
            self.port = server.add_insecure_port(listen)
        except RuntimeError as exc:
            raise OSError(f"cannot receive OTLP on {listen!r}: {exc}") from None
        await server.start()
        self.server = server
        log.info("console: receiving plugin hosts' spans over OTLP/gRPC on %s", listen)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            await server.stop(0.5)
