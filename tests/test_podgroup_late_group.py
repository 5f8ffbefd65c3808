"""A PodGroup created after its pods, for a gang that does not fit (seen left without a condition under
load on a live cluster, with ``serve`` not answering): the pods wait, gated, for their group; once it
appears they join it, one cycle finds the gang short, and the group ends ``False``/``Unschedulable`` with
kube-scheduler's message, then backs off; nothing runs unbounded. While many groups are scheduled back
to back, the scheduling loop lets the other work of the event loop (the gRPC server, the informers, the
condition writes) run between cycles."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from test_podgroup_cycle import SETTLE, condition, gang, generic_workload, gpod, make, message, rack_node
from test_runtime import NO_LEAKS, settled, wait_for

__all__ = ["generic_workload"]  # the autouse fixture: GenericWorkload (and TAS for test_tas_*) on

NODES = 60
PODS = 40


@dataclass
class Late:
    id: str
    topology: tuple[str, ...]
    condition: str
    pod_message: str


CASES = [
    # 40 pods of 2 cpus on 60 nodes of 1 cpu: the first pod fits nowhere, and 0 + 39 < 40.
    Late("all-nodes", (), "minCount (40) cannot be satisfied: 0 scheduled, 39 remaining, ",
         "0/60 nodes are available: 60 Insufficient cpu."),
    Late("one-rack", ("rack",), "pod group is unschedulable, 0/4 placements are available, first placement status: "
         "minCount (40) cannot be satisfied: 0 scheduled, 39 remaining, ",
         "0/15 nodes are available: 15 Insufficient cpu."),
]


async def _late_group(case: Late, tas: bool) -> None:
    s = make(tas=tas)
    nodes = [rack_node(f"n{i}", f"r{i % 4}", "1") for i in range(NODES)]
    pods = [gpod(f"p{i}", "2", "g") for i in range(PODS)]
    await s.apply([*nodes, *pods])
    task = asyncio.create_task(s.run())
    try:
        await wait_for(s, lambda: all(s.queue_of(p.uid) == "gated" for p in pods), SETTLE)
        assert s.stats.podgroup_attempts.total() == 0  # nothing is tried before the group exists
        s.cache.podgroups.put(gang("g", PODS, topology=case.topology))
        await wait_for(s, lambda: condition(s, "g") is not None and settled(s), SETTLE)
        assert condition(s, "g") == ("False", "Unschedulable", case.condition, 2)
        # One cycle decided it; the group then backs off (1 s at first), so at most one more ran by now.
        assert s.stats.podgroup_attempts.total() <= 2
        assert set(s.stats.podgroup_attempts) == {("unschedulable", "default-scheduler")}
        assert message(s, "p0") == case.pod_message
        assert all(node_name == "" for node_name in (s.pods[p.uid].pod.node_name for p in pods))
    finally:
        await s.drain(timeout=SETTLE)
        await s.stop()
        await asyncio.wait_for(task, SETTLE)
    assert s.leaks() == NO_LEAKS
    assert s.cache.assumed() == []


@pytest.mark.parametrize("case", [CASES[0]], ids=[CASES[0].id])
def test_a_late_podgroup_for_a_gang_that_does_not_fit_ends_unschedulable(case: Late) -> None:
    asyncio.run(_late_group(case, tas=False))


@pytest.mark.parametrize("case", [CASES[1]], ids=[CASES[1].id])
def test_tas_a_late_podgroup_for_a_gang_that_does_not_fit_ends_unschedulable(case: Late) -> None:
    asyncio.run(_late_group(case, tas=True))


def test_the_scheduling_loop_lets_other_work_run_between_group_cycles() -> None:
    # 30 gangs that do not fit, their PodGroups put at once: 30 cycles are due back to back. A task
    # started then (as a gRPC call, an informer event or a condition write would be) runs before the
    # last of them, not after the queue is empty.
    groups = 30

    async def main() -> tuple[int, int]:
        s = make()
        pods = [gpod(f"g{g}-{i}", "2", f"g{g}") for g in range(groups) for i in range(2)]
        await s.apply([rack_node("n0", "r0", "1"), *pods])
        task = asyncio.create_task(s.run())
        try:
            await wait_for(s, lambda: all(s.queue_of(p.uid) == "gated" for p in pods), SETTLE)
            for g in range(groups):
                s.cache.podgroups.put(gang(f"g{g}", 2))
            await wait_for(s, lambda: s.stats.podgroup_attempts.total() >= 1, SETTLE)
            seen = s.stats.podgroup_attempts.total()
            await wait_for(s, lambda: s.stats.podgroup_attempts.total() >= groups, SETTLE)
            return seen, s.stats.podgroup_attempts.total()
        finally:
            await s.drain(timeout=SETTLE)
            await s.stop()
            await asyncio.wait_for(task, SETTLE)

    seen, total = asyncio.run(main())
    assert total >= groups
    assert seen < groups
