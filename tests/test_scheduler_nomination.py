"""The nominator and a pod's nominatedNodeName through the binding cycle, as kube-scheduler v1.35 keeps
them (``pkg/scheduler/schedule_one.go``: ``assume``, ``bindingCycle``, ``handleBindingCycleError``;
``backend/queue/nominator.go``): an assumed pod leaves the nominator, so no other pod's Filter counts
it twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from test_runtime import Spec, assert_invariants, drive, fake, make_scheduler, node, rec, wait_for

from framework.scheduler import Scheduler
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
