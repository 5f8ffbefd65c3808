"""A pod's nominatedNodeName on a live cluster never outlives its binding.

The binding cycle hands the pod's node to the cluster source as its nominatedNodeName before the
binding is sent, when the binding will take a while (kube-scheduler v1.35's
NominatedNodeNameForExpectation). On a live cluster that patch is queued (framework/kube/events.py)
while the binding goes out at once, so the binding may land first; the API server clears the field on
binding (ClearingNominatedNodeNameAfterBinding) and a patch arriving afterwards must not set it again:
it is a JSON patch testing that ``spec.nodeName`` is unset, refused for a bound pod and then dropped
quietly (a v1.35 API server would refuse a plain patch too, as invalid, and the writer would log it).

Unit: the order the scheduler tells the source in; the StatusWriter's requests against a fake client.
Live (``kube``): a pod waiting at Permit, then bound, on the real kube-apiserver, with its
nomination's patch sent before the binding and held back until after it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kube_framework import get_json, node_manifest, pod_manifest
from test_runtime import PROFILE, Spec, fake, make_scheduler, node, rec, wait_for
from test_scheduler_nomination import PRE_BIND_WORKS, RecordingSource, hold_at_permit, pod

from framework.kube.client import ApiClient, ApiError, ApiUnreachable, KubeConfig
from framework.kube.events import JSON_PATCH, StatusWriter, Writer
from framework.kube.source import KubeSource
from framework.scheduler import Scheduler
from pluginhost.model import Pod
from pluginhost.status import Status
from tools.localcluster import LocalCluster

# ---------------------------------------------------------------------------------------------------
# The scheduler: the nomination is handed over before the binding is sent


class OrderSource(RecordingSource):
    """The embedded store, logging the nominations written and the bindings sent, in order."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler)
        self.log: list[tuple[str, str, str]] = []

    def nominated(self, pod: Pod, node_name: str) -> None:
        self.log.append(("nominated", pod.name, node_name))

    async def bind(self, pod: Pod, node_name: str) -> Status:
        self.log.append(("bind", pod.name, node_name))
        return await super().bind(pod, node_name)


@dataclass
class OrderCase:
    id: str
    specs: list[Spec]
    log: list[tuple[str, str, str]]
    waits: bool = False


ORDER_CASES = [
    OrderCase("waits-at-permit", [hold_at_permit("p1")], [("nominated", "p1", "n1"), ("bind", "p1", "n1")],
              waits=True),
    OrderCase("pre-bind-work", [PRE_BIND_WORKS], [("nominated", "p1", "n1"), ("bind", "p1", "n1")]),
    # Most pods: nothing will make the binding wait, nothing is written before it.
    OrderCase("nothing-to-wait-for", [fake("PB", "preBind", preBindPreFlight=Status.skip())], [("bind", "p1", "n1")]),
]  # fmt: skip


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in ORDER_CASES])
def test_the_nomination_is_handed_to_the_source_before_the_binding_is_sent(case: OrderCase) -> None:
    async def main() -> OrderSource:
        s, _ = make_scheduler(case.specs)
        source = s.source = OrderSource(s)
        await s.apply([node("n1"), pod("p1", "1")])
        task = asyncio.create_task(s.run())
        try:
            if case.waits:
                await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
                assert source.log == [("nominated", "p1", "n1")]  # before the wait, not after it
                waiting = s.handle.waiting_pod("uid-p1")
                assert waiting is not None
                waiting.allow("W")
            await wait_for(s, lambda: rec(s, "p1").pod.node_name == "n1")
        finally:
            await s.drain(timeout=5)
            await s.stop()
            await asyncio.wait_for(task, 5)
        return source

    assert asyncio.run(main()).log == case.log


# ---------------------------------------------------------------------------------------------------
# The StatusWriter's requests


class _Writer:
    def __init__(self) -> None:
        self.jobs: list[Callable[[], Awaitable[None]]] = []

    def submit(self, job: Callable[[], Awaitable[None]]) -> None:
        self.jobs.append(job)

    async def run(self) -> None:
        while self.jobs:
            await self.jobs.pop(0)()


class _Client:
    """Records each request; a JSON patch is answered with ``refuse`` (an ApiError) when set."""

    def __init__(self, refuse: ApiError | None = None) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.refuse = refuse

    async def request(self, method: str, path: str, *, verb: str, resource: str, body: Any = None,
                      content_type: str = "", **kw: Any) -> Any:
        self.requests.append((content_type, body))
        if content_type == JSON_PATCH and self.refuse is not None:
            raise self.refuse
        return {}


# What the API server answers when the JSON patch's test fails (the test's words are not in it).
BOUND = ApiError("patch", "pods/status", 422, "Invalid",
                 "the server rejected our request due to an error in our request")
NOMINATE_N1 = (JSON_PATCH, [{"op": "test", "path": "/spec/nodeName", "value": None},
                            {"op": "add", "path": "/status/nominatedNodeName", "value": "n1"}])


def _writes(client: _Client, *changes: Callable[[StatusWriter, Pod], None],
            current: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    writer = _Writer()
    status = StatusWriter(client, writer, lambda key, uid: current or {})  # type: ignore[arg-type]
    p = Pod(name="p1", namespace="ns", uid="u1")
    for change in changes:
        change(status, p)
    asyncio.run(writer.run())
    return client.requests


def test_a_node_is_nominated_by_a_json_patch_that_tests_the_pod_is_unbound() -> None:
    assert _writes(_Client(), lambda w, p: w.nominate(p, "n1")) == [NOMINATE_N1]


def test_a_nomination_is_cleared_by_a_strategic_merge_patch_without_a_test() -> None:
    # Clearing is right for a bound pod too (its binding cleared the field already).
    writes = _writes(_Client(refuse=BOUND), lambda w, p: w.nominate(p, ""), current={"nominatedNodeName": "n0"})
    assert writes == [("application/strategic-merge-patch+json", {"status": {"nominatedNodeName": None}})]


def test_a_nomination_and_a_condition_go_nomination_first() -> None:
    writes = _writes(_Client(), lambda w, p: w.unschedulable(p, "Unschedulable", "no room"),
                     lambda w, p: w.nominate(p, "n1"))
    assert [w[0] for w in writes] == [JSON_PATCH, "application/strategic-merge-patch+json"]
    assert writes[0] == NOMINATE_N1
    assert writes[1][1]["status"]["conditions"][0]["reason"] == "Unschedulable"


def test_a_pod_found_bound_gets_neither_the_nomination_nor_the_condition() -> None:
    writes = _writes(_Client(refuse=BOUND), lambda w, p: w.unschedulable(p, "Unschedulable", "no room"),
                     lambda w, p: w.nominate(p, "n1"))
    assert writes == [NOMINATE_N1]  # refused, and nothing raised: the Writer logs no refusal


def test_another_refusal_of_the_nomination_is_raised() -> None:
    other = ApiError("patch", "pods/status", 403, "Forbidden", "cannot patch resource pods/status")
    with pytest.raises(ApiError, match="cannot patch"):
        _writes(_Client(refuse=other), lambda w, p: w.nominate(p, "n1"))


class _Unanswered(_Client):
    """Records each request; the first ``lost`` of them get no answer (ApiUnreachable)."""

    def __init__(self, lost: int) -> None:
        super().__init__()
        self.lost = lost

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        await super().request(method, path, **kw)
        if len(self.requests) <= self.lost:
            raise ApiUnreachable(kw["verb"], kw["resource"], "https://127.0.0.1:1", ConnectionResetError())
        return {}


@pytest.mark.parametrize(
    ("changes", "lost", "want"),
    [
        pytest.param([lambda w, p: w.unschedulable(p, "Unschedulable", "no room")], 1,
                     [("application/strategic-merge-patch+json", "Unschedulable")] * 2, id="condition"),
        pytest.param([lambda w, p: w.nominate(p, "n1")], 2, [(JSON_PATCH, "n1")] * 3, id="nomination"),
        pytest.param([lambda w, p: w.unschedulable(p, "Unschedulable", "no room"), lambda w, p: w.nominate(p, "n1")],
                     1, [(JSON_PATCH, "n1"), (JSON_PATCH, "n1"), ("application/strategic-merge-patch+json",
                                                                 "Unschedulable")], id="both"),
    ],
)
def test_a_status_write_that_got_no_answer_is_sent_again(
    changes: list[Callable[[StatusWriter, Pod], None]], lost: int, want: list[tuple[str, str]]
) -> None:
    """The Writer runs a job again after ApiUnreachable; the job still has its patch to send."""
    client = _Unanswered(lost)

    async def main() -> None:
        writer = Writer(workers=1)
        writer.start()
        status = StatusWriter(client, writer, lambda key, uid: {})  # type: ignore[arg-type]
        p = Pod(name="p1", namespace="ns", uid="u1")
        for change in changes:
            change(status, p)
        assert await writer.flush(30)
        await writer.stop()
        assert writer.failed == 0

    asyncio.run(main())

    def what(content_type: str, body: Any) -> tuple[str, str]:
        if content_type == JSON_PATCH:
            return content_type, body[1]["value"]
        return content_type, body["status"]["conditions"][0]["reason"]

    assert [what(*r) for r in client.requests] == want


# ---------------------------------------------------------------------------------------------------
# On the real kube-apiserver


class _HeldPatches:
    """The StatusWriter's client, holding every pods/status patch until ``release`` is set."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.release = asyncio.Event()
        self.held = 0

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if kw.get("resource") == "pods/status":
            self.held += 1
            await self.release.wait()
        return await self.client.request(method, path, **kw)


@pytest.fixture
def kube_node(kube_cluster: LocalCluster, kube_namespace: str) -> Iterator[str]:
    name = f"{kube_namespace}-n"[-63:].lstrip("-")
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(name)))
    try:
        yield name
    finally:
        kube_cluster.kubectl("delete", "node", name)


def _api_pod(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    return get_json(cluster, "pod", "p1", "-n", namespace)  # type: ignore[no-any-return]


@pytest.mark.kube
@pytest.mark.parametrize("patch_after_binding", [False, True], ids=["patch-first", "binding-first"])
def test_a_pod_that_waited_at_permit_ends_bound_with_no_nominated_node(
    kube_cluster: LocalCluster, kube_namespace: str, kube_node: str, patch_after_binding: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube_namespace
    caplog.set_level(logging.WARNING, logger="outrigger")

    async def main() -> tuple[dict[str, Any], int]:
        s, _ = make_scheduler([hold_at_permit("p1")])
        source = KubeSource(s, ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig)))
        held = _HeldPatches(source.client)
        if patch_after_binding:
            source.status.client = held  # type: ignore[assignment]
        await source.start()
        task = asyncio.create_task(s.run())
        try:
            await source.wait_synced(30)
            await asyncio.to_thread(kube_cluster.kubectl, "create", "-f", "-",
                                    input=json.dumps(pod_manifest("p1", ns, PROFILE)))
            await wait_for(s, lambda: any(r.pod.name == "p1" and s.handle.waiting_pod(u) is not None
                                          for u, r in s.pods.items()), 30)
            uid = next(u for u, r in s.pods.items() if r.pod.name == "p1")
            if not patch_after_binding:  # the nomination reaches the pod while it waits
                await _until(lambda: _api_pod(kube_cluster, ns)["status"].get("nominatedNodeName") == kube_node)
            waiting = s.handle.waiting_pod(uid)
            assert waiting is not None
            waiting.allow("W")
            await _until(lambda: _api_pod(kube_cluster, ns)["spec"].get("nodeName") == kube_node)
            held.release.set()  # the nomination's patch goes out now, after the binding
            assert await source.writer.flush(10)
            return _api_pod(kube_cluster, ns), held.held
        finally:
            held.release.set()
            await s.stop()
            await asyncio.wait_for(task, 10)
            await source.stop()

    obj, held = asyncio.run(main())
    assert held == (1 if patch_after_binding else 0)
    assert (obj["spec"].get("nodeName"), obj["status"].get("nominatedNodeName", "")) == (kube_node, "")
    # A late nomination is dropped as expected, not refused as invalid (a v1.35 API server forbids one
    # on a bound pod: "may not be set on pods that are already bound to a node") and logged.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def _until(check: Callable[[], bool], timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(check):
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {timeout}s")
        await asyncio.sleep(0.1)
