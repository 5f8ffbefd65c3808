"""The console's traces: a bounded ring of recent scheduling contexts' spans, from the framework (a span
processor) and from plugin hosts (an OTLP/gRPC trace receiver the hosts export to, :mod:`.otlp`), and the
sampler that traces a context only while someone looks.

Sizes: :data:`MAX_TRACES` traces (the oldest dropped first), :data:`MAX_SPANS` spans per trace (later
ones dropped and counted).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from ..observe.otlp import SpanRecord

__all__ = ["MAX_SPANS", "MAX_TRACES", "SpanRing", "WatchSampler"]

#: Scheduling contexts whose spans are kept.
MAX_TRACES = 500
#: Spans kept per trace (a context with remote plugins has 50 to 150).
MAX_SPANS = 1000

_KINDS = {0: "INTERNAL", 1: "SERVER", 2: "CLIENT", 3: "PRODUCER", 4: "CONSUMER"}


class SpanRing(SpanProcessor):
    """Spans of the last :data:`MAX_TRACES` traces, kept while ``watching()`` says someone looks. The
    framework's spans are kept as they end (on the scheduling loop: nothing is converted there) and
    turned into the console's JSON when a trace is asked for; the hosts' arrive as JSON already."""

    def __init__(self, watching: Callable[[], bool], service: str = "outrigger-framework",
                 max_traces: int = MAX_TRACES, max_spans: int = MAX_SPANS) -> None:
        self.watching = watching
        self.service = service
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.dropped = 0
        self._traces: collections.OrderedDict[int, list[ReadableSpan | SpanRecord | dict[str, Any]]] = (
            collections.OrderedDict())
        self._lock = threading.Lock()

    def add(self, trace_id: int, span: ReadableSpan | SpanRecord | dict[str, Any]) -> None:
        with self._lock:
            spans = self._traces.get(trace_id)
            if spans is None:
                spans = self._traces[trace_id] = []
                if len(self._traces) > self.max_traces:
                    self._traces.popitem(last=False)
            if len(spans) >= self.max_spans:
                self.dropped += 1
                return
            spans.append(span)

    # Plugin calls come as their records (framework.observe.otlp.SpanRecord), made spans when asked for.
    takes_records = True

    def on_end(self, span: ReadableSpan | SpanRecord) -> None:  # type: ignore[override]
        if isinstance(span, SpanRecord):
            if self.watching():
                self.add(span.owner.trace_id, span)
            return
        ctx = span.context
        if ctx is not None and self.watching():
            self.add(ctx.trace_id, span)

    def _json(self, span: ReadableSpan | SpanRecord | dict[str, Any]) -> dict[str, Any]:
        if isinstance(span, dict):
            return span
        if isinstance(span, SpanRecord):
            span = span.to_span()
        ctx = span.context
        assert ctx is not None
        return {
            "spanId": f"{ctx.span_id:016x}",
            "parentSpanId": f"{span.parent.span_id:016x}" if span.parent is not None else "",
            "name": span.name, "service": self.service, "kind": span.kind.name,
            "start": span.start_time or 0, "end": span.end_time or 0,
            "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()},
            "status": span.status.status_code.name, "message": span.status.description or "",
        }

    def trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The kept spans of a trace (32 hex digits), by start time."""
        try:
            tid = int(trace_id, 16)
        except ValueError:
            return []
        with self._lock:
            spans = list(self._traces.get(tid, ()))
        return sorted((self._json(s) for s in spans), key=lambda s: (s["start"], s["end"]))

    def __len__(self) -> int:
        return len(self._traces)


class WatchSampler(Sampler):
    """Samples a scheduling context while someone looks at the console, drops it otherwise (the
    console's own tracing when no exporter is configured: nothing is traced while nobody looks)."""

    def __init__(self, watching: Callable[[], bool]) -> None:
        self.watching = watching

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None, trace_state: Any = None) -> SamplingResult:
        if self.watching():
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "OutriggerConsoleWatchSampler"


def kind_name(kind: int) -> str:
    """An OTLP span kind number (1 = INTERNAL ... 5 = CONSUMER) as the SDK's name."""
    return _KINDS.get(kind - 1, "INTERNAL")
