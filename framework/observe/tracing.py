"""Tracing: one OpenTelemetry trace per scheduling context (a scheduling cycle and its binding cycle).

The trace of one pod attempt reads::

    SchedulePod                         pod, profile, attempt, cycle id, snapshot generation, result,
    ├── SchedulingCycle                 selected node, feasible nodes, final status code and reasons
    │   ├── PreFilter
    │   │   └── PreFilter/NodeResourcesFit            one span per plugin call
    │   ├── Filter                      nodes in, nodes examined, feasible nodes
    │   │   └── Filter/Coscheduling     (CLIENT for a remote plugin; its host's spans are children)
    │   ├── Score ...
    │   └── Permit
    └── BindingCycle                    (a concurrent task, still in the same trace)
        ├── WaitOnPermit                 time held at Permit
        ├── PreBind, Bind, PostBind

Why not the SDK's ``Tracer``: a pod meets 30 to 50 plugin calls, and an SDK span costs ~20 us of CPU to
start and end, more than the whole scheduling of a pod takes in-process. A span here is the SDK's
:class:`ReadableSpan` from the start (:class:`Span` fills its fields in one go, without the SDK's
per-span locks, validation and copies); once ended it is queued, and when its trace's root span ends the
queued spans go to ordinary span processors (batch OTLP export, console, the in-process
:class:`SpanStore`) in one round, so exporters, resources and samplers are the standard ones. A plugin
call's span is not even built: its :class:`PluginCall` record is queued, the OTLP exporters write the
span from it on the export thread (:mod:`.otlp`), and only consumers that need the SDK's object (a
custom processor or exporter, a trace asked for) get one, built from the record. The sampler
decides once per scheduling context; an unsampled context costs one contextvar check per extension point
and plugin call.

Configuration (:class:`TracingConfig`) follows the standard environment variables:
``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``; a comma-separated list), ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG``; ``outrigger serve`` flags override them. Unlike
the OpenTelemetry default, tracing is off unless an exporter or an in-process store is asked for.

Remote plugins: :func:`inject` fills ``CycleContext.trace_context`` and :func:`grpc_metadata` gives the
``traceparent`` metadata of the current span, so a plugin host's spans join the pod's trace.
"""

from __future__ import annotations

import collections
import contextvars
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import DEFAULT_TRACE_STATE, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status as OtelStatus
from opentelemetry.trace.status import StatusCode

from pluginhost.errors import OutriggerError

from . import otlp
from .tailsampling import TailSampler, TailSampling
from .traceexport import ExportBatching, OtlpExporter, SinkExporter, TraceExport

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "SAMPLERS",
    "PluginCall",
    "SinkExporter",
    "SpanStore",
    "Tracing",
    "TracingConfig",
    "TracingConfigError",
    "add_event",
    "benchmark_tracing",
    "current_span",
    "get_current_span",
    "grpc_metadata",
    "inject",
    "make_sampler",
]

log = logging.getLogger("outrigger.tracing")

DEFAULT_SERVICE_NAME = "outrigger-framework"
SCOPE = InstrumentationScope("outrigger.framework", "0.1.0")
EXPORTERS = ("otlp", "console", "none")
SAMPLERS = (
    "always_on", "always_off", "traceidratio",
    "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
)

# Ended spans go to the processors when their trace's root span ends (a scheduling context's spans in
# one round, on the thread that ends it), so they die young, before the garbage collector moves them to
# its oldest generation: spans kept 20 ms were, and that made full collections of the whole heap several
# times as frequent as without tracing. Spans that end without their root (a root ended first, spans of
# other threads) are handed over by a thread this many seconds after the first of them waits.
DRAIN_INTERVAL = 0.05
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_rand = random.Random()
# A Span, or an extension point's record (framework.observe.pointspan.PointSpan, which imports this module).
_current: contextvars.ContextVar[Any] = contextvars.ContextVar("outrigger_span", default=None)


class TracingConfigError(OutriggerError, ValueError):
    """A tracing setting (flag or environment variable) that cannot be used; the message names it."""


# ---------------------------------------------------------------------------------------------------
# Spans


class Span(ReadableSpan):
    """One span of a scheduling context, built as the SDK's :class:`ReadableSpan` it is exported as.

    Started by :meth:`Tracing.start_trace` and :meth:`child`. It sets ReadableSpan's own fields as its
    constructor does (:data:`READABLE_SPAN_FIELDS`; a test checks them against the installed SDK), plus
    ``attrs`` (the attributes, mutable until the span ends), ``span_id``, ``trace_id``, ``leaf`` and
    ``tracing``; an ended span goes to the span processors as it is, with nothing left to convert.
    """

    def __init__(self, tracing: Tracing, name: str, trace_id: int, parent: SpanContext | None, kind: SpanKind,
                 attrs: dict[str, Any], span_id: int = 0, start_time: int = 0) -> None:
        # Not ReadableSpan.__init__ (keyword arguments, a default Resource built per call): the same
        # fields, set in the same order on every span so that CPython keeps them in a compact shared-key
        # layout (a third of the memory of a dict per span, and faster to allocate).
        if not span_id:
            span_id = _getrandbits(64) or 1
        self._name = name
        # SpanContext(trace_id, span_id, False, SAMPLED), without re-checking ids made valid here.
        self._context = _tuple_new(SpanContext, (trace_id, span_id, False, _SAMPLED, _STATE, True))
        self._kind = kind
        self._instrumentation_info = None
        self._instrumentation_scope = SCOPE
        self._parent = parent
        self._start_time = start_time or _time_ns()
        self._end_time: int | None = None
        self._attributes = attrs
        self._events: Sequence[Event] = ()
        self._links = ()
        self._resource = tracing.resource
        self._status = _UNSET
        self.attrs = attrs  # the same dict as the attributes
        self.span_id = span_id
        self.trace_id = trace_id
        self.leaf = False  # no child spans below this one (preemption's per-node what-ifs)
        self.tracing = tracing
        # An extension point's plugin calls (framework.observe.instrument): the one running, and all of them,
        # queued as the records of its child spans when the point ends.
        self.active: PluginCall | None = None
        self.calls: list[PluginCall] | None = None

    def child(self, name: str, attrs: dict[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL) -> Span:
        return Span(self.tracing, name, self.trace_id, self._context, kind, {} if attrs is None else attrs)

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        if not self._events:
            self._events = []
        self._events.append(Event(name, dict(attrs or {})))  # type: ignore[attr-defined]

    def error(self, message: str) -> None:
        self._status = OtelStatus(StatusCode.ERROR, message or None)

    def end(self) -> None:
        if self._end_time is not None:
            return
        self._end_time = _time_ns()
        self.tracing.ended(self)
        if self._parent is None:  # the trace is complete: its spans go to the processors now
            self.tracing.drain()

    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-01"


_UNSET = OtelStatus()
_STATE = DEFAULT_TRACE_STATE
_new = object.__new__
_tuple_new = tuple.__new__
_time_ns = time.time_ns
_getrandbits = _rand.getrandbits
# ReadableSpan's fields, as its constructor sets them; test_tracing checks the list against the SDK.
READABLE_SPAN_FIELDS = frozenset({
    "_name", "_context", "_kind", "_instrumentation_info", "_instrumentation_scope", "_parent", "_start_time",
    "_end_time", "_attributes", "_events", "_links", "_resource", "_status",
})


class PluginCall(otlp.SpanRecord):
    """A plugin call under an extension point's span, recorded by the runtime's observer (:mod:`.instrument`);
    closed when the point ends (:meth:`close`), it stands for its child span of the point's: the exporters
    write the span from it (:mod:`.otlp`), others get one made (:meth:`to_span`). Its span id is chosen as
    the call starts, so a remote plugin's request carries it as the parent of the host's spans."""

    __slots__ = ("attrs", "end", "error", "events", "info", "leaf", "nodes", "observer", "owner", "result",
                 "span_attrs", "span_end", "span_error", "span_id", "start", "started")
    span_end: int
    span_attrs: tuple[tuple[str, Any], ...]
    span_error: str | None

    def __init__(self, observer: Any, info: Any, owner: Any, nodes: int, leaf: bool) -> None:
        self.observer = observer  # what times the call for metrics (framework.observe.instrument)
        self.info = info  # the observer's precomputed pieces of this plugin's spans at this point
        self.owner = owner  # the extension point's span (None: timed for metrics only)
        self.nodes = nodes
        self.leaf = leaf
        self.span_id = _getrandbits(64) or 1
        self.attrs: dict[str, Any] | None = None  # set by the plugin's code
        self.events: list[Event] | None = None
        self.result: Any = None
        self.error: str | None = None
        self.end = 0
        self.started = 0.0  # perf_counter, when timed for metrics
        self.start = _time_ns()
        # span_end, span_attrs and span_error: set by close(), read only after it.

    def close(self, end: int, span_attrs: tuple[tuple[str, Any], ...], error: str | None) -> None:
        """Fix the span's outcome (the point has ended): its end, the status attributes as (key, value)
        pairs in order (a sequence value as a tuple) and the error message, which a late return does not
        change; and let go of the plugin's result."""
        self.span_end = end
        self.span_attrs = span_attrs
        self.span_error = error
        self.result = None

    @property
    def shared_key(self) -> Any:
        # None: attributes or events set by the plugin's code make the span its own.
        return None if self.attrs or self.events else (self.info, self.span_attrs, self.span_error)

    @property
    def _resource(self) -> Resource:  # of a point's span a plugin runs in the call (its owner)
        return self.owner._resource  # type: ignore[no-any-return]

    _instrumentation_scope = SCOPE

    def to_span(self) -> Span:
        """The child span of the point's span this closed call stands for."""
        info, owner = self.info, self.owner
        attrs = info.attrs.copy()
        for key, value in self.span_attrs:
            attrs[key] = list(value) if type(value) is tuple else value
        if self.attrs:
            attrs.update(self.attrs)
        parent = _tuple_new(SpanContext, (owner.trace_id, owner.span_id, False, _SAMPLED, _STATE, True))
        span = Span(owner.tracing, info.span_name, owner.trace_id, parent, info.kind, attrs, self.span_id,
                    self.start)
        if self.events:
            span._events = self.events
        if self.span_error is not None:
            span.error(self.span_error)
        span._end_time = self.span_end
        return span

    def done(self, result: Any) -> None:
        """The plugin returned ``result`` (its Status, FilterResult, or None)."""
        # Ended here rather than in the observer: a call fewer for each of a pod's 30 to 50 plugin calls.
        self.result = result
        self.end = _time_ns()
        owner = self.owner
        if owner is not None and owner.active is self:
            owner.active = None
        if self.started:
            self.observer.observe(self)

    def failed(self, exc: BaseException) -> None:
        """The plugin raised ``exc``."""
        self.error = f"{type(exc).__name__}: {exc}"
        self.end = _time_ns()
        owner = self.owner
        if owner is not None and owner.active is self:
            owner.active = None
        if self.started:
            self.observer.observe(self)

    @property
    def trace_id(self) -> int:
        return self.owner.trace_id if self.owner is not None else 0

    def is_recording(self) -> bool:
        return self.owner is not None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.attrs is None:
            self.attrs = {}
        self.attrs[key] = value

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        if self.events is None:
            self.events = []
        self.events.append(Event(name, dict(attrs or {})))

    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-01"


def current_span() -> Any:
    """The framework span the running code belongs to (None outside a sampled scheduling context): the
    plugin call in progress (a :class:`PluginCall`), an extension point's record (``PointSpan``) or a span."""
    span = _current.get()
    if span is not None and span.active is not None:
        return span.active
    return span


def get_current_span() -> Any:
    """The span code running in the framework describes itself on (``is_recording``, ``set_attribute``,
    ``add_event``, as OpenTelemetry's API has them): the framework's span inside a traced scheduling
    context, otherwise OpenTelemetry's current span (a no-op one without tracing)."""
    span = current_span()
    return span if span is not None else otel_trace.get_current_span()


def activate(span: Any) -> contextvars.Token[Any]:
    return _current.set(span)


def deactivate(token: contextvars.Token[Any]) -> None:
    _current.reset(token)


def add_event(name: str, attrs: Mapping[str, Any] | None = None) -> None:
    """Record an event (e.g. a remote plugin failure that was ignored) on the current span, if any."""
    span = current_span()
    if span is not None:
        span.add_event(name, attrs)


def inject(carrier: MutableMapping[str, str]) -> None:
    """Write the W3C ``traceparent`` of the current span into ``carrier`` (nothing outside a trace)."""
    span = current_span()
    if span is not None:
        carrier["traceparent"] = span.traceparent()


def grpc_metadata() -> tuple[tuple[str, str], ...] | None:
    """gRPC metadata carrying the current span's ``traceparent``; None outside a trace."""
    span = current_span()
    if span is None:
        return None
    return (("traceparent", span.traceparent()),)


# ---------------------------------------------------------------------------------------------------
# The in-process store and a sink for benchmarks


class SpanStore(SpanProcessor):
    """The spans of the last ``max_traces`` scheduling contexts, and each pod's last one (what
    ``outrigger trace POD`` prints). A span processor: it sees every span the framework ends, plugin
    calls as their records (``takes_records``), made spans when a trace is asked for."""

    takes_records = True

    def __init__(self, max_traces: int = 1000) -> None:
        self.max_traces = max(1, int(max_traces))
        self._traces: collections.OrderedDict[int, list[ReadableSpan | otlp.SpanRecord]] = collections.OrderedDict()
        self._by_pod: dict[str, int] = {}
        self._lock = threading.Lock()

    def begin(self, trace_id: int, pod: str) -> None:
        with self._lock:
            self._traces[trace_id] = []
            self._by_pod[pod] = trace_id
            while len(self._traces) > self.max_traces:
                old, _ = self._traces.popitem(last=False)
                for key in [k for k, v in self._by_pod.items() if v == old]:
                    del self._by_pod[key]

    def on_end(self, span: ReadableSpan | otlp.SpanRecord) -> None:  # type: ignore[override]
        if isinstance(span, otlp.SpanRecord):
            trace_id = span.owner.trace_id
        else:
            ctx = span.context
            if ctx is None:
                return
            trace_id = ctx.trace_id
        with self._lock:
            spans = self._traces.get(trace_id)
            if spans is not None:
                spans.append(span)

    def trace_of(self, pod: str) -> list[ReadableSpan]:
        """The ended spans of ``pod``'s (``namespace/name``) last scheduling context, by start time."""
        with self._lock:
            tid = self._by_pod.get(pod)
            spans = list(self._traces.get(tid, ())) if tid is not None else []
        return sorted(otlp.readable(spans), key=lambda s: s.start_time or 0)

    def __len__(self) -> int:
        return len(self._traces)


# ---------------------------------------------------------------------------------------------------
# Tracing


class Tracing:
    """Where the framework's spans go: span processors, a resource, a sampler, an optional store."""

    def __init__(
        self,
        processors: Sequence[SpanProcessor] = (),
        *,
        resource: Resource | None = None,
        sampler: Sampler | None = None,
        store: SpanStore | None = None,
        exporters: Sequence[SpanExporter] = (),
        batch: ExportBatching | None = None,
        tail: TailSampling | None = None,
        export_process: bool = False,
    ) -> None:
        self.processors = list(processors)
        # Exporters get whole traces, batched by an export thread (TraceExport), with no per-span call;
        # with tail sampling, only the traces it keeps (the processors still see every span). With
        # ``export_process``, encoded and sent by a process of its own (framework.observe.exportproc).
        self.export = TraceExport(exporters, batch or ExportBatching(), process=export_process) if exporters else None
        self.tail = TailSampler(tail) if tail is not None and exporters else None
        self.store = store
        if store is not None:
            self.processors.append(store)
        self.resource = resource or Resource.create({"service.name": DEFAULT_SERVICE_NAME})
        self.sampler = sampler or ParentBased(ALWAYS_ON)
        # ALWAYS_ON samples every context whatever it is asked (and builds a SamplingResult per pod to say so).
        self._always = self.sampler is ALWAYS_ON
        self._closed = False
        # Ended spans wait here until their trace's root ends (see DRAIN_INTERVAL).
        self._ended: collections.deque[Span | PluginCall] = collections.deque()
        self._drain_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outrigger-spans", daemon=True)
        self._thread.start()

    def start_trace(self, name: str, attrs: dict[str, Any], pod: str = "") -> Span | None:
        """The root span of a new scheduling context, or None when the sampler drops it."""
        trace_id = _rand.getrandbits(128) or 1
        if not self._always:
            result = self.sampler.should_sample(None, trace_id, name, SpanKind.INTERNAL, attrs)
            if not result.decision.is_sampled():  # type: ignore[no-untyped-call]
                return None
        span = Span(self, name, trace_id, None, SpanKind.INTERNAL, attrs)
        if self.store is not None and pod:
            self.store.begin(trace_id, pod)
        return span

    def ended(self, span: Span) -> None:
        """Queue an ended span for the processors."""
        ended = self._ended
        ended.append(span)
        if len(ended) == 1 and not self._wake.is_set():
            self._wake.set()  # the fallback thread, should no root end come to take it

    def ended_all(self, spans: Sequence[Span | PluginCall]) -> None:
        """Queue ended spans for the processors (an extension point's plugin calls, as their records)."""
        ended = self._ended
        was = len(ended)
        ended.extend(spans)
        if not was and not self._wake.is_set():
            self._wake.set()

    def drain(self) -> None:
        """Hand the queued spans to the processors now, unless the fallback thread is at it."""
        if self._drain_lock.acquire(blocking=False):
            try:
                self._hand_over()
            finally:
                self._drain_lock.release()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            time.sleep(DRAIN_INTERVAL)  # a root ending meanwhile takes them
            self._drain()

    def _drain(self) -> None:
        with self._drain_lock:
            self._hand_over()

    def _hand_over(self) -> None:
        ended = self._ended
        while ended:
            spans = [ended.popleft() for _ in range(len(ended))]
            if self.export is not None:
                kept = spans if self.tail is None else self.tail.select(spans)
                if kept:
                    self.export.put(kept)
            # Plugin calls are records (PluginCall): a processor that does not take them gets spans.
            plain: list[ReadableSpan] | None = None
            for p in self.processors:
                items: Sequence[Any] = spans
                if not getattr(p, "takes_records", False):
                    if plain is None:
                        plain = otlp.readable(spans)
                    items = plain
                for span in items:
                    try:
                        p.on_end(span)
                    except Exception:  # a broken processor must not stop the scheduling loop
                        log.exception("span processor %r failed", p)

    def force_flush(self, timeout_millis: int = 30_000) -> None:
        self._drain()
        if self.export is not None:
            self.export.flush()
        for p in self.processors:
            p.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop the processors (exporters send what they hold). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(5.0)
        self._drain()
        if self.export is not None:
            self.export.shutdown()
        for p in self.processors:
            try:
                p.shutdown()
            except Exception:  # a backend gone away must not stop the framework's shutdown
                log.exception("span processor %r failed to shut down", p)


def make_sampler(name: str, arg: str | None = None) -> Sampler:
    """A sampler by its ``OTEL_TRACES_SAMPLER`` name and ``OTEL_TRACES_SAMPLER_ARG`` (a ratio in [0, 1])."""
    name = name.strip().lower()
    ratio = 1.0
    if name.endswith("traceidratio") and arg not in (None, ""):
        try:
            ratio = float(arg)  # type: ignore[arg-type]
        except ValueError:
            raise TracingConfigError(f"trace sampler argument {arg!r} is not a number (a ratio in [0, 1])") from None
        if not 0.0 <= ratio <= 1.0:
            raise TracingConfigError(f"trace sampler argument {arg!r} is outside [0, 1]")
    samplers: dict[str, Sampler] = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "traceidratio": TraceIdRatioBased(ratio),
        "parentbased_always_on": ParentBased(ALWAYS_ON),
        "parentbased_always_off": ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": ParentBased(TraceIdRatioBased(ratio)),
    }
    if name not in samplers:
        raise TracingConfigError(f"unknown trace sampler {name!r} (one of: {', '.join(SAMPLERS)})")
    return samplers[name]


def _batching(env: Mapping[str, str]) -> ExportBatching:
    try:
        return ExportBatching.from_env(env)
    except ValueError as exc:
        raise TracingConfigError(str(exc)) from None


def _tail(env: Mapping[str, str], ratio: str | None, slow: str | None) -> TailSampling | None:
    try:
        return TailSampling.parse(ratio if ratio is not None else env.get("OUTRIGGER_TRACE_KEEP_RATIO"),
                                  slow if slow is not None else env.get("OUTRIGGER_TRACE_KEEP_SLOW"))
    except ValueError as exc:
        raise TracingConfigError(str(exc)) from None


def _export_process(env: Mapping[str, str]) -> bool:
    raw = env.get("OUTRIGGER_TRACE_EXPORT_PROCESS", "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise TracingConfigError(f"OUTRIGGER_TRACE_EXPORT_PROCESS={raw!r} is neither true (1) nor false (0)")


@dataclass(frozen=True)
class TracingConfig:
    """How to trace: exporters, OTLP endpoint, service name, sampler, and how many traces to keep in
    process. :meth:`from_env` reads the ``OTEL_*`` variables; keyword arguments (flags) override them."""

    exporters: tuple[str, ...] = ()
    endpoint: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    sampler: str = "parentbased_always_on"
    sampler_arg: str | None = None
    store: int = 0
    resource_attributes: Mapping[str, str] = field(default_factory=dict)
    batching: ExportBatching = field(default_factory=ExportBatching)
    tail: TailSampling | None = None
    export_process: bool = False  # encode and send in a process of its own (OUTRIGGER_TRACE_EXPORT_PROCESS)

    @property
    def enabled(self) -> bool:
        return bool(self.exporters) or self.store > 0

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        exporters: str | None = None,
        endpoint: str | None = None,
        service_name: str | None = None,
        sampler: str | None = None,
        sampler_arg: str | None = None,
        store: int | None = None,
        keep_ratio: str | None = None,
        keep_slow: str | None = None,
    ) -> TracingConfig:
        env = os.environ if env is None else env
        names = exporters if exporters is not None else env.get("OTEL_TRACES_EXPORTER", "none")
        chosen: list[str] = []
        for part in names.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part not in EXPORTERS:
                raise TracingConfigError(f"unknown trace exporter {part!r} (one of: {', '.join(EXPORTERS)})")
            if part != "none" and part not in chosen:
                chosen.append(part)
        if store is not None and store < 0:
            raise TracingConfigError(f"the number of traces to keep must be >= 0, got {store}")
        sampler_name = sampler or env.get("OTEL_TRACES_SAMPLER") or "parentbased_always_on"
        arg = sampler_arg if sampler_arg is not None else env.get("OTEL_TRACES_SAMPLER_ARG")
        make_sampler(sampler_name, arg)  # check now: a bad setting fails startup with its name
        return cls(
            exporters=tuple(chosen),
            endpoint=(endpoint or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                      or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")),
            service_name=service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME,
            sampler=sampler_name,
            sampler_arg=arg,
            store=store or 0,
            batching=_batching(env),
            tail=_tail(env, keep_ratio, keep_slow),
            export_process=_export_process(env),
        )

    def build(self) -> Tracing | None:
        """The :class:`Tracing` of this configuration, or None when tracing is off."""
        if not self.enabled:
            return None
        exporters: list[SpanExporter] = []
        for name in self.exporters:
            if name == "otlp":
                endpoint = self.endpoint
                insecure = None
                if endpoint and "://" not in endpoint:
                    insecure = True  # a bare host:port is a plain-text collector next to the framework
                exporters.append(OtlpExporter(endpoint=endpoint, insecure=insecure))
            else:
                exporters.append(ConsoleSpanExporter(service_name=self.service_name))
        resource = Resource.create({**self.resource_attributes, "service.name": self.service_name})
        store = SpanStore(self.store) if self.store > 0 else None
        return Tracing(resource=resource, sampler=make_sampler(self.sampler, self.sampler_arg), store=store,
                       exporters=exporters, batch=self.batching, tail=self.tail, export_process=self.export_process)


# The benchmark exports every few milliseconds instead of the SDK's 5 s (and with a queue large enough
# that no span is dropped): spans held longer outlive two garbage collections and make full collections
# of the whole heap frequent, a cost that depends on the heap and the export rate more than on tracing.
# docs/benchmarks.md says so.
BENCH_BATCHING = ExportBatching(delay=0.005, max_batch=512, max_queue=65_536)


def benchmark_tracing(store: int = 0, process: bool | None = None) -> tuple[Tracing, SinkExporter]:
    """Tracing as a production setup pays for it, without a backend: every context sampled, its spans
    batched and written as OTLP requests, as :class:`OtlpExporter` writes them, into a
    :class:`SinkExporter` that drops them. For the benchmark's tracing scenario::

        tracing, sink = benchmark_tracing()
        instrument(scheduler, tracing=tracing)        # framework.observe.instrument
        ...
        tracing.shutdown(); print(sink.spans)

    With ``process`` (default: ``OUTRIGGER_TRACE_EXPORT_PROCESS``), encoded in an export process.
    """
    sink = SinkExporter(encode=True)
    if process is None:  # as `outrigger serve` would: OUTRIGGER_TRACE_EXPORT_PROCESS
        process = _export_process(os.environ)
    return Tracing(sampler=ALWAYS_ON, store=SpanStore(store) if store else None, exporters=[sink],
                   batch=BENCH_BATCHING, export_process=process), sink
