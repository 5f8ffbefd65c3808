"""The export of finished traces: whole scheduling contexts handed over in one step, batched on a thread
of their own, and sent by the SDK's exporters, OTLP ones with the request written by :mod:`.otlp`.

:class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor` takes spans one at a time (``on_end``: a
sampled-flag check, a fork check, a lock and a condition per span, ~45 a pod) and its OTLP exporter
builds a protobuf object per span, attribute and value (2 to 3 ms a pod). Here a trace's ended spans
arrive as one list when its root span ends (:meth:`TraceExport.put`: one append), the export thread
takes what has gathered every ``delay`` or as soon as ``max_batch`` spans wait, and
:class:`OtlpExporter` is the SDK's gRPC exporter (its channel, retries, TLS, headers and compression)
with its request encoded straight from the spans. The batch settings follow the SDK's
``OTEL_BSP_SCHEDULE_DELAY``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and ``OTEL_BSP_MAX_QUEUE_SIZE``.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter

from . import otlp

__all__ = ["ExportBatching", "OtlpExporter", "TraceExport"]

log = logging.getLogger("outrigger.tracing")


@dataclass(frozen=True)
class ExportBatching:
    """How finished traces are batched for the exporters: at most ``delay`` seconds after the first
    waits, or as soon as ``max_batch`` spans wait; beyond ``max_queue`` waiting spans, whole traces are
    dropped (and counted) rather than the scheduling loop slowed."""

    delay: float = 5.0
    max_batch: int = 512
    max_queue: int = 2048

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ExportBatching:
        """The SDK's batch span processor settings: ``OTEL_BSP_SCHEDULE_DELAY`` (ms),
        ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and ``OTEL_BSP_MAX_QUEUE_SIZE`` (spans). A value that cannot be
        used raises ValueError naming it (``TracingConfig.from_env``: a TracingConfigError)."""
        env = os.environ if env is None else env
        values = {}
        for name, default in (("OTEL_BSP_SCHEDULE_DELAY", 5000), ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
                              ("OTEL_BSP_MAX_QUEUE_SIZE", 2048)):
            raw = env.get(name, "").strip()
            try:
                values[name] = int(raw) if raw else default
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a whole number") from None
            if values[name] <= 0:
                raise ValueError(f"{name}={raw!r} must be above 0")
        return cls(delay=values["OTEL_BSP_SCHEDULE_DELAY"] / 1000.0,
                   max_batch=values["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"],
                   max_queue=max(values["OTEL_BSP_MAX_QUEUE_SIZE"], values["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"]))


class TraceExport:
    """Finished traces on their way to ``exporters``: queued whole by the thread that ends them,
    exported in batches by a thread of this object's own (without ``thread``, only by :meth:`flush`)."""

    def __init__(self, exporters: Sequence[SpanExporter], batching: ExportBatching, *, thread: bool = True) -> None:
        self.exporters = list(exporters)
        self.batching = batching
        self.dropped = 0  # spans of traces dropped because the queue was full
        self.exported = 0  # spans handed to the exporters
        self._queue: collections.deque[Sequence[Any]] = collections.deque()
        self._waiting = 0  # spans in the queue (read without the lock: a hint for waking the thread)
        self._count = threading.Lock()  # _waiting, updated by the threads that queue and the one that exports
        self._lock = threading.Lock()  # one export at a time (the thread, a flush, the shutdown)
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        if thread:
            self._thread = threading.Thread(target=self._run, name="outrigger-trace-export", daemon=True)
            self._thread.start()

    def put(self, spans: Sequence[Any]) -> None:
        """Queue one hand-over of finished spans (a trace, or what ended since the last one): spans, and
        plugin calls as their :class:`.otlp.SpanRecord` s."""
        n = len(spans)
        with self._count:
            full = self._waiting + n > self.batching.max_queue
            if full:
                self.dropped += n
            else:
                self._waiting += n
                self._queue.append(spans)
            waiting = self._waiting
        if full:
            if self.dropped == n:
                log.warning("trace export queue full (%d spans): traces are dropped until the exporters "
                            "catch up", self.batching.max_queue)
            return
        if waiting >= self.batching.max_batch:
            self._wake.set()

    def _run(self) -> None:
        delay = self.batching.delay
        while not self._closed:
            self._wake.wait(delay)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Export everything queued now (on the caller's thread)."""
        queue = self._queue
        with self._lock:
            while queue:
                batch: list[Any] = []
                while queue and len(batch) < self.batching.max_batch:
                    batch.extend(queue.popleft())
                with self._count:
                    self._waiting -= len(batch)
                self._send(batch)

    def _send(self, batch: list[Any]) -> None:
        # Plugin calls arrive as records (otlp.SpanRecord): made spans, here on the export thread, only
        # for exporters that do not write them directly.
        plain: list[ReadableSpan] | None = None
        for exporter in self.exporters:
            items = batch
            if not getattr(exporter, "takes_records", False):
                if plain is None:
                    plain = otlp.readable(batch)
                items = plain
            try:
                exporter.export(items)
            except Exception:  # a backend gone away must not stop the export of the next batches
                log.exception("span exporter %r failed", exporter)
        self.exported += len(batch)

    def shutdown(self) -> None:
        """Export what is queued, stop the thread and shut the exporters down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.flush()
        for exporter in self.exporters:
            try:
                exporter.shutdown()
            except Exception:  # a backend gone away must not stop the framework's shutdown
                log.exception("span exporter %r failed to shut down", exporter)


class OtlpExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter with the request encoded by :func:`.otlp.request` (the same
    message as the SDK's encoder makes, a fraction of its cost), plugin calls' spans written from their
    records (``takes_records``)."""

    takes_records = True

    def _translate_data(self, data: Sequence[Any]) -> ExportTraceServiceRequest:
        return otlp.request(data)
