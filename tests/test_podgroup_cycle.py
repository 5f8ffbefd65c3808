"""The PodGroup scheduling cycle as kube-scheduler v1.37.2 runs it with GenericWorkload on
(``pkg/scheduler/schedule_one_podgroup.go``, ``backend/queue``): a group's pods are popped together,
scheduled in one snapshot one after the other, and placed all together or not at all; the messages
each pod gets and the PodGroup's ``PodGroupInitiallyScheduled`` condition are upstream's, word for word.

The rig is the in-process scheduler on the embedded store, with the in-tree GangScheduling plugin."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from test_runtime import NO_LEAKS, PROFILE, describe, node, settled, wait_for

from framework import features
from framework.config import load_config
from framework.observe.metrics import SchedulerMetrics
from framework.plugins import in_tree_registry
from framework.podgroup_queue import (
    GroupSchedulingQueue,
    QueuedPodGroupInfo,
    group_backoff_duration,
    member_order,
)
from framework.scheduler import Scheduler
from framework.scheduler.placements import placement_snapshot
from framework.scheduler.podgroup import validate_group
from framework.scheduler.podgroup_algorithm import POD_GROUP_UNSCHEDULABLE
from pluginhost.manifest import pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import QueuedPodInfo
from pluginhost.snapshot import ClusterTable
from pluginhost.status import Code, Status
from pluginhost.workload import BASIC, GANG, PodGroup, PodGroupCondition

SETTLE = 5.0


@pytest.fixture(autouse=True)
def generic_workload(request: pytest.FixtureRequest) -> Iterator[None]:
    """GenericWorkload on; TopologyAwareWorkloadScheduling too for the tests named ``test_tas_*``."""
    gates = "GenericWorkload=true"
    if request.node.name.startswith("test_tas_"):
        gates += ",TopologyAwareWorkloadScheduling=true"
    previous = features.install(features.parse(gates))
    try:
        yield
    finally:
        features.install(previous)


def config(plugins: list[str], *, placement: bool = False) -> str:
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1",
        "podMaxBackoffSeconds: 10",
        "profiles:",
        f"- schedulerName: {PROFILE}",
        "  plugins:",
        "    multiPoint:",
        "      enabled:",
        *(f"      - {{name: {name}}}" for name in plugins),
        "      disabled:",
        '      - {name: "*"}',
    ]
    return "\n".join(lines) + "\n"


def make(*, tas: bool = False) -> Scheduler:
    plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder"]
    if tas:
        plugins += ["TopologyPlacementGenerator", "PodGroupPodsCount"]
    reg = in_tree_registry()
    return Scheduler(load_config(config(plugins), reg.points(), "test.yaml"), reg, seed=0)


def gpod(name: str, cpu: str, group: str | None, priority: int = 0, scheduler: str = PROFILE,
         policy: str = "", bound: str = "") -> Pod:
    spec: dict[str, Any] = {
        "priority": priority, "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }  # fmt: skip
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    if policy:
        spec["preemptionPolicy"] = policy
    if bound:
        spec["nodeName"] = bound
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
                          "spec": spec})


def gang(name: str, min_count: int, *, priority: int | None = None, topology: tuple[str, ...] = ()) -> PodGroup:
    return PodGroup(name, uid=f"uid-pg-{name}", generation=2, policy=GANG, min_count=min_count, priority=priority,
                    topology_keys=topology)


def rack_node(name: str, rack: str, cpu: str) -> Node:
    from pluginhost.manifest import node_from_dict

    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"rack": rack}},
                           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def phase(s: Scheduler, name: str) -> str:
    rec = s.get_pod("default", name)
    assert rec is not None
    return str(rec.phase)


def message(s: Scheduler, name: str) -> str:
    """The message of the pod's first failed attempt (its FailedScheduling event)."""
    failed = [ev for ev in s.recent_events() if ev.name == name and ev.type in ("Unschedulable", "Error")]
    assert failed and failed[0].status is not None, describe(s)
    return failed[0].status.message()


def code(s: Scheduler, name: str) -> Code:
    failed = [ev for ev in s.recent_events() if ev.name == name and ev.type in ("Unschedulable", "Error")]
    assert failed and failed[0].status is not None, describe(s)
    return failed[0].status.code


def node_of(s: Scheduler, name: str) -> str:
    rec = s.get_pod("default", name)
    assert rec is not None
    return rec.pod.node_name


def condition(s: Scheduler, group: str) -> tuple[str, str, str, int] | None:
    pg = s.cache.podgroups.get("default", group)
    assert pg is not None
    c = pg.condition("PodGroupInitiallyScheduled")
    return None if c is None else (c.status, c.reason, c.message, c.observed_generation)


async def run(s: Scheduler, groups: list[PodGroup], objects: list[Pod | Node],
              during: Callable[[Scheduler], Awaitable[None]] | None = None, settle: float = SETTLE) -> None:
    for pg in groups:
        s.cache.podgroups.put(pg)
    await s.apply(objects)
    task = asyncio.create_task(s.run())
    try:
        if during is not None:
            await during(s)
        await wait_for(s, lambda: settled(s), settle)
    finally:
        await s.drain(timeout=settle)
        await s.stop()
        await asyncio.wait_for(task, settle)


def scenario(groups: list[PodGroup], objects: list[Pod | Node], *, tas: bool = False,
             during: Callable[[Scheduler], Awaitable[None]] | None = None) -> Scheduler:
    async def main() -> Scheduler:
        s = make(tas=tas)
        await run(s, groups, objects, during)
        return s

    s = asyncio.run(main())
    assert s.leaks() == NO_LEAKS
    assert s.cache.assumed() == []
    return s


# ---------------------------------------------------------------------------------------------------
# Whole gangs or nothing


def test_a_gang_that_fits_is_bound_whole_and_its_condition_says_scheduled() -> None:
    pods = [gpod(f"p{i}", "1", "g") for i in range(3)]
    s = scenario([gang("g", 3)], [node("n1", cpu="2"), node("n2", cpu="2"), *pods])
    assert [phase(s, f"p{i}") for i in range(3)] == ["Bound"] * 3
    assert condition(s, "g") == ("True", "Scheduled", "", 2)
    assert s.stats.podgroup_attempts == {("scheduled", PROFILE): 1}
    metrics = SchedulerMetrics()
    metrics.attach(s)
    assert [line for line in metrics.exposition().decode().splitlines()
            if line.startswith("scheduler_podgroup_schedule_attempts_total")] == [
        'scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0']


def test_each_pod_of_a_group_sees_the_pods_placed_before_it_one_row_changed_at_a_time() -> None:
    # Three 1-cpu pods on three 1-cpu nodes: each pod's snapshot is the last one's plus the pod placed
    # last, so only that row is new to plugins that keep per-row data between snapshots.
    seen: list[Any] = []

    async def main() -> Scheduler:
        s = make()
        schedule_pod = s._schedule_pod

        async def recording(fwk: Any, state: Any, pod: Pod, snapshot: Any, *rest: Any) -> Any:
            seen.append(snapshot)
            return await schedule_pod(fwk, state, pod, snapshot, *rest)

        s._schedule_pod = recording  # type: ignore[method-assign]
        await run(s, [gang("g", 3)], [node(f"n{i}", cpu="1") for i in range(3)]
                  + [gpod(f"p{i}", "1", "g") for i in range(3)])
        return s

    s = asyncio.run(main())
    hosts = [node_of(s, f"p{i}") for i in range(3)]
    assert sorted(hosts) == ["n0", "n1", "n2"]
    rows = [seen[0].row(h) for h in hosts]
    assert [snap.requested_of("cpu").tolist() for snap in seen] == [
        [0, 0, 0], [1000 if r == rows[0] else 0 for r in range(3)],
        [1000 if r in rows[:2] else 0 for r in range(3)]]
    changed = [np.flatnonzero(b.row_versions != a.row_versions).tolist() for a, b in itertools.pairwise(seen)]
    assert changed == [[rows[0]], [rows[1]]]


def test_a_gang_that_does_not_fit_binds_nothing_and_every_pod_says_why() -> None:
    # 3 pods of 1 cpu, minCount 3, room for 2: p0 and p1 fit, p2 does not; PlacementFeasible then says
    # the gang cannot reach minCount (2 scheduled, 0 remaining). No PodGroupPostFilter plugin runs, so
    # the group status gains an empty reason (upstream appends the PostFilter status's text as it is).
    pods = [gpod(f"p{i}", "1", "g") for i in range(3)]
    s = scenario([gang("g", 3)], [node("n1", cpu="1"), node("n2", cpu="1"), *pods])
    group_message = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
    assert [phase(s, f"p{i}") for i in range(3)] == ["Unschedulable"] * 3 or all(
        node_of(s, f"p{i}") == "" for i in range(3)), describe(s)
    assert message(s, "p0") == f"pod group is unschedulable, {group_message}"
    assert message(s, "p1") == f"pod group is unschedulable, {group_message}"
    assert message(s, "p2") == "0/2 nodes are available: 2 Insufficient cpu."
    assert condition(s, "g") == ("False", "Unschedulable", group_message, 2)
    assert s.stats.podgroup_attempts[("unschedulable", PROFILE)] >= 1


def test_a_gang_found_short_before_any_pod_is_tried_gives_every_pod_the_group_status() -> None:
    # minCount 4 with 3 pods known: PreEnqueue holds them ("waiting for minCount pods ...") until the
    # PodGroup shrinks to minCount 3; then the cycle's first PlacementFeasible passes. Here the group is
    # made infeasible from the start by a 4th pod that was deleted: 3 remaining, minCount 4.
    pods = [gpod(f"p{i}", "1", "g") for i in range(4)]

    async def during(s: Scheduler) -> None:
        s.delete_pod("default", "p3")  # before the first pop: PreEnqueue let the 4 in

    s = make()

    async def main() -> None:
        for pg in [gang("g", 4)]:
            s.cache.podgroups.put(pg)
        await s.apply([node("n1", cpu="8"), *pods])
        s.delete_pod("default", "p3")
        task = asyncio.create_task(s.run())
        try:
            await wait_for(s, lambda: settled(s), SETTLE)
        finally:
            await s.drain(timeout=SETTLE)
            await s.stop()
            await asyncio.wait_for(task, SETTLE)

    asyncio.run(main())
    reason = "pod group is unschedulable, minCount (4) cannot be satisfied: 0 scheduled, 3 remaining"
    # The pods the algorithm never reached take the group status as it was before PodGroupPostFilter
    # added its (empty) reason; the condition has it.
    assert [message(s, f"p{i}") for i in range(3)] == [reason] * 3
    assert condition(s, "g") == ("False", "Unschedulable", reason + ", ", 2)


def test_pods_added_to_a_group_with_bound_members_count_them() -> None:
    # A gang of minCount 2 is placed; a third pod added later is scheduled on its own merits (2 already
    # scheduled count toward minCount) and the condition stays True.
    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: phase(s, "p0") == "Bound" and phase(s, "p1") == "Bound", SETTLE)
        await s.apply([gpod("p2", "1", "g")])
        await wait_for(s, lambda: phase(s, "p2") == "Bound", SETTLE)

    s = scenario([gang("g", 2)], [node("n1", cpu="3"), gpod("p0", "1", "g"), gpod("p1", "1", "g")], during=during)
    assert [node_of(s, f"p{i}") for i in range(3)] == ["n1"] * 3
    assert condition(s, "g") == ("True", "Scheduled", "", 2)
    assert s.stats.podgroup_attempts == {("scheduled", PROFILE): 2}


def test_a_late_pod_that_does_not_fit_leaves_the_condition_true() -> None:
    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: phase(s, "p0") == "Bound" and phase(s, "p1") == "Bound", SETTLE)
        await s.apply([gpod("p2", "4", "g")])

    s = scenario([gang("g", 2)], [node("n1", cpu="3"), gpod("p0", "1", "g"), gpod("p1", "1", "g")], during=during)
    assert node_of(s, "p2") == ""
    assert message(s, "p2") == "0/1 nodes are available: 1 Insufficient cpu."
    assert condition(s, "g") == ("True", "Scheduled", "", 2)


def test_two_gangs_racing_for_the_same_room_one_is_placed_whole_the_other_waits() -> None:
    # Room for 4 pods; gangs a (priority 10) and b (priority 0) want 3 each. a goes first (queue order),
    # b cannot reach minCount and nothing of it is bound.
    a = [gpod(f"a{i}", "1", "a", priority=10) for i in range(3)]
    b = [gpod(f"b{i}", "1", "b") for i in range(3)]
    s = scenario([gang("a", 3, priority=10), gang("b", 3)], [node("n1", cpu="2"), node("n2", cpu="2"), *b, *a])
    assert sorted(phase(s, p.name) for p in a) == ["Bound"] * 3
    assert [node_of(s, p.name) for p in b] == ["", "", ""]
    assert condition(s, "a") == ("True", "Scheduled", "", 2)
    # b0 takes the last free cpu (1 scheduled, 2 remaining: Wait); b1 fits nowhere, and 1 + 1 < 3.
    b_message = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
    assert condition(s, "b") == ("False", "Unschedulable", b_message, 2)
    assert [message(s, p.name) for p in b] == [
        f"pod group is unschedulable, {b_message}",
        "0/2 nodes are available: 2 Insufficient cpu.",
        "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining",
    ]


# ---------------------------------------------------------------------------------------------------
# validatePodGroup


@dataclass
class ValidateCase:
    id: str
    pods: list[Pod]
    scheduled: list[Pod] = field(default_factory=list)
    priority: int = 0
    want: str = ""


VALIDATE_CASES = [
    ValidateCase("consistent", [gpod("p0", "1", "g"), gpod("p1", "1", "g")]),
    ValidateCase("scheduler-names", [gpod("p0", "1", "g"), gpod("p1", "1", "g", scheduler="other")],
                 want='all pods in a single pod group should have the same .spec.schedulerName set, '
                      'got: "other" and "default-scheduler"'),
    ValidateCase("priority", [gpod("p0", "1", "g", priority=5)], priority=0,
                 want="all pods in a single pod group should have the same priority as the pod group's priority, "
                      "got 5 and 0"),
    ValidateCase("preemption-policy", [gpod("p0", "1", "g"), gpod("p1", "1", "g", policy="Never")],
                 want="all pods in a single pod group should have the same preemption policy, "
                      "got Never and PreemptLowerPriority"),
    ValidateCase("scheduled-pods-too", [gpod("p0", "1", "g")], scheduled=[gpod("p1", "1", "g", priority=3)],
                 want="all pods in a single pod group should have the same priority as the pod group's priority, "
                      "got 3 and 0"),
    ValidateCase("no-profile", [gpod("p0", "1", "g", scheduler="other")],
                 want='profile not found for scheduler name "other"'),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in VALIDATE_CASES])
def test_validate_group(case: ValidateCase) -> None:
    assert validate_group(case.pods, case.scheduled, case.priority, [PROFILE]) == case.want


def test_an_invalid_group_fails_every_pod_with_a_scheduler_error() -> None:
    pods = [gpod("p0", "1", "g", priority=5), gpod("p1", "1", "g", priority=5)]
    s = scenario([gang("g", 2)], [node("n1"), *pods])
    want = "all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0"
    assert [message(s, "p0"), message(s, "p1")] == [want, want]
    assert [code(s, "p0"), code(s, "p1")] == [Code.Error, Code.Error]
    assert condition(s, "g") == ("False", "SchedulerError", want, 2)


# ---------------------------------------------------------------------------------------------------
# The queue: members in order, one entity per group, its backoff


def info(name: str, priority: int, attempts: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(gpod(name, "1", "g", priority=priority), timestamp=timestamp, attempts=attempts)


def test_members_are_ordered_by_priority_attempts_timestamp_then_name() -> None:
    infos = [info("e", 0, 0, 1.0), info("d", 0, 0, 1.0), info("c", 0, 1, 5.0), info("b", 5, 0, 9.0),
             info("a", 0, 0, 0.5)]
    assert [i.pod.name for i in sorted(infos, key=member_order)] == ["b", "c", "a", "d", "e"]


@pytest.mark.parametrize(("count", "size", "want"), [
    (0, 4, 0.0), (1, 4, 1.0), (2, 4, 2.0), (3, 4, 4.0), (4, 4, 8.0), (5, 4, 16.0), (6, 4, 20.0),
    (5, 1, 10.0), (9, 1, 10.0), (5, 2, 10 * math.sqrt(2)),
])
def test_group_backoff_caps_at_max_times_sqrt_size(count: int, size: int, want: float) -> None:
    # podInitialBackoff 1s, podMaxBackoff 10s: 1, 2, 4, 8, 16, then 10*sqrt(4) = 20 for a group of 4.
    assert group_backoff_duration(1.0, 10.0, count, size) == pytest.approx(want, abs=1e-9)


def test_a_group_is_one_queue_entity_with_the_podgroups_priority() -> None:
    async def main() -> None:
        groups = {"g": gang("g", 2, priority=7)}
        now = [0.0]
        q = GroupSchedulingQueue(lambda a, b: (a.pod.priority, -a.timestamp) > (b.pod.priority, -b.timestamp),
                                 group_of=lambda p: (p.namespace, p.scheduling_group) if p.scheduling_group else None,
                                 podgroup=lambda ns, name: groups.get(name), clock=lambda: now[0])
        assert await q.add(gpod("solo", "1", None, priority=3)) == "active"
        assert await q.add(gpod("m1", "1", "g", priority=7)) == "active"
        assert await q.add(gpod("m0", "1", "g", priority=7)) == "active"
        assert await q.add(gpod("x0", "1", "unknown")) == "gated"
        assert q.stats().active == 3 and q.stats().gated == 1
        first = await q.pop()
        assert isinstance(first, QueuedPodGroupInfo)
        # Equal priority, attempts and timestamp: by name.
        assert (first.key, first.pod.priority, [m.pod.name for m in first.members]) == ("podgroup/default/g", 7,
                                                                                       ["m0", "m1"])
        assert [q.where("uid-m0"), q.where("uid-m1")] == ["in-flight", "in-flight"]
        # A member arriving while its group is in flight waits for the group's cycle to end.
        assert await q.add(gpod("m2", "1", "g", priority=7)) == "active"
        q.requeue(first.members[1], Status(Code.Unschedulable, ("no",)))
        q.done("uid-m0")  # bound
        assert await q.add_attempted_group(first, Status(Code.Unschedulable, ("no",))) == "backoff"
        # m1 tried once comes before m2 never tried; the group backs off 1s (its first rejection).
        assert first.unschedulable_count == 1 and [m.pod.name for m in first.members] == ["m1", "m2"]
        assert q.group_backoff(first) == 1.0 and q.stats().backoff == 2
        second = await q.pop()
        assert second is not None and second.pod.name == "solo"

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------
# Topology-aware placements


def test_tas_places_the_gang_in_one_rack() -> None:
    # Two racks of two 2-cpu nodes; rack-a already runs 3 cpus of other pods. The gang (4 x 1 cpu,
    # minCount 4) fits only in rack-b, and lands there whole, though rack-a's free cpu would have been
    # filled first by the nodes' own scores.
    nodes = [rack_node("a1", "rack-a", "2"), rack_node("a2", "rack-a", "2"),
             rack_node("b1", "rack-b", "2"), rack_node("b2", "rack-b", "2")]
    filler = [gpod("f0", "2", None, bound="a1"), gpod("f1", "1", None, bound="a2")]
    pods = [gpod(f"p{i}", "1", "g") for i in range(4)]

    async def during(s: Scheduler) -> None:
        pass

    async def main() -> Scheduler:
        s = make(tas=True)
        s.cache.podgroups.put(gang("g", 4, topology=("rack",)))
        await s.apply([*nodes, *filler])
        task = asyncio.create_task(s.run())
        try:
            await wait_for(s, lambda: phase(s, "f0") == "Bound" and phase(s, "f1") == "Bound", SETTLE)
            await s.apply(pods)
            await wait_for(s, lambda: settled(s), SETTLE)
        finally:
            await s.drain(timeout=SETTLE)
            await s.stop()
            await asyncio.wait_for(task, SETTLE)
        return s

    s = asyncio.run(main())
    assert sorted(node_of(s, f"p{i}") for i in range(4)) == ["b1", "b1", "b2", "b2"], describe(s)
    assert condition(s, "g") == ("True", "Scheduled", "", 2)


@pytest.mark.parametrize("busy", ["rack-a", "rack-b"])
def test_tas_prefers_the_rack_that_would_be_most_allocated(busy: str) -> None:
    # Both racks (two 4-cpu, 8Gi nodes each) hold the gang (2 x 1 cpu) and PodGroupPodsCount ties them;
    # NodeResourcesFit's ScorePlacement (MostAllocated over the rack as one) picks the one already
    # running a 1-cpu pod: cpu (1000 + 2000) / 8000 and memory 3 x 200Mi (non-zero defaults) / 16Gi
    # give 37 and 3, mean 20; the empty rack 25 and 2, mean 13.
    nodes = [rack_node(n, f"rack-{n[0]}", "4") for n in ("a1", "a2", "b1", "b2")]
    filler = gpod("f0", "1", None, bound=f"{busy[-1]}1")

    async def main() -> dict[str, Any]:
        s = make(tas=True)
        s.cache.podgroups.put(gang("g", 2, topology=("rack",)))
        await s.apply([*nodes, filler, *(gpod(f"p{i}", "1", "g") for i in range(2))])
        return await s.explain_group("default", "g")

    out = asyncio.run(main())
    scores = {p["placement"]: p["score"]["plugins"] for p in out["placements"]}
    other = "rack-b" if busy == "rack-a" else "rack-a"
    assert scores == {busy: {"NodeResourcesFit": 20, "PodGroupPodsCount": 100},
                      other: {"NodeResourcesFit": 13, "PodGroupPodsCount": 100}}
    assert {p["node"][0] for p in out["pods"]} == {busy[-1]}


def test_tas_with_no_rack_holding_the_gang_reports_the_placements() -> None:
    nodes = [rack_node("a1", "rack-a", "2"), rack_node("b1", "rack-b", "2")]
    pods = [gpod(f"p{i}", "1", "g") for i in range(3)]
    s = scenario([gang("g", 3, topology=("rack",))], [*nodes, *pods], tas=True)
    assert [node_of(s, f"p{i}") for i in range(3)] == ["", "", ""]
    # The first placement (rack-a, one node of 2 cpus) takes p0 and p1, not p2: its status has no
    # error of its own, so its message is quoted whole.
    want = ("pod group is unschedulable, 0/2 placements are available, first placement status: "
            "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, ")
    assert condition(s, "g") == ("False", "Unschedulable", want, 2)


def test_placement_snapshots_share_a_node_table_while_the_nodes_stay() -> None:
    # A placement's snapshot holds its nodes' rows of the cycle's snapshot; its node table (and what
    # plugins keep per node table) is built once for those rows until a node changes.
    table = ClusterTable()
    for n in (rack_node("a1", "rack-a", "4"), rack_node("a2", "rack-a", "4"), rack_node("b1", "rack-b", "4")):
        table.upsert_node(n)
    before = placement_snapshot(table.snapshot(), ("a1", "a2"))
    table.place_pod(gpod("f0", "1", None), "a2")
    snap = table.snapshot()
    after = placement_snapshot(snap, ("a2", "a1"))
    assert after.table is before.table and after.names == ("a1", "a2")
    assert (before.requested_of("cpu").tolist(), after.requested_of("cpu").tolist()) == ([0, 0], [0, 1000])
    assert [len(p) for p in after.pods] == [0, 1]
    assert placement_snapshot(snap, snap.names) is snap
    table.upsert_node(rack_node("a1", "rack-b", "4"))
    relabelled = placement_snapshot(table.snapshot(), ("a1", "a2"))
    assert relabelled.table is not before.table
    assert [n.labels["rack"] for n in relabelled.nodes] == ["rack-b", "rack-a"]


_ = (BASIC, PodGroupCondition)


# ---------------------------------------------------------------------------------------------------
# explain for a group


def test_tas_explain_group_answers_per_placement() -> None:
    # Nothing runs the scheduling loop: explain works out what a cycle would do, and changes nothing.
    async def main() -> dict[str, Any]:
        s = make(tas=True)
        s.cache.podgroups.put(gang("g", 3, topology=("rack",)))
        await s.apply([rack_node("a1", "rack-a", "2"), rack_node("b1", "rack-b", "2"), rack_node("b2", "rack-b", "1"),
                       *(gpod(f"p{i}", "1", "g") for i in range(3))])
        out = await s.explain_group("default", "g")
        assert s.cache.assumed() == [] and s.leaks() == NO_LEAKS
        return out

    out = asyncio.run(main())
    fit = {"code": "Success", "reasons": []}
    assert out["placements"][0] == {
        "placement": "rack-a", "nodes": ["a1"],
        "status": {"code": "Unschedulable", "reasons": ["minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"]},
        "pods": [{"pod": "default/p0", "node": "a1", "status": fit},
                 {"pod": "default/p1", "node": "a1", "status": fit},
                 {"pod": "default/p2", "node": None,
                  "status": {"code": "Unschedulable", "reasons": ["0/1 nodes are available: 1 Insufficient cpu."]}}],
    }
    assert out["placements"][1]["placement"] == "rack-b"
    assert out["placements"][1]["status"] == fit
    assert sorted(p["node"] for p in out["pods"]) == ["b1", "b1", "b2"]
    assert (out["podGroup"], out["scheduled"], out["status"]) == ("default/g", 0, fit)


def test_explain_group_without_placements() -> None:
    async def main() -> dict[str, Any]:
        s = make()
        s.cache.podgroups.put(gang("g", 2))
        await s.apply([node("n1", cpu="1"), gpod("p0", "1", "g"), gpod("p1", "1", "g")])
        return await s.explain_group("default", "g")

    out = asyncio.run(main())
    assert "placements" not in out
    assert out["status"] == {"code": "Unschedulable",
                             "reasons": ["minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"]}
    assert [(p["pod"], p["node"]) for p in out["pods"]] == [("default/p0", "n1"), ("default/p1", None)]


def test_explain_group_whose_pods_are_all_bound_says_none_is_pending() -> None:
    # The bound members carry the profile's schedulerName; with no pending pod there is nothing to
    # compare them with, so the answer is "no pending pods", not a validation error.
    async def main() -> dict[str, Any]:
        s = make()
        s.cache.podgroups.put(gang("g", 2))
        await s.apply([node("n1", cpu="2"), gpod("p0", "1", "g", bound="n1"), gpod("p1", "1", "g", bound="n1")])
        return await s.explain_group("default", "g")

    out = asyncio.run(main())
    assert out == {"podGroup": "default/g", "scheduled": 2, "pods": [],
                   "status": {"code": "Unschedulable", "reasons": [POD_GROUP_UNSCHEDULABLE, "no pending pods"]}}


def test_cli_explains_a_podgroup_of_a_running_framework(capsys: pytest.CaptureFixture[str]) -> None:
    from framework_thread import FrameworkThread

    from framework.cli import main

    reg = in_tree_registry()
    fw = FrameworkThread(lambda r: load_config(config(["PrioritySort", "NodeResourcesFit", "GangScheduling",
                                                       "DefaultBinder"]), r.points(), "test.yaml"), reg).start()
    try:
        assert fw.server is not None
        s = fw.server.scheduler

        async def load() -> None:
            s.cache.podgroups.put(gang("g", 2))
            await s.apply([node("n1", cpu="1"), gpod("p0", "1", "g"), gpod("p1", "1", "g")])

        fw.call(load())
        assert main(["explain", "podgroup/g", "--server", fw.address, "-o", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["status"] == {"code": "Unschedulable",
                                 "reasons": ["minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"]}
        assert main(["explain", "podgroup/g", "--server", fw.address]) == 0
        text = capsys.readouterr().out
        assert text.splitlines()[:2] == ["podgroup default/g: Unschedulable (0 pod(s) already scheduled)",
                                         "  minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"]
        assert main(["explain", "podgroup/nope", "--server", fw.address]) == 1
        assert "podgroup default/nope not found" in capsys.readouterr().err
    finally:
        fw.close()


def test_pods_that_arrive_before_their_podgroup_wait_for_it() -> None:
    # kube-scheduler's incompletePodGroupPods: the pods wait, gated, until the PodGroup is seen.
    seen: dict[str, Any] = {}

    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: s.queue_of("uid-p1") == "gated", SETTLE)
        rec = s.get_pod("default", "p0")
        assert rec is not None and rec.last_status is not None
        seen["waiting"] = (s.queue_of("uid-p0"), rec.last_status.message())
        s.cache.podgroups.put(gang("late", 2))
        await wait_for(s, lambda: phase(s, "p0") == "Bound" and phase(s, "p1") == "Bound", SETTLE)

    s = scenario([], [node("n1", cpu="2"), gpod("p0", "1", "late"), gpod("p1", "1", "late")], during=during)
    assert seen["waiting"] == ("gated", 'waiting for pods\'s pod group "late" to appear in scheduling queue')
    assert condition(s, "late") == ("True", "Scheduled", "", 2)


def test_a_group_takes_its_first_pods_place_among_single_pods() -> None:
    async def main() -> list[str]:
        now = [1.0]
        q = GroupSchedulingQueue(lambda a, b: (a.pod.priority, -a.timestamp) > (b.pod.priority, -b.timestamp),
                                 group_of=lambda p: (p.namespace, p.scheduling_group) if p.scheduling_group else None,
                                 podgroup=lambda ns, name: gang(name, 1), clock=lambda: now[0])
        for name, group in (("solo-1", None), ("m0", "g"), ("solo-2", None), ("m1", "g")):
            await q.add(gpod(name, "1", group))
            now[0] += 1
        popped = []
        for _ in range(3):
            info = await q.pop()
            assert info is not None
            popped.append(info.pod.name)
        return popped

    # The group is queued at m0's time (2), after solo-1 (1) and before solo-2 (3).
    assert asyncio.run(main()) == ["solo-1", "g", "solo-2"]
