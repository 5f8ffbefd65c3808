"""NodeResourcesBalancedAllocation: scores, Skip for best-effort pods, args.

Scores follow kube-scheduler's ``balancedResourceScorer``: fractions requested/allocatable with the
pod (its real requests, placed pods by their real requests too), capped at 1, ``std`` of them
(``|f1 - f2| / 2`` for two), ``int((1 - std) * 100)`` in float64.
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
    # a: 2000/4000 = 0.5, 6000/10000 = 0.6 -> std 0.05 -> 95; b: 1/6 and 0.4 -> std 0.1167 -> 88
    ("two-resources", {}, NODES, PLACED, pod("p", container(cpu="1", memory="4000")), [95, 88]),
    # memory is still scored from what the node has: a 0.5 and 0.2 -> 85; b 1/6 and 0 -> 91
    ("pod-requests-cpu-only", {}, NODES, PLACED, pod("p", container(cpu="1")), [85, 91]),
    # 1400/4000 = 0.35 and 0.55: exactly 90 in real numbers, 89 in float64 as kube-scheduler computes
    (
        "float64-like-kube-scheduler",
        {},
        [node("n", cpu="4", memory="10000")],
        [],
        pod("p", container(cpu="1400m", memory="5500")),
        [89],
    ),
    # placed pods without requests count as nothing here (no non-zero defaults): 0.25 and 0.3 -> 97
    (
        "no-defaults-for-best-effort-neighbours",
        {},
        [node("n", cpu="4", memory="10000")],
        [(pod("be"), "n")],
        pod("p", container(cpu="1", memory="3000")),
        [97],
    ),
    # fractions are capped at 1: cpu 6000/4000 -> 1, memory 0.1 -> std 0.45 -> 55
    (
        "fraction-capped-at-one",
        {},
        [node("n", cpu="4", memory="10000")],
        [(pod("big", container(cpu="5")), "n")],
        pod("p", container(cpu="1", memory="1000")),
        [55],
    ),
    # a resource the node has none of is left out; one fraction left has no deviation
    (
        "resource-without-allocatable",
        {},
        [node("n", cpu="4")],
        [],
        pod("p", container(cpu="3", memory="1000")),
        [100],
    ),
    # init containers and overhead count: max(2000, 2500) + 0 cpu, 4000 + 1000 memory -> 0.625, 0.5 -> 93
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
        [93],
    ),
    # three resources: 0.5, 0.6, 0.5 -> mean 0.533, std 0.0471 -> 95 on "a";
    # "b" has no gpu: 1/6 and 0.4 -> 88 with the two-resource formula
    (
        "three-resources",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]},
        [node("a", cpu="4", memory="10000", gpu="4"), node("b", cpu="6", memory="10000")],
        [(pod("on-a", container(cpu="1", memory="2000", gpu="1")), "a")],
        pod("p", container(cpu="1", memory="4000", gpu="1")),
        [95, 88],
    ),
    # 0.75, 0.3, 0.125: std 0.263 -> 73
    (
        "three-resources-spread",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 1}]},
        [node("c", cpu="4", memory="10000", gpu="8")],
        [(pod("on-c", container(cpu="2", memory="2000")), "c")],
        pod("p", container(cpu="1", memory="1000", gpu="1")),
        [73],
    ),
    # a scalar resource the pod does not request is left out (two-resource formula on both nodes)
    (
        "unrequested-extended-resource",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]},
        [node("a", cpu="4", memory="10000", gpu="4"), node("b", cpu="6", memory="10000")],
        [(pod("on-a", container(cpu="1", memory="2000", gpu="3")), "a")],
        pod("p", container(cpu="1", memory="4000")),
        [95, 88],
    ),
    # only cpu configured: a single fraction never deviates
    ("single-resource", {"resources": [{"name": "cpu"}]}, NODES, PLACED, pod("p", container(cpu="1")), [100, 100]),
    # "pods" is not scored by kube-scheduler: only cpu is left
    (
        "pods-resource-ignored",
        {"resources": [{"name": "cpu"}, {"name": "pods"}]},
        NODES,
        PLACED,
        pod("p", container(cpu="1")),
        [100, 100],
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
    assert scores.tolist() == [88, 95]


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
    assert asyncio.run(plugin.score(CycleState(snapshot=snap), p, all_rows(snap))).tolist() == [95, 88]


def test_pre_score_state_survives_clone() -> None:
    snap = cluster(NODES, PLACED)
    plugin = NodeResourcesBalancedAllocation()
    p = pod("p", container(cpu="1", memory="4000"))
    state = CycleState(snapshot=snap)
    asyncio.run(plugin.pre_score(state, p, all_rows(snap)))
    assert asyncio.run(plugin.score(state.clone(), p, all_rows(snap))).tolist() == [95, 88]


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
