"""A PodGroup placed with some of its pods left behind (a basic group with a pod that fits nowhere, a gang
whose minCount is below its size), as the seeded mix of ``make compare`` has them: the group is tried again
at once for the pods left (kube-scheduler's AddAttemptedPodGroupIfNeeded requeues them without backoff
after a successful cycle), that cycle places nothing (``pod group is unschedulable``), and the
``PodGroupInitiallyScheduled`` condition stays True, even when the True written by the first cycle is not
yet in the scheduler's copy of the group (on a live cluster the write goes out in the background and comes
back through the watch).

kube-scheduler writes the condition synchronously but reads it back from its informer: when the second
cycle's snapshot comes before the watch event, it writes False over its own True (seen with v1.37.2,
docs/workloads.md#against-kube-scheduler). Outrigger keeps the condition it decided, so the True stays."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from test_podgroup_cycle import SETTLE, condition, gang, generic_workload, gpod, make, message, node_of
from test_runtime import NO_LEAKS, node, settled, wait_for

from pluginhost.workload import PodGroup, PodGroupCondition

__all__ = ["generic_workload"]  # the autouse fixture: GenericWorkload on


class LaggingWriter:
    """A status writer that, like the API server's through a watch, is not seen by the cache until later:
    it records each write and applies none."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, str, str]] = []
        self.pending: list[tuple[PodGroup, PodGroupCondition]] = []

    async def write_condition(self, pg: PodGroup, cond: PodGroupCondition) -> None:
        self.writes.append((pg.name, cond.status, cond.reason, cond.message))
        self.pending.append((pg, cond))


@dataclass
class LeftBehind:
    id: str
    group: PodGroup
    pods: list[tuple[str, str]]  # (name, cpu)
    nodes: dict[str, str]  # pod -> node ("" for none)
    left_message: str


CASES = [
    # One node of 4 cpus: s0 fits, s1 (64 cpus) fits nowhere; a basic group needs one pod.
    LeftBehind("basic", PodGroup("solo", uid="uid-pg-solo", generation=2), [("s0", "500m"), ("s1", "64")],
               {"s0": "n1", "s1": ""}, "0/1 nodes are available: 1 Insufficient cpu."),
    # minCount 2 of 3 pods of 1.2 cpus on 3 cpus: two fit, the third does not.
    LeftBehind("gang-below-size", gang("elastic", 2), [("e0", "1200m"), ("e1", "1200m"), ("e2", "1200m")],
               {"e0": "n1", "e1": "n1", "e2": ""}, "0/1 nodes are available: 1 Insufficient cpu."),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_group_placed_with_a_pod_left_behind_keeps_its_true_condition(case: LeftBehind) -> None:
    cpu = "4" if case.id == "basic" else "3"
    writer = LaggingWriter()

    async def main() -> None:
        s = make()
        s.cache.podgroups.writer = writer
        s.cache.podgroups.put(case.group)
        await s.apply([node("n1", cpu=cpu), *(gpod(name, c, case.group.name) for name, c in case.pods)])
        task = asyncio.create_task(s.run())
        try:
            # The first cycle places the group; the second (the pod left, alone) places nothing.
            await wait_for(s, lambda: s.stats.podgroup_attempts.total() >= 2 and settled(s), SETTLE)
        finally:
            await s.drain(timeout=SETTLE)
            await s.stop()
            await asyncio.wait_for(task, SETTLE)
        assert s.leaks() == NO_LEAKS
        assert {name: node_of(s, name) for name, _ in case.pods} == case.nodes
        left = next(name for name, n in case.nodes.items() if not n)
        assert message(s, left) == case.left_message
        assert dict(s.stats.podgroup_attempts) == {("scheduled", "default-scheduler"): 1,
                                                   ("unschedulable", "default-scheduler"): 1}
        # The cache never saw the True (the writer lags): only the True was written, never a False after it.
        assert condition(s, case.group.name) is None
        assert writer.writes == [(case.group.name, "True", "Scheduled", "")]

    asyncio.run(main())
