"""DefaultPreemption: victims, the choice of node, nomination, and the preemptor binding afterwards;
PodDisruptionBudgets: decoding, the embedded store's status, and how preemption respects them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from framework_thread import FrameworkThread

from framework import features
from framework.cli import main
from framework.disruption import embedded_status
from framework.plugins.defaultpreemption import (
    DefaultPreemption,
    filter_pods_with_pdb_violation,
    terminating_by_preemption,
)
from framework.plugins.noderesources import PluginArgsError
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import ApplyResult, Scheduler
from framework.scheduler.records import EV_DELETED, EV_NOMINATED, EV_PREEMPTED
from pluginhost.manifest import ManifestError, node_from_dict, parse_objects, pdb_from_dict, pod_from_dict
from pluginhost.model import LabelSelector, PodDisruptionBudget


def node(name: str, cpu: str = "4", unschedulable: bool = False) -> Any:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "spec": {"unschedulable": unschedulable},
                           "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "20"}}})


def pod(name: str, cpu: str, priority: int = 0, node_name: str = "", started: str = "2026-01-01T00:00:00Z",
        labels: dict[str, str] | None = None, namespace: str = "default", **spec: Any) -> Any:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": started,
                     "labels": labels or {}},
        "spec": {"priority": priority, "nodeName": node_name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec},
    })


def pdb(name: str, selector: dict[str, Any] | None, namespace: str = "default", **spec: Any) -> PodDisruptionBudget:
    body: dict[str, Any] = dict(spec)
    if selector is not None:
        body["selector"] = selector
    return pdb_from_dict({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": name, "namespace": namespace}, "spec": body})


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


def scenario(nodes: list[Any], placed: list[Any], preemptor: Any, expect_phase: str = "Bound",
             pdbs: list[PodDisruptionBudget] | None = None) -> Scheduler:
    async def main() -> Scheduler:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=11)
        await s.apply(nodes + placed + (pdbs or []))
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
                     "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 "
                     "nodes are available: 1 No preemption victims found for incoming pod.",
                     id="no-lower-priority-pods"),
        pytest.param([node("n1", "2")], [pod("a", "2", 0, "n1")], pod("p", "2", 100, preemptionPolicy="Never"),
                     "0/1 nodes are available: 1 Insufficient cpu. "
                     "preemption: not eligible due to preemptionPolicy=Never.", id="policy-never"),
        pytest.param([node("n1", "2", unschedulable=True), node("n2", "2")], [pod("a", "1", 100, "n2")],
                     pod("p", "2", 100),
                     "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
                     "preemption: 0/2 nodes are available: 1 No preemption victims found for "
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
    # With SchedulerPopFromBackoffQ (on by default) the preemptor is taken from backoffQ as soon as the
    # queue is idle and binds before the low-priority pod arrives: the gate is off here so that the
    # low-priority pod comes while the nominated pod still backs off.
    previous = features.install(features.parse("SchedulerPopFromBackoffQ=false"))
    try:
        _nominated_room_is_not_taken_by_a_lower_priority_pod()
    finally:
        features.install(previous)


def _nominated_room_is_not_taken_by_a_lower_priority_pod() -> None:
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


# ---- PodDisruptionBudgets ----------------------------------------------------------------------

LATE = "2026-02-01T00:00:00Z"  # started later: less important among pods of one priority
APP_A = {"app": "a"}

# Each case: the cluster, the budgets (their status worked out by the embedded store, as the disruption
# controller would), the preemptor, and where it must go with which victims.
PDB_CASES = [
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A), pod("a2", "2", 1, "n1", labels=APP_A),
         pod("b1", "2", 5, "n2"), pod("b2", "2", 5, "n2", started=LATE)],
        [pdb("a", {"matchLabels": APP_A}, minAvailable=2)],  # 2 healthy, 2 wanted: 0 disruptions allowed
        pod("hi", "2", 100), "n2", ["b2"],
        id="fewest-budget-violations-beats-the-lowest-victim-priority",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A), pod("a2", "2", 1, "n1", labels=APP_A),
         pod("b1", "2", 5, "n2"), pod("b2", "2", 5, "n2", started=LATE)],
        # 1 disruption allowed: a1 (the more important) takes it, a2 would violate. So a2 is reprieved
        # first and a1 is the victim, violating nothing: n1 wins on priority, as without the budget.
        [pdb("a", {"matchLabels": APP_A}, minAvailable=1)],
        pod("hi", "2", 100), "n1", ["a1"],
        id="a-budget-with-disruptions-left-is-no-obstacle",
    ),
    pytest.param(
        [node("n1")],
        [pod("plain", "2", 1, "n1"), pod("guarded", "2", 1, "n1", started=LATE, labels=APP_A)],
        [pdb("a", {"matchLabels": APP_A}, maxUnavailable=0)],
        pod("hi", "2", 100), "n1", ["plain"],  # without the budget: "guarded", the less important one
        id="victims-violating-a-budget-are-reprieved-first",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A, started=LATE), pod("a2", "2", 1, "n1", labels=APP_A, started=LATE),
         pod("a3", "2", 1, "n2", labels=APP_A), pod("c1", "2", 1, "n2")],
        # 3 pods of app=a, 2 wanted: 1 disruption allowed. n1's victims a1 and a2 need two, n2's a3 one.
        # Without the budget n1 would win: its victims started last.
        [pdb("a", {"matchLabels": APP_A}, minAvailable=2)],
        pod("hi", "4", 100), "n2", ["a3", "c1"],
        id="the-allowed-disruptions-are-spent-victim-by-victim",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A, started="2026-01-15T00:00:00Z"),
         pod("a2", "2", 1, "n1", labels=APP_A, started=LATE),
         pod("b1", "2", 1, "n2", labels={"app": "b"}), pod("b2", "2", 1, "n2", started=LATE)],
        # a: 1 allowed, n1's second victim violates; b: 0 allowed, n2's b1 violates. Tied on one
        # violation each: the lowest priority, the sum and the count tie too; n1's victims started later.
        [pdb("a", {"matchLabels": APP_A}, minAvailable=1), pdb("b", {"matchLabels": {"app": "b"}}, minAvailable=1)],
        pod("hi", "4", 100), "n1", ["a1", "a2"],
        id="equal-violations-fall-through-to-the-other-criteria",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A), pod("a2", "2", 1, "n1", labels=APP_A),
         pod("b1", "2", 5, "n2"), pod("b2", "2", 5, "n2", started=LATE)],
        [pdb("everything", {}, minAvailable=4)],  # the disruption controller's "all pods"; preemption's "none"
        pod("hi", "2", 100), "n1", ["a2"],
        id="an-empty-selector-covers-no-victim",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("a1", "2", 1, "n1", labels=APP_A), pod("a2", "2", 1, "n1", labels=APP_A),
         pod("b1", "2", 5, "n2"), pod("b2", "2", 5, "n2", started=LATE)],
        [pdb("a", {"matchLabels": APP_A}, namespace="elsewhere", minAvailable=2)],
        pod("hi", "2", 100), "n1", ["a2"],
        id="a-budget-of-another-namespace-covers-no-victim",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "pdbs", "preemptor", "node_name", "victims"), PDB_CASES)
def test_preemption_respects_pod_disruption_budgets(
    nodes: list[Any], placed: list[Any], pdbs: list[PodDisruptionBudget], preemptor: Any, node_name: str,
    victims: list[str],
) -> None:
    s = scenario(nodes, placed, preemptor, pdbs=pdbs)
    rec = s.get_pod("default", preemptor.name)
    assert rec is not None and rec.pod.node_name == node_name
    assert deleted(s) == victims
    assert [ev.node_name for ev in s.recent_events() if ev.type == EV_NOMINATED] == [node_name]
    assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}


def budget(namespace: str = "default", allowed: int = 0, disrupted: tuple[str, ...] = (),
           selector: LabelSelector | None = None) -> PodDisruptionBudget:
    return PodDisruptionBudget("b", namespace, selector=selector or LabelSelector({"app": "a"}),
                               disruptions_allowed=allowed, disrupted_pods=dict.fromkeys(disrupted, 0.0))


FILTER_CASES = [  # (pods in importance order, budgets, the violating pods, the others)
    pytest.param(["p1", "p2", "p3"], [budget(allowed=1)], ["p2", "p3"], ["p1"], id="allowed-spent-in-order"),
    pytest.param(["p1", "p2", "p3"], [budget(allowed=1, disrupted=("p1",))], ["p3"], ["p1", "p2"],
                 id="a-pod-being-disrupted-is-counted-already"),
    pytest.param(["p1", "p2"], [budget(allowed=5), budget(allowed=0)], ["p1", "p2"], [],
                 id="one-exhausted-budget-of-two-is-a-violation"),
    pytest.param(["p1", "p2"], [budget("other")], [], ["p1", "p2"], id="another-namespace"),
    pytest.param(["p1", "nolabels"], [budget(selector=LabelSelector())], [], ["p1", "nolabels"],
                 id="empty-selector-matches-nothing"),
    pytest.param(["nolabels"], [budget(selector=LabelSelector(match_labels={}, match_expressions=[]))], [],
                 ["nolabels"], id="a-pod-without-labels-matches-nothing"),
]


@pytest.mark.parametrize(("names", "budgets", "violating", "others"), FILTER_CASES)
def test_filter_pods_with_pdb_violation(names: list[str], budgets: list[PodDisruptionBudget],
                                        violating: list[str], others: list[str]) -> None:
    pods = [pod(n, "1", 1, "n1", labels={} if n == "nolabels" else APP_A) for n in names]
    got = filter_pods_with_pdb_violation(pods, budgets)
    assert ([p.name for p in got[0]], [p.name for p in got[1]]) == (violating, others)


def test_a_pod_over_one_budget_is_not_charged_to_the_budgets_after_it() -> None:
    """kube-scheduler v1.37 stops at the first budget a pod exceeds: "strict" (listed first, nothing
    allowed) takes p1, so "loose" still has its one disruption for p2 (v1.35 charged both to p1)."""
    strict = PodDisruptionBudget("strict", "default", selector=LabelSelector({"tier": "x"}), disruptions_allowed=0)
    loose = PodDisruptionBudget("loose", "default", selector=LabelSelector({"app": "a"}), disruptions_allowed=1)
    pods = [pod("p1", "1", 1, "n1", labels={"app": "a", "tier": "x"}), pod("p2", "1", 1, "n1", labels=APP_A)]
    violating, others = filter_pods_with_pdb_violation(pods, [strict, loose])
    assert ([p.name for p in violating], [p.name for p in others]) == (["p1"], ["p2"])


STATUS_PODS = [pod("r1", "1", node_name="n1", labels=APP_A), pod("r2", "1", node_name="n1", labels=APP_A),
               pod("r3", "1", node_name="n1", labels=APP_A), pod("pending", "1", labels=APP_A),
               pod("other", "1", node_name="n1", labels={"app": "b"}),
               pod("elsewhere", "1", node_name="n1", labels=APP_A, namespace="ns2")]


@pytest.mark.parametrize(
    ("selector", "spec", "allowed"),
    [
        # 4 pods of app=a in default (3 bound and healthy, 1 pending).
        pytest.param({"matchLabels": APP_A}, {"minAvailable": 2}, 1, id="min-available"),
        pytest.param({"matchLabels": APP_A}, {"minAvailable": 3}, 0, id="min-available-all-healthy"),
        pytest.param({"matchLabels": APP_A}, {"minAvailable": 5}, 0, id="min-available-more-than-there-are"),
        pytest.param({"matchLabels": APP_A}, {"minAvailable": "50%"}, 1, id="min-available-percent"),
        pytest.param({"matchLabels": APP_A}, {"minAvailable": "30%"}, 1, id="min-available-percent-rounds-up"),
        pytest.param({"matchLabels": APP_A}, {"maxUnavailable": 2}, 1, id="max-unavailable"),
        pytest.param({"matchLabels": APP_A}, {"maxUnavailable": "100%"}, 3, id="max-unavailable-all"),
        pytest.param({"matchLabels": APP_A}, {"maxUnavailable": "30%"}, 1, id="max-unavailable-percent-rounds-up"),
        pytest.param({"matchLabels": APP_A}, {}, 0, id="neither-set"),
        pytest.param(None, {"maxUnavailable": 1}, 0, id="no-selector-no-pods"),
        pytest.param({}, {"minAvailable": 1}, 3, id="empty-selector-all-pods-of-the-namespace"),
    ],
)
def test_the_embedded_store_works_out_disruptions_allowed(selector: dict[str, Any] | None, spec: dict[str, Any],
                                                           allowed: int) -> None:
    assert embedded_status(pdb("b", selector, **spec), STATUS_PODS).disruptions_allowed == allowed


def test_a_pod_being_deleted_is_not_healthy() -> None:
    going = dataclasses.replace(STATUS_PODS[0], deletion_timestamp=1.0)
    assert embedded_status(pdb("b", {"matchLabels": APP_A}, minAvailable=1), [going, *STATUS_PODS[1:]]) \
        .disruptions_allowed == 1


def test_a_pdb_manifest_decodes() -> None:
    [got] = parse_objects(json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "labels": {"team": "x"}},
        "spec": {"maxUnavailable": "25%", "selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]}]}, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        "status": {"disruptionsAllowed": 2, "currentHealthy": 4, "desiredHealthy": 2, "expectedPods": 4,
                   "disruptedPods": {"web-1": "2026-01-01T00:00:10Z"}, "observedGeneration": 1,
                   "conditions": [{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
                                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                   "observedGeneration": 1}]},
    }), "pdb.json")
    assert isinstance(got, PodDisruptionBudget)
    assert (got.key, got.uid, got.labels, got.min_available, got.max_unavailable, got.disruptions_allowed,
            got.disrupted_pods) == ("shop/web", "u1", {"team": "x"}, None, "25%", 2, {"web-1": 1767225610.0})
    assert got.selector is not None and [(e.key, e.operator, e.values) for e in got.selector.match_expressions] == [
        ("app", "In", ("web",))]


P = "pdb.yaml: document 1 (PodDisruptionBudget default/b): "


@pytest.mark.parametrize(
    ("spec", "extra", "message"),  # the API server's words (kube-apiserver v1.35), where it has them
    [
        ({"minAvailable": 1, "maxUnavailable": 1}, {}, P + "spec: minAvailable and maxUnavailable cannot be both set"),
        ({"minAvailable": -1}, {}, P + "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
        ({"maxUnavailable": "abc"}, {}, P + """spec.maxUnavailable: Invalid value: "abc": a valid percent string \
must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"""),
        ({"maxUnavailable": "1"}, {}, P + """spec.maxUnavailable: Invalid value: "1": a valid percent string must \
be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"""),
        ({"minAvailable": "150%"}, {}, P + 'spec.minAvailable: Invalid value: "150%": must not be greater than 100%'),
        ({"minAvailable": 1.5}, {}, P + 'spec.minAvailable: expected an integer or a percent string such as "50%", '
                                        "got number"),
        ({"unhealthyPodEvictionPolicy": "Sometimes"}, {}, P + 'spec.unhealthyPodEvictionPolicy: Unsupported value: '
                                                              '"Sometimes": supported values: "AlwaysAllow", '
                                                              '"IfHealthyBudget"'),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}, {},
         P + 'spec.selector.matchExpressions[0].operator: unsupported operator "Bogus" (supported: DoesNotExist, '
             "Exists, In, NotIn)"),
        ({"minAvailable": 1, "minAvaliable": 2}, {}, P + 'unknown field "spec.minAvaliable"'),
        ({}, {"apiVersion": "policy/v1beta1"},
         P + 'apiVersion: unsupported apiVersion "policy/v1beta1" for PodDisruptionBudget (expected "policy/v1")'),
    ],
)
def test_a_bad_pdb_manifest_is_one_line_naming_the_field(spec: dict[str, Any], extra: dict[str, Any],
                                                          message: str) -> None:
    doc = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"}, "spec": spec,
           **extra}
    with pytest.raises(ManifestError) as err:
        parse_objects(json.dumps(doc), "pdb.yaml")
    assert str(err.value) == message


def test_apply_and_delete_pdbs_in_the_embedded_store() -> None:
    async def main_() -> list[list[ApplyResult]]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry)
        first = await s.apply([pdb("web", {"matchLabels": APP_A}, minAvailable=1)])
        uid = first[0].uid
        again = await s.apply([pdb("web", {"matchLabels": APP_A}, minAvailable=1)])
        changed = await s.apply([pdb("web", {"matchLabels": APP_A}, minAvailable=2)])
        assert s.pdbs["default/web"].min_available == 2 and s.pdbs["default/web"].uid == uid
        dry = await s.apply([pdb("api", {"matchLabels": APP_A})], dry_run=True)
        assert sorted(s.pdbs) == ["default/web"]
        assert s.delete_pdb("default", "web") is not None and s.delete_pdb("default", "web") is None
        return [[dataclasses.replace(r, uid="") for r in rs] for rs in (first, again, changed, dry)]

    got = asyncio.run(main_())
    assert [[r.action for r in rs] for rs in got] == [["created"], ["unchanged"], ["configured"], ["created"]]
    assert got[0] == [ApplyResult("PodDisruptionBudget", "default", "web", "", "created")]


def test_the_cli_applies_and_deletes_a_pdb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pdb.yaml"
    path.write_text("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\n"
                    "spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}\n")
    with FrameworkThread() as fw:
        assert main(["apply", "-f", str(path), "--server", fw.address]) == 0
        assert main(["apply", "-f", str(path), "--server", fw.address]) == 0
        assert main(["delete", "-f", str(path), "--server", fw.address]) == 0
        assert main(["delete", "pdb", "web", "-n", "shop", "--server", fw.address]) == 1
    out, err = capsys.readouterr()
    assert out == ("poddisruptionbudget/shop/web created\npoddisruptionbudget/shop/web unchanged\n"
                   "poddisruptionbudget/shop/web deleted\n")
    assert err == "error: not found: poddisruptionbudget shop/web\n"


@pytest.mark.parametrize(
    ("deleting", "conditions", "want"),
    [
        (True, [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], True),
        (False, [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], False),
        (True, [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}], False),
        (True, [{"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}], False),
        (True, [{"type": "Ready", "status": "True"}], False),
    ],
    ids=["preempted-and-deleting", "not-deleting", "evicted", "condition-false", "no-disruption-target"],
)
def test_terminating_by_preemption(deleting: bool, conditions: list[dict[str, str]], want: bool) -> None:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "v"},
           "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"conditions": conditions}}
    if deleting:
        doc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
    assert terminating_by_preemption(pod_from_dict(doc)) is want


# ---- A preemptor's nomination after a later attempt ------------------------------------------------

NO_VICTIMS = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes "
              "are available: 1 No preemption victims found for incoming pod.")


def nominated_to(node_name: str, preemptor: Any) -> Any:
    """``preemptor`` as a former preemption left it: ``status.nominatedNodeName`` set."""
    return dataclasses.replace(preemptor, nominated_node_name=node_name)


def terminating_victim(name: str, cpu: str, priority: int, node_name: str) -> Any:
    """A pod a preemption is deleting: a deletion timestamp and DisruptionTarget PreemptionByScheduler."""
    doc = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-02T00:00:00Z"},
        "spec": {"priority": priority, "nodeName": node_name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                   "reason": "PreemptionByScheduler"}]},
    }  # fmt: skip
    return pod_from_dict(doc)


@dataclasses.dataclass(frozen=True)
class NominationCase:
    id: str
    nodes: list[Any]
    placed: list[Any]
    preemptor: Any
    #: The preemptor's nomination after its attempt failed, and the reason that attempt gave.
    nominated: str
    message: str


NOMINATION_CASES = [
    # kube-scheduler's Preempt finds no candidate: NewPostFilterResultWithNominatedNode("") (ModeOverride)
    # and handleSchedulingFailure clears the nomination, in the nominator and on the pod.
    NominationCase("nominated-node-gone-and-no-candidate-clears", [node("n1", "2")],
                   [pod("a", "2", 100, "n1")], nominated_to("n9", pod("hi", "2", 100)), "", NO_VICTIMS),
    NominationCase("pods-on-the-nominated-node-outrank-it-clears", [node("n1", "2")],
                   [pod("a", "2", 200, "n1")], nominated_to("n1", pod("hi", "2", 100)), "", NO_VICTIMS),
    # Not eligible to preempt: no result (ModeNoop), the nomination stays as it is.
    NominationCase("victim-still-terminating-on-the-nominated-node-keeps", [node("n1", "2")],
                   [terminating_victim("old", "2", 0, "n1")], nominated_to("n1", pod("hi", "2", 100)), "n1",
                   "0/1 nodes are available: 1 Insufficient cpu. preemption: not "
                   "eligible due to a terminating pod on the nominated node."),
    NominationCase("preemption-policy-never-keeps", [node("n1", "2")], [pod("a", "2", 0, "n1")],
                   nominated_to("n1", pod("hi", "2", 100, preemptionPolicy="Never")), "n1",
                   "0/1 nodes are available: 1 Insufficient cpu. preemption: not "
                   "eligible due to preemptionPolicy=Never."),
]  # fmt: skip


@pytest.mark.parametrize("case", NOMINATION_CASES, ids=lambda c: c.id)
def test_a_failed_preemption_sets_the_preemptors_nomination_as_kube_scheduler_does(case: NominationCase) -> None:
    s = scenario(case.nodes, case.placed, case.preemptor, expect_phase="Unschedulable")
    rec = s.get_pod("default", "hi")
    assert rec is not None and rec.last_status is not None
    assert list(rec.last_status.reasons) == [case.message]
    info = s.queue.info("uid-hi")
    assert info is not None
    # The nominator, the pod the queue retries and the pod the Scheduler API shows agree.
    assert (rec.nominated_node, s.nominated.get("uid-hi", ""), info.pod.nominated_node_name) == (case.nominated,) * 3
    assert deleted(s) == []
    assert [ev.type for ev in s.recent_events() if ev.type == EV_NOMINATED] == []
