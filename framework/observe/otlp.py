"""OTLP trace requests written straight from the framework's spans, in protobuf's wire format.

The OpenTelemetry SDK's encoder builds a protobuf message object per span, per attribute and per
attribute value (an ``AnyValue`` inside a ``KeyValue``), each through keyword arguments and ABC
``isinstance`` checks: about 60 us a span, 2 to 3 ms for the ~45 spans of one scheduling context, ten
times what recording them costs. :func:`encode` writes the same request as bytes instead: a span is a
few byte strings joined, and the pieces that repeat from pod to pod (an attribute with its value, a span
name, a resource, a scope) are encoded once and reused. :func:`request` parses the bytes into the
``ExportTraceServiceRequest`` exporters send (one C-level parse); a test checks it against the SDK's
encoding of the same spans field by field.

Spans this encoder does not know how to write (links, values other than str, bool, int, float, bytes
and their sequences) go through the SDK's encoder, so any ``ReadableSpan`` can be given.

A plugin call's span need not exist as a ``ReadableSpan`` at all: the scheduling loop records the call
(:class:`SpanRecord`, :class:`framework.observe.tracing.PluginCall`) and this module writes its span
straight from the record on the export thread, the part it shares with the same plugin's other calls
(name, kind, attributes, status) looked up by the record's :attr:`~SpanRecord.shared_key`.
:func:`readable` turns records into spans for consumers that need the SDK's objects.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal import _encode_attributes, _encode_instrumentation_scope
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PB2Resource
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import DEFAULT_TRACE_STATE, SpanKind
from opentelemetry.trace.status import StatusCode

__all__ = ["SpanRecord", "assemble", "encode", "group_fields", "readable", "record_message", "request",
           "shared_part", "span_message"]

_pack_d = struct.Struct("<d").pack
_pack_q = struct.Struct("<Q").pack
# Span.span_id (field 2) and parent_span_id (field 4), then start (7) and end (8) time, each pair one pack.
_pack_ids = struct.Struct(">HQHQ").pack
_pack_times = struct.Struct("<BQBQ").pack
_SMALL = [bytes((i,)) for i in range(128)]
# Span.flags (field 16, fixed32): SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, with IS_REMOTE for a remote parent.
_FLAGS_LOCAL = b"\x85\x01" + (0x100).to_bytes(4, "little")
_FLAGS_REMOTE = b"\x85\x01" + (0x300).to_bytes(4, "little")
# Pieces cached across requests (attributes with their values, names): bounded, emptied when full.
_CACHE_MAX = 16_384
_kv_cache: dict[tuple[str, Any], bytes] = {}
_name_cache: dict[str, bytes] = {}
_shared_cache: dict[tuple[Any, ...], bytes] = {}
_group_cache: dict[tuple[int, int], tuple[Resource, Any, bytes, bytes]] = {}
_last_trace: tuple[int, bytes] = (0, b"")
# Span.kind (field 6): OTLP's SpanKind is the API's plus one (0 is SPAN_KIND_UNSPECIFIED).
_KINDS = {id(kind): b"\x30" + _SMALL[kind.value + 1] for kind in SpanKind}
_NO_STATE = DEFAULT_TRACE_STATE
_STATUS_UNSET = StatusCode.UNSET


class _Unsupported(Exception):
    """A value or span the direct encoder leaves to the SDK's."""


class SpanRecord:
    """A span kept as the record the scheduling loop made rather than as a ``ReadableSpan``: what
    :func:`encode` reads from one (a plugin call's, :class:`framework.observe.tracing.PluginCall`, or
    an extension point's, :class:`framework.observe.pointspan.PointSpan`) is ``owner`` (what it is a
    child of: its ``trace_id``, ``span_id``, ``_resource`` and ``_instrumentation_scope``),
    ``span_id``, ``start``, ``span_end``, :attr:`shared_key` and :meth:`to_span`."""

    __slots__ = ()
    owner: Any
    span_id: int
    start: int
    span_end: int
    attrs: Any
    events: Any

    @property
    def shared_key(self) -> Any:
        """A hashable key equal for records whose spans share name, kind, attributes and status; None
        for a span written on its own (attributes or events of its own)."""
        raise NotImplementedError

    def to_span(self) -> ReadableSpan:
        """The record as the ``ReadableSpan`` it stands for."""
        raise NotImplementedError


def readable(items: Sequence[Any]) -> list[ReadableSpan]:
    """``items`` (spans and :class:`SpanRecord` s) as spans, in the same order."""
    return [item.to_span() if isinstance(item, SpanRecord) else item for item in items]


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n] if n >= 0 else _varint(n + (1 << 64))
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Lengths of messages (a span is 100 to 400 bytes, a batch's scope up to ~200 KB) by table below 16 KiB.
_LENGTHS = [_varint(n) for n in range(1 << 14)]


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte(s), the payload's length, the payload."""
    n = len(payload)
    return tag + (_LENGTHS[n] if n < 16384 else _varint(n)) + payload


def _any_value(value: Any) -> bytes:
    """An ``AnyValue`` message's bytes (the SDK's type order: bool before int)."""
    if isinstance(value, str):
        return _field(b"\x0a", value.encode())
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _pack_d(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, list | tuple):
        return _field(b"\x2a", b"".join([_field(b"\x0a", _any_value(v)) for v in value]))
    raise _Unsupported(type(value).__name__)


def _key_value(key: str, value: Any) -> bytes:
    """A ``KeyValue`` message's bytes, cached for hashable values."""
    hashable = not isinstance(value, list)
    if hashable:
        got = _kv_cache.get((key, value))
        if got is not None:
            return got
    out = _field(b"\x0a", key.encode()) + _field(b"\x12", _any_value(value))
    if hashable:
        if len(_kv_cache) >= _CACHE_MAX:
            _kv_cache.clear()
        _kv_cache[(key, value)] = out
    return out


def _attributes(tag: bytes, attrs: Mapping[str, Any] | None) -> list[bytes]:
    if not attrs:
        return []
    return [_field(tag, _key_value(k, v)) for k, v in attrs.items()]


def _name(name: str) -> bytes:
    got = _name_cache.get(name)
    if got is None:
        if len(_name_cache) >= _CACHE_MAX:
            _name_cache.clear()
        got = _name_cache[name] = _field(b"\x2a", name.encode())
    return got


def _span(span: ReadableSpan) -> bytes:
    """One ``Span`` message's bytes (field numbers from opentelemetry/proto/trace/v1/trace.proto):
    what is the span's own (ids, times, events), then what many spans share (:func:`_shared`)."""
    # A SpanContext is a tuple (trace_id, span_id, is_remote, trace_flags, trace_state, is_valid): its
    # fields are read by index, its properties being Python calls.
    ctx = span._context
    if span._links or ctx is None:
        raise _Unsupported("links, or no context")
    parent = span._parent
    trace_id = ctx[0]
    global _last_trace
    if _last_trace[0] != trace_id:  # a batch holds each trace's spans together
        _last_trace = (trace_id, b"\x0a\x10" + trace_id.to_bytes(16, "big"))
    parts = [_last_trace[1], b"\x12\x08" + ctx[1].to_bytes(8, "big")]
    state = ctx[4]
    if state is not _NO_STATE and state:
        parts.append(_field(b"\x1a", ",".join(f"{k}={v}" for k, v in state.items()).encode()))
    remote_parent = False
    if parent is not None:
        parts.append(b"\x22\x08" + parent[1].to_bytes(8, "big"))
        remote_parent = parent[2]
    parts.append(_pack_times(0x39, span._start_time or 0, 0x41, span._end_time or 0))
    for event in span._events:
        event_parts = [b"\x09" + _pack_q(event.timestamp), _field(b"\x12", event.name.encode())]
        event_parts.extend(_attributes(b"\x1a", event.attributes))
        parts.append(_field(b"\x5a", b"".join(event_parts)))
    parts.append(_shared(span, remote_parent))
    body = b"".join(parts)
    n = len(body)
    return b"\x12" + (_LENGTHS[n] if n < 16384 else _varint(n)) + body  # ScopeSpans.spans


_record_cache: dict[Any, bytes] = {}


def _record(rec: Any) -> bytes:
    """A :class:`SpanRecord`'s ``Span`` message bytes, as :func:`_span` writes its ``to_span()``: the
    ids and times packed, the rest looked up by its shared key (made from a span the first time)."""
    key = rec.shared_key
    if key is None:  # attributes or events of this span's own
        return _span(rec.to_span())
    owner = rec.owner
    trace_id = owner.trace_id
    global _last_trace
    if _last_trace[0] != trace_id:
        _last_trace = (trace_id, b"\x0a\x10" + trace_id.to_bytes(16, "big"))
    shared = _record_cache.get(key)
    if shared is None:
        if len(_record_cache) >= _CACHE_MAX:
            _record_cache.clear()
        shared = _record_cache[key] = _shared(rec.to_span(), False)
    body = b"".join((_last_trace[1], _pack_ids(0x1208, rec.span_id, 0x2208, owner.span_id),
                     _pack_times(0x39, rec.start, 0x41, rec.span_end), shared))
    n = len(body)
    return b"\x12" + (_LENGTHS[n] if n < 16384 else _varint(n)) + body


def record_message(trace_id: int, span_id: int, parent_id: int, start: int, end: int, shared: bytes) -> bytes:
    """A plugin call's ``Span`` message bytes from its ids, times and :func:`shared_part` (what
    :func:`encode` writes for a :class:`SpanRecord`)."""
    global _last_trace
    if _last_trace[0] != trace_id:
        _last_trace = (trace_id, b"\x0a\x10" + trace_id.to_bytes(16, "big"))
    body = b"".join((_last_trace[1], _pack_ids(0x1208, span_id, 0x2208, parent_id),
                     _pack_times(0x39, start, 0x41, end), shared))
    n = len(body)
    return b"\x12" + (_LENGTHS[n] if n < 16384 else _varint(n)) + body


def shared_part(rec: SpanRecord) -> bytes:
    """The part of a :class:`SpanRecord`'s span it shares with records of the same
    :attr:`~SpanRecord.shared_key` (name, kind, attributes, status, flags)."""
    return _shared(rec.to_span(), False)


def span_message(span: ReadableSpan) -> bytes:
    """One span's ``ScopeSpans.spans`` field bytes (the SDK's encoder for what this one leaves to it)."""
    try:
        return _span(span)
    except _Unsupported:
        return _field(b"\x12", _encode_span(span).SerializeToString())


def _shared(span: ReadableSpan, remote_parent: bool) -> bytes:
    """The span's name, kind, attributes, status and flags: the same from pod to pod for most of a
    scheduling context's spans (a plugin's call at a point), so encoded once and looked up."""
    attrs = span._attributes
    status = span._status
    # Enum members by identity: their __hash__ is a Python call.
    kind, code = id(span._kind), id(status._status_code)
    key: tuple[Any, ...] | None
    try:
        key = (span._name, kind, tuple(attrs.items()) if attrs else (), code, status._description, remote_parent)
        got = _shared_cache.get(key)
    except TypeError:  # an unhashable attribute value (a list)
        key = got = None
    if got is not None:
        return got
    parts = [_name(span._name), _KINDS[kind]]
    if attrs:
        parts.extend([_field(b"\x4a", _key_value(k, v)) for k, v in attrs.items()])
        if type(attrs) is not dict and span.dropped_attributes:
            parts.append(b"\x50" + _varint(span.dropped_attributes))
    if status.status_code is _STATUS_UNSET and not status.description:
        parts.append(b"\x7a\x00")
    else:
        status_parts = b""
        if status.description:
            status_parts = _field(b"\x12", status.description.encode())
        if status.status_code is not _STATUS_UNSET:
            status_parts += b"\x18" + _varint(status.status_code.value)
        parts.append(_field(b"\x7a", status_parts))
    parts.append(_FLAGS_REMOTE if remote_parent else _FLAGS_LOCAL)
    got = b"".join(parts)
    if key is not None:
        if len(_shared_cache) >= _CACHE_MAX:
            _shared_cache.clear()
        _shared_cache[key] = got
    return got


def _group(resource: Resource, scope: Any) -> tuple[bytes, bytes]:
    """A resource's and a scope's encoded fields (``ResourceSpans.resource`` and ``schema_url``,
    ``ScopeSpans.scope`` and ``schema_url``), cached by identity: ``Resource.__hash__`` writes JSON."""
    key = (id(resource), id(scope))
    got = _group_cache.get(key)
    if got is not None and got[0] is resource and got[1] is scope:
        return got[2], got[3]
    res = PB2Resource(attributes=_encode_attributes(resource.attributes)).SerializeToString()
    res_field = _field(b"\x0a", res)
    if resource.schema_url:
        res_field += _field(b"\x1a", resource.schema_url.encode())
    sc_field = _field(b"\x0a", _encode_instrumentation_scope(scope).SerializeToString())
    if scope is not None and scope.schema_url:
        sc_field += _field(b"\x1a", scope.schema_url.encode())
    if len(_group_cache) >= 64:
        _group_cache.clear()
    _group_cache[key] = (resource, scope, res_field, sc_field)
    return res_field, sc_field


def encode(spans: Sequence[ReadableSpan | SpanRecord]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of ``spans`` (spans and :class:`SpanRecord` s),
    grouped by resource and scope as the SDK's encoder groups them (in order of first appearance)."""
    groups: dict[tuple[int, int], tuple[Resource, Any, list[bytes]]] = {}
    last_resource: Any = None
    last_scope: Any = None
    target: list[bytes] = []
    for span in spans:
        if isinstance(span, SpanRecord):
            owner = span.owner
            resource = owner._resource
            scope = owner._instrumentation_scope or None
            encoded = _record(span)
        else:
            resource = span._resource
            scope = span._instrumentation_scope or None
            try:
                encoded = _span(span)
            except _Unsupported:
                encoded = _field(b"\x12", _encode_span(span).SerializeToString())
        if resource is not last_resource or scope is not last_scope or not groups:  # mostly one group
            key = (id(resource), id(scope))
            group = groups.get(key)
            if group is None:
                group = groups[key] = (resource, scope, [])
            target, last_resource, last_scope = group[2], resource, scope
        target.append(encoded)
    return assemble([(id(resource), *_group(resource, scope), encoded_spans)
                     for resource, scope, encoded_spans in groups.values()])


def group_fields(resource: Resource, scope: Any) -> tuple[bytes, bytes]:
    """A resource's and a scope's encoded fields, as :func:`assemble` takes them."""
    return _group(resource, scope)


def assemble(groups: Sequence[tuple[Any, bytes, bytes, Sequence[bytes]]]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of encoded spans in groups ``(resource key,
    resource fields, scope fields, span messages)``, in order; groups of one resource key share its
    ``ResourceSpans``."""
    by_resource: dict[Any, list[bytes]] = {}
    resources: dict[Any, bytes] = {}
    for rid, res_field, sc_field, encoded_spans in groups:
        resources[rid] = res_field
        by_resource.setdefault(rid, []).append(_field(b"\x12", sc_field + b"".join(encoded_spans)))
    # ResourceSpans: resource (1) and schema_url (3) in res_field, then scope_spans (2); protobuf
    # readers take fields in any order.
    return b"".join([_field(b"\x0a", resources[rid] + b"".join(scopes)) for rid, scopes in by_resource.items()])


def request(spans: Sequence[ReadableSpan | SpanRecord]) -> ExportTraceServiceRequest:
    """The ``ExportTraceServiceRequest`` of ``spans`` (what an OTLP exporter sends)."""
    return ExportTraceServiceRequest.FromString(encode(spans))
