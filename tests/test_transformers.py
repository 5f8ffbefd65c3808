"""Transformers: plugins that change the pod's view (before PreFilter) or node rows' view (before
Filter, Score, PostFilter) for one cycle. In-process and in a plugin host process on 127.0.0.1; the
chain follows the profile's order; nothing of a view reaches the cache or the next cycle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
from koord_plugins import ALL, SHRINK, STAGE, WANT
from test_remote_harness import HostProcess, endpoint, remote_rig, until

from framework.config import load_config
from framework.plugins import Registry, in_tree_registry
from framework.scheduler import Scheduler, explain_pod
from pluginhost.definition import manifest_of
from pluginhost.manifest import parse_objects
from pluginhost.model import CPU, PODS, Node, Pod
from pluginhost.plugin import runs_at
from pluginhost.snapshot import ClusterTable
from pluginhost.view import NodeChange, NodeView, PodChange, ViewError, apply_pod_change, apply_view

MODES = ["inprocess", "remote"]


# ---------------------------------------------------------------------------------------------------
# Views


def _table() -> ClusterTable:
    t = ClusterTable()
    for i in range(3):
        t.upsert_node(Node(f"n{i}", labels={"k": f"v{i}"}, allocatable={CPU: 4000, PODS: 10}))
    t.place_pod(Pod("p", uid="p", requests={CPU: 1000}), "n1")
    return t


VIEW_CASES = [
    ("requested delta frees cpu", NodeView(changes=(NodeChange("n1", requested={CPU: -600, PODS: -1}),)),
     {"requested_cpu": [0, 400, 0], "pods": [0, 0, 0], "alloc_cpu": [4000, 4000, 4000], "labels": ["v0", "v1", "v2"],
      "same_table": True}),
    ("allocatable delta", NodeView(changes=(NodeChange("n2", allocatable={CPU: 1000}),)),
     {"requested_cpu": [0, 1000, 0], "pods": [0, 1, 0], "alloc_cpu": [4000, 4000, 5000], "labels": ["v0", "v1", "v2"],
      "same_table": False}),
    ("labels set and removed in order",
     NodeView(changes=(NodeChange("n0", labels={"k": "x"}), NodeChange("n0", remove_labels=("k",)),
                       NodeChange("n2", labels={"k": "y"}))),
     {"requested_cpu": [0, 1000, 0], "pods": [0, 1, 0], "alloc_cpu": [4000, 4000, 4000], "labels": [None, "v1", "y"],
      "same_table": False}),
    ("added node and pod", NodeView(added_nodes=((99, Node("extra", labels={"k": "e"}, allocatable={CPU: 2000})),),
                                    added_pods=(Pod("q", uid="q", node_name="extra", requests={CPU: 500}),)),
     {"requested_cpu": [0, 1000, 0, 500], "pods": [0, 1, 0, 1], "alloc_cpu": [4000, 4000, 4000, 2000],
      "labels": ["v0", "v1", "v2", "e"], "same_table": False}),
]


@pytest.mark.parametrize(("name", "view", "want"), VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_apply_view_changes_only_the_view(name: str, view: NodeView, want: dict[str, Any]) -> None:
    table = _table()
    base = table.snapshot()
    before = (base.requested.copy(), base.allocatable.copy(), base.row_versions.copy())
    out = apply_view(base, view)
    assert out.generation == base.generation
    assert out.requested_of(CPU).tolist() == want["requested_cpu"]
    assert out.requested_of(PODS).tolist() == want["pods"]
    assert out.allocatable_of(CPU).tolist() == want["alloc_cpu"]
    assert [n.labels.get("k") for n in out.nodes] == want["labels"]
    assert (out.table is base.table) is want["same_table"]
    # The base snapshot and the table behind it are untouched.
    assert np.array_equal(base.requested, before[0]) and np.array_equal(base.allocatable, before[1])
    assert np.array_equal(base.row_versions, before[2])
    assert [n.labels["k"] for n in table.snapshot().nodes] == ["v0", "v1", "v2"]
    assert table.snapshot() is base
    # Changed and added rows get versions no real row has.
    changed = {c.node for c in view.changes} | {n.name for _, n in view.added_nodes}
    for row, node in enumerate(out.nodes):
        assert (int(out.row_versions[row]) < 0) is (node.name in changed)


def test_apply_view_refuses_an_unknown_node() -> None:
    base = _table().snapshot()
    with pytest.raises(ViewError, match="names node 'nope', which is not in the snapshot of generation"):
        apply_view(base, NodeView(changes=(NodeChange("nope", requested={CPU: 1}),)))


def test_apply_pod_change_copies_the_pod() -> None:
    pod = Pod("p", labels={"a": "1", "b": "2"}, annotations={"x": "y"}, requests={CPU: 3000, "memory": 5})
    out = apply_pod_change(pod, PodChange(labels={"c": "3"}, remove_labels=("a",), requests={CPU: 500},
                                          remove_annotations=("x",), node_selector={"zone": "z1"}))
    assert (out.labels, out.annotations, out.requests, out.node_selector) == (
        {"b": "2", "c": "3"}, {}, {CPU: 500, "memory": 5}, {"zone": "z1"})
    assert (pod.labels, pod.annotations, pod.requests, pod.node_selector) == (
        {"a": "1", "b": "2"}, {"x": "y"}, {CPU: 3000, "memory": 5}, {})


# ---------------------------------------------------------------------------------------------------
# Declaring transformers


MANIFEST_CASES = [
    ("ShrinkCpu", {"preFilter"}, {"PRE_FILTER_TRANSFORMER"}),
    ("StageA", {"filter", "score"}, {"FILTER_TRANSFORMER", "SCORE_TRANSFORMER"}),
    ("StageGate", set(), {"FILTER"}),
    ("Heartbeat", set(), {"PRE_FILTER", "CONTROLLER"}),
]


@pytest.mark.parametrize(("name", "only", "enums"), MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_a_transformer_that_does_not_implement_its_point_only_transforms(name: str, only: set[str],
                                                                         enums: set[str]) -> None:
    from pluginhost import pb

    cls = ALL[name]
    got = {pb.plugin.ExtensionPoint.Name(e).removeprefix("EXTENSION_POINT_") for e in manifest_of(cls).points}
    assert got == enums
    inst = cls({}, None)
    for point in ("preFilter", "filter", "score", "postFilter"):
        assert runs_at(inst, point) is (point not in only)


# ---------------------------------------------------------------------------------------------------
# Scheduling with transformers


def config(profiles: dict[str, list[str]]) -> str:
    lines = ["apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
             "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 1", "profiles:"]
    for name, enabled in profiles.items():
        lines += [f"- schedulerName: {name}", "  plugins:", "    multiPoint:", "      enabled:"]
        lines += [f"      - name: {p}" for p in enabled]
    return "\n".join(lines) + "\n"


PROFILES = {
    "default-scheduler": ["ShrinkCpu", "StageA", "StageB", "StageGate", "StageScore"],
    "reversed": ["StageB", "StageA", "StageGate", "StageScore"],
    "ungated": ["StageA", "StageB", "StageScore"],
    "plain": ["StageGate"],
    "post": ["MarkNodes", "PostFilterProbe"],
}


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def pod(name: str, cpu: str, annotations: dict[str, str] | None = None, profile: str = "default-scheduler",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations or {},
                         "labels": labels or {}},
            "spec": {"schedulerName": profile,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def objects(*docs: dict[str, Any]) -> list[Pod | Node]:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}), "test.json")


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    with HostProcess("koord_plugins:PLUGINS") as proc:
        yield proc.address


@asynccontextmanager
async def scheduler(mode: str, address: str) -> AsyncIterator[Scheduler]:
    text = config(PROFILES)
    if mode == "inprocess":
        reg: Registry = in_tree_registry()
        for name in ("ShrinkCpu", "StageA", "StageB", "StageGate", "StageScore", "MarkNodes", "PostFilterProbe"):
            reg.register_class(ALL[name])
        yield Scheduler(load_config(text, reg.points()), reg, seed=0)
        return
    rig = await remote_rig([endpoint("koord", address)], lambda r: load_config(text, r.points()))
    try:
        yield rig.scheduler
    finally:
        await rig.close()


async def schedule(s: Scheduler, objs: list[Pod | Node], names: list[str]) -> None:
    await s.apply(objs)
    task = asyncio.create_task(s.run())
    try:
        def done() -> bool:
            recs = [s.get_pod("default", n) for n in names]
            settled = all(r is not None and (r.phase == "Bound" or r.last_status is not None) for r in recs)
            return settled and not s.leaks()["binding_cycles"]
        await until(done, 20, f"pods {names} settled")
    finally:
        await s.stop()
        await asyncio.wait_for(task, 5)


def state(s: Scheduler, name: str) -> tuple[str, str, str]:
    rec = s.get_pod("default", name)
    assert rec is not None
    reason = rec.last_status.reasons[0] if rec.last_status is not None and rec.phase != "Bound" else ""
    return rec.phase, rec.pod.node_name, reason


@pytest.mark.parametrize("mode", MODES)
def test_a_pod_transformer_lets_a_pod_pass_filter_without_changing_the_cache(mode: str, host: str) -> None:
    async def go() -> None:
        async with scheduler(mode, host) as s:
            # 3 CPUs fit no 2-CPU node; the transformer makes the cycle see 1 CPU.
            objs = objects(node("n0"), pod("big", "3", {SHRINK: "1000"}), pod("plain", "3", profile="plain"))
            await schedule(s, objs, ["big", "plain"])
            assert state(s, "big") == ("Bound", "n0", "")
            assert state(s, "plain")[:2] == ("Unschedulable", "")
            assert "Insufficient cpu" in state(s, "plain")[2]
            snap = s.cache.snapshot()
            placed = snap.pods[snap.row("n0")]  # type: ignore[index]
            # The cache holds the pod as applied: its own requests and labels.
            assert [(p.name, p.requests[CPU], p.labels) for p in placed] == [("big", 3000, {})]
            assert snap.requested_of(CPU).tolist() == [3000]
            assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}

    asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
def test_node_transformers_chain_in_profile_order_and_do_not_leak(mode: str, host: str) -> None:
    async def go() -> None:
        async with scheduler(mode, host) as s:
            objs = objects(node("n0"), node("n1", labels={STAGE: "x"}),
                           pod("first", "100m", {WANT: "ab"}), pod("second", "100m", {WANT: "ab"}),
                           pod("backwards", "100m", {WANT: "ab"}, profile="reversed"))
            await schedule(s, objs, ["first", "second", "backwards"])
            # StageA then StageB: n0 reads "ab" (n1 "xab"). A view leaking into the next cycle would
            # make the second pod see "abab".
            assert state(s, "first") == ("Bound", "n0", "")
            assert state(s, "second") == ("Bound", "n0", "")
            assert state(s, "backwards") == (
                "Unschedulable", "", "0/2 nodes are available: 2 node(s) had the wrong stage. "
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
            snap = s.cache.snapshot()
            assert [n.labels for n in snap.nodes] == [{}, {STAGE: "x"}]
            assert s.nodes["n1"].labels == {STAGE: "x"}

    asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
def test_score_transformers_chain_in_order_in_explain(mode: str, host: str) -> None:
    async def go() -> None:
        async with scheduler(mode, host) as s:
            await s.apply(objects(node("n0"), node("n1", labels={STAGE: "x"})))
            probe = objects(pod("probe", "100m", {WANT: "ab"}, profile="ungated"))[0]
            assert isinstance(probe, Pod)
            got = await explain_pod(s.profiles["ungated"], s.cache.snapshot(), probe)
            assert {n: e["scores"]["StageScore"]["raw"] for n, e in got["nodes"].items()} == {"n0": 100, "n1": 0}
            assert got["selected"] == "n0"
            backwards = objects(pod("probe", "100m", {WANT: "ba"}, profile="ungated"))[0]
            assert isinstance(backwards, Pod)
            got = await explain_pod(s.profiles["ungated"], s.cache.snapshot(), backwards)
            assert {n: e["scores"]["StageScore"]["raw"] for n, e in got["nodes"].items()} == {"n0": 0, "n1": 0}
            # Explain left nothing behind either.
            assert [n.labels for n in s.cache.snapshot().nodes] == [{}, {STAGE: "x"}]

    asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
def test_a_post_filter_transformer_changes_what_post_filter_plugins_see(mode: str, host: str) -> None:
    async def go() -> None:
        async with scheduler(mode, host) as s:
            await schedule(s, objects(node("n0"), pod("huge", "8", profile="post")), ["huge"])
            phase, where, reason = state(s, "huge")
            assert (phase, where) == ("Unschedulable", "")
            assert reason.endswith("post-filter saw seen on n0")
            assert [n.labels for n in s.cache.snapshot().nodes] == [{}]

    asyncio.run(go())
