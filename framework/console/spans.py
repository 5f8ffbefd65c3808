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

__all__ = ["MAX_SPANS", "MAX_TRACES", "SpanRing", "WatchSampler"]

#: Scheduling contexts whose spans are kept.
MAX_TRACES = 500
#: Spans kept per trace (a context with remote plugins has 50 to 150).
MAX_SPANS = 1000

_KINDS = {0: "INTERNAL", 1: "SERVER", 2: "CLIENT", 3: "PRODUCER", 4: "CONSUMER"}


class SpanRing(SpanProcessor):
    """Spans of the last :data:`MAX_TRACES` traces as plain dicts (the console's JSON), kept while
    ``watching()`` says someone looks."""

    def __init__(self, watching: Callable[[], bool], service: str = "outrigger-framework",
                 max_traces: int = MAX_TRACES, max_spans: int = MAX_SPANS) -> None:
        self.watching = watching
        self.service = service
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.dropped = 0
        self._traces: collections.OrderedDict[str, list[dict[str, Any]]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, trace_id: str, span: dict[str, Any]) -> None:
        with self._lock:
            spans = self._traces.get(trace_id)
            if spans is None:
                spans = self._traces[trace_id] = []
                while len(self._traces) > self.max_traces:
                    self._traces.popitem(last=False)
            if len(spans) >= self.max_spans:
                self.dropped += 1
                return
            spans.append(span)

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        if ctx is None or not self.watching():
            return
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}
        self.add(f"{ctx.trace_id:032x}", {
            "spanId": f"{ctx.span_id:016x}",
            "parentSpanId": f"{span.parent.span_id:016x}" if span.parent is not None else "",
            "name": span.name, "service": self.service, "kind": span.kind.name,
            "start": span.start_time or 0, "end": span.end_time or 0, "attributes": attrs,
            "status": span.status.status_code.name, "message": span.status.description or "",
        })

    def trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The kept spans of a trace, by start time."""
        with self._lock:
            spans = list(self._traces.get(trace_id, ()))
        return sorted(spans, key=lambda s: (s["start"], s["end"]))

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
