"""Which of two complete gangs the queue hands out first, by kube-scheduler v1.37.2's rule
(``backend/queue``): a group is one queue entity whose timestamp is that of the member that created it
(``newQueuedPodGroupInfoFromRootLookup``: the first member queued once its PodGroup is known, stamped
when the scheduler saw it), ordered by the QueueSort plugin (PrioritySort: priority, then that
timestamp); GangScheduling's PreEnqueue holds a gang until its minCount pods are known. So of two gangs
whose PodGroups come first, the one whose first pod was seen first goes first, whenever each became
complete; a higher priority goes first whatever the times. (With pods seen before their PodGroup,
kube-scheduler stamps the group with any one of them, a Go map's order: not compared.)

The rig is the in-process scheduler on the embedded store, with the in-tree GangScheduling plugin."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from test_podgroup_cycle import gang, gpod, make, message, node_of, phase, run
from test_runtime import NO_LEAKS, node

from framework import features
from framework.podgroup_queue import GroupSchedulingQueue, QueuedPodGroupInfo
from pluginhost.model import Pod
from pluginhost.plugin import QueuedPodInfo
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.workload import PodGroup


@pytest.fixture(autouse=True)
def generic_workload() -> object:
    previous = features.install(features.parse("GenericWorkload=true"))
    try:
        yield
    finally:
        features.install(previous)


def queue(groups: dict[str, PodGroup], seen: dict[str, int], now: list[float]) -> GroupSchedulingQueue:
    """The group queue with PrioritySort's less and a PreEnqueue that, as GangScheduling's, holds a
    gang's members until ``seen`` (the pods known per group, counted before the queue hears of one, as
    the scheduler's cache is) reaches its minCount."""

    async def pre_enqueue(pod: Pod) -> Status:
        group = groups[pod.scheduling_group or ""]
        if seen.get(group.name, 0) < group.min_count:
            return Status(Code.UnschedulableAndUnresolvable, ("waiting",), "GangScheduling")
        return SUCCESS

    def less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:  # PrioritySort's Less
        return (a.pod.priority, -a.timestamp) > (b.pod.priority, -b.timestamp)

    return GroupSchedulingQueue(less, group_of=lambda p: (p.namespace, p.scheduling_group or ""),
                                podgroup=lambda ns, name: groups.get(name), clock=lambda: now[0],
                                pre_enqueue=pre_enqueue)


@pytest.mark.parametrize(("arrivals", "blue_priority", "want_where", "want_order"), [
    # The mix's racing step: both PodGroups, then the pods in turns. Red is complete (and active) at
    # red-2, blue at blue-2; red's first pod was seen first.
    (["red-0", "blue-0", "red-1", "blue-1", "red-2", "blue-2"], None,
     ["gated", "gated", "gated", "gated", "active", "active"], ["race-red", "race-blue"]),
    (["blue-0", "red-0", "blue-1", "red-1", "blue-2", "red-2"], None,
     ["gated", "gated", "gated", "gated", "active", "active"], ["race-blue", "race-red"]),
    # Blue complete first, red seen first: the timestamp decides, not the time a gang became complete.
    (["red-0", "blue-0", "red-1", "blue-1", "blue-2", "red-2"], None,
     ["gated", "gated", "gated", "gated", "active", "active"], ["race-red", "race-blue"]),
    # A higher priority (the PodGroup's) goes first whatever the times.
    (["red-0", "blue-0", "red-1", "blue-1", "red-2", "blue-2"], 10,
     ["gated", "gated", "gated", "gated", "active", "active"], ["race-blue", "race-red"]),
])
def test_of_two_complete_gangs_the_one_seen_first_is_popped_first(
        arrivals: list[str], blue_priority: int | None, want_where: list[str], want_order: list[str]) -> None:
    async def main() -> tuple[list[str], list[str], list[list[str]]]:
        groups = {"race-red": gang("race-red", 3), "race-blue": gang("race-blue", 3, priority=blue_priority)}
        seen: dict[str, int] = {}
        now = [0.0]
        q = queue(groups, seen, now)
        where = []
        for name in arrivals:
            group = f"race-{name.split('-')[0]}"
            seen[group] = seen.get(group, 0) + 1
            where.append(await q.add(gpod(name, "1", group)))
            now[0] += 1.0
        order, members = [], []
        for _ in range(2):
            popped = await q.pop()
            assert isinstance(popped, QueuedPodGroupInfo)
            order.append(popped.group_name)
            members.append([m.pod.name for m in popped.members])
        return where, order, members

    where, order, members = asyncio.run(main())
    assert where == want_where
    assert order == want_order
    assert members == [[f"{g.removeprefix('race-')}-{i}" for i in range(3)] for g in want_order]


@pytest.mark.parametrize(("arrivals", "placed", "waiting"), [
    (["red-0", "blue-0", "red-1", "blue-1", "red-2", "blue-2"], "red", "blue"),
    (["blue-0", "red-0", "blue-1", "red-1", "blue-2", "red-2"], "blue", "red"),
])
def test_the_gang_seen_first_takes_the_room_the_other_waits(arrivals: list[str], placed: str, waiting: str) -> None:
    # 4 cpus on two nodes, two gangs of three 1-cpu pods, all queued before the scheduler starts: the
    # first gang out of the queue is placed whole, the other cannot reach its minCount on the cpu left.
    async def main() -> dict[str, tuple[str, str, str]]:
        s = make()
        await run(s, [gang("race-red", 3), gang("race-blue", 3)],
                  [node("race-a", cpu="2"), node("race-b", cpu="2"),
                   *(gpod(name, "1", f"race-{name.split('-')[0]}") for name in arrivals)])
        assert s.leaks() == NO_LEAKS
        return {name: (phase(s, name), node_of(s, name), message(s, name) if name.startswith(waiting) else "")
                for name in arrivals}

    got = asyncio.run(main())
    assert sorted(n for n, (_, on, _) in got.items() if on) == [f"{placed}-{i}" for i in range(3)]
    # Which of the two identical nodes takes two is a tie.
    assert sorted(Counter(on for _, on, _ in got.values() if on).values()) == [1, 2]
    # The other's cycle places one pod on the cpu left, finds no room for the next, and gives up; the
    # gang waits in the queue (Pending) for an event that may give it room. (The pod not reached gets
    # PlacementFeasible's status as it is.)
    unsatisfied = "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
    assert [got[f"{waiting}-{i}"] for i in range(3)] == [
        ("Pending", "", unsatisfied), ("Pending", "", "0/2 nodes are available: 2 Insufficient cpu."),
        ("Pending", "", "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")]
