"""The framework's spans as exporters get them: the SDK's ReadableSpan with every field filled, and the
exact span tree of one pod's scheduling context (names, nesting, kinds and attributes)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import StatusCode
from test_observability import bound, in_process
from test_remote_examples import config, nodes, objects, pod
from test_remote_harness import until

from framework.observe.observability import ObservabilityConfig
from framework.observe.tracing import READABLE_SPAN_FIELDS, SCOPE, Span, Tracing
from framework.service import Server


def test_span_sets_every_field_of_the_sdks_readable_span() -> None:
    assert set(vars(ReadableSpan("x"))) == READABLE_SPAN_FIELDS
    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])
    try:
        root = tracing.start_trace("SchedulePod", {"outrigger.pod": "default/p"})
        assert root is not None
        child = root.child("Filter/X", {"outrigger.plugin": "X"}, SpanKind.CLIENT)
        child.add_event("remote plugin failure ignored", {"plugin": "X"})
        child.error("RuntimeError: boom")
        child.end()
        child.end()  # a second end changes nothing and exports nothing
        root.end()
        tracing.force_flush()
    finally:
        tracing.shutdown()
    got = exporter.get_finished_spans()
    assert [s.name for s in got] == ["Filter/X", "SchedulePod"]
    for span, parent in ((got[0], root), (got[1], None)):
        assert isinstance(span, Span) and set(vars(span)) >= READABLE_SPAN_FIELDS
        # What the SDK's constructor makes of the same values.
        want = ReadableSpan(
            name=span.name, context=SpanContext(span.trace_id, span.span_id, False, TraceFlags(TraceFlags.SAMPLED)),
            parent=parent.context if parent is not None else None, resource=tracing.resource,
            attributes=dict(span.attributes or {}), events=span.events, kind=span.kind, status=span.status,
            start_time=span.start_time, end_time=span.end_time, instrumentation_scope=SCOPE,
        )
        fields = sorted(READABLE_SPAN_FIELDS - {"_events"})
        assert [getattr(span, k) for k in fields] == [getattr(want, k) for k in fields]
        assert span.events == want.events
        assert span.to_json() == want.to_json()
        assert span.context.is_valid and span.context.trace_flags.sampled and not span.context.is_remote
        assert span.start_time is not None and span.end_time is not None and 0 < span.start_time <= span.end_time
    child_span, root_span = got
    assert child_span.context.trace_id == root_span.context.trace_id
    assert child_span.parent == root_span.context and root_span.parent is None
    assert (child_span.kind, child_span.status.status_code, child_span.status.description) == (
        SpanKind.CLIENT, StatusCode.ERROR, "RuntimeError: boom")
    assert [(e.name, dict(e.attributes or {})) for e in child_span.events] == [
        ("remote plugin failure ignored", {"plugin": "X"})]
    assert (root_span.kind, root_span.status.status_code, root_span.events) == (SpanKind.INTERNAL, StatusCode.UNSET, ())
    assert child.traceparent() == f"00-{child_span.context.trace_id:032x}-{child_span.context.span_id:016x}-01"


# The trace of one pod bound on the first of two equal nodes with the default plugins (seed 1).
WEB_TRACE: list[tuple[str, dict[str, Any]]] = [
    ('SchedulePod', {'k8s.pod.name': 'web', 'k8s.namespace.name': 'default', 'k8s.pod.uid': 'uid-web',
        'outrigger.pod': 'default/web', 'outrigger.profile': 'default-scheduler', 'outrigger.attempt': 1,
        'outrigger.cycle_id': 'uid-web:1:1', 'outrigger.snapshot.generation': 2, 'outrigger.result': 'bound',
        'outrigger.feasible_nodes': 2, 'outrigger.selected_node': 'n0', 'outrigger.status.code': 'Success'}),
    ('  SchedulingCycle', {'outrigger.cycle_id': 'uid-web:1:1', 'outrigger.snapshot.generation': 2,
        'outrigger.result': 'scheduled', 'outrigger.feasible_nodes': 2, 'outrigger.selected_node': 'n0',
        'outrigger.status.code': 'Success'}),
    ('    PreFilter', {'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Success'}),
    ('      PreFilter/NodeName', {'outrigger.plugin': 'NodeName', 'outrigger.extension_point': 'PreFilter',
        'outrigger.status.code': 'Success'}),
    ('      PreFilter/NodeUnschedulable', {'outrigger.plugin': 'NodeUnschedulable',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Success'}),
    ('      PreFilter/TaintToleration', {'outrigger.plugin': 'TaintToleration',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Success'}),
    ('      PreFilter/NodeAffinity', {'outrigger.plugin': 'NodeAffinity', 'outrigger.extension_point': 'PreFilter',
        'outrigger.status.code': 'Skip'}),
    ('      PreFilter/NodePorts', {'outrigger.plugin': 'NodePorts', 'outrigger.extension_point': 'PreFilter',
        'outrigger.status.code': 'Skip'}),
    ('      PreFilter/NodeResourcesFit', {'outrigger.plugin': 'NodeResourcesFit',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Success'}),
    ('      PreFilter/VolumeRestrictions', {'outrigger.plugin': 'VolumeRestrictions',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/NodeVolumeLimits', {'outrigger.plugin': 'NodeVolumeLimits',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/VolumeBinding', {'outrigger.plugin': 'VolumeBinding',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/VolumeZone', {'outrigger.plugin': 'VolumeZone',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/PodTopologySpread', {'outrigger.plugin': 'PodTopologySpread',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/InterPodAffinity', {'outrigger.plugin': 'InterPodAffinity',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/DynamicResources', {'outrigger.plugin': 'DynamicResources',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('      PreFilter/NodeDeclaredFeatures', {'outrigger.plugin': 'NodeDeclaredFeatures',
        'outrigger.extension_point': 'PreFilter', 'outrigger.status.code': 'Skip'}),
    ('    Filter', {'outrigger.extension_point': 'Filter', 'outrigger.filter.nodes_in': 2,
        'outrigger.filter.to_find': 2, 'outrigger.filter.nodes_examined': 2, 'outrigger.filter.nodes_out': 2,
        'outrigger.status.code': 'Success'}),
    ('      Filter/NodeName', {'outrigger.plugin': 'NodeName', 'outrigger.extension_point': 'Filter',
        'outrigger.filter.nodes_in': 2, 'outrigger.filter.nodes_out': 2, 'outrigger.status.code': 'Success'}),
    ('      Filter/NodeUnschedulable', {'outrigger.plugin': 'NodeUnschedulable',
        'outrigger.extension_point': 'Filter', 'outrigger.filter.nodes_in': 2, 'outrigger.filter.nodes_out': 2,
        'outrigger.status.code': 'Success'}),
    ('      Filter/TaintToleration', {'outrigger.plugin': 'TaintToleration', 'outrigger.extension_point': 'Filter',
        'outrigger.filter.nodes_in': 2, 'outrigger.filter.nodes_out': 2, 'outrigger.status.code': 'Success'}),
    ('      Filter/NodeResourcesFit', {'outrigger.plugin': 'NodeResourcesFit',
        'outrigger.extension_point': 'Filter', 'outrigger.filter.nodes_in': 2, 'outrigger.filter.nodes_out': 2,
        'outrigger.status.code': 'Success'}),
    ('    PreScore', {'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Success'}),
    ('      PreScore/TaintToleration', {'outrigger.plugin': 'TaintToleration',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Success'}),
    ('      PreScore/NodeAffinity', {'outrigger.plugin': 'NodeAffinity', 'outrigger.extension_point': 'PreScore',
        'outrigger.status.code': 'Skip'}),
    ('      PreScore/NodeResourcesFit', {'outrigger.plugin': 'NodeResourcesFit',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Success'}),
    ('      PreScore/VolumeBinding', {'outrigger.plugin': 'VolumeBinding',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Success'}),
    ('      PreScore/PodTopologySpread', {'outrigger.plugin': 'PodTopologySpread',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Skip'}),
    ('      PreScore/InterPodAffinity', {'outrigger.plugin': 'InterPodAffinity',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Skip'}),
    ('      PreScore/NodeResourcesBalancedAllocation', {'outrigger.plugin': 'NodeResourcesBalancedAllocation',
        'outrigger.extension_point': 'PreScore', 'outrigger.status.code': 'Success'}),
    ('    Score', {'outrigger.extension_point': 'Score', 'outrigger.score.nodes': 2,
        'outrigger.status.code': 'Success'}),
    ('      Score/TaintToleration', {'outrigger.plugin': 'TaintToleration', 'outrigger.extension_point': 'Score',
        'outrigger.status.code': 'Success'}),
    ('      NormalizeScore/TaintToleration', {'outrigger.plugin': 'TaintToleration',
        'outrigger.extension_point': 'NormalizeScore', 'outrigger.status.code': 'Success'}),
    ('      Score/NodeResourcesFit', {'outrigger.plugin': 'NodeResourcesFit', 'outrigger.extension_point': 'Score',
        'outrigger.status.code': 'Success'}),
    ('      Score/VolumeBinding', {'outrigger.plugin': 'VolumeBinding', 'outrigger.extension_point': 'Score',
        'outrigger.status.code': 'Success'}),
    ('      Score/DynamicResources', {'outrigger.plugin': 'DynamicResources', 'outrigger.extension_point': 'Score',
        'outrigger.status.code': 'Success'}),
    ('      NormalizeScore/DynamicResources', {'outrigger.plugin': 'DynamicResources',
        'outrigger.extension_point': 'NormalizeScore', 'outrigger.status.code': 'Success'}),
    ('      Score/NodeResourcesBalancedAllocation', {'outrigger.plugin': 'NodeResourcesBalancedAllocation',
        'outrigger.extension_point': 'Score', 'outrigger.status.code': 'Success'}),
    ('      Score/ImageLocality', {'outrigger.plugin': 'ImageLocality', 'outrigger.extension_point': 'Score',
        'outrigger.status.code': 'Success'}),
    ('    Reserve', {'outrigger.extension_point': 'Reserve', 'outrigger.status.code': 'Success'}),
    ('      Reserve/VolumeBinding', {'outrigger.plugin': 'VolumeBinding',
        'outrigger.extension_point': 'Reserve', 'outrigger.status.code': 'Success'}),
    ('      Reserve/DynamicResources', {'outrigger.plugin': 'DynamicResources', 'outrigger.extension_point': 'Reserve',
        'outrigger.status.code': 'Success'}),
    ('    Permit', {'outrigger.extension_point': 'Permit', 'outrigger.status.code': 'Success'}),
    ('  BindingCycle', {'outrigger.result': 'bound', 'outrigger.status.code': 'Success'}),
    # Neither PreBind plugin has work for a pod without volumes or claims: their PreBindPreFlight
    # answers Skip, so PreBind calls neither (kube-scheduler's SkipPreBindPlugins).
    ('    PreBind', {'outrigger.extension_point': 'PreBind', 'outrigger.status.code': 'Success'}),
    ('    Bind', {'outrigger.extension_point': 'Bind', 'outrigger.status.code': 'Success',
        'outrigger.status.plugin': 'DefaultBinder'}),
    ('      Bind/DefaultBinder', {'outrigger.plugin': 'DefaultBinder', 'outrigger.extension_point': 'Bind',
        'outrigger.status.code': 'Success'}),
    ('    PostBind', {'outrigger.extension_point': 'PostBind', 'outrigger.status.code': 'Success'}),
]


def test_the_span_tree_of_one_pod_is_exact() -> None:
    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])

    async def test(server: Server) -> None:
        await server.scheduler.apply(objects(*nodes(2), pod("web")))
        await until(bound(server, "web"), 30, "web bound")

    in_process(config([], {}), test, ObservabilityConfig(tracing=tracing))
    tracing.shutdown()
    spans = exporter.get_finished_spans()
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)

    def walk(span: ReadableSpan, depth: int, out: list[tuple[str, dict[str, Any]]]) -> None:
        out.append(("  " * depth + span.name, dict(span.attributes or {})))
        assert span.context is not None
        for c in sorted(children.get(span.context.span_id, []), key=lambda s: s.start_time or 0):
            walk(c, depth + 1, out)

    roots = children[None]
    assert len(roots) == 1
    got: list[tuple[str, dict[str, Any]]] = []
    walk(roots[0], 0, got)
    assert got == WEB_TRACE
    assert len(spans) == len(WEB_TRACE)  # every span is in the tree
    assert {(s.kind, s.status.status_code, s.resource, s.instrumentation_scope) for s in spans} == {
        (SpanKind.INTERNAL, StatusCode.UNSET, tracing.resource, SCOPE)}
    assert len({s.context.trace_id for s in spans if s.context}) == 1


def test_plugin_calls_are_observed_by_the_runtime_not_wrapped() -> None:
    """The runtime tells ``Framework.observer`` about each plugin call: code running in the call records on
    the call's span (attributes, events, the traceparent a remote request would carry, whose span id is the
    exported span's), a raising plugin's span is an error, and sampled calls are timed for the metric."""
    import asyncio

    from test_runtime import PROFILE, drive, fake, make_scheduler, manifest, raises

    from framework.observe import tracing as fw_tracing
    from framework.observe.instrument import instrument
    from framework.observe.metrics import SchedulerMetrics
    from pluginhost.status import SUCCESS

    seen: list[str] = []

    def marks(pod: Any) -> Any:
        span = fw_tracing.get_current_span()
        span.set_attribute("marker.pod", pod.name)
        span.add_event("marked", {"n": 1})
        carrier: dict[str, str] = {}
        fw_tracing.inject(carrier)
        seen.append(carrier["traceparent"])
        return None  # PreScore answers Success

    async def run() -> tuple[list[ReadableSpan], Any]:
        s, _ = make_scheduler([fake("Marker", "preScore", preScore=lambda pod: marks(pod) or SUCCESS),
                               fake("Broken", "reserve", reserve=raises("boom"))], fit=False)
        assert s.profiles[PROFILE].observer is None  # nothing observes an uninstrumented scheduler
        exporter = InMemorySpanExporter()
        tracing = Tracing([SimpleSpanProcessor(exporter)])
        metrics = SchedulerMetrics(plugin_sample_percent=100)
        instrument(s, tracing=tracing, metrics=metrics)
        assert s.profiles[PROFILE].observer is not None

        async def first_attempt(sched: Any) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not any(sp.name == "SchedulePod" for sp in exporter.get_finished_spans()):
                assert loop.time() < deadline, "no scheduling context ended"
                tracing.force_flush()
                await asyncio.sleep(0.01)

        # The pod fails at Reserve and settles in the backoff queue once a traced attempt has ended.
        await asyncio.wait_for(drive(s, manifest(["n0", "n1"], ["web"]), first_attempt), 60)
        tracing.shutdown()
        return list(exporter.get_finished_spans()), metrics

    spans, metrics = asyncio.run(run())
    first = min((s for s in spans if s.name == "SchedulePod"), key=lambda s: s.start_time or 0)
    assert first.context is not None
    trace = [s for s in spans if s.context is not None and s.context.trace_id == first.context.trace_id]
    marker = [s for s in trace if s.name == "PreScore/Marker"]
    broken = [s for s in trace if s.name == "Reserve/Broken"]
    assert len(marker) == 1 and len(broken) == 1
    m, b = marker[0], broken[0]
    points = {s.name: s for s in trace if s.name in ("PreScore", "Reserve")}
    assert m.parent == points["PreScore"].context and b.parent == points["Reserve"].context
    assert dict(m.attributes or {}) == {"outrigger.plugin": "Marker", "outrigger.extension_point": "PreScore",
                                        "outrigger.status.code": "Success", "marker.pod": "web"}
    assert [(e.name, dict(e.attributes or {})) for e in m.events] == [("marked", {"n": 1})]
    assert m.context is not None
    assert seen[0] == f"00-{m.context.trace_id:032x}-{m.context.span_id:016x}-01"
    assert dict(b.attributes or {}) == {"outrigger.plugin": "Broken", "outrigger.extension_point": "Reserve"}
    assert (b.status.status_code, b.status.description) == (StatusCode.ERROR, "RuntimeError: boom")
    assert m.start_time is not None and m.end_time is not None and b.start_time is not None
    assert points["PreScore"].start_time <= m.start_time <= m.end_time <= points["PreScore"].end_time  # type: ignore[operator]
    reg = metrics.registry
    attempts = len(seen)  # every attempt ran PreScore once, Reserve once (sampled at 100%)
    for plugin, point, status in (("Marker", "PreScore", "Success"), ("Broken", "Reserve", "Error")):
        got = reg.get_sample_value("scheduler_plugin_execution_duration_seconds_count",
                                   {"plugin": plugin, "extension_point": point, "status": status})
        assert got == attempts, (plugin, point, got, attempts)


def test_a_traces_spans_reach_the_processors_when_its_root_ends() -> None:
    import time as _time

    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])
    try:
        root = tracing.start_trace("SchedulePod", {})
        assert root is not None
        cycle = root.child("SchedulingCycle")
        cycle.child("Filter").end()
        cycle.end()
        root.end()  # in the same call, no flush: the whole trace is handed over as the root ends
        assert [s.name for s in exporter.get_finished_spans()] == ["Filter", "SchedulingCycle", "SchedulePod"]
        late = root.child("Late")  # a span ending after its root: the fallback thread hands it over
        late.end()
        deadline = _time.monotonic() + 30
        while len(exporter.get_finished_spans()) < 4:
            assert _time.monotonic() < deadline, "the late span never reached the processor"
            _time.sleep(0.01)
        assert [s.name for s in exporter.get_finished_spans()][3:] == ["Late"]
    finally:
        tracing.shutdown()
