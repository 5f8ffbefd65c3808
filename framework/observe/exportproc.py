"""Trace export in a process of its own: the OTLP encoding and the exporters' sending off the
framework's interpreter.

The export thread of :class:`~.traceexport.TraceExport` shares the interpreter's lock with the
scheduling loop, so every microsecond it spends writing OTLP bytes or in the exporter's gRPC call is
one the loop waits for. With an :class:`ExportProcess`, that thread only turns a batch into compact
tuples (:class:`Packer`: a plugin call's or an extension point's record is five integers and the
number of the part it shares with the same plugin's other calls or the same point in other contexts,
encoded once; a span is its fields, its attributes the dict it has) and writes them, pickled, to a
child process's stdin. The child (``python -m framework.observe.exportproc``) writes the same
``ExportTraceServiceRequest`` as :func:`.otlp.encode` would and hands it to exporters built there from
their :attr:`process_spec` (the OTLP exporter with the same endpoint, the benchmark's sink), then
acknowledges each batch with the spans and bytes it wrote.

The child is started with the tracing and stopped with it (stdin closed: it exports what it holds
and exits); it ignores SIGINT and exits when the framework dies (stdin at end of file). Should it
fail (not start, die, stop reading), :class:`~.traceexport.TraceExport` goes on on its own thread,
with a warning: tracing's failure never stops scheduling.
"""

from __future__ import annotations

import logging
import marshal
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import IO, Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import DEFAULT_TRACE_STATE, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from . import otlp

__all__ = ["ExportProcess", "Packer", "child_main", "encode_message"]

log = logging.getLogger("outrigger.tracing")

_FRAME = struct.Struct("<I")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_STATE = DEFAULT_TRACE_STATE
# Shared pieces and resource groups the packer remembers (numbered for the child): bounded; when
# full, both sides start again from an empty table (the child is told so).
TABLE_MAX = 16_384
START_SECONDS = 30.0  # how long a flush waits for the child's acknowledgements
STOP_SECONDS = 10.0  # how long the child gets to export what it holds when stopped


class Packer:
    """Turns batches of finished spans and :class:`.otlp.SpanRecord` s into the child's messages
    (:meth:`pack`), remembering what it has already defined for the child."""

    def __init__(self) -> None:
        self._shared: dict[Any, int] = {}
        self._groups: dict[tuple[int, int], tuple[Any, Any, int]] = {}

    def pack(self, batch: Sequence[Any]) -> Message:
        """``(reset, shared definitions, group definitions, parts)`` for ``batch``: ``reset`` tells the
        child to forget earlier definitions; a part is ``(group, rows, shared ids)`` (plugin calls'
        records: a row is ``(trace, span, parent, start, end)``), ``(group, message bytes)`` (a span
        the packer encoded) or a span's fields (:func:`_span_item`)."""
        if len(self._shared) >= TABLE_MAX or len(self._groups) >= 64:
            self._shared.clear()
            self._groups.clear()
            reset = True
        else:
            reset = False
        group_defs: list[tuple[int, int, bytes, bytes]] = []
        shared_defs: list[tuple[int, bytes]] = []
        records: list[Any] = []
        parts: list[tuple[Any, ...]] = []
        for item in batch:
            if isinstance(item, otlp.SpanRecord):
                records.append(item)
            else:
                parts.append(_span_item(self._group(item._resource, item._instrumentation_scope, group_defs), item))
        if records:
            parts[:0] = self._records(records, group_defs, shared_defs)
        return reset, shared_defs, group_defs, parts

    def _records(self, records: list[Any], group_defs: list[tuple[int, int, bytes, bytes]],
                 shared_defs: list[tuple[int, bytes]]) -> list[tuple[Any, ...]]:
        # Most of a batch: read in C (attrgetter, map), one part per group.
        owners = list(map(_OWNER, records))
        resources, scopes = set(map(id, map(_RESOURCE, owners))), set(map(id, map(_SCOPE, owners)))
        keys = list(map(_KEY, records))
        if None in keys or len(resources) > 1 or len(scopes) > 1:
            parts: list[tuple[Any, ...]] = []  # rare: a span with its own attributes, or several groups
            for rec, key in zip(records, keys):
                owner = rec.owner
                gid = self._group(owner._resource, owner._instrumentation_scope, group_defs)
                if key is None:
                    parts.append(_span_item(gid, rec.to_span()))
                else:
                    parts.append((gid, [_ROW(rec)], [self._shared_id(rec, key, shared_defs)]))
            return parts
        gid = self._group(owners[0]._resource, owners[0]._instrumentation_scope, group_defs)
        sids = list(map(self._shared.get, keys))
        if None in sids:
            sids = [sid if sid is not None else self._shared_id(rec, key, shared_defs)
                    for sid, rec, key in zip(sids, records, keys)]
        return [(gid, list(map(_ROW, records)), sids)]

    def _shared_id(self, rec: Any, key: Any, defs: list[tuple[int, bytes]]) -> int:
        sid = self._shared.get(key)
        if sid is None:
            sid = self._shared[key] = len(self._shared)
            defs.append((sid, otlp.shared_part(rec)))
        return sid

    def _group(self, resource: Any, scope: Any, defs: list[tuple[int, int, bytes, bytes]]) -> int:
        scope = scope or None
        key = (id(resource), id(scope))
        got = self._groups.get(key)
        if got is not None and got[0] is resource and got[1] is scope:
            return got[2]
        gid = len(self._groups)
        self._groups[key] = (resource, scope, gid)
        defs.append((gid, id(resource), *otlp.group_fields(resource, scope)))
        return gid


Message = tuple[bool, list[tuple[int, bytes]], list[tuple[int, int, bytes, bytes]], list[tuple[Any, ...]]]
_OWNER = attrgetter("owner")
_RESOURCE = attrgetter("_resource")
_SCOPE = attrgetter("_instrumentation_scope")
_KEY = attrgetter("shared_key")
_ROW = attrgetter("owner.trace_id", "span_id", "owner.span_id", "start", "span_end")


def _span_item(gid: int, span: ReadableSpan) -> tuple[Any, ...]:
    """A span as ``(group, name, trace, span, parent, parent remote, kind, start, end, attributes,
    status code, status description, events)``, or ``(group, message bytes)`` for what the child would
    not rebuild the same (links, a trace state, attributes with limits)."""
    ctx, parent, attrs = span._context, span._parent, span._attributes
    if span._links or ctx is None or (ctx[4] is not _STATE and ctx[4]) or (attrs is not None
                                                                        and type(attrs) is not dict):
        return gid, otlp.span_message(span)
    status = span._status
    events = [(e.name, dict(e.attributes or {}), e.timestamp) for e in span._events] if span._events else None
    return (gid, span._name, ctx[0], ctx[1], parent[1] if parent is not None else 0,
            bool(parent[2]) if parent is not None else False, span._kind.value, span._start_time or 0,
            span._end_time or 0, attrs or None, status._status_code.value, status._description, events)


def _rebuild(item: tuple[Any, ...]) -> ReadableSpan:
    (_, name, trace_id, span_id, parent_id, parent_remote, kind, start, end, attrs, code, description,
     events) = item
    # The fields the encoder reads (otlp._span), set without ReadableSpan.__init__: given no resource,
    # it makes the default one, detectors and all, per span.
    span = _new(ReadableSpan)
    span._name = name
    span._context = _tuple_new(SpanContext, (trace_id, span_id, False, _SAMPLED, _STATE, True))
    span._parent = _tuple_new(SpanContext, (trace_id, parent_id, parent_remote, _SAMPLED, _STATE, True)) \
        if parent_id else None
    span._kind = _KINDS[kind]
    span._attributes = attrs
    span._events = [Event(n, a, t) for n, a, t in events] if events else ()
    span._links = ()
    span._start_time = start
    span._end_time = end
    span._status = Status(_CODES[code], description) if code or description else _UNSET
    return span


_new = object.__new__
_tuple_new = tuple.__new__
_KINDS = {kind.value: kind for kind in SpanKind}
_CODES = {code.value: code for code in StatusCode}
_UNSET = Status()


class _Tables:
    """The child's copy of the packer's definitions."""

    def __init__(self) -> None:
        self.shared: dict[int, bytes] = {}
        self.groups: dict[int, tuple[int, bytes, bytes]] = {}


def encode_message(tables: _Tables, message: Message) -> tuple[bytes, int]:
    """The serialized ``ExportTraceServiceRequest`` of one packed batch (the child's side of
    :meth:`Packer.pack`), and its number of spans: per resource and scope, the plugin calls' spans,
    then the other spans, each as :func:`.otlp.encode` writes it."""
    reset, shared_defs, group_defs, parts = message
    if reset:
        tables.shared.clear()
        tables.groups.clear()
    tables.shared.update(shared_defs)
    for gid, rid, res_field, sc_field in group_defs:
        tables.groups[gid] = (rid, res_field, sc_field)
    shared = tables.shared
    by_group: dict[int, list[bytes]] = {}
    record = otlp.record_message
    for part in parts:
        n = len(part)
        spans = by_group.get(part[0])
        if spans is None:
            spans = by_group[part[0]] = []
        if n == 3:
            spans.extend([record(t, i, p, s, e, shared[sid]) for (t, i, p, s, e), sid in zip(part[1], part[2])])
        elif n == 2:
            spans.append(part[1])
        else:
            spans.append(otlp.span_message(_rebuild(part)))
    groups = tables.groups
    body = otlp.assemble([(*groups[gid], spans) for gid, spans in by_group.items()])
    return body, sum(map(len, by_group.values()))


# ---- the parent's side --------------------------------------------------------------------------


def _write_frame(out: IO[bytes], payload: bytes) -> None:
    out.write(_FRAME.pack(len(payload)) + payload)
    out.flush()


def _read_frame(src: IO[bytes]) -> bytes | None:
    head = src.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    (n,) = _FRAME.unpack(head)
    body = src.read(n)
    return body if len(body) == n else None


class ExportProcess:
    """The child process exporting for ``exporters`` (each with a :attr:`process_spec`); ``acked``
    (called with the spans and bytes of each batch the child has written) on a reader thread."""

    def __init__(self, specs: Sequence[Any], acked: Callable[[int, int], None]) -> None:
        self.packer = Packer()
        self.sent = 0  # batches written to the child
        self.done = 0  # batches it acknowledged
        self._acked = acked
        self._cond = threading.Condition()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "framework.observe.exportproc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        assert self._proc.stdin is not None and self._proc.stdout is not None
        _write_frame(self._proc.stdin, pickle.dumps(list(specs), protocol=pickle.HIGHEST_PROTOCOL))
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,), name="outrigger-trace-acks",
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, batch: Sequence[Any]) -> None:
        """Hand ``batch`` to the child (raises OSError when it is gone)."""
        message = self.packer.pack(batch)
        try:
            payload = b"m" + marshal.dumps(message)  # tuples, ints, str, dicts: a third of pickle's time
        except ValueError:  # an attribute value of another type, set by a plugin's code
            payload = b"p" + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        stdin = self._proc.stdin
        assert stdin is not None
        _write_frame(stdin, payload)
        self.sent += 1

    def _read(self, src: IO[bytes]) -> None:
        while True:
            frame = _read_frame(src)
            if frame is None:
                break
            spans, nbytes = pickle.loads(frame)
            try:
                self._acked(spans, nbytes)
            except Exception:  # a counter's failure must not stop the acknowledgements
                log.exception("trace export acknowledgement failed")
            with self._cond:
                self.done += 1
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait(self, timeout: float = START_SECONDS) -> bool:
        """Wait until the child has acknowledged every batch sent (False: it did not in ``timeout``)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.done >= self.sent or not self.alive(), timeout) and \
                self.done >= self.sent

    def stop(self) -> None:
        """Close the child's stdin (it exports what it holds and exits), killing it after STOP_SECONDS."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(STOP_SECONDS)
        self._reader.join(STOP_SECONDS)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


# ---- the child's side ---------------------------------------------------------------------------


class _Encoded:
    """An encoded request as the OTLP exporter's ``export`` is given it in the child."""

    __slots__ = ("body", "count")

    def __init__(self, body: bytes, count: int) -> None:
        self.body = body
        self.count = count


class _EncodedOtlpExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter (channel, retries, TLS, headers, compression) sending
    requests encoded already."""

    def _translate_data(self, data: Any) -> ExportTraceServiceRequest:
        return ExportTraceServiceRequest.FromString(data.body)

    def _count_data(self, data: Any) -> int:
        return int(data.count)


def _exporter(spec: Any) -> Any:
    kind = spec[0]
    if kind == "otlp":
        return _EncodedOtlpExporter(endpoint=spec[1], insecure=spec[2])
    if kind == "sink":
        return None  # the bytes are counted; nothing is sent
    raise ValueError(f"unknown exporter spec {spec!r}")


def child_main(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Read the exporter specs, then packed batches, until end of file; export each and acknowledge it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the framework stops it (stdin closed), not a Ctrl-C
    first = _read_frame(stdin)
    if first is None:
        return 0
    exporters = [e for e in (_exporter(spec) for spec in pickle.loads(first)) if e is not None]
    tables = _Tables()
    while True:
        frame = _read_frame(stdin)
        if frame is None:
            break
        message = marshal.loads(frame[1:]) if frame[:1] == b"m" else pickle.loads(frame[1:])
        body, count = encode_message(tables, message)
        for exporter in exporters:
            try:
                exporter.export(_Encoded(body, count))
            except Exception:  # a backend gone away must not stop the export of the next batches
                log.exception("span exporter %r failed", exporter)
        _write_frame(stdout, pickle.dumps((count, len(body))))
    for exporter in exporters:
        try:
            exporter.shutdown()
        except Exception:
            log.exception("span exporter %r failed to shut down", exporter)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.stdin.buffer, sys.stdout.buffer))
