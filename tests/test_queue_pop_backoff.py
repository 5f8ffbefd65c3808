"""The queue's SchedulerPopFromBackoffQ (kube-scheduler's popBackoff, on by default in 1.37): when activeQ is
empty, a pod a plugin rejected is taken from backoffQ before its backoff ends, the one whose backoff ends
first; a pod backing off after an error waits its backoff out; with the gate off every pod waits."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import pytest

from framework import features
from framework.podgroup_queue import GroupSchedulingQueue, QueuedPodGroupInfo
from framework.profiles import build_registry, default_scheduler_config
from framework.queue import BACKOFF, IN_FLIGHT, SchedulingQueue
from framework.scheduler import Scheduler
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, ClusterEvent, QueuedPodInfo
from pluginhost.status import Code, Status

REJECTED = Status(Code.Unschedulable, ("no fit",), "Fit")
ERROR = Status(Code.Error, ("boom",), "Fit")
NODE_ADDED = ClusterEvent("Node", ActionType.Add)


class Clock:
    """A clock the test moves: no backoff ends unless the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _backing_off(q: SchedulingQueue, clock: Clock, name: str, status: Status) -> None:
    """Add ``name``, pop it, fail it with ``status``; a rejected pod is moved to backoffQ by an event."""
    await q.add(Pod(name=name, uid=name))
    info = await q.pop()
    assert info is not None and info.pod.uid == name
    q.requeue(info, status, {"Fit"} if status.is_rejected else ())
    if status.is_rejected:
        q.on_event(NODE_ADDED)
    assert q.where(name) == BACKOFF
    clock.now += 0.5  # the next pod fails later: its backoff ends later


async def _next_popped(q: SchedulingQueue, turns: int = 20) -> str | None:
    """What pop() returns without the clock moving: a pod's name, or None when it keeps waiting."""
    task = asyncio.ensure_future(q.pop())
    for _ in range(turns):
        await asyncio.sleep(0)
        if task.done():
            info = task.result()
            return info.pod.uid if info is not None else None
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


@dataclass(frozen=True)
class Case:
    name: str
    gate: bool
    #: (pod, how its attempt ended), in the order they fail.
    backing_off: tuple[tuple[str, Status], ...]
    active: tuple[str, ...]
    want: str | None


CASES = [
    Case("rejected-pod-taken-early", True, (("a", REJECTED),), (), "a"),
    Case("gate-off-waits", False, (("a", REJECTED),), (), None),
    Case("error-waits-its-backoff", True, (("a", ERROR),), (), None),
    Case("active-pod-first", True, (("a", REJECTED),), ("b",), "b"),
    Case("earliest-backoff-first", True, (("a", REJECTED), ("b", REJECTED)), (), "a"),
    Case("rejected-before-error", True, (("a", ERROR), ("b", REJECTED)), (), "b"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pop_takes_a_rejected_pod_from_backoff_when_active_is_empty(case: Case) -> None:
    async def run() -> tuple[str | None, dict[str, str | None]]:
        clock = Clock()
        q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, initial_backoff=10, clock=clock,
                            pop_from_backoff=case.gate)
        for name, status in case.backing_off:
            await _backing_off(q, clock, name, status)
        for name in case.active:
            await q.add(Pod(name=name, uid=name))
        got = await _next_popped(q)
        return got, {name: q.where(name) for name, _ in case.backing_off}

    got, where = asyncio.run(run())
    assert got == case.want
    assert where == {name: (IN_FLIGHT if name == case.want else BACKOFF) for name, _ in case.backing_off}


def test_a_pod_gone_from_backoff_is_not_popped() -> None:
    async def run() -> tuple[str | None, int]:
        clock = Clock()
        q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, initial_backoff=10, clock=clock,
                            pop_from_backoff=True)
        await _backing_off(q, clock, "deleted", REJECTED)
        await _backing_off(q, clock, "activated", REJECTED)
        q.delete("deleted")
        q.activate(["activated"])  # to activeQ: its backoffQ entry is left behind
        first = await _next_popped(q)
        return first, len(q)

    assert asyncio.run(run()) == ("activated", 1)


def test_the_backoff_ends_as_before_with_the_gate_on() -> None:
    async def run() -> list[str | None]:
        clock = Clock()
        q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, initial_backoff=10, clock=clock,
                            pop_from_backoff=True)
        await _backing_off(q, clock, "err", ERROR)
        seen = [await _next_popped(q)]
        clock.now += 10
        seen.append(await _next_popped(q))
        return seen

    assert asyncio.run(run()) == [None, "err"]


def test_a_group_waits_its_backoff_out() -> None:
    q = GroupSchedulingQueue(lambda a, b: a.timestamp < b.timestamp, pop_from_backoff=True,
                             group_of=lambda pod: None, podgroup=lambda ns, name: None)
    rejected = QueuedPodGroupInfo(pod=Pod(name="g", uid="g"), unschedulable_count=1)
    alone = QueuedPodInfo(pod=Pod(name="p", uid="p"), last_status=REJECTED)
    assert (q._waits_backoff_out(rejected), q._waits_backoff_out(alone)) == (True, False)


@pytest.mark.parametrize(("gates", "want"), [("", True), ("SchedulerPopFromBackoffQ=false", False)])
def test_the_scheduler_follows_the_gate(gates: str, want: bool) -> None:
    previous = features.install(features.parse(gates))
    try:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry)
    finally:
        features.install(previous)
    assert s.queue.pop_from_backoff is want
