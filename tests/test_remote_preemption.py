"""Preemption with a remote Filter plugin: the plugin is asked "would the pod fit without these
victims?" on the same what-if the in-process plugins see (the victims travel as
``CycleContext.node_view.removed_pods``, which its host applies to its snapshot mirror), and the
nominator's "with the pods nominated here" check likewise (``added_pods``)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from test_remote_harness import endpoint, remote_rig, until

from framework.config import load_config
from framework.whatif import node_pods_view, with_node_pods
from pluginhost.host import PluginHost
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, NodeBatch
from pluginhost.status import Code
from pluginhost.view import NodeView, ViewError, apply_view

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: PrioritySort}
      - {name: NodeResourcesFit}
      - {name: NoBlocker}
      - {name: DefaultPreemption}
      - {name: DefaultBinder}
      disabled:
      - {name: "*"}
"""


class NoBlocker(FilterPlugin):
    """Keeps pods off nodes that hold a pod labelled ``role: blocker`` (it reads the node's pods from
    its snapshot mirror, so only a view can tell it a blocker is gone)."""

    name = "NoBlocker"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        pods = batch.snapshot.pods
        blocked = np.fromiter(
            (any(p.labels.get("role") == "blocker" for p in pods[r]) for r in batch.rows.tolist()),
            dtype=np.bool_, count=len(batch),
        )
        return FilterResult.from_mask(blocked, Code.Unschedulable, "node(s) had a blocker")


def node(name: str, cpu: str = "4") -> Any:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "20"}}})


def pod(name: str, priority: int = 0, node_name: str = "", labels: dict[str, str] | None = None) -> Any:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"priority": priority, "nodeName": node_name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}]},
    })


def test_remote_filter_sees_the_victims_gone_and_the_preemptor_binds_after_them() -> None:
    async def main() -> dict[str, Any]:
        host = await PluginHost([NoBlocker], listen="127.0.0.1:0").start()
        rig = await remote_rig([endpoint("blockers", host.address)], lambda reg: load_config(CONFIG, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            # n0 holds a low-priority blocker and a high-priority bystander; n1 holds an important blocker.
            await s.apply([node("n0"), node("n1"),
                           pod("blocker", 0, "n0", {"role": "blocker"}), pod("bystander", 2000, "n0"),
                           pod("guard", 5000, "n1", {"role": "blocker"})])
            await s.apply([pod("vip", 1000)])
            await until(lambda: s.pods["uid-vip"].phase == "Bound", 15, "vip to bind")
            await s.drain(5)
            preempted = [ev.name for ev in s.recent_events() if ev.type == "Preempted"]
            return {"vip": s.pods["uid-vip"].pod.node_name, "preempted": preempted,
                    "left": sorted(r.pod.name for r in s.pods.values()), "leaks": s.leaks()}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    got = asyncio.run(main())
    # Only the blocker was evicted (the remote plugin said the pod fits n0 without it; n1's blocker
    # is more important than vip); vip landed where it went.
    assert got["preempted"] == ["blocker"]
    assert got["vip"] == "n0"
    assert got["left"] == ["bystander", "guard", "vip"]
    assert got["leaks"] == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}


# ---- the view itself ------------------------------------------------------------------------------


def _snapshot(placed: tuple[tuple[str, str, str], ...] = (("a", "n0", "100m"), ("b", "n0", "100m"),
                                                          ("c", "n1", "100m"))) -> Any:
    """A cache's snapshot of nodes n0 and n1 holding ``placed`` (name, node, cpu request) pods."""
    from framework.cache import Cache

    cache = Cache()
    for n in (node("n0"), node("n1")):
        cache.add_node(n)
    for name, node_name, cpu in placed:
        cache.add_pod(_sized(name, node_name, cpu))
    return cache.snapshot()


def _sized(name: str, node_name: str, cpu: str) -> Pod:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    })


def test_node_pods_view_gives_the_snapshot_of_a_cache_that_holds_those_pods() -> None:
    # The what-if (pod a evicted from n0, x nominated there) against a cache where that really happened.
    snap = _snapshot()
    row = snap.row("n0")
    assert row is not None
    target = [p for p in snap.pods[row] if p.name == "b"] + [_sized("x", "", "300m")]
    view = node_pods_view(snap, row, target)
    assert [u for u, _ in view.removed_pods] == ["uid-a"]
    assert [(p.name, p.node_name) for p in view.added_pods] == [("x", "n0")]
    want = _snapshot((("b", "n0", "100m"), ("x", "n0", "300m"), ("c", "n1", "100m")))
    for seen in (apply_view(snap, view), with_node_pods(snap, row, target)):
        assert sorted(p.name for p in seen.pods[row]) == ["b", "x"]
        for r in ("n0", "n1"):
            at, there = seen.row(r), want.row(r)
            assert seen.requested[at].tolist() == want.requested[there].tolist(), r
            assert seen.non_zero_requested[at].tolist() == want.non_zero_requested[there].tolist(), r
        assert seen.row_versions[row] < 0  # a fresh what-if version: per-row caches redo the row
    assert snap.requested[row, snap.columns["cpu"]] == 200  # the base snapshot untouched


def test_a_view_removing_a_pod_the_node_does_not_hold_is_an_error() -> None:
    snap = _snapshot()
    with pytest.raises(ViewError, match="removes pod 'uid-c' from node 'n0', which does not hold it"):
        apply_view(snap, NodeView(removed_pods=(("uid-c", "n0"),)))
