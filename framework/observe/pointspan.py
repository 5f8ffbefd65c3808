"""An extension point's span kept as a record: :class:`PointSpan`.

About a dozen spans of each scheduling context are extension points (PreFilter, Filter, ... PostBind),
started and ended by the instrumentation's wrappers on the scheduling loop. Built as the SDK's
``ReadableSpan`` (:class:`~.tracing.Span`), each costs twenty fields, a ``SpanContext`` and a status
object there, and the exporters then read them back one attribute at a time. A :class:`PointSpan`
holds only what the point's span is made of (ids, times, attributes, status message, events) and is an
:class:`.otlp.SpanRecord`: the OTLP encoder writes it from its fields on the export thread, the parts
that repeat from pod to pod (name, attributes, status) encoded once and looked up, and only consumers
that need the SDK's object get one (:meth:`PointSpan.to_span`). While the point runs it is the current
span: plugin calls are recorded on it (``active``, ``calls``) and code describes itself on it
(``set_attribute``, ``add_event``), as on a :class:`~.tracing.Span`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import Event
from opentelemetry.trace import DEFAULT_TRACE_STATE, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status as OtelStatus
from opentelemetry.trace.status import StatusCode

from . import otlp
from .tracing import SCOPE, PluginCall, Span, _getrandbits, _time_ns

__all__ = ["PointSpan"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_STATE = DEFAULT_TRACE_STATE
_INTERNAL = SpanKind.INTERNAL
_tuple_new = tuple.__new__


class PointSpan(otlp.SpanRecord):
    """The span of one extension point under ``owner`` (the cycle's span, another point's, or the plugin
    call it runs inside), written from this record (:mod:`.otlp`, :mod:`.exportproc`). ``attrs`` are
    its attributes, set until it ends; ``end`` queues it with the context's other ended spans."""

    __slots__ = ("active", "attrs", "calls", "events", "name", "owner", "span_end", "span_error", "span_id",
                 "start", "trace_id", "tracing")
    leaf = False  # points always have their plugin calls' spans below them
    _instrumentation_scope = SCOPE

    def __init__(self, owner: Span | PointSpan | PluginCall, tracing: Any, name: str, attrs: dict[str, Any]) -> None:
        self.owner = owner
        self.tracing = tracing
        self.trace_id: int = owner.trace_id
        self.span_id = _getrandbits(64) or 1
        self.name = name
        self.attrs = attrs
        self.start = _time_ns()
        self.span_end = 0
        self.span_error: str | None = None
        self.events: list[Event] | None = None
        # The plugin call running under this point, and all of them (framework.observe.instrument).
        self.active: PluginCall | None = None
        self.calls: list[PluginCall] | None = None

    @property
    def _resource(self) -> Any:
        return self.tracing.resource

    @property
    def shared_key(self) -> Any:
        """Name, attributes and status, or None when this span is written on its own (it has events,
        or an attribute value that is a list)."""
        if self.events:
            return None
        key = (_POINT, self.name, tuple(self.attrs.items()), self.span_error)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def to_span(self) -> Span:
        """The ``ReadableSpan`` this ended point stands for."""
        owner = self.owner
        parent = _tuple_new(SpanContext, (self.trace_id, owner.span_id, False, _SAMPLED, _STATE, True))
        span = Span(self.tracing, self.name, self.trace_id, parent, _INTERNAL, dict(self.attrs), self.span_id,
                    self.start)
        if self.events:
            span._events = self.events
        if self.span_error is not None:
            span._status = OtelStatus(StatusCode.ERROR, self.span_error or None)
        span._end_time = self.span_end or None
        return span

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def add_event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        if self.events is None:
            self.events = []
        self.events.append(Event(name, dict(attrs or {})))

    def error(self, message: str) -> None:
        self.span_error = message  # an ERROR status, described by the message when there is one

    def end(self) -> None:
        if self.span_end:
            return
        self.span_end = _time_ns()
        self.tracing.ended(self)

    def child(self, name: str, attrs: dict[str, Any] | None = None, kind: SpanKind = _INTERNAL) -> Span:
        context = _tuple_new(SpanContext, (self.trace_id, self.span_id, False, _SAMPLED, _STATE, True))
        return Span(self.tracing, name, self.trace_id, context, kind, {} if attrs is None else attrs)

    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-01"


# Keeps a point's shared key apart from a plugin call's (a tuple of other things).
_POINT = "point"
