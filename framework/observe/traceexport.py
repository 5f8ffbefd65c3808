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
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import otlp
from .exportproc import ExportProcess

__all__ = ["ExportBatching", "OtlpExporter", "SinkExporter", "TraceExport"]

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

    def __init__(self, exporters: Sequence[SpanExporter], batching: ExportBatching, *, thread: bool = True,
                 process: bool = False) -> None:
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
        # With ``process``, the encoding and the exporters run in a child (.exportproc) when every
        # exporter can be built there; this thread then only packs each batch for it.
        self.process: ExportProcess | None = None
        specs = [getattr(e, "process_spec", None) for e in self.exporters]
        if process and specs and all(specs):
            try:
                self.process = ExportProcess(specs, self._acked)
            except OSError:
                log.exception("trace export process did not start: exporting on a thread")
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
            self._flush()

    def flush(self) -> None:
        """Export everything queued now (on the caller's thread; with a process, until it has written
        every batch sent to it)."""
        self._flush()
        proc = self.process
        if proc is not None and not proc.wait():
            log.warning("trace export process did not acknowledge every batch in time")

    def _flush(self) -> None:
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
        proc = self.process
        if proc is not None:
            try:
                proc.send(batch)
                self.exported += len(batch)
                return
            except (OSError, ValueError):  # the child is gone or stopped reading: go on here
                log.warning("trace export process %d failed: exporting on a thread from now on", proc.pid)
                self.process = None
                proc.stop()
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

    def _acked(self, spans: int, nbytes: int) -> None:
        """The process wrote a batch of ``spans`` spans, ``nbytes`` bytes of request: exporters that
        count what they export (the benchmark's sink) are told."""
        for exporter in self.exporters:
            counted = getattr(exporter, "exported_elsewhere", None)
            if counted is not None:
                counted(spans, nbytes)

    def shutdown(self) -> None:
        """Export what is queued, stop the thread (and the process) and shut the exporters down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.flush()
        if self.process is not None:
            self.process.stop()
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

    def __init__(self, endpoint: str | None = None, insecure: bool | None = None) -> None:
        super().__init__(endpoint=endpoint, insecure=insecure)
        # How the export process builds the same exporter (the rest of its settings: the environment).
        self.process_spec = ("otlp", endpoint, insecure)

    def _translate_data(self, data: Sequence[Any]) -> ExportTraceServiceRequest:
        return otlp.request(data)


class SinkExporter(SpanExporter):
    """An exporter that counts spans and drops them (the benchmark's tracing cost without a backend);
    with ``encode``, after writing their OTLP request as an OTLP exporter does (counted in ``bytes``).
    Plugin calls come as their records, as to :class:`~.traceexport.OtlpExporter`."""

    takes_records = True

    def __init__(self, encode: bool = False) -> None:
        self.spans = 0
        self.bytes = 0
        self.encode = encode
        # In an export process (framework.observe.exportproc) the request is always written, and counted.
        self.process_spec = ("sink",) if encode else None

    def exported_elsewhere(self, spans: int, nbytes: int) -> None:
        """The export process wrote ``spans`` spans into a request of ``nbytes`` bytes."""
        self.spans += spans
        self.bytes += nbytes

    def export(self, spans: Sequence[ReadableSpan | otlp.SpanRecord]) -> SpanExportResult:  # type: ignore[override]
        self.spans += len(spans)
        if self.encode:
            self.bytes += len(otlp.encode(spans))
        return SpanExportResult.SUCCESS
