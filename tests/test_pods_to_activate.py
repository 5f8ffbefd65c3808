"""PodsToActivate and custom-resource events: the two ways kube-scheduler moves a gang's pods out of the
unschedulable pool before the five-minute flush, and Outrigger with it.

- **PodsToActivate**: a plugin names pods under ``kubernetes.io/pods-to-activate`` in the cycle's state
  (Coscheduling's Permit: the gang's siblings); at the end of a successful scheduling cycle the queue
  moves them to activeQ (``SchedulingQueue.activate``, kube-scheduler's ``Activate``), whatever their
  backoff. A pod in flight goes to activeQ if its attempt is rejected; a gated pod stays gated.
- **Custom-resource events**: a plugin may register events of a custom resource by its GVK string
  (``podgroups.v1alpha1.scheduling.x-k8s.io``); a change to one of its objects moves the pods that plugin
  rejected, and no other.

A Gang plugin stands in for Coscheduling: PreFilter turns a pod away until its group is complete (or its
PodGroup exists), Permit names the group's other pods to activate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from test_runtime import SETTLE_SECONDS, EventedFake, Fake, config_yaml, node, pod, wait_for

from framework.config import load_config
from framework.kube.customresources import resource_name, resource_path
from framework.plugins import in_tree_registry
from framework.queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue
from framework.scheduler import Scheduler
from framework.scheduler.base import PODS_TO_ACTIVATE_KEY
from pluginhost.model import Node, Pod
from pluginhost.plugin import ActionType, ClusterEvent, CycleState, PreFilterResult
from pluginhost.state import StateValue
from pluginhost.status import SUCCESS, Code, Status

REJECTED = Status(Code.Unschedulable, ("no",), "Gang")
ERROR = Status(Code.Error, ("boom",), "Gang")

# ---- the queue --------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def new_queue(clock: Clock, gate: set[str] | None = None) -> SchedulingQueue:
    async def pre_enqueue(p: Pod) -> Status:
        return Status(Code.UnschedulableAndUnresolvable, ("gated",), "Gate") if p.name in (gate or ()) else SUCCESS

    return SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, pre_enqueue=pre_enqueue, clock=clock,
                           plugin_events=lambda name: [])


async def placed(q: SchedulingQueue, name: str, where: str) -> None:
    """Pod ``name`` added and moved to ``where``."""
    await q.add(Pod(name=name, uid=name))
    if where in (GATED, ACTIVE):
        return
    info = await q.pop()
    assert info is not None and info.pod.uid == name
    if where == UNSCHEDULABLE:
        assert q.requeue(info, REJECTED, {"Gang"}) == UNSCHEDULABLE
    elif where == BACKOFF:
        assert q.requeue(info, ERROR) == BACKOFF


QUEUE_CASES = [
    # (where the pod is when activated, where it is after, whether activate() reports it moved)
    ("unschedulable", UNSCHEDULABLE, ACTIVE, True),
    ("backoff", BACKOFF, ACTIVE, True),
    ("in-flight", IN_FLIGHT, IN_FLIGHT, False),
    ("gated", GATED, GATED, False),
    ("active", ACTIVE, ACTIVE, False),
]


@pytest.mark.parametrize(("before", "after", "moved"), [c[1:] for c in QUEUE_CASES], ids=[c[0] for c in QUEUE_CASES])
def test_activate_moves_unschedulable_and_backoff_pods_to_active_at_once(before: str, after: str, moved: bool) -> None:
    async def run() -> tuple[str | None, list[str]]:
        q = new_queue(Clock(), gate={"p"} if before == GATED else set())
        await placed(q, "p", before)
        got = [i.pod.uid for i in q.activate(["p", "unknown"])]
        return q.where("p"), got

    assert asyncio.run(run()) == (after, ["p"] if moved else [])


@pytest.mark.parametrize(("status", "where"), [(REJECTED, ACTIVE), (ERROR, BACKOFF)], ids=["rejected", "error"])
def test_a_pod_activated_in_flight_goes_to_active_when_rejected(status: Status, where: str) -> None:
    async def run() -> str:
        q = new_queue(Clock())
        await q.add(Pod(name="p", uid="p"))
        info = await q.pop()
        assert info is not None
        q.activate(["p"])
        return q.requeue(info, status, {"Gang"})

    assert asyncio.run(run()) == where


def test_an_activated_pods_old_backoff_entry_does_not_release_it_early() -> None:
    async def run() -> list[str | None]:
        clock = Clock()
        q = new_queue(clock)
        await placed(q, "p", BACKOFF)  # backoff 1 s (first attempt)
        q.activate(["p"])
        info = await q.pop()
        assert info is not None
        info.attempts = 4  # this attempt's backoff: 8 s
        assert q.requeue(info, ERROR) == BACKOFF
        seen = []
        for now in (102.0, 109.0):  # past the old entry's expiry, then past the new one's
            clock.now = now
            q._flush_backoff()
            seen.append(q.where("p"))
        return seen

    assert asyncio.run(run()) == [BACKOFF, ACTIVE]


# ---- the scheduler ------------------------------------------------------------------------------------

GVK = "podgroups.v1alpha1.scheduling.x-k8s.io"
GROUP = ["g0", "g1", "g2"]


class Gang(EventedFake):
    """PreFilter: Unschedulable until every pod of the group is ``arrived`` and ``ready`` holds. Permit:
    the group's other pods to activate, written as ``activation(keys)`` makes them."""

    arrived: set[str]
    ready: list[bool]
    activation: Callable[[list[str]], Any] | None
    at: str  # the point that names the siblings: "permit" (scheduling cycle) or "preBind" (binding cycle)

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        self.calls.append(("preFilter", self.name, pod.name))
        if not self.ready[0] or not set(GROUP) <= self.arrived:
            return None, Status(Code.UnschedulableAndUnresolvable, ("the group is not complete",))
        return None, SUCCESS

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        self.calls.append(("permit", self.name, pod.name, node_name))
        if self.at == "permit":
            self._name_siblings(state, pod)
        return SUCCESS, 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(("preBind", self.name, pod.name, node_name))
        if self.at == "preBind":
            self._name_siblings(state, pod)
        return SUCCESS

    def _name_siblings(self, state: CycleState, pod: Pod) -> None:
        if self.activation is not None:
            state.write(PODS_TO_ACTIVATE_KEY, self.activation([f"{pod.namespace}/{n}" for n in GROUP if n != pod.name]))


def gang_scheduler(activation: Callable[[list[str]], Any] | None, *, ready: bool = True,
                   events: list[ClusterEvent] | None = None, at: str = "permit") -> tuple[Scheduler, Gang]:
    reg = in_tree_registry()
    gang: list[Gang] = []

    def factory(args: dict[str, Any], handle: Any) -> Fake:
        plugin = Gang("Gang", [], handle, {"events": events or [ClusterEvent(GVK, ActionType.Add | ActionType.Update)]})
        plugin.arrived, plugin.ready, plugin.activation, plugin.at = set(), [ready], activation, at
        gang.append(plugin)
        return plugin

    reg.register("Gang", factory, frozenset({"preFilter", "permit", "preBind"}))
    entries = [("PrioritySort", 0), ("NodeResourcesFit", 0), ("Gang", 0), ("DefaultBinder", 0)]
    s = Scheduler(load_config(config_yaml(entries, None), reg.points(), "test-config.yaml"), reg, seed=0)
    return s, gang[0]


def phases(s: Scheduler) -> dict[str, str]:
    return {rec.pod.name: rec.phase if rec.phase == "Bound" else s.queue_of(uid) for uid, rec in s.pods.items()}


async def run_gang(s: Scheduler, gang: Gang) -> dict[str, str]:
    """The group's first two pods applied and turned away, then the third: where each pod is once the
    third is bound and the others had time to follow."""
    objects: list[Pod | Node] = [node("n1"), pod("g0"), pod("g1")]
    await s.apply(objects)
    gang.arrived |= {"g0", "g1"}
    task = asyncio.create_task(s.run())
    try:
        await wait_for(s, lambda: [s.queue_of(f"uid-{n}") for n in ("g0", "g1")] == [UNSCHEDULABLE] * 2)
        gang.arrived.add("g2")
        await s.apply([pod("g2")])
        await wait_for(s, lambda: phases(s)["g2"] == "Bound")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_SECONDS
        while set(phases(s).values()) != {"Bound"} and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return phases(s)
    finally:
        await s.drain(timeout=SETTLE_SECONDS)
        await s.stop()
        await asyncio.wait_for(task, SETTLE_SECONDS)


ALL_BOUND = dict.fromkeys(GROUP, "Bound")
STRANDED = {"g0": UNSCHEDULABLE, "g1": UNSCHEDULABLE, "g2": "Bound"}

ACTIVATION_CASES = [
    # (how Permit names the siblings, where the group ends)
    ("a remote plugin's StateValue (the Go adapter's JSON list)", StateValue.json, ALL_BOUND),
    ("an in-process plugin's set of keys", set, ALL_BOUND),
    ("nothing named: the siblings wait for an event", None, STRANDED),
]


@pytest.mark.parametrize(("activation", "want"), [c[1:] for c in ACTIVATION_CASES],
                         ids=[c[0] for c in ACTIVATION_CASES])
def test_pods_a_plugin_names_to_activate_are_scheduled_at_once(activation: Any, want: dict[str, str]) -> None:
    s, gang = gang_scheduler(activation)
    assert asyncio.run(run_gang(s, gang)) == want


@pytest.mark.parametrize(("activation", "want"), [c[1:] for c in ACTIVATION_CASES],
                         ids=[c[0] for c in ACTIVATION_CASES])
def test_pods_named_in_the_binding_cycle_are_activated_when_it_succeeds(activation: Any, want: dict[str, str]) -> None:
    s, gang = gang_scheduler(activation, at="preBind")
    assert asyncio.run(run_gang(s, gang)) == want


def test_a_custom_resource_event_moves_the_pods_the_plugin_registering_it_rejected() -> None:
    s, gang = gang_scheduler(None, ready=False)
    assert s.custom_resources() == [GVK]

    async def run() -> tuple[dict[str, str], dict[str, str]]:
        await s.apply([node("n1"), *(pod(n) for n in GROUP)])
        gang.arrived |= set(GROUP)
        task = asyncio.create_task(s.run())
        try:
            await wait_for(s, lambda: set(phases(s).values()) == {UNSCHEDULABLE})
            gang.ready[0] = True
            s.custom_resource_changed("other.v1.example.com", None, {})  # nobody registered it
            await asyncio.sleep(0.05)
            before = phases(s)
            s.custom_resource_changed(GVK, None, {"metadata": {"name": "g"}})  # the PodGroup is created
            await wait_for(s, lambda: set(phases(s).values()) == {"Bound"}, timeout=5.0)  # after their backoff
            return before, phases(s)
        finally:
            await s.drain(timeout=SETTLE_SECONDS)
            await s.stop()
            await asyncio.wait_for(task, SETTLE_SECONDS)

    before, after = asyncio.run(run())
    assert before == dict.fromkeys(GROUP, UNSCHEDULABLE)
    assert after == ALL_BOUND


def test_only_gvk_strings_count_as_custom_resources() -> None:
    events = [ClusterEvent("Node", ActionType.Add), ClusterEvent("Pod", ActionType.All),
              ClusterEvent("foos.v1", ActionType.Add), ClusterEvent(GVK, ActionType.Add),
              ClusterEvent("bars.v1beta1.a.b.c", ActionType.Update)]
    s, _ = gang_scheduler(None, events=events)
    assert s.custom_resources() == ["bars.v1beta1.a.b.c", GVK]


@pytest.mark.parametrize(("gvk", "path", "name"), [
    (GVK, "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "podgroups.scheduling.x-k8s.io"),
    ("bars.v1beta1.a.b.c", "/apis/a.b.c/v1beta1/bars", "bars.a.b.c"),
])
def test_a_gvk_string_names_its_collection_as_kube_scheduler_parses_it(gvk: str, path: str, name: str) -> None:
    assert (resource_path(gvk), resource_name(gvk)) == (path, name)


@pytest.mark.parametrize("gvk", ["foos.v1", "foos", "foos..example.com"])
def test_a_string_of_fewer_than_three_parts_is_no_custom_resource(gvk: str) -> None:
    with pytest.raises(ValueError, match=r"plural\.version\.group"):
        resource_path(gvk)
