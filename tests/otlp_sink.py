"""An OTLP/gRPC trace collector for tests: a real ``opentelemetry.proto.collector.trace.v1.TraceService``
on 127.0.0.1 that keeps every span it is sent, from any process or language.

No tests here. ::

    with OtlpSink() as sink:                      # sink.endpoint: "http://127.0.0.1:PORT"
        ... run processes with OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint ...
        sink.wait_for(lambda spans: any(s.name == "SchedulePod" for s in spans))
        by_service = {s.service for s in sink.spans}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

__all__ = ["CollectedSpan", "OtlpSink", "attribute_value"]

SPAN_KIND = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS_CODE = {0: "UNSET", 1: "OK", 2: "ERROR"}


def attribute_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (arrays as lists)."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [attribute_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: attribute_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass(frozen=True)
class CollectedSpan:
    """One span as received (ids in lowercase hex, as W3C writes them)."""

    service: str
    scope: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "UNSET"
    status_message: str = ""
    events: tuple[str, ...] = ()


class _Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self, sink: OtlpSink) -> None:
        self.sink = sink

    def Export(self, request: Any, context: Any) -> Any:
        got = []
        for rs in request.resource_spans:
            attrs = {kv.key: attribute_value(kv.value) for kv in rs.resource.attributes}
            service = str(attrs.get("service.name", ""))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(CollectedSpan(
                        service=service,
                        scope=ss.scope.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=s.name,
                        kind=SPAN_KIND.get(s.kind, str(s.kind)),
                        attributes={kv.key: attribute_value(kv.value) for kv in s.attributes},
                        status=STATUS_CODE.get(s.status.code, str(s.status.code)),
                        status_message=s.status.message,
                        events=tuple(e.name for e in s.events),
                    ))
        with self.sink._cond:
            self.sink._spans.extend(got)
            self.sink.requests += 1
            self.sink._cond.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpSink:
    """The collector (see the module docstring). Thread-safe; runs on its own gRPC thread pool."""

    def __init__(self) -> None:
        self._spans: list[CollectedSpan] = []
        self._cond = threading.Condition()
        self.requests = 0
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans(self) -> list[CollectedSpan]:
        with self._cond:
            return list(self._spans)

    def wait_for(self, done: Callable[[list[CollectedSpan]], bool], timeout: float = 30.0) -> list[CollectedSpan]:
        """Wait (bounded) until ``done(spans)``; AssertionError naming what arrived otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({(s.service, s.name) for s in self._spans})
                    raise AssertionError(f"spans did not arrive in {timeout:g}s; got {len(self._spans)}: {names}")
                self._cond.wait(min(left, 0.5))
            return list(self._spans)

    def start(self) -> OtlpSink:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(0.5).wait(5)

    def __enter__(self) -> OtlpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
