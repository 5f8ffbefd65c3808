"""DefaultPreemption's PodGroupPostFilter (kube-scheduler v1.37.2's ``PodGroupEvaluator``, GenericWorkload
on): a gang that cannot be placed evicts lower-priority victims from the whole cluster, a victim PodGroup
with ``disruptionMode: All`` as one unit, PodDisruptionBudgets respected as a single pod's preemption
respects them; its pods are nominated, it waits, and it is bound once the room is free.

The rig is the in-process scheduler on the embedded store (a victim's deletion is immediate there), with
PrioritySort, NodeResourcesFit, GangScheduling, DefaultPreemption and DefaultBinder."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_podgroup_cycle import condition, config, gang, node_of
from test_preemption import pdb
from test_runtime import NO_LEAKS, PROFILE, node, wait_for

from framework import features
from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.plugins.defaultpreemption import DefaultPreemption
from framework.plugins.podgrouppreemption import (
    Budget,
    Victim,
    cluster_victims,
    filter_victims_with_pdb_violation,
    group_preemption_policy,
)
from framework.scheduler import Scheduler
from framework.scheduler.podgroup_algorithm import POD_GROUP_UNSCHEDULABLE
from framework.scheduler.records import EV_DELETED, EV_NOMINATED, EV_PREEMPTED, Event
from pluginhost.manifest import pod_from_dict
from pluginhost.model import Node, Pod, PodDisruptionBudget
from pluginhost.placement import PodGroupAssignments, PodGroupInfo
from pluginhost.plugin import CycleState
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status
from pluginhost.view import NodeView
from pluginhost.workload import PodGroup

PLUGINS = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultPreemption", "DefaultBinder"]


@pytest.fixture(autouse=True)
def generic_workload() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true"))
    try:
        yield
    finally:
        features.install(previous)


def vpod(name: str, cpu: str, priority: int, node_name: str = "", group: str = "",
         labels: dict[str, str] | None = None, policy: str = "", started: int = 0) -> Pod:
    """A pod: bound to ``node_name`` when given (a victim), pending otherwise; ``started`` orders the
    creation timestamps (seconds after 2026-01-01)."""
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if policy:
        spec["preemptionPolicy"] = policy
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {},
                                       "creationTimestamp": f"2026-01-01T00:00:{started:02d}Z"},
                          "spec": spec})


def victim_group(name: str, mode: str, priority: int | None = None) -> PodGroup:
    return PodGroup(name, uid=f"uid-pg-{name}", policy="basic", disruption_mode=mode, priority=priority)


def deleted(events: list[Event]) -> list[str]:
    return sorted(ev.name for ev in events if ev.type == EV_DELETED and ev.kind == "Pod")


def preempted(events: list[Event]) -> dict[str, str]:
    """Victim -> the reason its Preempted event gives."""
    return {ev.name: ev.status.message() for ev in events if ev.type == EV_PREEMPTED and ev.status is not None}


def nominations(events: list[Event]) -> dict[str, str]:
    """Pod -> the first node it was nominated to."""
    out: dict[str, str] = {}
    for ev in events:
        if ev.type == EV_NOMINATED:
            out.setdefault(ev.name, ev.node_name)
    return out


def scenario(groups: list[PodGroup], objects: list[Pod | Node | PodDisruptionBudget],
             gang_pods: list[str]) -> Scheduler:
    """Run until every pod of the gang is bound (at most 10 s)."""
    async def main() -> Scheduler:
        reg = in_tree_registry()
        s = Scheduler(load_config(config(PLUGINS), reg.points(), "test.yaml"), reg, seed=0)
        for pg in groups:
            s.cache.podgroups.put(pg)
        await s.apply(objects)  # type: ignore[arg-type]
        task = asyncio.create_task(s.run())

        try:
            await wait_for(s, lambda: all(node_of(s, n) for n in gang_pods), 10.0)
        finally:
            await s.drain(timeout=10.0)
            await s.stop()
            await asyncio.wait_for(task, 10.0)
        return s

    s = asyncio.run(main())
    assert s.leaks() == NO_LEAKS
    assert s.cache.assumed() == []
    return s


@dataclass
class Case:
    id: str
    nodes: list[Node]
    victims: list[Pod]
    gang: list[Pod]
    min_count: int
    priority: int = 10
    groups: list[PodGroup] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    want_deleted: list[str] = field(default_factory=list)
    want_nominated: dict[str, str] = field(default_factory=dict)
    want_bound: dict[str, str] = field(default_factory=dict)
    #: The PodGroup's PodGroupInitiallyScheduled condition at the end: status and message.
    want_condition: tuple[str, str] = ("True", "")


GANG_SHORT = "pod group is unschedulable, minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"

CASES = [
    Case("no-victims-needed",
         [node("n1", cpu="3")], [vpod("l1", "1", 1, "n1")],
         [vpod("p0", "1", 10, group="g"), vpod("p1", "1", 10, group="g")], 2,
         want_bound={"p0": "n1", "p1": "n1"}),
    Case("lower-priority-victims-the-most-important-reprieved",
         # Room for the gang's 2 cpus is made by evicting 2 of the 3: l3 (priority 3) is given back first
         # and fits beside the gang; l2 and l1 do not.
         [node("n1", cpu="3")],
         [vpod("l1", "1", 1, "n1"), vpod("l2", "1", 2, "n1"), vpod("l3", "1", 3, "n1")],
         [vpod("p0", "1", 10, group="g"), vpod("p1", "1", 10, group="g")], 2,
         want_deleted=["l1", "l2"], want_nominated={"p0": "n1", "p1": "n1"},
         want_bound={"p0": "n1", "p1": "n1"}),
    Case("disruption-all-evicts-the-victims-whole-group",
         # One cpu is wanted, on n1 (more room left there); v's pods run on n1 and n2: All evicts both.
         [node("n1", cpu="3"), node("n2", cpu="1")],
         [vpod("h1", "1", 50, "n1"), vpod("v0", "1", 0, "n1", group="v"), vpod("w0", "1", 0, "n1"),
          vpod("v1", "1", 0, "n2", group="v")],
         [vpod("p0", "2", 10, group="g")], 1, groups=[victim_group("v", "All")],
         want_deleted=["v0", "v1", "w0"], want_nominated={"p0": "n1"}, want_bound={"p0": "n1"}),
    Case("disruption-single-evicts-only-the-pods-in-the-way",
         [node("n1", cpu="3"), node("n2", cpu="1")],
         [vpod("h1", "1", 50, "n1"), vpod("v0", "1", 0, "n1", group="v"), vpod("w0", "1", 0, "n1"),
          vpod("v1", "1", 0, "n2", group="v")],
         [vpod("p0", "2", 10, group="g")], 1, groups=[victim_group("v", "Single")],
         want_deleted=["v0", "w0"], want_nominated={"p0": "n1"}, want_bound={"p0": "n1"}),
    Case("a-group-victim-is-more-important-than-a-lone-pod",
         # v0 (of a group, rank 2) and w0 (a lone pod) have the same priority: v0 is given back first.
         [node("n1", cpu="2")],
         [vpod("v0", "1", 0, "n1", group="v", started=9), vpod("w0", "1", 0, "n1", started=1)],
         [vpod("p0", "1", 10, group="g")], 1, groups=[victim_group("v", "Single")],
         want_deleted=["w0"], want_nominated={"p0": "n1"}, want_bound={"p0": "n1"}),
    Case("pdb-protected-victim-is-reprieved-first",
         # a's budget allows no disruption: a is given back before b although b has the higher priority.
         [node("n1", cpu="2")],
         [vpod("a", "1", 1, "n1", labels={"app": "a"}), vpod("b", "1", 2, "n1")],
         [vpod("p0", "1", 10, group="g")], 1,
         pdbs=[pdb("guard", {"matchLabels": {"app": "a"}}, minAvailable=1)],
         want_deleted=["b"], want_nominated={"p0": "n1"}, want_bound={"p0": "n1"}),
    Case("without-the-pdb-the-lower-priority-goes",
         [node("n1", cpu="2")],
         [vpod("a", "1", 1, "n1", labels={"app": "a"}), vpod("b", "1", 2, "n1")],
         [vpod("p0", "1", 10, group="g")], 1,
         want_deleted=["a"], want_nominated={"p0": "n1"}, want_bound={"p0": "n1"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_group_preemption_picks_the_victims_and_nominates_the_gang(case: Case) -> None:
    pg = gang("g", case.min_count, priority=case.priority)
    s = scenario([pg, *case.groups], [*case.nodes, *case.victims, *case.pdbs, *case.gang], [p.name for p in case.gang])
    events = list(s.recent_events())
    assert deleted(events) == case.want_deleted
    assert sorted(preempted(events)) == case.want_deleted
    assert all(why == "preempted by podgroup default/g on node cluster" for why in preempted(events).values())
    assert nominations(events) == case.want_nominated
    assert {p.name: node_of(s, p.name) for p in case.gang if node_of(s, p.name)} == case.want_bound
    got = condition(s, "g")
    assert got is not None and (got[0], got[2]) == case.want_condition


@dataclass
class Refusal:
    id: str
    victims: list[Pod]
    gang: list[Pod]
    #: The pods the group's algorithm is re-run without (None: it is not re-run).
    want_removed: list[str] | None
    want_code: Code
    want_message: str


RERUN_STATUS = Status(Code.Unschedulable, (POD_GROUP_UNSCHEDULABLE, "minCount (2) cannot be satisfied: 1 scheduled, "
                                           "0 remaining"))
REFUSALS = [
    Refusal("higher-priority-pods-are-not-victims",
            [vpod("h1", "1", 50, "n1"), vpod("l1", "1", 1, "n1")],
            [vpod("p0", "1", 10, group="g"), vpod("p1", "1", 10, group="g")], ["l1"], Code.Unschedulable,
            "pod group preemption: pod group is unschedulable, minCount (2) cannot be satisfied: 1 scheduled, "
            "0 remaining"),
    Refusal("nothing-of-lower-priority", [vpod("h1", "1", 50, "n1")], [vpod("p0", "1", 10, group="g")], None,
            Code.UnschedulableAndUnresolvable,
            "pod group preemption: No preemption victims found for incoming preemptor"),
    Refusal("preemption-policy-never", [vpod("l1", "1", 1, "n1")],
            [vpod("p0", "1", 10, group="g", policy="Never")], None, Code.Unschedulable,
            "pod group preemption: not eligible due to preemptionPolicy=Never."),
]


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.id)
def test_group_preemption_refuses_and_says_why(case: Refusal) -> None:
    async def main() -> tuple[Any, Status, list[list[str]], list[str]]:
        reg = in_tree_registry()
        s = Scheduler(load_config(config(PLUGINS), reg.points(), "test.yaml"), reg, seed=0)
        pg = gang("g", len(case.gang), priority=10)
        s.cache.podgroups.put(pg)
        await s.apply([node("n1", cpu="2"), *case.victims, *case.gang])
        plugin = s.profiles[PROFILE].plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        removed: list[list[str]] = []

        async def schedule(view: NodeView | None = None) -> tuple[PodGroupAssignments | None, Status]:
            removed.append(sorted(uid.removeprefix("uid-") for uid, _ in (view.removed_pods if view else ())))
            return None, RERUN_STATUS

        snapshot = s.cache.snapshot()
        result, status = await plugin.pod_group_post_filter(CycleState("t", snapshot), PodGroupInfo(pg, case.gang),
                                                            schedule)
        return result, status, removed, deleted(list(s.recent_events()))

    result, status, removed, gone = asyncio.run(main())
    assert result is None
    assert (status.code, status.message()) == (case.want_code, case.want_message)
    assert removed == ([] if case.want_removed is None else [case.want_removed])
    assert gone == []


# ---- the parts, on a snapshot ----------------------------------------------------------------------


class Groups:
    def __init__(self, *groups: PodGroup) -> None:
        self._by = {(g.namespace, g.name): g for g in groups}

    def get(self, namespace: str, name: str) -> PodGroup | None:
        return self._by.get((namespace, name))


def snapshot_of(s: Scheduler) -> Snapshot:
    return s.cache.snapshot()


def test_cluster_victims_make_one_unit_of_a_disruption_all_group_wherever_its_pods_run() -> None:
    async def main() -> list[Victim]:
        reg = in_tree_registry()
        s = Scheduler(load_config(config(PLUGINS), reg.points(), "test.yaml"), reg, seed=0)
        await s.apply([node("n1"), node("n2"), vpod("a0", "1", 0, "n1", group="a"), vpod("x", "1", 4, "n1"),
                       vpod("a1", "1", 0, "n2", group="a"), vpod("s0", "1", 0, "n2", group="s")])
        return cluster_victims(snapshot_of(s), Groups(victim_group("a", "All", 7), victim_group("s", "Single", 3)))

    victims = asyncio.run(main())
    assert [([p.name for p in v.pods], v.priority, v.rank, v.group) for v in victims] == [
        (["a0", "a1"], 7, 2, "default/a"),
        (["x"], 4, 1, ""),
        (["s0"], 3, 2, ""),
    ]
    assert [v.pods[0].name for v in sorted(victims, key=Victim.importance)] == ["a0", "x", "s0"]


def test_a_victim_unit_violates_when_any_of_its_pods_does() -> None:
    a = Victim((vpod("a0", "1", 0, labels={"app": "a"}), vpod("a1", "1", 0, labels={"app": "a"})), 0, 2, "default/a")
    b = Victim((vpod("b0", "1", 0, labels={"app": "b"}),), 0, 1)
    budgets = [Budget.of(pdb("pa", {"matchLabels": {"app": "a"}}, maxUnavailable=1)),
               Budget.of(pdb("pb", {"matchLabels": {"app": "b"}}, maxUnavailable=1))]
    # disruptionsAllowed as the disruption controller would have it: pa and pb allow one each.
    budgets = [Budget(b_.namespace, b_.matcher, 1, b_.disrupted) for b_ in budgets]
    violating, clean = filter_victims_with_pdb_violation([a, b], budgets)
    assert [(v.group, n) for v, n in violating] == [("default/a", 1)]
    assert clean == [b]


@pytest.mark.parametrize(("gate", "pg_policy", "pod_policy", "want"), [
    (False, "", "", "PreemptLowerPriority"),
    (False, "", "Never", "Never"),
    (False, "Never", "", "PreemptLowerPriority"),  # the PodGroup's field is read only with the gate on
    (True, "Never", "", "Never"),
    (True, "", "Never", "PreemptLowerPriority"),
])
def test_group_preemption_policy(gate: bool, pg_policy: str, pod_policy: str, want: str) -> None:
    previous = features.install(features.parse(f"GenericWorkload=true,PodGroupPreemptionPolicy={str(gate).lower()}"))
    try:
        pg = PodGroup("g", preemption_policy=pg_policy)
        assert group_preemption_policy(pg, [vpod("p0", "1", 0, policy=pod_policy)]) == want
    finally:
        features.install(previous)


# ---- victims out of the gang's reach ---------------------------------------------------------------


def zone_node(name: str, cpu: str, zone: str) -> Node:
    from pluginhost.manifest import node_from_dict

    return node_from_dict({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
                           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def shy_pod(name: str, cpu: str, group: str) -> Pod:
    """A gang pod of priority 10 that keeps out of any zone with an ``app: x`` pod."""
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
                          "spec": {"priority": 10, "schedulingGroup": {"podGroupName": group},
                                   "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                                    [term]}},
                                   "containers": [{"name": "c", "image": "busybox",
                                                   "resources": {"requests": {"cpu": cpu}}}]}})


def run_gang_of_one(objects: list[Pod | Node]) -> Scheduler:
    """``objects`` applied with InterPodAffinity in the profile and the gang "g" of one (priority 10), run
    until p0 is placed, then drained and stopped."""

    async def main() -> Scheduler:
        reg = in_tree_registry()
        s = Scheduler(load_config(config([*PLUGINS, "InterPodAffinity"]), reg.points(), "test.yaml"), reg, seed=0)
        s.cache.podgroups.put(gang("g", 1, priority=10))
        await s.apply(objects)
        task = asyncio.create_task(s.run())
        try:
            await wait_for(s, lambda: bool(node_of(s, "p0")), 10.0)
        finally:
            await s.drain(timeout=10.0)
            await s.stop()
            await asyncio.wait_for(task, 10.0)
        return s

    return asyncio.run(main())


def test_group_preemption_with_inter_pod_affinity_evicts_only_the_victims_in_reach() -> None:
    # p0 (2 cpus, away from app=x by zone) fits only on n1 once l1 is out. x1 is app=x in n1's zone:
    # given back, p0 fails its anti-affinity, so x1 goes too. x2 (app=x, zone b) and y2 (zone a, not
    # app=x) are on nodes p0 is not proposed on and out of its anti-affinity's reach: both stay.
    nodes = [zone_node("n1", "2", "a"), zone_node("n2", "1500m", "a"), zone_node("n3", "1", "b")]
    victims = [vpod("l1", "2", 1, "n1", labels={"app": "y"}), vpod("x1", "500m", 1, "n2", labels={"app": "x"}),
               vpod("y2", "500m", 1, "n2", labels={"app": "y"}), vpod("x2", "1", 1, "n3", labels={"app": "x"})]

    s = run_gang_of_one([*nodes, *victims, shy_pod("p0", "2", "g")])
    events = list(s.recent_events())
    assert deleted(events) == ["l1", "x1"]
    assert preempted(events) == {v: "preempted by podgroup default/g on node cluster" for v in ("l1", "x1")}
    assert nominations(events) == {"p0": "n1"}
    assert node_of(s, "p0") == "n1"
    assert s.leaks() == NO_LEAKS


@pytest.mark.parametrize(("other", "other_node", "node_name", "want"), [
    # p0's own anti-affinity (app=x by zone): an app=x pod reaches the nodes of its zone only.
    ({"app": "x"}, "n2", "n1", True),
    ({"app": "x"}, "n3", "n1", False),
    ({"app": "y"}, "n2", "n1", False),
    ({"app": "x"}, "n1", "n1", True),
])
def test_inter_pod_affinity_says_which_nodes_a_pod_reaches(other: dict[str, str], other_node: str, node_name: str,
                                                           want: bool) -> None:
    async def main() -> bool:
        reg = in_tree_registry()
        s = Scheduler(load_config(config([*PLUGINS, "InterPodAffinity"]), reg.points(), "test.yaml"), reg, seed=0)
        await s.apply([zone_node("n1", "2", "a"), zone_node("n2", "2", "a"), zone_node("n3", "2", "b")])
        plugin = s.profiles[PROFILE].plugins["InterPodAffinity"]
        snapshot = s.cache.snapshot()
        state = CycleState("t", snapshot)
        pod = shy_pod("p0", "1", "g")
        _, status = await plugin.pre_filter(state, pod)  # type: ignore[attr-defined]
        assert status.ok
        row, other_row = snapshot.row(node_name), snapshot.row(other_node)
        assert row is not None and other_row is not None
        return bool(plugin.reaches(state, pod, vpod("o", "1", 1, other_node, labels=other),  # type: ignore[attr-defined]
                                   other_row, row, snapshot.table))

    assert asyncio.run(main()) is want


def social_pod(name: str, labels: dict[str, str], cpu: str = "1") -> Pod:
    """A gang pod that must share a zone with an ``app: x`` pod (labelled ``labels``)."""
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
                          "spec": {"priority": 10, "schedulingGroup": {"podGroupName": "g"},
                                   "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                                [term]}},
                                   "containers": [{"name": "c", "image": "busybox",
                                                   "resources": {"requests": {"cpu": cpu}}}]}})


@pytest.mark.parametrize(("own", "other", "other_node", "want"), [
    # Affinity to app=x by zone: an app=x pod reaches the nodes of its zone...
    ({"app": "y"}, {"app": "x"}, "n2", True),
    ({"app": "y"}, {"app": "x"}, "n3", False),
    ({"app": "y"}, {"app": "y"}, "n2", False),
    # ...and anywhere when the pod matches its own affinity: the first of its group may go where no
    # app=x pod is, so any app=x pod in the cluster ends that allowance.
    ({"app": "x"}, {"app": "x"}, "n3", True),
    ({"app": "x"}, {"app": "y"}, "n3", False),
    ({"app": "x"}, {"app": "y"}, "n2", False),
])
def test_inter_pod_affinity_reach_of_a_pod_with_affinity(own: dict[str, str], other: dict[str, str], other_node: str,
                                                         want: bool) -> None:
    async def main() -> bool:
        reg = in_tree_registry()
        s = Scheduler(load_config(config([*PLUGINS, "InterPodAffinity"]), reg.points(), "test.yaml"), reg, seed=0)
        await s.apply([zone_node("n1", "2", "a"), zone_node("n2", "2", "a"), zone_node("n3", "2", "b"),
                       vpod("anchor", "1", 1, "n1", labels={"app": "x"})])
        plugin = s.profiles[PROFILE].plugins["InterPodAffinity"]
        snapshot = s.cache.snapshot()
        state = CycleState("t", snapshot)
        pod = social_pod("p0", own)
        _, status = await plugin.pre_filter(state, pod)  # type: ignore[attr-defined]
        assert status.ok
        row, other_row = snapshot.row("n1"), snapshot.row(other_node)
        assert row is not None and other_row is not None
        return bool(plugin.reaches(state, pod, vpod("o", "1", 1, other_node, labels=other),  # type: ignore[attr-defined]
                                   other_row, row, snapshot.table))

    assert asyncio.run(main()) is want


def test_group_preemption_evicts_a_far_victim_that_ends_the_first_of_group_allowance() -> None:
    # p0 (2 cpus, labelled app=x, must share a zone with an app=x pod) fits only on n1 once l1 is out,
    # and only as the first of its group: with no app=x pod anywhere. xb (app=x) is in zone b, far from
    # n1, yet given back it ends that allowance, so it goes too; yb (app=y, zone b) is out of reach and
    # stays, as does yc on n4 (zone c).
    nodes = [zone_node("n1", "2", "a"), zone_node("n3", "1500m", "b"), zone_node("n4", "1", "c")]
    victims = [vpod("l1", "2", 1, "n1", labels={"app": "y"}), vpod("xb", "500m", 1, "n3", labels={"app": "x"}),
               vpod("yb", "1", 1, "n3", labels={"app": "y"}), vpod("yc", "1", 1, "n4", labels={"app": "y"})]
    gang_pod = social_pod("p0", {"app": "x"}, "2")

    s = run_gang_of_one([*nodes, *victims, gang_pod])
    events = list(s.recent_events())
    assert deleted(events) == ["l1", "xb"]
    assert nominations(events) == {"p0": "n1"}
    assert node_of(s, "p0") == "n1"
    assert s.leaks() == NO_LEAKS
