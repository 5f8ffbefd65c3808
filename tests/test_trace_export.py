"""The export path of the framework's traces: OTLP requests written straight from the spans (the same
message as the SDK's encoder makes), the batching of whole traces, its settings, a full queue, and tail
sampling (which contexts' traces are exported)."""

from __future__ import annotations

import marshal
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

from framework.observe import exportproc, otlp
from framework.observe.instrument import _Info
from framework.observe.pointspan import PointSpan
from framework.observe.tailsampling import TailSampler, TailSampling
from framework.observe.traceexport import ExportBatching, TraceExport
from framework.observe.tracing import (
    PluginCall,
    SinkExporter,
    Span,
    SpanStore,
    Tracing,
    TracingConfig,
    TracingConfigError,
)


class Recorder(SpanExporter):
    """Keeps each batch's span names; ``fail`` makes every export raise."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail
        self.shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.fail:
            raise RuntimeError("collector gone")
        self.batches.append([s.name for s in spans])
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.shut = True


def _framework_trace(tracing: Tracing) -> list[Span]:
    root = tracing.start_trace("SchedulePod", {"k8s.pod.name": "web", "outrigger.attempt": 3, "ok": True,
                                               "ratio": 0.25, "neg": -7, "big": 1 << 40})
    assert root is not None
    cycle = root.child("SchedulingCycle", {"outrigger.status.reasons": ["no fit", "taint"], "raw": b"\x00\x01"})
    call = cycle.child("Filter/Remote", {"outrigger.plugin": "Remote", "outrigger.filter.nodes_in": 5000},
                       SpanKind.CLIENT)
    call.add_event("remote plugin failure ignored", {"plugin": "Remote", "code": 14})
    call.error("RuntimeError: boom")
    for span in (call, cycle, root):
        span.end()
    return [call, cycle, root]


def _sdk_spans(_: Tracing) -> list[ReadableSpan]:
    ctx = SpanContext(0xABC, 0x12, False, TraceFlags(TraceFlags.SAMPLED), TraceState([("vendor", "x")]))
    remote_parent = SpanContext(0xABC, 0x34, True, TraceFlags(TraceFlags.SAMPLED))
    res_a = Resource.create({"service.name": "a"})
    res_b = Resource({"service.name": "b", "zone": "z1"}, schema_url="https://opentelemetry.io/schemas/1.21.0")
    scope_a = InstrumentationScope("lib.a", "1.0")
    scope_b = InstrumentationScope("lib.b", None, "https://s")
    return [
        ReadableSpan("server", ctx, remote_parent, res_a, {"n": 1}, kind=SpanKind.SERVER, instrumentation_scope=scope_a,
                     start_time=10, end_time=20, status=Status(StatusCode.OK)),
        ReadableSpan("linked", SpanContext(0xABC, 0x56, False), None, res_b, None,
                     links=(Link(remote_parent, {"why": "batch"}),), instrumentation_scope=scope_b,
                     start_time=11, end_time=12),
        ReadableSpan("events", SpanContext(0xDEF, 0x78, False), ctx, res_a, {"list": (1, 2)}, kind=SpanKind.PRODUCER,
                     events=(Event("e", {"f": 1.5}, timestamp=15),), instrumentation_scope=scope_b,
                     start_time=13, end_time=14, status=Status(StatusCode.ERROR)),
        ReadableSpan("no-scope", SpanContext(0xDEF, 0x9A, False), None, res_a, {}, kind=SpanKind.CONSUMER,
                     start_time=1, end_time=2),
    ]


@pytest.mark.parametrize("make", [_framework_trace, _sdk_spans], ids=["framework-trace", "sdk-spans"])
def test_the_request_is_the_sdks_encoding_of_the_same_spans(make: Callable[[Tracing], list[Any]]) -> None:
    tracing = Tracing()
    try:
        spans = make(tracing)
        want = encode_spans(spans)
        assert otlp.request(spans) == want
        assert otlp.request(spans) == want  # the second time from the cached pieces
        assert otlp.request([]) == encode_spans([])
    finally:
        tracing.shutdown()


def test_whole_traces_are_batched_and_a_full_queue_drops_whole_traces() -> None:
    one, broken, two = Recorder(), Recorder(fail=True), Recorder()
    export = TraceExport([one, broken, two], ExportBatching(delay=600.0, max_batch=4, max_queue=8),
                         thread=False)
    try:
        spans = {name: ReadableSpan(name) for name in "abcdefghi"}
        for names in ("abc", "de", "f", "ghi"):  # g, h, i would make 9 > 8 waiting spans
            export.put([spans[n] for n in names])
        assert (export.dropped, one.batches) == (3, [])
        export.flush()
        # A batch ends once it holds max_batch spans, never inside a trace; the failing exporter is skipped.
        assert one.batches == two.batches == [["a", "b", "c", "d", "e"], ["f"]]
        assert export.exported == 6
        export.put([spans["g"]])  # room again
    finally:
        export.shutdown()
    assert one.batches[-1] == ["g"] and one.shut and two.shut
    assert (export.exported, export.dropped) == (7, 3)


def test_a_tracing_with_exporters_exports_each_ended_trace() -> None:
    recorder, sink = Recorder(), SinkExporter(encode=True)
    tracing = Tracing(exporters=[recorder, sink], batch=ExportBatching(delay=600.0))
    try:
        _framework_trace(tracing)
        tracing.force_flush()
        assert recorder.batches == [["Filter/Remote", "SchedulingCycle", "SchedulePod"]]
        assert sink.spans == 3 and sink.bytes > 0
    finally:
        tracing.shutdown()


class _Plugin:
    def __init__(self, name: str) -> None:
        self.name = name


def _closed_calls(tracing: Tracing) -> tuple[list[Any], list[Span]]:
    """Plugin calls of one context as the scheduling loop leaves them (closed records), and its spans."""
    root = tracing.start_trace("SchedulePod", {"outrigger.pod": "default/web"})
    assert root is not None
    point = root.child("Filter", {"outrigger.extension_point": "Filter"})
    fit, remote = _Info("Filter", _Plugin("NodeResourcesFit")), _Info("Score", _Plugin("Remote"))
    calls = []
    for info, nodes, extra, error in [
        (fit, 5000, (("outrigger.filter.nodes_in", 5000), ("outrigger.filter.nodes_out", 4990),
                     ("outrigger.status.code", "Unschedulable")), None),
        (remote, -1, (("outrigger.status.code", "Success"),), None),
        (remote, -1, (("outrigger.status.code", "Error"), ("outrigger.status.reasons", ("boom", "again")),
                      ("outrigger.status.plugin", "Remote")), "boom"),
        (remote, -1, (), "the plugin call did not return"),
        (remote, -1, (("outrigger.status.code", "Success"),), None),  # the second time from the cache
    ]:
        call = PluginCall(None, info, point, nodes, False)
        call.close(call.start + 1000, extra, error)
        calls.append(call)
    calls[-1].set_attribute("outrigger.remote.cached", True)  # set by the plugin's code: its own span
    calls[-1].add_event("retried", {"attempt": 2})
    point.end()
    root.end()
    return calls, [point, root]


def test_plugin_calls_are_written_from_their_records_as_the_sdk_writes_their_spans() -> None:
    tracing = Tracing()
    try:
        calls, spans = _closed_calls(tracing)
        made = otlp.readable(calls)
        assert [(s.name, dict(s.attributes or {}), s.status.status_code, s.status.description) for s in made] == [
            ("Filter/NodeResourcesFit", {"outrigger.plugin": "NodeResourcesFit", "outrigger.extension_point": "Filter",
                                         "outrigger.filter.nodes_in": 5000, "outrigger.filter.nodes_out": 4990,
                                         "outrigger.status.code": "Unschedulable"}, StatusCode.UNSET, None),
            ("Score/Remote", {"outrigger.plugin": "Remote", "outrigger.extension_point": "Score",
                              "outrigger.status.code": "Success"}, StatusCode.UNSET, None),
            ("Score/Remote", {"outrigger.plugin": "Remote", "outrigger.extension_point": "Score",
                              "outrigger.status.code": "Error", "outrigger.status.reasons": ["boom", "again"],
                              "outrigger.status.plugin": "Remote"}, StatusCode.ERROR, "boom"),
            ("Score/Remote", {"outrigger.plugin": "Remote", "outrigger.extension_point": "Score"}, StatusCode.ERROR,
             "the plugin call did not return"),
            ("Score/Remote", {"outrigger.plugin": "Remote", "outrigger.extension_point": "Score",
                              "outrigger.status.code": "Success", "outrigger.remote.cached": True}, StatusCode.UNSET,
             None),
        ]
        point = spans[0]
        assert [(s.context.span_id, s.parent, s.start_time, s.end_time) for s in made] == [
            (c.span_id, point.context, c.start, c.start + 1000) for c in calls]
        assert [e.name for e in made[-1].events] == ["retried"]
        want = encode_spans(made + spans)
        assert otlp.request(calls + spans) == want
        assert otlp.request(calls + spans) == want  # the shared pieces from the cache
    finally:
        tracing.shutdown()


def test_exporters_that_do_not_take_records_get_spans() -> None:
    recorder, sink = Recorder(), SinkExporter(encode=True)
    store = SpanStore()
    tracing = Tracing(exporters=[recorder, sink], batch=ExportBatching(delay=600.0), store=store)
    try:
        calls, spans = _closed_calls(tracing)
        store.begin(spans[1].trace_id, "default/web")
        tracing.ended_all(calls)
        tracing.drain()
        tracing.force_flush()
        assert recorder.batches == [["Filter", "SchedulePod", "Filter/NodeResourcesFit"] + ["Score/Remote"] * 4]
        assert sink.spans == 7 and sink.bytes == len(otlp.encode(spans + calls))
        assert [s.name for s in store.trace_of("default/web")] == ["Filter/NodeResourcesFit"] + ["Score/Remote"] * 4
    finally:
        tracing.shutdown()


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, ExportBatching(5.0, 512, 2048)),
        ({"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64", "OTEL_BSP_MAX_QUEUE_SIZE": "128"},
         ExportBatching(0.1, 64, 128)),
        ({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4096"}, ExportBatching(5.0, 4096, 4096)),  # the queue holds a batch
    ],
)
def test_batch_settings_come_from_the_sdks_variables(env: dict[str, str], want: ExportBatching) -> None:
    assert TracingConfig.from_env(env).batching == want


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_BSP_SCHEDULE_DELAY": "soon"}, "OTEL_BSP_SCHEDULE_DELAY='soon' is not a whole number"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, "OTEL_BSP_MAX_QUEUE_SIZE='0' must be above 0"),
    ],
)
def test_bad_batch_settings_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(TracingConfigError) as err:
        TracingConfig.from_env(env)
    assert str(err.value) == message


# ---------------------------------------------------------------------------------------------------
# Tail sampling

HALF = 1 << 63  # trace ids below keep a ratio of 0.5 (their low 64 bits are compared, as TraceIdRatioBased does)


def _ctx(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED))


def _context_spans(trace_id: int, result: str, ms: int) -> list[ReadableSpan]:
    """A scheduling context: its root (result, lasting ``ms``) and one child, the child ending first."""
    root = _ctx(trace_id, 1)
    return [ReadableSpan("SchedulingCycle", _ctx(trace_id, 2), root, start_time=0, end_time=1),
            ReadableSpan("SchedulePod", root, None, attributes={"outrigger.result": result}, start_time=0,
                         end_time=ms * 1_000_000)]


# (trace id, result, duration in ms) of six contexts: bound fast below and above the ratio's cut, bound
# slow, unschedulable (a preempting cycle ends so too), an error, a pod deleted while it was scheduled.
CONTEXTS = [(1, "bound", 5), (HALF + 2, "bound", 5), (HALF + 3, "bound", 300), (HALF + 4, "unschedulable", 5),
            (HALF + 5, "error", 1), (HALF + 6, "deleted", 2)]


@pytest.mark.parametrize(
    ("ratio", "slow", "kept"),
    [
        ("0", None, [HALF + 4, HALF + 5, HALF + 6]),
        ("0.5", None, [1, HALF + 4, HALF + 5, HALF + 6]),
        ("1", None, [1, HALF + 2, HALF + 3, HALF + 4, HALF + 5, HALF + 6]),
        (None, "250ms", [HALF + 3, HALF + 4, HALF + 5, HALF + 6]),
        ("0.5", "0.3s", [1, HALF + 3, HALF + 4, HALF + 5, HALF + 6]),
        (None, "301ms", [HALF + 4, HALF + 5, HALF + 6]),
    ],
)
def test_tail_sampling_keeps_failed_and_slow_contexts_and_a_ratio_of_the_rest(
        ratio: str | None, slow: str | None, kept: list[int]) -> None:
    rule = TailSampling.parse(ratio, slow)
    assert rule is not None
    sampler = TailSampler(rule)
    got: list[ReadableSpan] = []
    for trace_id, result, ms in CONTEXTS:
        child, root = _context_spans(trace_id, result, ms)
        got += sampler.select([child])  # waits for its root
        got += sampler.select([root])
    assert [s.context.trace_id for s in got if s.parent is None] == kept
    assert [s.name for s in got] == ["SchedulingCycle", "SchedulePod"] * len(kept)
    assert (sampler.kept, sampler.dropped) == (len(kept), len(CONTEXTS) - len(kept))
    # A span ending after its root follows its trace's decision.
    late = [ReadableSpan("BindingCycle", _ctx(t, 9), _ctx(t, 1)) for t, _, _ in CONTEXTS]
    assert [s.context.trace_id for s in sampler.select(late)] == kept


def test_tail_sampling_by_percentile_keeps_the_slowest_of_recent_contexts() -> None:
    rule = TailSampling.parse("0", "p90")
    assert rule == TailSampling(0.0, 0.0, 90.0)
    sampler = TailSampler(rule)
    kept = []
    for i in range(1, 301):  # durations 1..100 ms, three times over: the 90th percentile of a window is 91 ms
        trace_id = HALF + i
        child, root = _context_spans(trace_id, "bound", (i - 1) % 100 + 1)
        if sampler.select([child, root]):
            kept.append((i - 1) % 100 + 1)
    # No threshold before 100 contexts: the 100th sets it (91 ms) and is decided by it, as are those after.
    assert kept == [100] + list(range(92, 101)) * 2


def test_a_tracing_with_tail_sampling_exports_only_kept_traces_but_stores_all() -> None:
    recorder = Recorder()
    store = SpanStore(10)
    tracing = Tracing(exporters=[recorder], batch=ExportBatching(delay=600.0), tail=TailSampling(0.0), store=store)
    try:
        for pod, result in (("default/fast", "bound"), ("default/failed", "unschedulable")):
            root = tracing.start_trace("SchedulePod", {"outrigger.pod": pod}, pod=pod)
            assert root is not None
            root.child("SchedulingCycle").end()
            root.set_attribute("outrigger.result", result)
            root.end()
        tracing.force_flush()
        assert recorder.batches == [["SchedulingCycle", "SchedulePod"]]
        assert [s.attributes["outrigger.pod"] for s in recorder_spans(tracing, store, "default/failed")] == [
            "default/failed"]
        assert [s.name for s in store.trace_of("default/fast")] == ["SchedulePod", "SchedulingCycle"]
    finally:
        tracing.shutdown()


def recorder_spans(tracing: Tracing, store: SpanStore, pod: str) -> list[ReadableSpan]:
    return [s for s in store.trace_of(pod) if s.parent is None]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"keep_ratio": "most"}, "trace keep ratio 'most' is not a number (a ratio in [0, 1])"),
        ({"keep_ratio": "2"}, "trace keep ratio '2' is outside [0, 1]"),
        ({"keep_slow": "slow"}, "slow trace threshold 'slow' is neither a duration (250ms, 2s) nor a percentile (p99)"),
        ({"keep_slow": "p100"}, "slow trace percentile 'p100' is outside (p0, p100)"),
        ({"keep_slow": "0ms"}, "slow trace threshold '0ms' must be above 0"),
    ],
)
def test_bad_tail_sampling_settings_are_named(flags: dict[str, str], message: str) -> None:
    with pytest.raises(TracingConfigError) as err:
        TracingConfig.from_env({}, **flags)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("env", "flags", "want"),
    [
        ({}, {}, None),
        ({"OUTRIGGER_TRACE_KEEP_RATIO": "0.1"}, {}, TailSampling(0.1)),
        ({"OUTRIGGER_TRACE_KEEP_RATIO": "0.1", "OUTRIGGER_TRACE_KEEP_SLOW": "2s"}, {"keep_slow": "250ms"},
         TailSampling(0.1, 0.25)),
    ],
)
def test_tail_sampling_settings_come_from_env_and_flags(env: dict[str, str], flags: dict[str, str],
                                                        want: TailSampling | None) -> None:
    assert TracingConfig.from_env(env, **flags).tail == want


# ---- the export process -------------------------------------------------------------------------


def _packed_then_written(batch: list[Any], packer: exportproc.Packer, tables: exportproc._Tables) -> tuple[bytes, int]:
    """``batch`` as the export thread packs it and the child writes it (through marshal, as sent)."""
    return exportproc.encode_message(tables, marshal.loads(marshal.dumps(packer.pack(batch))))


def _records_and_spans(tracing: Tracing) -> list[Any]:
    calls, spans = _closed_calls(tracing)
    return spans + calls[:-1]  # plugin calls' records without attributes of their own: the C-level path


@pytest.mark.parametrize("make", [
    _records_and_spans,
    lambda t: [s for part in _closed_calls(t) for s in part],  # a call with its own attributes and events
    lambda t: _framework_trace(t) + _sdk_spans(t),  # links, trace state, resources and scopes of their own
], ids=["records-and-spans", "record-with-own-attributes", "framework-and-sdk-spans"])
def test_the_export_process_writes_the_sdks_encoding_of_the_same_spans(make: Callable[[Tracing], list[Any]]) -> None:
    tracing = Tracing()
    try:
        batch = make(tracing)
        # The child writes, per resource and scope, the plugin calls' spans first, then the others.
        order = [s for s in batch if isinstance(s, otlp.SpanRecord)] + [s for s in batch
                                                                        if not isinstance(s, otlp.SpanRecord)]
        want = encode_spans(otlp.readable(order))
        packer, tables = exportproc.Packer(), exportproc._Tables()
        for _ in range(2):  # the second time with the shared pieces and groups already defined
            body, count = _packed_then_written(batch, packer, tables)
            assert (ExportTraceServiceRequest.FromString(body), count) == (want, len(batch))
            assert len(body) == len(otlp.encode(batch))
    finally:
        tracing.shutdown()


def test_the_packers_tables_start_again_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exportproc, "TABLE_MAX", 2)
    tracing = Tracing()
    try:
        calls, spans = _closed_calls(tracing)
        batch = calls[:-1] + spans
        packer, tables = exportproc.Packer(), exportproc._Tables()
        want = encode_spans(otlp.readable(batch))
        first = packer.pack(batch)
        assert (first[0], len(first[1])) == (False, 4)  # four shared pieces defined
        exportproc.encode_message(tables, first)
        second = packer.pack(batch)
        assert (second[0], len(second[1])) == (True, 4)  # the table was full: both sides start again
        assert ExportTraceServiceRequest.FromString(exportproc.encode_message(tables, second)[0]) == want
    finally:
        tracing.shutdown()


def _traced_contexts(tracing: Tracing, n: int) -> None:
    for _ in range(n):
        _framework_trace(tracing)
        calls, _spans = _closed_calls(tracing)
        tracing.ended_all(calls)
        tracing.drain()


def test_a_tracing_with_an_export_process_exports_as_the_export_thread_does() -> None:
    counts = []
    for process in (False, True):
        sink = SinkExporter(encode=True)
        tracing = Tracing(exporters=[sink], batch=ExportBatching(delay=600.0, max_batch=8), export_process=process)
        try:
            assert (tracing.export is not None and tracing.export.process is not None) == process
            _traced_contexts(tracing, 3)
            tracing.force_flush()
            counts.append((sink.spans, sink.bytes))
        finally:
            tracing.shutdown()
        if process:
            assert tracing.export is not None and tracing.export.process is not None
            assert tracing.export.process._proc.returncode == 0  # stopped with the tracing
    assert counts[0] == counts[1] and counts[0][0] == 3 * (3 + 7)


def test_the_export_thread_takes_over_when_the_export_process_dies() -> None:
    sink = SinkExporter(encode=True)
    tracing = Tracing(exporters=[sink], batch=ExportBatching(delay=600.0), export_process=True)
    try:
        export = tracing.export
        assert export is not None and export.process is not None
        _traced_contexts(tracing, 1)
        tracing.force_flush()
        assert sink.spans == 10
        proc = export.process
        proc._proc.kill()
        proc._proc.wait(10)
        _traced_contexts(tracing, 2)  # its pipe is gone: these are encoded on the export thread
        tracing.force_flush()
        assert export.process is None and sink.spans == 30 and export.exported == 30
    finally:
        tracing.shutdown()


def test_an_otlp_exporter_in_the_export_process_sends_the_trace_to_a_collector() -> None:
    from otlp_sink import OtlpSink

    with OtlpSink() as collector:
        tracing = TracingConfig.from_env({"OUTRIGGER_TRACE_EXPORT_PROCESS": "1", "OTEL_SERVICE_NAME": "fw"},
                                         exporters="otlp", endpoint=collector.endpoint).build()
        assert tracing is not None and tracing.export is not None and tracing.export.process is not None
        try:
            _framework_trace(tracing)
            tracing.force_flush()
            got = collector.wait_for(lambda spans: len(spans) == 3)
        finally:
            tracing.shutdown()
    assert sorted((s.service, s.name, s.kind, s.status, s.events) for s in got) == [
        ("fw", "Filter/Remote", "CLIENT", "ERROR", ("remote plugin failure ignored",)),
        ("fw", "SchedulePod", "INTERNAL", "UNSET", ()),
        ("fw", "SchedulingCycle", "INTERNAL", "UNSET", ()),
    ]
    by_name = {s.name: s for s in got}
    assert by_name["Filter/Remote"].parent_span_id == by_name["SchedulingCycle"].span_id
    assert by_name["SchedulingCycle"].parent_span_id == by_name["SchedulePod"].span_id


@pytest.mark.parametrize(("value", "want"), [("", False), ("0", False), ("1", True), ("true", True), ("off", False)])
def test_the_export_process_is_chosen_by_env(value: str, want: bool) -> None:
    assert TracingConfig.from_env({"OUTRIGGER_TRACE_EXPORT_PROCESS": value}).export_process is want


def test_a_bad_export_process_setting_is_named() -> None:
    with pytest.raises(TracingConfigError, match=r"OUTRIGGER_TRACE_EXPORT_PROCESS='maybe' is neither"):
        TracingConfig.from_env({"OUTRIGGER_TRACE_EXPORT_PROCESS": "maybe"})


# ---- extension points' spans as records ---------------------------------------------------------


def _point_records(tracing: Tracing) -> tuple[list[Any], list[Span]]:
    """Extension points' spans as the wrappers leave them (ended records: attributes, an error with
    and without a message, a list value and an event written on their own, a point run inside a plugin
    call), the call they run in, and the context's spans."""
    root = tracing.start_trace("SchedulePod", {"outrigger.pod": "default/web"})
    assert root is not None
    cycle = root.child("SchedulingCycle")
    filt = PointSpan(cycle, tracing, "Filter", {"outrigger.extension_point": "Filter"})
    filt.attrs.update({"outrigger.filter.nodes_in": 5000, "outrigger.filter.nodes_out": 4990,
                       "outrigger.status.code": "Success"})
    reserve = PointSpan(cycle, tracing, "Reserve", {"outrigger.extension_point": "Reserve"})
    reserve.error("")
    permit = PointSpan(cycle, tracing, "Permit", {"outrigger.extension_point": "Permit"})
    permit.error("boom")
    post = PointSpan(cycle, tracing, "PostFilter", {"outrigger.extension_point": "PostFilter",
                                                   "outrigger.status.reasons": ["no fit", "taint"]})
    post_call = PluginCall(None, _Info("PostFilter", _Plugin("DefaultPreemption")), post, -1, False)
    inner = PointSpan(post_call, tracing, "Filter", {"outrigger.extension_point": "Filter"})
    inner.add_event("retried", {"attempt": 2})
    post_call.close(post_call.start + 1000, (("outrigger.status.code", "Success"),), None)
    points = [filt, reserve, permit, inner, post]
    for point in points:
        point.end()
    cycle.end()
    root.end()
    return [*points, post_call], [cycle, root]


def test_extension_points_are_written_from_their_records_as_the_sdk_writes_their_spans() -> None:
    tracing = Tracing()
    try:
        records, spans = _point_records(tracing)
        made = otlp.readable(records)
        cycle, post_call = spans[0], records[-1]
        assert [(s.name, s.parent.span_id if s.parent else 0, dict(s.attributes or {}), s.status.status_code,
                 s.status.description, [e.name for e in s.events]) for s in made] == [
            ("Filter", cycle.span_id, {"outrigger.extension_point": "Filter", "outrigger.filter.nodes_in": 5000,
                                       "outrigger.filter.nodes_out": 4990, "outrigger.status.code": "Success"},
             StatusCode.UNSET, None, []),
            ("Reserve", cycle.span_id, {"outrigger.extension_point": "Reserve"}, StatusCode.ERROR, None, []),
            ("Permit", cycle.span_id, {"outrigger.extension_point": "Permit"}, StatusCode.ERROR, "boom", []),
            ("Filter", post_call.span_id, {"outrigger.extension_point": "Filter"}, StatusCode.UNSET, None,
             ["retried"]),
            ("PostFilter", cycle.span_id, {"outrigger.extension_point": "PostFilter",
                                           "outrigger.status.reasons": ["no fit", "taint"]}, StatusCode.UNSET, None,
             []),
            ("PostFilter/DefaultPreemption", records[4].span_id, {
                "outrigger.plugin": "DefaultPreemption", "outrigger.extension_point": "PostFilter",
                "outrigger.status.code": "Success"}, StatusCode.UNSET, None, []),
        ]
        assert [(s.context.span_id, s.context.trace_id, s.start_time, s.end_time) for s in made] == [
            (r.span_id, cycle.trace_id, r.start, r.span_end) for r in records]
        assert all(0 < r.start <= r.span_end for r in records)
        want = encode_spans(made + spans)
        assert otlp.request(records + spans) == want
        assert otlp.request(records + spans) == want  # the shared pieces from the cache
        # Through the export process: the records first, as the child writes them.
        packer, tables = exportproc.Packer(), exportproc._Tables()
        for _ in range(2):
            body, count = _packed_then_written(records + spans, packer, tables)
            assert (ExportTraceServiceRequest.FromString(body), count) == (want, 8)
    finally:
        tracing.shutdown()


def test_a_point_record_ends_once() -> None:
    recorder = Recorder()
    tracing = Tracing(exporters=[recorder], batch=ExportBatching(delay=600.0))
    try:
        root = tracing.start_trace("SchedulePod", {})
        assert root is not None
        point = PointSpan(root, tracing, "Bind", {"outrigger.extension_point": "Bind"})
        point.end()
        first = point.span_end
        point.end()  # a second end changes nothing and queues nothing
        root.end()
        tracing.force_flush()
        assert (point.span_end, recorder.batches) == (first, [["Bind", "SchedulePod"]])
        assert point.traceparent() == f"00-{root.trace_id:032x}-{point.span_id:016x}-01"
    finally:
        tracing.shutdown()
