"""NodeResourcesFit: Filter reasons and codes, the three scoring strategies, args, queueing hints.

Expected values follow kube-scheduler's ``noderesources`` package (fit.go, least_allocated.go,
most_allocated.go, requested_to_capacity_ratio.go, resource_allocation.go); CPU is in millicores,
everything else in whole units.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from framework.dra.models import DeviceClass
from framework.plugins.noderesources import (
    NodeResourcesFit,
    PluginArgsError,
    broken_linear,
    is_extended_resource_name,
    is_scalar_resource_name,
)
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import ActionType, ClusterEvent, CycleState, NodeBatch, QueueingHint
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code, Status

MI = 2**20
GPU = "example.com/gpu"

# ---- builders --------------------------------------------------------------------------------


def node(name: str, **allocatable: str) -> Node:
    """A node with the given allocatable (``ephemeral_storage`` and ``example_com_gpu`` spelled
    Python-style); 110 pods unless ``pods`` is given."""
    alloc = {"pods": "110"}
    for key, value in allocatable.items():
        alloc[_resource(key)] = value
    return node_from_dict({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def _resource(key: str) -> str:
    return {"ephemeral_storage": "ephemeral-storage", "gpu": GPU, "hugepages_2Mi": "hugepages-2Mi"}.get(key, key)


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "app"}
    if requests:
        c["resources"] = {"requests": {_resource(k): v for k, v in requests.items()}}
    return c


def pod(name: str, *containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any) -> Pod:
    body: dict[str, Any] = {"containers": list(containers) or [container()], **spec}
    if init:
        body["initContainers"] = list(init)
    return pod_from_dict({"metadata": {"name": name, "uid": name}, "spec": body})


def cluster(nodes: list[Node], placed: Sequence[tuple[Pod, str]] = ()) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    for p, where in placed:
        assert table.place_pod(p, where)
    return table.snapshot()


def run_filter(plugin: NodeResourcesFit, p: Pod, snap: Snapshot) -> list[Status]:
    async def go() -> list[Status]:
        state = CycleState(snapshot=snap)
        _, status = await plugin.pre_filter(state, p)
        assert status.ok
        result = await plugin.filter(state, p, NodeBatch(snap, np.arange(len(snap), dtype=np.int64)))
        return [result.status_at(i) for i in range(len(result))]

    return asyncio.run(go())


def run_score(plugin: NodeResourcesFit, p: Pod, snap: Snapshot, *, pre_score: bool = True) -> list[int]:
    async def go() -> list[int]:
        state = CycleState(snapshot=snap)
        batch = NodeBatch(snap, np.arange(len(snap), dtype=np.int64))
        if pre_score:
            assert (await plugin.pre_score(state, p, batch)).ok
        return [int(s) for s in await plugin.score(state, p, batch)]

    return asyncio.run(go())


# ---- Filter ----------------------------------------------------------------------------------

SMALL = dict(cpu="1", memory="2000", ephemeral_storage="3000", gpu="2")
UNSCHED = Code.Unschedulable
UNRESOLVABLE = Code.UnschedulableAndUnresolvable

FILTER_CASES: list[tuple[str, dict[str, str], list[Pod], Pod, dict[str, Any], Code, tuple[str, ...]]] = [
    # (id, node allocatable, pods already on the node, incoming pod, args, code, reasons)
    ("fits", SMALL, [], pod("p", container(cpu="500m", memory="1000")), {}, Code.Success, ()),
    (
        "fits-exactly",
        SMALL,
        [pod("a", container(cpu="600m", memory="1500"))],
        pod("p", container(cpu="400m", memory="500", ephemeral_storage="3000", gpu="2")),
        {},
        Code.Success,
        (),
    ),
    ("too-many-pods", {**SMALL, "pods": "1"}, [pod("a")], pod("p"), {}, UNSCHED, ("Too many pods",)),
    ("no-pods-allowed", {**SMALL, "pods": "0"}, [], pod("p"), {}, UNSCHED, ("Too many pods",)),
    (
        "insufficient-cpu",
        SMALL,
        [pod("a", container(cpu="800m"))],
        pod("p", container(cpu="300m")),
        {},
        UNSCHED,
        ("Insufficient cpu",),
    ),
    (
        "cpu-larger-than-node-is-unresolvable",
        SMALL,
        [],
        pod("p", container(cpu="1500m")),
        {},
        UNRESOLVABLE,
        ("Insufficient cpu",),
    ),
    (
        "insufficient-memory",
        SMALL,
        [pod("a", container(memory="1500"))],
        pod("p", container(memory="501")),
        {},
        UNSCHED,
        ("Insufficient memory",),
    ),
    (
        "insufficient-ephemeral-storage",
        SMALL,
        [pod("a", container(ephemeral_storage="2000"))],
        pod("p", container(ephemeral_storage="1001")),
        {},
        UNSCHED,
        ("Insufficient ephemeral-storage",),
    ),
    (
        "insufficient-extended-resource",
        SMALL,
        [pod("a", container(gpu="2"))],
        pod("p", container(gpu="1")),
        {},
        UNSCHED,
        (f"Insufficient {GPU}",),
    ),
    (
        "extended-resource-the-node-lacks",
        {"cpu": "1", "memory": "2000"},
        [],
        pod("p", container(gpu="1")),
        {},
        UNRESOLVABLE,
        (f"Insufficient {GPU}",),
    ),
    (
        "every-reason-in-kube-scheduler-order",
        {**SMALL, "pods": "1"},
        [pod("a", container(cpu="1", memory="2000", ephemeral_storage="3000", gpu="2"))],
        pod("p", container(cpu="1m", memory="1", ephemeral_storage="1", gpu="1")),
        {},
        UNSCHED,
        (
            "Too many pods",
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
            f"Insufficient {GPU}",
        ),
    ),
    (
        "one-unresolvable-reason-makes-the-node-unresolvable",
        SMALL,
        [pod("a", container(cpu="900m"))],
        pod("p", container(cpu="200m", memory="5000")),
        {},
        UNRESOLVABLE,
        ("Insufficient cpu", "Insufficient memory"),
    ),
    (
        "scalar-resources-in-name-order",
        {**SMALL, "example.com/aaa": "1"},
        [],
        pod("p", container(gpu="3", **{"example.com/aaa": "2"})),
        {},
        UNRESOLVABLE,
        ("Insufficient example.com/aaa", f"Insufficient {GPU}"),
    ),
    (
        "hugepages-are-checked",
        {**SMALL, "hugepages_2Mi": "4Mi"},
        [pod("a", container(hugepages_2Mi="4Mi", memory="1"))],
        pod("p", container(hugepages_2Mi="2Mi", memory="1")),
        {},
        UNSCHED,
        ("Insufficient hugepages-2Mi",),
    ),
    (
        "ignored-resource",
        SMALL,
        [pod("a", container(gpu="2"))],
        pod("p", container(gpu="5")),
        {"ignoredResources": [GPU]},
        Code.Success,
        (),
    ),
    (
        "ignored-resource-group",
        {"cpu": "1", "memory": "2000"},
        [],
        pod("p", container(gpu="5")),
        {"ignoredResourceGroups": ["example.com"]},
        Code.Success,
        (),
    ),
    (
        "ignored-group-leaves-other-groups",
        {"cpu": "1", "memory": "2000"},
        [],
        pod("p", container(gpu="1", **{"vendor.io/fpga": "1"})),
        {"ignoredResourceGroups": ["example.com"]},
        UNRESOLVABLE,
        ("Insufficient vendor.io/fpga",),
    ),
    (
        "only-extended-resources-can-be-ignored",
        {**SMALL, "hugepages_2Mi": "2Mi"},
        [],
        pod("p", container(cpu="2", hugepages_2Mi="4Mi", memory="1")),
        {"ignoredResources": ["cpu", "hugepages-2Mi"]},
        UNRESOLVABLE,
        ("Insufficient cpu", "Insufficient hugepages-2Mi"),
    ),
    (
        "zero-request-pod-only-checks-pod-count",
        SMALL,
        [pod("a", container(cpu="1", memory="2000", ephemeral_storage="3000", gpu="2"))],
        pod("p"),
        {},
        Code.Success,
        (),
    ),
    (
        "zero-request-pod-on-full-node",
        {**SMALL, "pods": "1"},
        [pod("a", container(cpu="1", memory="2000"))],
        pod("p"),
        {},
        UNSCHED,
        ("Too many pods",),
    ),
    (
        "init-container-larger-than-containers",
        SMALL,
        [pod("a", container(cpu="600m"))],
        pod("p", container(cpu="100m"), init=(container("init", cpu="500m"),)),
        {},
        UNSCHED,
        ("Insufficient cpu",),
    ),
    (
        "sidecar-adds-to-containers",
        SMALL,
        [pod("a", container(cpu="500m"))],
        pod(
            "p",
            container(cpu="300m"),
            init=({**container("sidecar", cpu="300m"), "restartPolicy": "Always"},),
        ),
        {},
        UNSCHED,
        ("Insufficient cpu",),
    ),
    (
        "overhead-counts",
        SMALL,
        [pod("a", container(memory="1500"))],
        pod("p", container(memory="400"), overhead={"memory": "200"}),
        {},
        UNSCHED,
        ("Insufficient memory",),
    ),
]


@pytest.mark.parametrize(
    ("allocatable", "existing", "incoming", "args", "code", "reasons"),
    [case[1:] for case in FILTER_CASES],
    ids=[case[0] for case in FILTER_CASES],
)
def test_filter(
    allocatable: dict[str, str],
    existing: list[Pod],
    incoming: Pod,
    args: dict[str, Any],
    code: Code,
    reasons: tuple[str, ...],
) -> None:
    snap = cluster([node("n1", **allocatable)], [(p, "n1") for p in existing])
    [status] = run_filter(NodeResourcesFit(args), incoming, snap)
    assert status.code == code
    assert status.reasons == reasons


def test_filter_answers_each_node_of_the_batch_in_order() -> None:
    nodes = [
        node("big", cpu="4", memory="4000"),
        node("small", cpu="1", memory="4000"),
        node("full", cpu="2", memory="4000"),
    ]
    snap = cluster(nodes, [(pod("a", container(cpu="2")), "full")])
    plugin = NodeResourcesFit()
    p = pod("p", container(cpu="1500m"))

    async def go() -> list[Status]:
        state = CycleState(snapshot=snap)
        await plugin.pre_filter(state, p)
        rows = np.asarray([2, 0, 1], dtype=np.int64)
        result = await plugin.filter(state, p, NodeBatch(snap, rows))
        return [result.status_at(i) for i in range(len(result))]

    full, big, small = asyncio.run(go())
    assert full.code == UNSCHED and full.reasons == ("Insufficient cpu",)
    assert big.ok
    assert small.code == UNRESOLVABLE and small.reasons == ("Insufficient cpu",)


def test_filter_without_pre_filter_is_an_error() -> None:
    snap = cluster([node("n1", cpu="1", memory="1000")])
    plugin = NodeResourcesFit()
    result = asyncio.run(plugin.filter(CycleState(snapshot=snap), pod("p"), NodeBatch(snap, np.arange(1))))
    status = result.status_at(0)
    assert status.code == Code.Error
    assert "PreFilterNodeResourcesFit" in status.message()


def test_pre_filter_state_survives_clone() -> None:
    snap = cluster([node("n1", cpu="1", memory="1000")])
    plugin = NodeResourcesFit()
    p = pod("p", container(cpu="2"))
    state = CycleState(snapshot=snap)
    asyncio.run(plugin.pre_filter(state, p))
    result = asyncio.run(plugin.filter(state.clone(), p, NodeBatch(snap, np.arange(1))))
    assert result.status_at(0).reasons == ("Insufficient cpu",)


# ---- Score -----------------------------------------------------------------------------------

# Node "a": 4 CPU, 10000 bytes of memory, a pod using 1 CPU and 2000 bytes already.
# Node "b": 6 CPU, 10000 bytes of memory, empty.
# The incoming pod asks for 1 CPU and 4000 bytes.
SCORE_NODES = [node("a", cpu="4", memory="10000"), node("b", cpu="6", memory="10000")]
SCORE_PLACED = [(pod("on-a", container(cpu="1", memory="2000")), "a")]
INCOMING = pod("p", container(cpu="1", memory="4000"))
RTCR_MOST = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}

SCORE_CASES: list[tuple[str, dict[str, Any], Pod, list[int]]] = [
    # a: cpu (4000-2000)*100/4000 = 50, memory (10000-6000)*100/10000 = 40 -> 45
    # b: cpu 5000*100/6000 = 83, memory 6000*100/10000 = 60 -> 143/2 = 71
    ("least-allocated-default", {}, INCOMING, [45, 71]),
    ("least-allocated-explicit", {"scoringStrategy": {"type": "LeastAllocated"}}, INCOMING, [45, 71]),
    # a: cpu 2000*100/4000 = 50, memory 60 -> 55; b: cpu 1000*100/6000 = 16, memory 40 -> 28
    ("most-allocated", {"scoringStrategy": {"type": "MostAllocated"}}, INCOMING, [55, 28]),
    # a: (50*3 + 40*1) / 4 = 47; b: (83*3 + 60) / 4 = 77
    (
        "least-allocated-weights",
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}],
            }
        },
        INCOMING,
        [47, 77],
    ),
    # a: (50*2 + 60) / 3 = 53; b: (16*2 + 40) / 3 = 24
    (
        "most-allocated-weights",
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            }
        },
        INCOMING,
        [53, 24],
    ),
    # Utilizations as for MostAllocated; score = utilization: a (50+60)/2 = 55; b (16+40)/2 = 28
    (
        "requested-to-capacity-ratio-most",
        {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": RTCR_MOST}},
        INCOMING,
        [55, 28],
    ),
    # b: (16 + 41) / 2 = 28.5, rounded half away from zero
    (
        "requested-to-capacity-ratio-rounds-half-up",
        {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": RTCR_MOST}},
        pod("p", container(cpu="1", memory="4100")),
        [56, 29],
    ),
    # Least-like shape with a kink: f(p) = 100 - 50*p/30 up to 30, then 50 - 50*(p-30)/70 (truncated).
    # a: cpu 50 -> 50 - 1000/70 = 50 - 14 = 36, memory 60 -> 50 - 1500/70 = 50 - 21 = 29 -> 32.5 -> 33
    # b: cpu 16 -> 100 - 800/30 = 100 - 26 = 74, memory 40 -> 50 - 500/70 = 50 - 7 = 43 -> 58.5 -> 59
    (
        "requested-to-capacity-ratio-truncates-between-points",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [
                        {"utilization": 0, "score": 10},
                        {"utilization": 30, "score": 5},
                        {"utilization": 100, "score": 0},
                    ]
                },
            }
        },
        INCOMING,
        [33, 59],
    ),
    # Flat up to the first point: a cpu 50 -> 20, memory 60 -> 20 + 80*10/50 = 36 -> 28;
    # b cpu 16 -> 20, memory 40 -> 20 -> 20
    (
        "requested-to-capacity-ratio-flat-before-first-point",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 2}, {"utilization": 100, "score": 10}]
                },
            }
        },
        INCOMING,
        [28, 20],
    ),
    # a: (50*2 + 60) / 3 = 53.3 -> 53; b: (16*2 + 40) / 3 = 24
    (
        "requested-to-capacity-ratio-weights",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                "requestedToCapacityRatio": RTCR_MOST,
            }
        },
        INCOMING,
        [53, 24],
    ),
]


@pytest.mark.parametrize(("args", "incoming", "want"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_score(args: dict[str, Any], incoming: Pod, want: list[int]) -> None:
    snap = cluster(SCORE_NODES, SCORE_PLACED)
    assert run_score(NodeResourcesFit(args), incoming, snap) == want


def test_score_without_pre_score_computes_the_requests() -> None:
    snap = cluster(SCORE_NODES, SCORE_PLACED)
    assert run_score(NodeResourcesFit(), INCOMING, snap, pre_score=False) == [45, 71]


# 1 CPU and 1Gi of memory; a container without requests counts as 100m and 200Mi when scoring.
DEFAULTS_NODE = [node("n", cpu="1", memory="1Gi")]

NON_ZERO_CASES: list[tuple[str, str, list[Pod], Pod, int]] = [
    # cpu (1000-100)*100/1000 = 90, memory (1024-200)*100/1024 = 80 -> 85
    ("best-effort-pod", "LeastAllocated", [], pod("p"), 85),
    # placed best-effort pods count with the defaults too: cpu 80, memory (1024-400)*100/1024 = 60 -> 70
    ("best-effort-pod-next-to-best-effort-pod", "LeastAllocated", [pod("a")], pod("p"), 70),
    # an explicit zero request is a request: cpu 100, memory 80 -> 90
    ("explicit-zero-cpu", "LeastAllocated", [], pod("p", container(cpu="0")), 90),
    # the init container without requests counts as 100m / 200Mi, larger than the container's
    (
        "init-container-defaults",
        "LeastAllocated",
        [],
        pod("p", container(cpu="50m", memory=f"{100 * MI}"), init=(container("init"),)),
        85,
    ),
    # cpu 100*100/1000 = 10, memory 200*100/1024 = 19 -> 14
    ("most-allocated-best-effort", "MostAllocated", [], pod("p"), 14),
    # cpu counted over capacity (1000m + 100m): least scores it 0, most 100; memory 400Mi in use
    # -> least (0 + 60) / 2 = 30, most (100 + 39) / 2 = 69
    ("least-over-capacity", "LeastAllocated", [pod("a", container(cpu="1"))], pod("p"), 30),
    ("most-over-capacity", "MostAllocated", [pod("a", container(cpu="1"))], pod("p"), 69),
]


@pytest.mark.parametrize(
    ("strategy", "existing", "incoming", "want"), [c[1:] for c in NON_ZERO_CASES], ids=[c[0] for c in NON_ZERO_CASES]
)
def test_score_counts_non_zero_defaults(strategy: str, existing: list[Pod], incoming: Pod, want: int) -> None:
    snap = cluster(DEFAULTS_NODE, [(p, "n") for p in existing])
    plugin = NodeResourcesFit({"scoringStrategy": {"type": strategy}})
    assert run_score(plugin, incoming, snap) == [want]


EXTENDED_NODES = [
    node("gpu", cpu="4", memory="10000", gpu="4", ephemeral_storage="1000"),
    node("plain", cpu="4", memory="10000", ephemeral_storage="1000"),
]
EXTENDED_PLACED = [(pod("on-gpu", container(cpu="2", memory="5000", gpu="1", ephemeral_storage="500")), "gpu")]

EXTENDED_CASES: list[tuple[str, str, list[dict[str, Any]], Pod, list[int]]] = [
    # gpu node: cpu 3000*100/4000 = 75, memory 60, gpu 2*100/4 = 50 weighted 2 -> (75+60+100)/4 = 58
    # plain node: no gpu allocatable, left out: cpu 25, memory 10 -> 17
    (
        "requested-extended-resource",
        "MostAllocated",
        [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 2}],
        pod("p", container(cpu="1", memory="1000", gpu="1")),
        [58, 17],
    ),
    # not requested by the pod: left out everywhere (gpu node: (75+60)/2 = 67, plain 17)
    (
        "unrequested-extended-resource-is-left-out",
        "MostAllocated",
        [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 2}],
        pod("p", container(cpu="1", memory="1000")),
        [67, 17],
    ),
    # ephemeral-storage is scored even when the pod does not ask for it: gpu node cpu 25 and
    # 500/1000 used -> least (25 + 50) / 2 = 37; plain node cpu 75 and 100 -> 87
    (
        "ephemeral-storage-without-request",
        "LeastAllocated",
        [{"name": "cpu"}, {"name": "ephemeral-storage"}],
        pod("p", container(cpu="1")),
        [37, 87],
    ),
    # "pods" is not a resource kube-scheduler scores: only cpu remains (least 25 / 75)
    (
        "pods-is-not-scored",
        "LeastAllocated",
        [{"name": "cpu"}, {"name": "pods"}],
        pod("p", container(cpu="1")),
        [25, 75],
    ),
    # nothing scoreable at all scores 0
    ("nothing-to-score", "LeastAllocated", [{"name": GPU}], pod("p", container(cpu="1")), [0, 0]),
]


@pytest.mark.parametrize(
    ("strategy", "resources", "incoming", "want"),
    [c[1:] for c in EXTENDED_CASES],
    ids=[c[0] for c in EXTENDED_CASES],
)
def test_score_resources(strategy: str, resources: list[dict[str, Any]], incoming: Pod, want: list[int]) -> None:
    snap = cluster(EXTENDED_NODES, EXTENDED_PLACED)
    plugin = NodeResourcesFit({"scoringStrategy": {"type": strategy, "resources": resources}})
    assert run_score(plugin, incoming, snap) == want


def test_requested_to_capacity_ratio_leaves_zero_scores_out() -> None:
    # cpu utilization 0 scores 0 and is not averaged in: memory 5000/10000 -> 50 (not 25)
    snap = cluster([node("n", cpu="4", memory="10000")])
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": RTCR_MOST}}
    assert run_score(NodeResourcesFit(args), pod("p", container(cpu="0", memory="5000")), snap) == [50]


def test_requested_to_capacity_ratio_over_capacity_scores_full_utilization() -> None:
    # cpu is over capacity (counted as 100%), memory 2000/10000 = 20% -> (100 + 20) / 2 = 60
    snap = cluster([node("n", cpu="1", memory="10000")], [(pod("a", container(cpu="1", memory="0")), "n")])
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": RTCR_MOST}}
    assert run_score(NodeResourcesFit(args), pod("p", container(cpu="500m", memory="2000")), snap) == [60]


@pytest.mark.parametrize(
    ("shape", "points", "want"),
    [
        ([(0, 0), (100, 100)], [0, 1, 50, 99, 100], [0, 1, 50, 99, 100]),
        ([(0, 100), (100, 0)], [0, 33, 100], [100, 67, 0]),
        ([(20, 30), (80, 90)], [0, 20, 21, 50, 80, 100], [30, 30, 31, 60, 90, 90]),
        ([(0, 0), (30, 10), (100, 0)], [15, 30, 31, 65], [5, 10, 10, 5]),
        ([(0, 100), (70, 0)], [1, 69], [99, 2]),  # -100*1/70 truncates to -1, not -2
        ([(40, 70)], [0, 40, 100], [70, 70, 70]),
    ],
    ids=["identity", "reverse", "flat-outside", "peak", "truncation", "single-point"],
)
def test_broken_linear(shape: list[tuple[int, int]], points: list[int], want: list[int]) -> None:
    assert broken_linear(shape, np.asarray(points, dtype=np.int64)).tolist() == want


# ---- args ------------------------------------------------------------------------------------


def most(resources: Any) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "MostAllocated", "resources": resources}}


def rtcr(shape: Any) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}}


BAD_ARGS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-type", {"scoringStrategy": {"type": "Balanced"}}, "scoringStrategy.type"),
    ("missing-type", {"scoringStrategy": {"resources": [{"name": "cpu"}]}}, "scoringStrategy.type"),
    ("weight-too-large", most([{"name": "cpu", "weight": 101}]), "resources[0].weight: 101"),
    ("negative-weight", most([{"name": "cpu", "weight": -1}]), "resources[0].weight: -1"),
    ("weight-not-int", most([{"name": "cpu", "weight": "2"}]), "weight must be an integer"),
    ("resource-without-name", most([{"weight": 2}]), "resources[0].name is required"),
    ("resources-not-a-list", most({"name": "cpu"}), "must be a list"),
    ("ratio-missing", {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "must be specified"),
    (
        "ratio-with-other-type",
        {"scoringStrategy": {"type": "LeastAllocated", "requestedToCapacityRatio": {"shape": []}}},
        "must be nil",
    ),
    ("empty-shape", rtcr([]), "at least one point"),
    ("unsorted-shape", rtcr([{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]), "increasing order"),
    ("utilization-out-of-range", rtcr([{"utilization": 101, "score": 1}]), "utilization"),
    ("score-out-of-range", rtcr([{"utilization": 10, "score": 11}]), "score"),
    ("score-negative", rtcr([{"utilization": 10, "score": -1}]), "score"),
    ("group-with-slash", {"ignoredResourceGroups": ["example.com/gpu"]}, "can't contain '/'"),
    ("invalid-ignored-resource", {"ignoredResources": ["not a name"]}, "ignoredResources[0]"),
    ("ignored-resources-not-a-list", {"ignoredResources": "example.com/gpu"}, "ignoredResources"),
    ("unknown-field", {"scoringStrategyy": {}}, "unknown field 'scoringStrategyy'"),
    ("unknown-strategy-field", {"scoringStrategy": {"type": "MostAllocated", "shape": []}}, "unknown field 'shape'"),
    ("strategy-not-a-mapping", {"scoringStrategy": "MostAllocated"}, "must be a mapping"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_bad_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError, match="NodeResourcesFit") as err:
        NodeResourcesFit(args)
    assert message in str(err.value)


def test_args_defaults() -> None:
    plugin = NodeResourcesFit({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs"})
    assert plugin.strategy == "LeastAllocated"
    assert plugin.resources == [("cpu", 1), ("memory", 1)]
    # an explicit null strategy is defaulted too; a zero weight becomes 1; empty resources are defaulted
    assert NodeResourcesFit({"scoringStrategy": None}).strategy == "LeastAllocated"
    zero = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}})
    assert zero.resources == [("cpu", 1)]
    empty = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": []}})
    assert empty.resources == [("cpu", 1), ("memory", 1)]
    shaped = NodeResourcesFit(rtcr([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]))
    assert shaped.shape == ((0, 0), (100, 100))


# ---- resource names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [
        ("cpu", False, False),
        ("pods", False, False),
        ("example.com/gpu", True, True),
        ("nvidia.com/gpu", True, True),
        ("kubernetes.io/foo", False, True),
        ("hugepages-2Mi", False, True),
        ("attachable-volumes-csi-x", False, True),
        ("requests.example.com/gpu", False, False),
        ("example.com/bad name", False, False),
    ],
)
def test_resource_name_kinds(name: str, extended: bool, scalar: bool) -> None:
    assert is_extended_resource_name(name) is extended
    assert is_scalar_resource_name(name) is scalar


# ---- queueing hints --------------------------------------------------------------------------


def test_events_to_register() -> None:
    """kube-scheduler 1.37's registrations (InPlacePodVerticalScaling and DRAExtendedResource on):
    assigned-pod deletes and scale-downs, the pod's own scale-down, node additions and allocatable
    changes, DeviceClasses added or changed."""
    regs = NodeResourcesFit().events_to_register()
    assert [(r.event.resource, r.event.action, r.hint is not None) for r in regs] == [
        ("AssignedPod", ActionType.Delete, True),
        ("Node", ActionType.Add | ActionType.UpdateNodeAllocatable, True),
        ("DeviceClass", ActionType.Add | ActionType.Update, True),
        ("AssignedPod", ActionType.UpdatePodScaleDown, True),
        ("TargetPod", ActionType.UpdatePodScaleDown, True),
    ]


def hints(plugin: NodeResourcesFit) -> tuple[Any, Any]:
    delete, node_event, *_ = plugin.events_to_register()
    return delete.hint, node_event.hint


def hint_for(event: ClusterEvent) -> Any:
    reg = next(r for r in NodeResourcesFit().events_to_register() if r.event.matches(event))
    return reg.hint


def test_pod_deletion_hint() -> None:
    on_delete = hint_for(ClusterEvent("AssignedPod", ActionType.Delete))
    waiting = pod("p", container(cpu="1"))
    unscheduled = pod("u", container(cpu="1"))
    bound = pod_from_dict({"metadata": {"name": "b"}, "spec": {"nodeName": "n1", "containers": [container()]}})
    assert on_delete(waiting, unscheduled, None) is QueueingHint.QueueSkip
    assert on_delete(waiting, bound, None) is QueueingHint.Queue
    nominated = pod("n", container(cpu="1"))
    nominated.nominated_node_name = "n1"
    assert on_delete(waiting, nominated, None) is QueueingHint.Queue


def bound_pod(cpu: str, memory: str) -> Pod:
    spec = {"nodeName": "n1", "containers": [container(cpu=cpu, memory=memory)]}
    return pod_from_dict({"metadata": {"name": "b", "uid": "b"}, "spec": spec})


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(bound_pod("2", "100"), bound_pod("1", "100"), QueueingHint.Queue, id="gives-back-wanted-cpu"),
        pytest.param(bound_pod("2", "200"), bound_pod("2", "100"), QueueingHint.QueueSkip, id="gives-back-memory-only"),
        pytest.param(pod("u", container(cpu="2")), pod("u", container(cpu="1")), QueueingHint.QueueSkip,
                     id="unscheduled-pod-frees-nothing"),
    ],
)
def test_assigned_pod_scale_down_hint(old: Pod, new: Pod, want: QueueingHint) -> None:
    on_scale_down = hint_for(ClusterEvent("AssignedPod", ActionType.UpdatePodScaleDown))
    assert on_scale_down(pod("p", container(cpu="1")), old, new) is want


GPU_POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {
    "example.com/gpu": "1", "deviceclass.resource.kubernetes.io/tpu": "1"}}}]}}


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(None, DeviceClass("gpu", extended_resource_name="example.com/gpu"), QueueingHint.Queue,
                 id="added-mapping-the-resource"),
    pytest.param(None, DeviceClass("tpu"), QueueingHint.Queue, id="added-under-the-implicit-name-asked"),
    pytest.param(None, DeviceClass("fpga", extended_resource_name="example.com/fpga"), QueueingHint.QueueSkip,
                 id="added-mapping-another"),
    pytest.param(DeviceClass("gpu"), DeviceClass("gpu", extended_resource_name="example.com/gpu"),
                 QueueingHint.Queue, id="now-maps-the-resource"),
    pytest.param(DeviceClass("tpu", selectors=("a",)), DeviceClass("tpu", selectors=("b",)), QueueingHint.QueueSkip,
                 id="same-extendedResourceName"),
])
def test_device_class_hint(old: DeviceClass | None, new: DeviceClass, want: QueueingHint) -> None:
    """DRAExtendedResource: a class added or changed requeues the pod when it may now map what it asks for."""
    on_class = hint_for(ClusterEvent("DeviceClass", ActionType.Update))
    assert on_class(pod_from_dict(GPU_POD), old, new) is want


def test_target_pod_scale_down_always_queues() -> None:
    """1.37 registers the pod's own scale-down apart (TargetPod), and always requeues it."""
    waiting = pod("p", container(cpu="1"))
    on_own = hint_for(ClusterEvent("TargetPod", ActionType.UpdatePodScaleDown))
    assert on_own(waiting, waiting, pod("p", container(cpu="500m"))) is QueueingHint.Queue
    other_pending = ClusterEvent("UnscheduledPod", ActionType.UpdatePodScaleDown)
    assert not any(r.event.matches(other_pending) for r in NodeResourcesFit().events_to_register())


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, node("n", cpu="1", memory="1000"), QueueingHint.QueueSkip),  # too small even when empty
        (None, node("n", cpu="4", memory="1000"), QueueingHint.Queue),
        (None, node("n", cpu="4", memory="1000", pods="0"), QueueingHint.QueueSkip),
        (node("n", cpu="1", memory="1000"), node("n", cpu="4", memory="1000"), QueueingHint.Queue),
        (node("n", cpu="4", memory="1000"), node("n", cpu="4", memory="2000"), QueueingHint.QueueSkip),
        (node("n", cpu="4", memory="1000", pods="5"), node("n", cpu="4", memory="1000", pods="6"), QueueingHint.Queue),
    ],
    ids=[
        "added-too-small",
        "added-big-enough",
        "added-without-pod-room",
        "cpu-grew",
        "other-resource-grew",
        "pods-grew",
    ],
)
def test_node_change_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    _, on_node = hints(NodeResourcesFit())
    assert on_node(pod("p", container(cpu="2")), old, new) is want


class _DraHandle:
    """A handle whose snapshot's DRA store holds one DeviceClass mapping example.com/gpu."""

    def __init__(self) -> None:
        self.dra = self
        self.classes = {"gpu": DeviceClass("gpu", extended_resource_name=GPU)}

    def snapshot(self) -> Any:
        return self


@pytest.mark.parametrize(("mapped", "new", "want"), [
    pytest.param(True, node("n", cpu="4", memory="1000"), QueueingHint.Queue, id="mapped-left-to-devices"),
    pytest.param(False, node("n", cpu="4", memory="1000"), QueueingHint.QueueSkip, id="unmapped-node-lacks-it"),
    pytest.param(True, node("n", cpu="4", memory="1000", gpu="1"), QueueingHint.QueueSkip,
                 id="mapped-but-advertised-too-few"),
])
def test_node_added_hint_leaves_resources_backed_by_devices_to_dynamic_resources(
        mapped: bool, new: Node, want: QueueingHint) -> None:
    plugin = NodeResourcesFit(handle=_DraHandle() if mapped else None)  # type: ignore[arg-type]
    _, on_node = hints(plugin)
    assert on_node(pod("p", container(cpu="2", gpu="2")), None, new) is want
