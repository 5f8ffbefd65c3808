"""The nominator and a pod's nominatedNodeName through the binding cycle, as kube-scheduler v1.37 keeps
them (``pkg/scheduler/schedule_one.go``: ``assume``, ``bindingCycle``, ``handleBindingCycleError``;
``backend/queue/nominator.go``): an assumed pod leaves the nominator, so no other pod's Filter counts
it twice; a pod whose binding takes a while gets its node as nominatedNodeName meanwhile; a failed
binding cycle clears a nomination only if the pod had one when it was scheduled."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from test_runtime import Spec, assert_invariants, drive, fake, make_scheduler, node, rec, wait_for

from framework.scheduler import EmbeddedSource, Scheduler
from pluginhost.manifest import pod_from_dict
from pluginhost.model import Pod
from pluginhost.status import SUCCESS, Status


def pod(name: str, cpu: str, priority: int = 0, nominated: str = "") -> Pod:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"priority": priority,
                 "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
    }  # fmt: skip
    if nominated:
        body["status"] = {"nominatedNodeName": nominated}
    return pod_from_dict(body)


def hold_at_permit(*names: str) -> Spec:
    """A Permit plugin "W" that makes the named pods wait (until the test allows them)."""
    return fake("W", "permit", permit=lambda p, n: (Status.wait(), 30.0) if p.name in names else SUCCESS)


# ---------------------------------------------------------------------------------------------------
# The nominator while a binding cycle runs


@dataclass
class AssumedCase:
    id: str
    #: p1 (3 of n1's 4 cpus), held at Permit while p2 (1 cpu, priority 0) is scheduled.
    p1: Pod
    #: The nominator while p1 waits.
    nominator: dict[str, str]
    #: Where p2 goes.
    p2_node: str


ASSUMED_CASES = [
    # assume calls DeleteNominatedPodIfExists: p1 counts on n1 once (assumed), so p2 fits beside it.
    AssumedCase("nominated-pod-of-higher-priority", pod("p1", "3", priority=10, nominated="n1"), {}, "n1"),
    AssumedCase("nominated-pod-of-equal-priority", pod("p1", "3", nominated="n1"), {}, "n1"),
    AssumedCase("nominated-pod-of-lower-priority", pod("p1", "3", priority=-1, nominated="n1"), {}, "n1"),
    AssumedCase("pod-never-nominated", pod("p1", "3"), {}, "n1"),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in ASSUMED_CASES])
def test_an_assumed_pod_leaves_the_nominator(case: AssumedCase) -> None:
    seen: dict[str, Any] = {}

    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        seen["nominator"] = dict(s.nominated)
        await s.apply([pod("p2", "1")])
        await wait_for(s, lambda: rec(s, "p2").phase == "Bound")
        wp = s.handle.waiting_pod("uid-p1")
        assert wp is not None
        wp.allow("W")

    async def main() -> Scheduler:
        s, _ = make_scheduler([hold_at_permit("p1")])
        await drive(s, [node("n1"), case.p1], during)
        return s

    s = asyncio.run(main())
    assert_invariants(s)
    assert seen["nominator"] == case.nominator
    assert (rec(s, "p1").pod.node_name, rec(s, "p2").pod.node_name) == ("n1", case.p2_node)
    assert s.nominated == {}


def test_a_status_update_of_an_assumed_pod_keeps_its_nomination() -> None:
    """A live cluster's informer brings status-only updates of a pod whose binding cycle runs (its own
    condition, its nominatedNodeName): kube-scheduler ignores updates of assumed pods, so the pod keeps
    the nomination it was scheduled with, and its failure clears that nomination (clearNominatedNode)."""
    seen: dict[str, Any] = {}

    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        await s.observe_pod(pod("p1", "3", nominated="n1"), spec_changed=False)
        seen["during"] = (rec(s, "p1").pod.nominated_node_name, dict(s.nominated))
        wp = s.handle.waiting_pod("uid-p1")
        assert wp is not None
        wp.reject("W", "not now")

    async def main() -> Scheduler:
        s, _ = make_scheduler([hold_at_permit("p1")])
        await drive(s, [node("n1"), pod("p1", "3", nominated="n1")], during)
        return s

    s = asyncio.run(main())
    assert_invariants(s)
    assert seen["during"] == ("n1", {})
    assert (rec(s, "p1").pod.nominated_node_name, s.nominated) == ("", {})


# ---------------------------------------------------------------------------------------------------
# nominatedNodeName as the binding cycle's expectation (NominatedNodeNameForExpectation, beta and on since v1.35)


class RecordingSource(EmbeddedSource):
    """The embedded store, recording every nominatedNodeName the scheduler writes (what a live cluster
    gets as status patches)."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler)
        self.written: list[tuple[str, str]] = []

    def nominated(self, pod: Pod, node_name: str) -> None:
        self.written.append((pod.name, node_name))


@dataclass
class ExpectationCase:
    id: str
    specs: list[Spec]
    #: What happens to p1's wait at Permit ("" when it does not wait).
    permit: str = ""
    p1: Pod = dataclasses.field(default_factory=lambda: pod("p1", "1"))
    binder: bool = True
    #: The nominatedNodeName values written for p1, in order.
    written: list[str] = dataclasses.field(default_factory=list)
    #: p1's nodeName and nominatedNodeName once settled.
    outcome: tuple[str, str] = ("n1", "")


PRE_BIND_WORKS = fake("PB", "preBind")  # its PreBindPreFlight answers Success: it has work to do
PRE_BIND_FAILS = fake("PB", "preBind", preBind=Status.failure("volume not attached"))

# schedule_one_test.go's TestSchedulerScheduleOne cases with NominatedNodeNameForExpectation on, and
# what handleBindingCycleError's clearNominatedNode then does.
EXPECTATION_CASES = [
    # Set before WaitOnPermit when the pod waits; the binding clears it (ClearingNominatedNodeNameAfterBinding).
    ExpectationCase("waits-at-permit-sets-then-binding-clears", [hold_at_permit("p1")], "allow", written=["n1"]),
    ExpectationCase("pre-flight-success-sets-then-binding-clears", [PRE_BIND_WORKS], written=["n1"]),
    # Nothing will take a while: the pod is bound at once, nothing is written.
    ExpectationCase("pre-flight-skip-does-not-set",
                    [fake("PB", "preBind", preBindPreFlight=Status.skip(), preBind=Status.failure("not called"))]),
    ExpectationCase("no-pre-bind-plugin-does-not-set", []),
    ExpectationCase("pre-flight-error-does-not-set",
                    [fake("PB", "preBind", preBindPreFlight=Status.failure("no api"))], outcome=("", "")),
    ExpectationCase("pre-flight-unschedulable-is-an-error-and-does-not-set",
                    [fake("PB", "preBind", preBindPreFlight=Status.unschedulable("later"))], outcome=("", "")),
    ExpectationCase("bind-failure-without-pre-bind-work-does-not-set",
                    [fake("B", "bind", bind=Status.failure("conflict"))], binder=False, outcome=("", "")),
    # A failed binding cycle passes clearNominatedNode, but updatePod compares with the pod as it was
    # scheduled: one that had no nomination keeps the node the binding cycle set.
    ExpectationCase("pre-bind-failure-keeps-the-node-set", [PRE_BIND_FAILS], written=["n1"], outcome=("", "n1")),
    ExpectationCase("permit-rejection-after-the-wait-keeps-the-node-set", [hold_at_permit("p1")], "reject",
                    written=["n1"], outcome=("", "n1")),
    # One nominated (by a preemption) elsewhere gets the node, then loses any nomination on failure.
    ExpectationCase("nominated-elsewhere-pre-bind-failure-clears", [PRE_BIND_FAILS], p1=pod("p1", "1", nominated="n0"),
                    written=["n1", ""], outcome=("", "")),
    # Already nominated to that node: nothing to write until the failure clears it.
    ExpectationCase("nominated-there-pre-bind-failure-clears", [PRE_BIND_FAILS], p1=pod("p1", "1", nominated="n1"),
                    written=[""], outcome=("", "")),
    ExpectationCase("nominated-there-binding-clears", [PRE_BIND_WORKS], p1=pod("p1", "1", nominated="n1")),
]  # fmt: skip


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in EXPECTATION_CASES])
def test_the_binding_cycle_sets_the_nominated_node_as_kube_scheduler_does(case: ExpectationCase) -> None:
    seen: dict[str, Any] = {}

    async def during(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        seen["waiting"] = (rec(s, "p1").pod.nominated_node_name, dict(s.nominated))
        wp = s.handle.waiting_pod("uid-p1")
        assert wp is not None
        wp.allow("W") if case.permit == "allow" else wp.reject("W", "not now")

    async def main() -> tuple[Scheduler, RecordingSource]:
        s, _ = make_scheduler(case.specs, binder=case.binder)
        source = s.source = RecordingSource(s)
        await drive(s, [node("n1"), case.p1], during if case.permit else None)
        return s, source

    s, source = asyncio.run(main())
    assert_invariants(s)
    if case.permit:
        assert seen["waiting"] == ("n1", {})
    assert source.written == [("p1", n) for n in case.written]
    p1 = rec(s, "p1").pod
    assert (p1.node_name, p1.nominated_node_name) == case.outcome
    assert s.nominated == {}
    info = s.queue.info("uid-p1")  # a requeued pod is the record's, with the node the cycle set
    assert info is None or info.pod.nominated_node_name == case.outcome[1]


# ---------------------------------------------------------------------------------------------------
# The walk after a nominated node that did not fit


@pytest.mark.parametrize(
    ("nominated", "next_start"),
    [
        # 200 nodes at 50%: Filter stops after 100 nodes. kube-scheduler counts the nominated node it
        # tried among the processed nodes (its status stays in the diagnosis) when the walk did not
        # reach it again, so the next walk starts one node further.
        pytest.param("n199", 101, id="tried-node-beyond-the-walk"),
        # The walk meets it again (it takes the place of a feasible node: 101 nodes walked), counted once.
        pytest.param("n050", 101, id="tried-node-walked-again"),
        pytest.param("", 100, id="no-nominated-node"),
    ],
)
def test_a_nominated_node_that_did_not_fit_counts_as_processed(nominated: str, next_start: int) -> None:
    async def main() -> Scheduler:
        s, _ = make_scheduler([], percentage=50)
        nodes = [node(f"n{i:03d}", cpu="100m" if f"n{i:03d}" == nominated else "4") for i in range(200)]
        await s.apply([*nodes, pod("p1", "1", nominated=nominated)])
        info = await s.queue.pop()
        assert info is not None
        await s.schedule_one(info)
        if s._binding_tasks:
            await asyncio.wait(list(s._binding_tasks), timeout=10)
        await s.stop()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    assert rec(s, "p1").pod.node_name not in ("", nominated)
    assert s._next_start == next_start
