"""Opportunistic batching as kube-scheduler 1.37 does it (``framework/runtime/batch.go``,
``schedule_one.go``): which pods sign alike, when a batch hints a node, the rescoring of a last chosen
node that still fits, why a batch is not used (the flush reasons), the placements that follow, and the
metrics. Cycles are stepped one pod at a time and the batch's clock is the test's, so nothing here
depends on timing.

Scores are worked out by hand from NodeResourcesFit's LeastAllocated (cpu and memory, weight 1 each):
``((allocatable - requested) * 100) // allocatable`` per resource, averaged. Nodes have 64Gi of memory
and pods ask 100Mi, so memory scores 99 throughout, and a node's total is ``(cpu + 99) // 2``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from framework.batching import MAX_BATCH_AGE, pod_signer
from framework.config import load_config
from framework.dra.models import DeviceClass
from framework.observe.metrics import SchedulerMetrics
from framework.plugins import in_tree_registry
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod

PROFILE = "default-scheduler"


def node(name: str, cpu: str, labels: dict[str, str] | None = None) -> Node:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
                           "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}})


def pod(name: str, cpu: str = "1", **spec: Any) -> Pod:
    labels = spec.pop("labels", {"app": name})
    nominated = spec.pop("nominated", "")
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}], **spec},
    }  # fmt: skip
    if nominated:
        body["status"] = {"nominatedNodeName": nominated}
    return pod_from_dict(body)


def make(plugins: list[str], args: str = "") -> Scheduler:
    yaml = "\n".join([
        "apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration", "profiles:",
        f"- schedulerName: {PROFILE}", "  plugins:", "    multiPoint:", "      enabled:",
        *[f"      - {{name: {n}}}" for n in plugins], "      disabled:", '      - {name: "*"}',
    ]) + "\n" + args
    reg = in_tree_registry()
    return Scheduler(load_config(yaml, reg.points(), "test.yaml"), reg, seed=5)


FIT = ["PrioritySort", "NodeResourcesFit", "DefaultBinder"]


async def step(s: Scheduler, count: int = 1) -> None:
    """Pop and schedule ``count`` pods, each one's binding cycle finished before the next."""
    for _ in range(count):
        info = await asyncio.wait_for(s.queue.pop(), 5)
        assert info is not None
        await s.schedule_one(info)
        if s._binding_tasks:
            await asyncio.wait(list(s._binding_tasks), timeout=5)


def placed(s: Scheduler) -> dict[str, str]:
    return {r.pod.name: r.pod.node_name for r in s.pods.values()}


# ---------------------------------------------------------------------------------------------------
# Signatures


@dataclass
class SignCase:
    id: str
    a: Pod
    b: Pod
    #: None: ``b`` cannot be signed; else whether the two sign alike.
    same: bool | None
    plugins: list[str] = field(default_factory=lambda: [*FIT, "TaintToleration", "NodeAffinity", "NodePorts",
                                                        "ImageLocality", "VolumeRestrictions"])


TOL_A = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]


def zone_in(*values: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "z", "operator": "In", "values": list(values)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


CONFIG = [{"name": "c", "configMap": {"name": "y"}}, {"name": "s", "secret": {"secretName": "y"}}]
SIGN_CASES = [
    SignCase("names-and-labels-do-not-count", pod("x"), pod("y", labels={"other": "1"}), True),
    SignCase("labels-count-with-inter-pod-affinity", pod("x"), pod("y", labels={"other": "1"}), False,
             [*FIT, "InterPodAffinity"]),
    SignCase("requests-count", pod("x"), pod("y", cpu="2"), False),
    SignCase("toleration-order-does-not-count", pod("x", tolerations=TOL_A), pod("y", tolerations=TOL_A[::-1]),
             True),
    SignCase("node-selector-counts", pod("x"), pod("y", nodeSelector={"zone": "a"}), False),
    SignCase("affinity-value-order-does-not-count",
             pod("x", affinity=zone_in("a", "b")), pod("y", affinity=zone_in("b", "a")), True),
    SignCase("config-maps-and-secrets-do-not-count", pod("x"),
             pod("y", volumes=CONFIG), True),
    SignCase("claims-count", pod("x"), pod("y", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]),
             False),
    SignCase("host-ports-count", pod("x"),
             pod("y", containers=[{"name": "c", "image": "busybox", "ports": [{"containerPort": 80, "hostPort": 80}],
                                   "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]), False),
    SignCase("pod-anti-affinity-is-not-signable", pod("x"),
             pod("y", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                 {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "y"}}}]}}),
             None, [*FIT, "InterPodAffinity"]),
    SignCase("spread-constraints-are-not-signable", pod("x"),
             pod("y", topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                                 "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"app": "y"}}}]),
             None, [*FIT, "PodTopologySpread"]),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in SIGN_CASES])
def test_which_pods_sign_alike(case: SignCase) -> None:
    args = ""
    if "PodTopologySpread" in case.plugins:
        args = ("  pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: List}\n")
    s = make(case.plugins, args)
    signer = pod_signer(s.profiles[PROFILE])
    assert signer is not None
    a, b = asyncio.run(signer(case.a)), asyncio.run(signer(case.b))
    assert a is not None
    assert (None if b is None else a == b) == case.same


@pytest.mark.parametrize(("resource", "signable"), [
    pytest.param("example.com/gpu", False, id="mapped-by-a-class"),
    pytest.param("deviceclass.resource.kubernetes.io/gpu", False, id="a-class-implicit-name"),
    pytest.param("other.com/x", True, id="not-mapped"),
])
def test_pods_asking_for_extended_resources_backed_by_devices_do_not_sign(resource: str, signable: bool) -> None:
    """kube-scheduler 1.37's NodeResourcesFit: "signature disabled when dra extended resources are used in
    the cluster" (DynamicResources gives each such pod devices of its own)."""
    s = make(FIT)
    s.cache.dra.put(DeviceClass("gpu", extended_resource_name="example.com/gpu"))
    signer = pod_signer(s.profiles[PROFILE])
    assert signer is not None
    wanted = pod("p", containers=[{"name": "c", "image": "busybox", "resources": {"limits": {resource: "1"}}}])
    assert (asyncio.run(signer(wanted)) is not None) is signable


def test_profiles_whose_pods_never_sign() -> None:
    """kube-scheduler's default profile (PodTopologySpread with System defaulting) and a profile with a
    plugin that does not sign: batching has nothing to act on."""
    registry = build_registry()
    default = Scheduler(default_scheduler_config(registry), registry)
    assert pod_signer(default.profiles[PROFILE]) is None
    listed = make([*FIT, "PodTopologySpread"],
                  "  pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: List}\n")
    assert pod_signer(listed.profiles[PROFILE]) is not None


# ---------------------------------------------------------------------------------------------------
# Hints, rescoring and placements


@dataclass
class BatchCase:
    id: str
    nodes: list[Node]
    pods: list[Pod]
    #: Where each pod goes.
    want: dict[str, str]
    attempts: dict[str, int]
    flushed: dict[str, int] = field(default_factory=dict)
    rescores: int = 0
    #: Run between the first pod's cycle and the others' (a change the batch does not hear of).
    between: Callable[[Scheduler, list[float]], Awaitable[None]] | None = None


async def shrink_n2(s: Scheduler, clock: list[float]) -> None:
    await s.apply([node("n2", "1")])


async def age(s: Scheduler, clock: list[float]) -> None:
    clock[0] += MAX_BATCH_AGE + 0.001


async def delete_n1(s: Scheduler, clock: list[float]) -> None:
    s.delete_node("n1")


BATCH_CASES = [
    # Nodes of 1 cpu take one pod each and score alike: p1 is scored, then each next pod finds the last
    # chosen node full (not rescored) and gets the next node of the cached ranking.
    BatchCase("full-nodes-hand-out-the-cached-ranking",
              [node("n1", "1"), node("n2", "1"), node("n3", "1")], [pod("p1"), pod("p2"), pod("p3")],
              {}, {"no_hint": 1, "hint_used": 2}),
    # p1: n1 (8 cpu) 93, n2 (5) 89, n3 (2) 74 -> n1. p2: n1 still fits, rescored with p1 on it: 87 < n2's
    # 89 -> n2. p3: n2 rescored 79 < n1's 87 -> n1. p4: n1 rescored 80 > 79 -> n1. p5: n1 74 < n2 79 -> n2.
    BatchCase("a-node-that-still-fits-is-rescored-and-competes",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")],
              [pod("p1"), pod("p2"), pod("p3"), pod("p4"), pod("p5")],
              {"p1": "n1", "p2": "n2", "p3": "n1", "p4": "n1", "p5": "n2"},
              {"no_hint": 1, "hint_used": 4}, rescores=4),
    # n2 shrinks to 1 cpu after p1: its cached 89 is stale (scored afresh it would be (0+99)//2 = 49,
    # below n1's 87), but the batch does not know, and p2 still fits there: kube-scheduler 1.37 puts it
    # on n2 without scoring.
    BatchCase("cached-scores-are-not-refreshed-by-node-changes",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")], [pod("p1"), pod("p2")],
              {"p1": "n1", "p2": "n2"}, {"no_hint": 1, "hint_used": 1}, rescores=1, between=shrink_n2),
    # p2 asks 2 cpus: its signature differs (a flush) and its results start a batch p3 differs from.
    # p2 on n1: (8000-3000)*100//8000 = 62 -> 80 against n2's 2 cpus (5000-2000)*100//5000 = 60 -> 79.
    BatchCase("a-different-pod-starts-a-new-batch",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")], [pod("p1"), pod("p2", cpu="2"), pod("p3")],
              {"p1": "n1", "p2": "n1", "p3": "n2"}, {"no_hint": 3}, {"pod_incompatible": 2}),
    BatchCase("a-nominated-pod-bypasses-the-batch",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")], [pod("p1"), pod("p2", nominated="n3")],
              # It goes to its nominated node, one feasible node: nothing to rank (an empty list).
              {"p1": "n1", "p2": "n3"}, {"no_hint": 2}, {"pod_nominated": 1, "empty_list": 1}),
    BatchCase("an-old-batch-is-not-used",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")], [pod("p1"), pod("p2")],
              # Scored afresh: n1 with p1 (8000-2000)*100//8000 = 75 -> 87, n2 89.
              {"p1": "n1", "p2": "n2"}, {"no_hint": 2}, {"expired": 1}, between=age),
    BatchCase("a-last-chosen-node-gone-is-a-flush",
              [node("n1", "8"), node("n2", "5"), node("n3", "2")], [pod("p1"), pod("p2")],
              {"p1": "n1", "p2": "n2"}, {"no_hint": 2}, {"node_missing": 1}, between=delete_n1),
    # One feasible node: nothing left to rank.
    BatchCase("one-feasible-node-stores-nothing",
              [node("n1", "1")], [pod("p1"), pod("p2")],
              {"p1": "n1", "p2": ""}, {"no_hint": 2}, {"empty_list": 1}),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in BATCH_CASES])
def test_batching_places_pods_as_kube_scheduler_1_37(case: BatchCase) -> None:
    async def main() -> Scheduler:
        s = make(FIT)
        clock = [100.0]
        s.batches[PROFILE].clock = lambda: clock[0]
        await s.apply([*case.nodes, *case.pods])
        await step(s)
        if case.between is not None:
            await case.between(s, clock)
        await step(s, len(case.pods) - 1)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    batch = s.batches[PROFILE]
    got = placed(s)
    if case.want:
        assert {k: v for k, v in got.items() if k in case.want} == case.want
    else:  # ties: every pod on its own node
        assert sorted(got.values()) == sorted(n.name for n in case.nodes)
    assert dict(batch.attempts) == case.attempts
    assert dict(batch.flushed) == case.flushed
    assert batch.rescores == case.rescores


NO_SPREAD = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - {name: PodTopologySpread}
"""


def test_the_default_profile_without_spread_batches_as_the_real_kube_scheduler() -> None:
    """kube-scheduler v1.37.2 (the real binary, this profile, these nodes and six such pods created at
    once on an API server) logged a hint for every pod after the first: n1, n1, n2, n1, n1, and bound
    them there. Every plugin of the profile scores here (BalancedAllocation, ImageLocality, ...), and
    no two candidates tie on any hint, so the placements must be the same."""

    async def main() -> Scheduler:
        registry = build_registry()
        s = Scheduler(load_config(NO_SPREAD, registry.points(), "test.yaml"), registry, seed=9)
        s.batches[PROFILE].clock = lambda: 100.0
        nodes = [node(name, cpu, {"kubernetes.io/hostname": name}) for name, cpu in (("n1", "16"), ("n2", "6"),
                                                                                     ("n3", "3"))]
        await s.apply([*nodes, *[pod(f"p{i}", labels={}) for i in range(1, 7)]])
        await step(s, 6)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    batch = s.batches[PROFILE]
    assert placed(s) == {"p1": "n1", "p2": "n1", "p3": "n1", "p4": "n2", "p5": "n1", "p6": "n1"}
    assert (dict(batch.attempts), dict(batch.flushed), batch.rescores) == ({"no_hint": 1, "hint_used": 5}, {}, 5)


def test_a_failed_pod_between_two_identical_ones_flushes_the_batch() -> None:
    """kube-scheduler counts every pod popped: a pod that failed (no results stored) between two
    identical pods leaves a gap in the cycle count, so the second is scheduled afresh."""

    async def main() -> Scheduler:
        s = make(FIT)
        s.batches[PROFILE].clock = lambda: 100.0
        await s.apply([node("n1", "8"), node("n2", "5"), pod("p1"), pod("big", cpu="64"), pod("p2")])
        await step(s, 3)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    batch = s.batches[PROFILE]
    assert placed(s) == {"p1": "n1", "big": "", "p2": "n2"}
    assert (dict(batch.attempts), dict(batch.flushed)) == ({"no_hint": 3}, {"pod_incompatible": 1, "pod_skipped": 1})


def test_the_gate_turns_batching_off() -> None:
    from framework import features

    features.install(features.parse("OpportunisticBatching=false"))
    try:
        s = make(FIT)
    finally:
        features.install(features.parse(""))
    assert s.batches == {}


def test_batch_metrics_are_kube_schedulers() -> None:
    async def main() -> Scheduler:
        s = make(FIT)
        s.batches[PROFILE].clock = lambda: 100.0
        await s.apply([node("n1", "8"), node("n2", "5"), node("n3", "2"), pod("p1"), pod("p2"), pod("p3", cpu="2")])
        await step(s, 3)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    metrics = SchedulerMetrics()
    metrics.attach(s)
    lines = [line for line in metrics.exposition().decode().splitlines() if line.startswith("scheduler_batch_")]
    assert lines == [
        f'scheduler_batch_attempts_total{{profile="{PROFILE}",result="hint_used"}} 1.0',
        f'scheduler_batch_attempts_total{{profile="{PROFILE}",result="no_hint"}} 2.0',
        f'scheduler_batch_cache_flushed_total{{profile="{PROFILE}",reason="pod_incompatible"}} 1.0',
        f'scheduler_batch_rescore_attempts_total{{profile="{PROFILE}"}} 1.0',
    ]


def test_default_profile_counts_every_pod_without_a_hint() -> None:
    """The default profile's pods never sign: each cycle reports no hint and a batch it cannot keep, as
    kube-scheduler's metrics do, and placements are those of an unbatched cycle."""

    async def main() -> Scheduler:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        await s.apply([node("n1", "8"), node("n2", "5"), pod("p1"), pod("p2"), pod("p3")])
        await step(s, 3)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    batch = s.batches[PROFILE]
    assert (dict(batch.attempts), dict(batch.flushed), batch.rescores) == ({"no_hint": 3}, {"pod_not_batchable": 3}, 0)



def test_a_hinted_pod_is_filtered_on_its_hint_alone_and_not_scored() -> None:
    calls: list[tuple[str, int]] = []

    async def main() -> Scheduler:
        s = make(FIT)
        s.batches[PROFILE].clock = lambda: 100.0
        fit = s.profiles[PROFILE].plugins["NodeResourcesFit"]
        score, filter_ = fit.score, fit.filter  # type: ignore[attr-defined]

        async def counted_score(state: Any, pod: Pod, batch: Any) -> Any:
            calls.append((f"score {pod.name}", len(batch)))
            return await score(state, pod, batch)

        async def counted_filter(state: Any, pod: Pod, batch: Any) -> Any:
            calls.append((f"filter {pod.name}", len(batch)))
            return await filter_(state, pod, batch)

        fit.score, fit.filter = counted_score, counted_filter  # type: ignore[attr-defined]
        await s.apply([node("n1", "1"), node("n2", "1"), node("n3", "1"), pod("p1"), pod("p2")])
        await step(s, 2)
        await s.stop()
        return s

    asyncio.run(asyncio.wait_for(main(), 30))
    # p1: the whole cluster filtered and scored. p2: the last chosen node filtered (full: not rescored),
    # then the hint, nothing scored.
    assert calls == [("filter p1", 3), ("score p1", 3), ("filter p2", 1), ("filter p2", 1)]
