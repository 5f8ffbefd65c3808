"""Victims that are not bound yet, as kube-scheduler 1.37 preempts them (``framework/preemption/executor.go``,
``framework/runtime/{waiting_pods_map,pods_in_prebind_map}.go``): a pod waiting at Permit is stopped with
an Error ("waiting on permit for pod: preempted"), a pod whose PreBind plugins run is cancelled
("preempted by DefaultPreemption"); neither is deleted, and the event says "(in kube-scheduler
memory)." Also the Permit Wait status and the stop semantics of a waiting pod and of a pod in PreBind."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.runtime import Framework
from framework.scheduler import EmbeddedSource, Scheduler
from framework.scheduler.records import EV_DELETED, EV_ERROR, EV_PREEMPTED
from framework.waiting import PodInPreBind, WaitingPodHandle
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import BindPlugin, CycleState, PermitPlugin, PreBindPlugin, QueueSortPlugin
from pluginhost.status import SUCCESS, Code, Status

PROFILE = "default-scheduler"
LIMIT = 20.0  # seconds any wait of these tests may take at most


def node(name: str, cpu: str = "2") -> Node:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def pod(name: str, cpu: str, priority: int, hold: bool = False) -> Pod:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"hold": "yes"} if hold else {}},
        "spec": {"priority": priority,
                 "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
    })


class Hold(PermitPlugin):
    """Makes pods labelled hold=yes wait at Permit (for longer than any test runs)."""

    name = "Hold"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        if pod.labels.get("hold") == "yes":
            return Status.wait("waiting for the test"), 600.0
        return SUCCESS, 0.0


class SlowPreBind(PreBindPlugin):
    """Has PreBind work for pods labelled hold=yes and never finishes it on its own (a plugin that
    waits on its context, as a Go plugin does); records how each call ended."""

    name = "SlowPreBind"
    ended: list[str] = []

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS if pod.labels.get("hold") == "yes" else Status.skip()

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            self.ended.append(f"{pod.name} cancelled")
            raise
        return SUCCESS


class RecordingSource(EmbeddedSource):
    """The embedded store, recording what it is told of preemptions."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler)
        self.preemptions: list[tuple[str, str, str, bool]] = []

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str, in_memory: bool = False) -> None:
        self.preemptions.append((victim.name, preemptor.name, node_name, in_memory))


def make(point_plugin: str) -> tuple[Scheduler, RecordingSource]:
    reg = in_tree_registry()
    reg.register_class(Hold)
    reg.register_class(SlowPreBind)
    names = ["PrioritySort", "NodeResourcesFit", "DefaultPreemption", point_plugin, "DefaultBinder"]
    yaml = "\n".join([
        "apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 1", "profiles:", f"- schedulerName: {PROFILE}",
        "  plugins:", "    multiPoint:", "      enabled:", *[f"      - {{name: {n}}}" for n in names],
        "      disabled:", '      - {name: "*"}',
    ]) + "\n"
    s = Scheduler(load_config(yaml, reg.points(), "test.yaml"), reg, seed=3)
    source = RecordingSource(s)
    s.source = source
    return s, source


async def until(cond: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIMIT
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {LIMIT}s: {what}")
        await asyncio.sleep(0.005)


@dataclass
class UnboundCase:
    id: str
    plugin: str
    #: Whether the victim is held at Permit (else: running PreBind) when the preemptor comes.
    at_permit: bool
    #: The Error the victim's binding cycle ends with.
    error: Status


UNBOUND_CASES = [
    UnboundCase("waiting-at-permit", "Hold", True,
                Status(Code.Error, ("waiting on permit for pod: preempted",), "DefaultPreemption")),
    UnboundCase("running-prebind", "SlowPreBind", False,
                Status(Code.Error, ('running PreBind plugin "SlowPreBind": preempted by DefaultPreemption',),
                       "SlowPreBind")),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in UNBOUND_CASES])
def test_an_unbound_victim_is_stopped_in_memory_not_deleted(case: UnboundCase) -> None:
    SlowPreBind.ended = []

    async def main() -> tuple[Scheduler, RecordingSource]:
        s, source = make(case.plugin)
        await s.apply([node("n1"), pod("low", "2", 0, hold=True)])
        task = asyncio.create_task(s.run())
        try:
            if case.at_permit:
                await until(lambda: s.waiting_pods.get("uid-low") is not None, "low waits at Permit")
            else:
                await until(lambda: s.waiting_pods.in_pre_bind.get("uid-low") is not None, "low in PreBind")
            await s.apply([pod("high", "2", 10)])
            await until(lambda: (r := s.get_pod("default", "high")) is not None and r.phase == "Bound", "high bound")
            await until(lambda: any(ev.type == EV_ERROR and ev.name == "low" for ev in s.recent_events()),
                        "low's binding cycle failed")
        finally:
            await s.stop()
            task.cancel()
        return s, source

    s, source = asyncio.run(main())
    events = s.recent_events()
    assert [ev.status for ev in events if ev.type == EV_ERROR and ev.name == "low"] == [case.error]
    assert [ev.name for ev in events if ev.type == EV_PREEMPTED] == ["low"]
    assert [ev.name for ev in events if ev.type == EV_DELETED] == []
    assert source.preemptions == [("low", "high", "n1", True)]
    high = s.get_pod("default", "high")
    assert high is not None and high.pod.node_name == "n1"
    assert SlowPreBind.ended == ([] if case.at_permit else ["low cancelled"])
    assert len(s.waiting_pods.in_pre_bind._pods) == 0


def test_the_event_of_a_victim_stopped_in_memory_says_so() -> None:
    """The live cluster's Preempted event (kube-scheduler 1.37's eventMessage)."""
    from framework.kube.source import KubeSource

    recorded: list[dict[str, Any]] = []

    class Events:
        def record(self, pod: Pod, **kw: Any) -> None:
            recorded.append(kw)

    fake = object.__new__(KubeSource)
    fake.events = Events()  # type: ignore[assignment]
    victim, preemptor = pod("low", "1", 0), pod("high", "1", 10)
    KubeSource.preempted(fake, victim, preemptor, "n1")
    KubeSource.preempted(fake, victim, preemptor, "n1", in_memory=True)
    assert [r["note"] for r in recorded] == [
        "Preempted by pod uid-high on node n1",
        "Preempted by pod uid-high on node n1 (in kube-scheduler memory).",
    ]


# ---------------------------------------------------------------------------------------------------
# How a waiting pod and a pod in PreBind stop


@pytest.mark.parametrize(
    ("first", "second", "results", "status"),
    [
        (("reject", "A", "no"), ("preempt", "B", "preempted"), (True, False),
         Status(Code.Unschedulable, ("no",), "A")),
        (("preempt", "B", "preempted"), ("reject", "A", "no"), (True, False),
         Status(Code.Error, ("preempted",), "B")),
        (("allow", "A", ""), ("preempt", "B", "preempted"), (None, False), SUCCESS),
        (("preempt", "B", "preempted"), ("preempt", "B", "again"), (True, False),
         Status(Code.Error, ("preempted",), "B")),
    ],
)
def test_a_waiting_pod_stops_once(first: tuple[str, str, str], second: tuple[str, str, str],
                                  results: tuple[bool | None, bool], status: Status) -> None:
    async def main() -> tuple[tuple[bool | None, ...], Status]:
        wp = WaitingPodHandle(pod("p", "1", 0), "n1", {"A": 600.0})
        got: list[bool | None] = []
        for verb, plugin, message in (first, second):
            got.append(wp.allow(plugin) if verb == "allow" else getattr(wp, verb)(plugin, message))
        return tuple(got), await wp.result

    assert asyncio.run(main()) == (results, status)


@pytest.mark.parametrize(
    ("steps", "results"),
    [
        (["cancel", "mark"], [True, False]),
        (["mark", "cancel"], [True, False]),
        (["cancel", "cancel", "mark"], [True, True, False]),
        (["mark", "mark"], [True, True]),
    ],
)
def test_a_pod_in_prebind_is_cancelled_until_marked_prebound(steps: list[str], results: list[bool]) -> None:
    async def main() -> list[bool]:
        entry = PodInPreBind()
        return [entry.cancel_pod("preempted by X") if step == "cancel" else entry.mark_prebound() for step in steps]

    assert asyncio.run(main()) == results


class Sort(QueueSortPlugin):
    name = "Sort"

    def less(self, a: Any, b: Any) -> bool:
        return False


class Binder(BindPlugin):
    name = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS


class Waits(PermitPlugin):
    def __init__(self, name: str, answer: Status) -> None:
        self.name = name
        self.answer = answer

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        return self.answer, 600.0


@pytest.mark.parametrize(
    ("answers", "want"),
    [
        pytest.param([Status.wait("gang of 3"), SUCCESS, Status.wait("quota", "later")],
                     Status(Code.Wait, ("quota", "later", "one or more plugins asked to wait and no plugin "
                                        "rejected pod"))),
        pytest.param([Status.wait()], Status(Code.Wait, ("one or more plugins asked to wait and no plugin "
                                                         "rejected pod",))),
        pytest.param([Status.wait("gang"), Status(Code.Unschedulable, ("full",))],
                     Status(Code.Unschedulable, ("full",), "P1")),
        pytest.param([SUCCESS, SUCCESS], SUCCESS),
    ],
)
def test_permit_wait_is_the_last_waiting_plugins_status_with_kube_schedulers_reason(
    answers: list[Status], want: Status
) -> None:
    async def main() -> tuple[Status, int]:
        plugins = [Waits(f"P{i}", a) for i, a in enumerate(answers)]
        fwk = Framework(PROFILE, {"queueSort": [Sort()], "permit": plugins, "bind": [Binder()]}, {})
        status = await fwk.run_permit(CycleState("c1", None), pod("p", "1", 0), "n1")
        waiting = len(fwk.waiting_pods)
        for wp in fwk.waiting_pods:
            wp.reject("", "done")
        return status, waiting

    status, waiting = asyncio.run(main())
    assert status == want
    assert waiting == (1 if want.code is Code.Wait else 0)


def test_a_prebind_plugin_that_finishes_after_its_pod_was_cancelled_does_not_bind_it() -> None:
    """A plugin that does not watch its context: it returns Success, but the pod was cancelled while it
    ran, so MarkPrebound fails and the cycle ends with the cause."""

    class Ignores(PreBindPlugin):
        name = "Ignores"

        def __init__(self, entry: PodInPreBind) -> None:
            self.entry = entry

        async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
            self.entry.cancel_pod("preempted by DefaultPreemption")  # arrives while the plugin runs
            return SUCCESS

    async def main() -> tuple[Status, bool]:
        entry = PodInPreBind()
        fwk = Framework(PROFILE, {"queueSort": [Sort()], "preBind": [Ignores(entry)], "bind": [Binder()]}, {})
        status = await fwk.run_pre_bind(CycleState("c1", None), pod("p", "1", 0), "n1", entry)
        return status, entry.mark_prebound()

    assert asyncio.run(main()) == (SUCCESS, False)
