"""A PodGroup cycle's trace (GenericWorkload and TopologyAwareWorkloadScheduling on): one trace per group
cycle rooted at SchedulePodGroup, with the placements tried, each pod's cycle inside its placement, the
PlacementGenerate and PlacementScore calls (a remote plugin's as a CLIENT span whose host's server span is
its child, across processes over OTLP), the pods' Reserve and Permit, their binding cycles, and the outcome;
nothing of it when tracing is off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_sink import CollectedSpan, OtlpSink
from test_observability_e2e import host_env
from test_podgroup_cycle import gang, gpod, make, node, run
from test_remote_harness import HostProcess, endpoint, remote_rig
from test_remote_placement import NODES, config_for, gang_cycle

from framework import features
from framework.observe.instrument import instrument
from framework.observe.tracing import SpanStore, Tracing

HOST = "placement-host"


@pytest.fixture(autouse=True)
def topology_aware() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(previous)


def tree(spans: list[ReadableSpan], keep: Any = lambda s: True) -> list[str]:
    """The spans as an indented outline, children in start order, each "name[ key=value...]"."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    out: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        if not keep(span):
            return
        a = span.attributes or {}
        label = " ".join(f"{k.removeprefix('outrigger.')}={a[k]}" for k in ("outrigger.placement", "outrigger.pod")
                         if k in a)
        out.append("  " * depth + span.name + (f" {label}" if label else ""))
        for c in children.get(span.context.span_id, []):
            walk(c, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return out


async def run_gang(address: str, tracing: Tracing | None) -> tuple[list[str], Any]:
    rig = await remote_rig([endpoint("shared", address)], config_for)
    s = rig.scheduler
    try:
        if tracing is not None:
            instrument(s, tracing=tracing)
        _, landed = await gang_cycle(s, NODES, 2, explain=False)
        return landed, s
    finally:
        await rig.close()


# The group's trace down to its extension points (the plugin spans of each pod's points left out).
GROUP_TRACE = [
    "SchedulePodGroup",
    "  PodGroupSchedulingCycle",
    "    PlacementGenerate",
    "      PlacementGenerate/TopologyPlacementGenerator",
    *(line for rack in ("rack-a", "rack-b") for line in (
        f"    Placement placement={rack}",
        "      SchedulePodInGroup pod=default/p0",
        "        PreFilter", "        Filter", "        PreScore", "        Score", "        Reserve",
        # The last pod's single feasible node needs no scoring.
        "      SchedulePodInGroup pod=default/p1",
        "        PreFilter", "        Filter", "        Reserve",
        # The placement's assumptions undone before the next is tried.
        "    Unreserve", "    Unreserve",
    )),
    "    PlacementScore",
    "      PlacementScore/NodeResourcesFit placement=rack-a",
    "      PlacementScore/NodeResourcesFit placement=rack-b",
    "      PlacementScore/PodGroupPodsCount placement=rack-a",
    "      PlacementScore/PodGroupPodsCount placement=rack-b",
    "      PlacementScore/SharedLabelPlacement placement=rack-a",
    "      PlacementScore/SharedLabelPlacement placement=rack-b",
    "      NormalizePlacementScore/PodGroupPodsCount",
    *(line for p in ("p0", "p1") for line in (
        f"    PrepareForBinding pod=default/{p}", "      Reserve", "      Permit", "        Permit/GangScheduling")),
    # p0 waits at GangScheduling's Permit until p1 arrives.
    "  BindingCycle pod=default/p0", "    WaitOnPermit", "    PreBind", "    Bind", "      Bind/DefaultBinder",
    "    PostBind",
    "  BindingCycle pod=default/p1", "    PreBind", "    Bind", "      Bind/DefaultBinder", "    PostBind",
]


def _not_a_pods_plugin(span: ReadableSpan) -> bool:
    """Leaves out the plugin spans under a pod's own points (those of a pod's trace, tested there)."""
    return not (span.name.split("/")[0] in ("PreFilter", "Filter", "PreScore", "Score") and "/" in span.name)


def test_a_group_cycle_is_one_trace_with_its_placements_pods_and_the_remote_plugins_host_spans() -> None:
    exporter = InMemorySpanExporter()
    store = SpanStore(10)
    tracing = Tracing([SimpleSpanProcessor(exporter)], store=store)
    with OtlpSink() as sink:
        with HostProcess("pluginhost.examples.sharedlabel:SharedLabelPlacement", env=host_env(sink, HOST)) as host:
            landed, _ = asyncio.run(run_gang(host.address, tracing))
        # SIGTERM made the host flush its spans.
        host_spans: list[CollectedSpan] = sink.wait_for(
            lambda spans: len([s for s in spans if s.service == HOST]) >= 2, 30)
    tracing.shutdown()
    assert landed == ["b1", "b2"]
    spans = list(exporter.get_finished_spans())
    assert len({s.context.trace_id for s in spans}) == 1  # one trace for the whole group cycle
    assert tree(spans, _not_a_pods_plugin) == GROUP_TRACE
    # `outrigger trace` of a member (or of the group) shows the group's cycle.
    for key in ("default/p0", "default/p1", "podgroup/default/g"):
        assert sorted(s.context.span_id for s in store.trace_of(key)) == sorted(s.context.span_id for s in spans)
    by_name: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    (root,) = by_name["SchedulePodGroup"]
    (cycle,) = by_name["PodGroupSchedulingCycle"]
    cycle_id = "podgroup/default/g:1:1"
    assert dict(root.attributes or {}) == {
        "k8s.namespace.name": "default", "outrigger.podgroup": "default/g", "outrigger.podgroup.name": "g",
        "outrigger.profile": "default-scheduler", "outrigger.attempt": 1,
        "outrigger.podgroup.pods": ["default/p0", "default/p1"], "outrigger.podgroup.min_count": 2,
        "outrigger.cycle_id": cycle_id, "outrigger.snapshot.generation": 4, "outrigger.result": "bound",
        "outrigger.podgroup.placement": "rack-b", "outrigger.status.code": "Success",
        "outrigger.podgroup.assignments": ["default/p0=b2", "default/p1=b1"], "outrigger.podgroup.bound": 2,
    }
    assert dict(cycle.attributes or {}) == {
        "outrigger.cycle_id": cycle_id, "outrigger.snapshot.generation": 4, "outrigger.result": "scheduled",
        "outrigger.podgroup.placement": "rack-b", "outrigger.status.code": "Success",
    }
    assert [dict(s.attributes or {}) for s in by_name["Placement"]] == [
        {"outrigger.placement": rack, "outrigger.placement.nodes": 2, "outrigger.placement.pods_placed": 2,
         "outrigger.status.code": "Success"} for rack in ("rack-a", "rack-b")]
    assert [(dict(s.attributes or {})["outrigger.pod"], dict(s.attributes or {})["outrigger.selected_node"])
            for s in by_name["SchedulePodInGroup"]] == [
        ("default/p0", "a2"), ("default/p1", "a1"), ("default/p0", "b2"), ("default/p1", "b1")]
    assert [(dict(s.attributes or {})["outrigger.pod"], dict(s.attributes or {})["outrigger.result"])
            for s in by_name["BindingCycle"]] == [("default/p0", "bound"), ("default/p1", "bound")]

    # The remote plugin's calls: CLIENT spans, each the parent of the host's server span of that call.
    calls = by_name["PlacementScore/SharedLabelPlacement"]
    assert [(s.kind.name, dict(s.attributes or {})) for s in calls] == [
        ("CLIENT", {"outrigger.plugin": "SharedLabelPlacement", "outrigger.extension_point": "PlacementScore",
                    "outrigger.remote.endpoint": "shared", "outrigger.status.code": "Success",
                    "outrigger.placement": rack}) for rack in ("rack-a", "rack-b")]
    served = {s.parent_span_id: s for s in host_spans if s.service == HOST}
    assert sorted(served) == sorted(f"{s.context.span_id:016x}" for s in calls)
    for call in calls:
        got = served[f"{call.context.span_id:016x}"]
        rack = dict(call.attributes or {})["outrigger.placement"]
        assert (got.trace_id, got.name, got.kind) == (
            f"{root.context.trace_id:032x}", "outrigger.v1.Plugin/PlacementScore", "SERVER")
        assert (got.attributes["outrigger.plugin"], got.attributes["outrigger.cycle_id"]) == (
            "SharedLabelPlacement", f"{cycle_id}/placement/{rack}")


def test_without_tracing_a_group_cycle_makes_no_span_and_schedules_the_same() -> None:
    with HostProcess("pluginhost.examples.sharedlabel:SharedLabelPlacement") as host:
        landed, s = asyncio.run(run_gang(host.address, None))
    assert landed == ["b1", "b2"]
    # Nothing was wrapped: the scheduler's own methods.
    assert "schedule_group" not in vars(s) and "_simulate_pod" not in vars(s)


def test_an_unschedulable_group_cycles_trace_says_why_and_has_no_binding_cycle() -> None:
    # 3 pods of 1 cpu, minCount 3, room for 2 (no placements: TopologyAwareWorkloadScheduling off).
    features.install(features.parse("GenericWorkload=true"))
    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])

    async def main() -> None:
        s = make()
        instrument(s, tracing=tracing)
        await run(s, [gang("g", 3)], [node("n1", cpu="1"), node("n2", cpu="1"),
                                      *(gpod(f"p{i}", "1", "g") for i in range(3))])

    asyncio.run(main())
    tracing.shutdown()
    spans = list(exporter.get_finished_spans())
    first = min((s for s in spans if s.name == "SchedulePodGroup"), key=lambda s: s.start_time or 0)
    trace = [s for s in spans if s.context.trace_id == first.context.trace_id]
    assert [line for line in tree(trace) if not line.startswith("      ")] == [
        "SchedulePodGroup",
        "  PodGroupSchedulingCycle",
        "    SchedulePodInGroup pod=default/p0",
        "    SchedulePodInGroup pod=default/p1",
        "    SchedulePodInGroup pod=default/p2",
        "    Unreserve", "    Unreserve",  # p0's and p1's Reserve undone: all or nothing
        "    PodGroupPostFilter",
    ]
    group = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    a = dict(first.attributes or {})
    assert {k: a[k] for k in ("outrigger.result", "outrigger.status.code", "outrigger.status.reasons")} == {
        "outrigger.result": "unschedulable", "outrigger.status.code": "Unschedulable",
        "outrigger.status.reasons": [group, ""],  # the condition's message: PodGroupPostFilter adds ""
    }
    assert "outrigger.podgroup.assignments" not in a and "outrigger.podgroup.bound" not in a
    pods = {dict(s.attributes or {})["outrigger.pod"]: dict(s.attributes or {}) for s in trace
            if s.name == "SchedulePodInGroup"}
    assert [p["outrigger.status.code"] for p in pods.values()] == ["Success", "Success", "Unschedulable"]
    assert sorted(p.get("outrigger.selected_node", "") for p in pods.values()) == ["", "n1", "n2"]
    assert pods["default/p2"]["outrigger.status.reasons"] == ["0/2 nodes are available: 2 Insufficient cpu."]
