"""The scheduling queue with many pods in flight, as on a live cluster where binding cycles wait for the
API server: a pod that fails after an event one of its rejecting plugins cares about goes to backoff,
events before it was popped or caused by its own failure do not count, and the events log is shared by
every pod in flight (an event costs one append, not one per binding cycle) and trimmed as they leave."""

from __future__ import annotations

import asyncio

import pytest

from framework import queue as queue_module
from framework.queue import BACKOFF, UNSCHEDULABLE, SchedulingQueue
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, ClusterEvent, ClusterEventWithHint
from pluginhost.status import Code, Status

NODE_ADD = ClusterEvent("Node", ActionType.Add)
POD_DELETE = ClusterEvent("Pod", ActionType.Delete)
REJECTED = Status(Code.Unschedulable, ("0/1 nodes are available: 1 Insufficient cpu.",))


def events_of(plugin: str) -> list[ClusterEventWithHint]:
    return [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(POD_DELETE)] if plugin == "Fit" else []


def new_queue() -> SchedulingQueue:
    return SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, plugin_events=events_of)


async def popped(q: SchedulingQueue, *names: str) -> dict[str, object]:
    for name in names:
        await q.add(Pod(name=name, uid=name))
    infos = {}
    for _ in names:
        info = await q.pop()
        assert info is not None
        infos[info.pod.uid] = info
    return infos


CASES = [
    # (what happened while "a" was in flight, where "a" goes when it fails)
    ("an event its rejecting plugin cares about", [(NODE_ADD, "")], BACKOFF),
    ("an event its plugin does not care about", [(ClusterEvent("Node", ActionType.UpdateNodeLabel), "")],
     UNSCHEDULABLE),
    ("its own failure's event does not count", [(POD_DELETE, "a")], UNSCHEDULABLE),
    ("another pod's failure counts", [(POD_DELETE, "b")], BACKOFF),
    ("nothing", [], UNSCHEDULABLE),
]


@pytest.mark.parametrize(("events", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failed_pod_goes_where_the_events_seen_in_flight_send_it(events: list[tuple[ClusterEvent, str]],
                                                                   where: str) -> None:
    async def run() -> str:
        q = new_queue()
        q.on_event(NODE_ADD)  # before anything was popped: never counts
        infos = await popped(q, "a", "b")
        for event, exclude in events:
            q.on_event(event, exclude=exclude)
        return q.requeue(infos["a"], REJECTED, {"Fit"})  # type: ignore[arg-type]

    assert asyncio.run(run()) == where


def test_a_pod_sees_only_the_events_after_it_was_popped_and_the_log_is_trimmed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "_LOG_TRIM", 8)

    async def run() -> None:
        q = new_queue()
        infos = await popped(q, "early")  # stays in flight throughout (a slow binding)
        for _ in range(20):
            q.on_event(ClusterEvent("Node", ActionType.UpdateNodeLabel))
        late = await popped(q, "late")
        assert len(q._events_log) == 20
        for i in range(20):  # bindings come and go while "early" waits
            extra = await popped(q, f"p{i}")
            q.on_event(ClusterEvent("Node", ActionType.UpdateNodeLabel))
            q.done(f"p{i}")
        assert len(q._events_log) == 40  # "early" can still read all of it
        q.on_event(NODE_ADD)
        assert q.requeue(infos["early"], REJECTED, {"Fit"}) == BACKOFF  # type: ignore[arg-type]
        assert len(q._events_log) <= 21  # trimmed to what "late" (popped after 20) may still read
        assert q.requeue(late["late"], REJECTED, {"Fit"}) == BACKOFF  # type: ignore[arg-type]
        assert (q._events_log, q._in_flight_since) == ([], {})  # nothing in flight: nothing kept
        del extra

    asyncio.run(run())


def test_a_pod_deleted_in_flight_leaves_the_log() -> None:
    async def run() -> None:
        q = new_queue()
        await popped(q, "a")
        q.on_event(NODE_ADD)
        assert q.delete("a")
        assert (q._events_log, q._in_flight_since) == ([], {})

    asyncio.run(run())
