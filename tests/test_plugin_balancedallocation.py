"""NodeResourcesBalancedAllocation: scores, Skip for best-effort pods, args.

Scores follow kube-scheduler v1.37's ``balancedResourceScorer(requested, allocated, allocatable)``:
a node's balance is ``int64((1 - std) * 100)`` over the fractions requested/allocatable (real
requests, placed pods by their real requests too), capped at 1, ``std`` of them (``|f1 - f2| / 2``
for two); the score is the change the pod brings, ``50 + (50 + with - without) / 2`` (Go integer
division). Each expected value was computed with upstream's function in Go, written below as
``with, without -> score``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from framework.plugins.balancedallocation import NodeResourcesBalancedAllocation
from framework.plugins.noderesources import PluginArgsError
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code

GPU = "example.com/gpu"


def node(name: str, **allocatable: str) -> Node:
    alloc = {"pods": "110", **{GPU if k == "gpu" else k: v for k, v in allocatable.items()}}
    return node_from_dict({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "app"}
    if requests:
        c["resources"] = {"requests": {GPU if k == "gpu" else k: v for k, v in requests.items()}}
    return c


def pod(name: str, *containers: dict[str, Any], **spec: Any) -> Pod:
    return pod_from_dict(
        {"metadata": {"name": name, "uid": name}, "spec": {"containers": list(containers) or [container()], **spec}}
    )


def cluster(nodes: list[Node], placed: Sequence[tuple[Pod, str]] = ()) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    for p, where in placed:
        assert table.place_pod(p, where)
    return table.snapshot()


def all_rows(snap: Snapshot) -> NodeBatch:
    return NodeBatch(snap, np.arange(len(snap), dtype=np.int64))


def run(plugin: NodeResourcesBalancedAllocation, p: Pod, snap: Snapshot) -> list[int]:
    async def go() -> list[int]:
        state = CycleState(snapshot=snap)
        status = await plugin.pre_score(state, p, all_rows(snap))
        assert status.ok, status
        return [int(s) for s in await plugin.score(state, p, all_rows(snap))]

    return asyncio.run(go())


# Node "a": 4 CPU, 10000 bytes, a pod using 1 CPU and 2000 bytes. Node "b": 6 CPU, 10000 bytes, empty.
NODES = [node("a", cpu="4", memory="10000"), node("b", cpu="6", memory="10000")]
PLACED = [(pod("on-a", container(cpu="1", memory="2000")), "a")]

CASES: list[tuple[str, dict[str, Any], list[Node], list[tuple[Pod, str]], Pod, list[int]]] = [
    # a: 0.5 and 0.6 with the pod -> 95, 0.25 and 0.2 without -> 97: 50 + (50 + 95 - 97) / 2 = 74;
    # b: 1/6 and 0.4 -> 88, empty -> 100: 50 + 38 / 2 = 69
    ("two-resources", {}, NODES, PLACED, pod("p", container(cpu="1", memory="4000")), [74, 69]),
    # memory is still scored from what the node has: a 0.5 and 0.2 -> 85, 97 without -> 69;
    # b 1/6 and 0 -> 91, 100 -> 70
    ("pod-requests-cpu-only", {}, NODES, PLACED, pod("p", container(cpu="1")), [69, 70]),
    # a pod that evens the node out scores above 75: 0.75 and 0.6 -> 92, 0.25 and 0.6 -> 82 -> 80
    (
        "pod-evens-the-node-out",
        {},
        [node("n", cpu="4", memory="10000")],
        [(pod("mem-heavy", container(cpu="1", memory="6000")), "n")],
        pod("p", container(cpu="2")),
        [80],
    ),
    # a pod that changes nothing in balance: one fraction only (memory has no allocatable) -> 75
    (
        "no-change-in-balance",
        {},
        [node("n", cpu="4")],
        [],
        pod("p", container(cpu="1", memory="1000")),
        [75],
    ),
    # 1400/4000 = 0.35 and 0.55: exactly 90 in real numbers, 89 in float64 as kube-scheduler computes;
    # 50 + (50 + 89 - 100) / 2 = 69 (90 would give 70)
    (
        "float64-like-kube-scheduler",
        {},
        [node("n", cpu="4", memory="10000")],
        [],
        pod("p", container(cpu="1400m", memory="5500")),
        [69],
    ),
    # placed pods without requests count as nothing here (no non-zero defaults): 0.25 and 0.3 -> 97,
    # 100 without -> 73
    (
        "no-defaults-for-best-effort-neighbours",
        {},
        [node("n", cpu="4", memory="10000")],
        [(pod("be"), "n")],
        pod("p", container(cpu="1", memory="3000")),
        [73],
    ),
    # fractions are capped at 1: cpu 6000/4000 -> 1, memory 0.1 -> std 0.45 -> 55; without the pod
    # 1 and 0 -> 50: 50 + 55 / 2 = 77
    (
        "fraction-capped-at-one",
        {},
        [node("n", cpu="4", memory="10000")],
        [(pod("big", container(cpu="5")), "n")],
        pod("p", container(cpu="1", memory="1000")),
        [77],
    ),
    # a resource the node has none of is left out; one fraction left has no deviation: 100 and 100
    (
        "resource-without-allocatable",
        {},
        [node("n", cpu="4")],
        [],
        pod("p", container(cpu="3", memory="1000")),
        [75],
    ),
    # init containers and overhead count: max(2000, 2500) + 0 cpu, 4000 + 1000 memory -> 0.625, 0.5
    # -> 93, 100 without -> 71
    (
        "pod-requests-include-init-and-overhead",
        {},
        [node("n", cpu="4", memory="10000")],
        [],
        pod(
            "p",
            container(cpu="2", memory="4000"),
            initContainers=[container("init", cpu="2500m")],
            overhead={"memory": "1000"},
        ),
        [71],
    ),
    # three resources: 0.5, 0.6, 0.5 -> mean 0.533, std 0.0471 -> 95 on "a", 0.25, 0.2, 0.25 -> 97
    # without -> 74; "b" has no gpu: 1/6 and 0.4 -> 88 with the two-resource formula -> 69
    (
        "three-resources",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]},
        [node("a", cpu="4", memory="10000", gpu="4"), node("b", cpu="6", memory="10000")],
        [(pod("on-a", container(cpu="1", memory="2000", gpu="1")), "a")],
        pod("p", container(cpu="1", memory="4000", gpu="1")),
        [74, 69],
    ),
    # 0.75, 0.3, 0.125: std 0.263 -> 73; without 0.5, 0.2, 0 -> 79: 50 + 44 / 2 = 72
    (
        "three-resources-spread",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 1}]},
        [node("c", cpu="4", memory="10000", gpu="8")],
        [(pod("on-c", container(cpu="2", memory="2000")), "c")],
        pod("p", container(cpu="1", memory="1000", gpu="1")),
        [72],
    ),
    # a scalar resource the pod does not request is left out (two-resource formula on both nodes)
    (
        "unrequested-extended-resource",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]},
        [node("a", cpu="4", memory="10000", gpu="4"), node("b", cpu="6", memory="10000")],
        [(pod("on-a", container(cpu="1", memory="2000", gpu="3")), "a")],
        pod("p", container(cpu="1", memory="4000")),
        [74, 69],
    ),
    # only cpu configured: a single fraction never deviates, with or without the pod
    ("single-resource", {"resources": [{"name": "cpu"}]}, NODES, PLACED, pod("p", container(cpu="1")), [75, 75]),
    # "pods" is not scored by kube-scheduler: only cpu is left
    (
        "pods-resource-ignored",
        {"resources": [{"name": "cpu"}, {"name": "pods"}]},
        NODES,
        PLACED,
        pod("p", container(cpu="1")),
        [75, 75],
    ),
]


@pytest.mark.parametrize(
    ("args", "nodes", "placed", "incoming", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_score(
    args: dict[str, Any], nodes: list[Node], placed: list[tuple[Pod, str]], incoming: Pod, want: list[int]
) -> None:
    snap = cluster(nodes, placed)
    assert run(NodeResourcesBalancedAllocation(args), incoming, snap) == want


def test_score_answers_the_batch_rows_in_order() -> None:
    snap = cluster(NODES, PLACED)
    plugin = NodeResourcesBalancedAllocation()
    p = pod("p", container(cpu="1", memory="4000"))
    state = CycleState(snapshot=snap)
    asyncio.run(plugin.pre_score(state, p, all_rows(snap)))
    scores = asyncio.run(plugin.score(state, p, NodeBatch(snap, np.asarray([1, 0], dtype=np.int64))))
    assert scores.dtype == np.int64
    assert scores.tolist() == [69, 74]


@pytest.mark.parametrize(
    ("args", "incoming"),
    [
        ({}, pod("p")),
        ({}, pod("p", container(gpu="1"))),  # requests nothing the plugin scores
        ({}, pod("p", container(cpu="0", memory="0"))),
        ({"resources": [{"name": GPU}]}, pod("p", container(cpu="1"))),
    ],
    ids=["best-effort", "only-other-resources", "explicit-zeros", "configured-resource-not-requested"],
)
def test_pre_score_skips_pods_requesting_none_of_the_resources(args: dict[str, Any], incoming: Pod) -> None:
    snap = cluster(NODES, PLACED)
    plugin = NodeResourcesBalancedAllocation(args)
    state = CycleState(snapshot=snap)
    status = asyncio.run(plugin.pre_score(state, incoming, all_rows(snap)))
    assert status.code == Code.Skip
    assert "PreScoreNodeResourcesBalancedAllocation" not in state
    # Score without PreScore state scores such a pod 0 everywhere, as kube-scheduler does.
    assert asyncio.run(plugin.score(state, incoming, all_rows(snap))).tolist() == [0, 0]


def test_score_without_pre_score_computes_the_requests() -> None:
    snap = cluster(NODES, PLACED)
    plugin = NodeResourcesBalancedAllocation()
    p = pod("p", container(cpu="1", memory="4000"))
    assert asyncio.run(plugin.score(CycleState(snapshot=snap), p, all_rows(snap))).tolist() == [74, 69]


def test_pre_score_state_survives_clone() -> None:
    snap = cluster(NODES, PLACED)
    plugin = NodeResourcesBalancedAllocation()
    p = pod("p", container(cpu="1", memory="4000"))
    state = CycleState(snapshot=snap)
    asyncio.run(plugin.pre_score(state, p, all_rows(snap)))
    assert asyncio.run(plugin.score(state.clone(), p, all_rows(snap))).tolist() == [74, 69]


def test_args_defaults() -> None:
    assert NodeResourcesBalancedAllocation().resources == ("cpu", "memory")
    assert NodeResourcesBalancedAllocation({"resources": []}).resources == ("cpu", "memory")
    zero = NodeResourcesBalancedAllocation(
        {
            "kind": "NodeResourcesBalancedAllocationArgs",
            "resources": [
                {"name": "memory", "weight": 0},
                {"name": GPU},
            ],
        }
    )
    assert zero.resources == ("memory", GPU)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name: duplicate value 'cpu'"),
        ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight: 2: must be 1"),
        ({"resources": [{"weight": 1}]}, "resources[0].name is required"),
        ({"resources": {"name": "cpu"}}, "must be a list"),
        ({"resources": ["cpu"]}, "resources[0] must be a mapping"),
        ({"resource": [{"name": "cpu"}]}, "unknown field 'resource'"),
    ],
    ids=["duplicate", "weight-not-one", "missing-name", "not-a-list", "not-a-mapping", "unknown-field"],
)
def test_bad_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError, match="NodeResourcesBalancedAllocation") as err:
        NodeResourcesBalancedAllocation(args)
    assert message in str(err.value)
