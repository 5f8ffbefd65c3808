"""DefaultPreemption: victims, the choice of node, nomination, and the preemptor binding afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.plugins.defaultpreemption import DefaultPreemption
from framework.plugins.noderesources import PluginArgsError
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import EV_DELETED, EV_NOMINATED, EV_PREEMPTED, Scheduler
from pluginhost.manifest import node_from_dict, pod_from_dict


def node(name: str, cpu: str = "4", unschedulable: bool = False) -> Any:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "spec": {"unschedulable": unschedulable},
                           "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "20"}}})


def pod(name: str, cpu: str, priority: int = 0, node_name: str = "", started: str = "2026-01-01T00:00:00Z",
        **spec: Any) -> Any:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": started},
        "spec": {"priority": priority, "nodeName": node_name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec},
    })


async def run_until(s: Scheduler, names: list[str], phase: str, limit: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        recs = [s.get_pod("default", n) for n in names]
        if all(r is not None and r.phase == phase for r in recs):
            return
        await asyncio.sleep(0.01)
    got = {n: (r.phase if (r := s.get_pod("default", n)) else None) for n in names}
    raise AssertionError(f"pods did not reach {phase}: {got}")


def scenario(nodes: list[Any], placed: list[Any], preemptor: Any, expect_phase: str = "Bound") -> Scheduler:
    async def main() -> Scheduler:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=11)
        await s.apply(nodes + placed)
        task = asyncio.get_running_loop().create_task(s.run())
        await s.apply([preemptor])
        await run_until(s, [preemptor.name], expect_phase)
        await s.drain()
        await s.stop()
        task.cancel()
        return s

    return asyncio.run(asyncio.wait_for(main(), 20))


def deleted(s: Scheduler) -> list[str]:
    return sorted(ev.name for ev in s.recent_events() if ev.type == EV_DELETED and ev.kind == "Pod")


# Each case: the cluster (nodes with bound pods) and the victims the preemptor must evict.
CASES = [
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 10, "n1"), pod("a2", "2", 10, "n1"), pod("b1", "2", 5, "n2"),
         pod("b2", "2", 5, "n2", started="2026-02-01T00:00:00Z")],
        pod("hi", "2", 100), "n2", ["b2"],  # b1 started earlier: more important, reprieved first
        id="lowest-highest-victim-priority-wins-and-one-victim-is-enough",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 5, "n1"), pod("a2", "2", 1, "n1"), pod("b1", "2", 5, "n2"), pod("b2", "2", 3, "n2")],
        pod("hi", "4", 100), "n1", ["a1", "a2"],
        id="same-highest-priority-then-smallest-priority-sum",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "1", 1, "n1"), pod("a2", "1", 1, "n1"), pod("a3", "2", 9, "n1"),
         pod("b1", "2", 1, "n2"), pod("b2", "2", 9, "n2")],
        pod("hi", "2", 100), "n2", ["b1"],
        id="reprieve-keeps-the-more-important-pod-and-fewer-victims-win",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "4", 1, "n1", started="2026-01-01T00:00:00Z"),
         pod("b1", "4", 1, "n2", started="2026-03-01T00:00:00Z")],
        pod("hi", "4", 100), "n2", ["b1"],
        id="tie-broken-by-latest-start-of-most-important-victim",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "preemptor", "node_name", "victims"), CASES)
def test_preemption_evicts_the_right_victims_and_the_preemptor_binds(
    nodes: list[Any], placed: list[Any], preemptor: Any, node_name: str, victims: list[str]
) -> None:
    s = scenario(nodes, placed, preemptor)
    rec = s.get_pod("default", preemptor.name)
    assert rec is not None and rec.pod.node_name == node_name
    assert deleted(s) == victims
    events = s.recent_events()
    assert sorted(ev.name for ev in events if ev.type == EV_PREEMPTED) == victims
    assert [ev.node_name for ev in events if ev.type == EV_NOMINATED] == [node_name]
    assert rec.nominated_node == ""  # cleared once bound
    assert s.nominated == {}
    assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}


@pytest.mark.parametrize(
    ("nodes", "placed", "preemptor", "message"),
    [
        pytest.param([node("n1", "2")], [pod("a", "2", 100, "n1")], pod("p", "2", 100),
                     "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 "
                     "nodes are available: 1 No preemption victims found for incoming pod.",
                     id="no-lower-priority-pods"),
        pytest.param([node("n1", "2")], [pod("a", "2", 0, "n1")], pod("p", "2", 100, preemptionPolicy="Never"),
                     "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
                     "preemption: not eligible due to preemptionPolicy=Never.", id="policy-never"),
        pytest.param([node("n1", "2", unschedulable=True), node("n2", "2")], [pod("a", "1", 100, "n2")],
                     pod("p", "2", 100),
                     "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. no new claims "
                     "to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for "
                     "incoming pod, 1 Preemption is not helpful for scheduling.",
                     id="unresolvable-nodes-are-not-candidates"),
    ],
)
def test_no_preemption_leaves_victims_alone_with_a_clear_reason(
    nodes: list[Any], placed: list[Any], preemptor: Any, message: str
) -> None:
    s = scenario(nodes, placed, preemptor, expect_phase="Unschedulable")
    rec = s.get_pod("default", preemptor.name)
    assert rec is not None and rec.last_status is not None
    assert list(rec.last_status.reasons) == [message]
    assert deleted(s) == []
    assert s.nominated == {}


def test_nominated_room_is_not_taken_by_a_lower_priority_pod() -> None:
    async def main() -> Scheduler:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=5)
        await s.apply([node("n1", "2"), pod("victim", "2", 0, "n1")])
        task = asyncio.get_running_loop().create_task(s.run())
        await s.apply([pod("hi", "2", 100)])
        # Preempted and nominated, but still backing off (1 s) when the low-priority pod arrives.
        for _ in range(200):
            if s.nominated:
                break
            await asyncio.sleep(0.01)
        assert s.nominated == {"uid-hi": "n1"}
        assert s.get_pod("default", "hi").phase == "Pending"  # type: ignore[union-attr]
        await s.apply([pod("low", "2", 1)])
        await run_until(s, ["hi"], "Bound", limit=10)
        await s.drain()
        await s.stop()
        task.cancel()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    hi, low = s.get_pod("default", "hi"), s.get_pod("default", "low")
    assert hi is not None and hi.pod.node_name == "n1"
    assert low is not None and low.phase == "Unschedulable" and low.pod.node_name == ""
    assert deleted(s) == ["victim"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage: Invalid value: 101"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute: Invalid value: -1"),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "cannot both be zero"),
        ({"bogus": 1}, "unknown args field(s) ['bogus']"),
    ],
)
def test_bad_args_are_refused(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        DefaultPreemption(args)


@pytest.mark.parametrize(("nodes", "expected"), [(10, 10), (100, 100), (500, 100), (5000, 500), (0, 0)])
def test_number_of_candidates_follows_kube_scheduler(nodes: int, expected: int) -> None:
    assert DefaultPreemption().num_candidates(nodes) == expected
