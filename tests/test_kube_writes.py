"""Writes to the API server whose answer was lost, on the real API server behind a proxy that injects the
failure (tests/kube_fault_proxy.py): the request reaches the API server, is applied, and its answer is
replaced by a ``503`` with ``Retry-After`` (the client sends it again), or the request is answered
``500`` without reaching it. A write is sent twice only when a second copy cannot apply it twice
(framework.kube.client.resendable), and each second copy's refusal is read as done:

- an Event is one object per occurrence, with its series count (a create sent again is refused
  AlreadyExists; a series whose Event is missing creates it with its count, as client-go does);
- a victim's delete, with its uid precondition, found gone (404) when sent again is done; one refused
  409 because the name is another pod's now is reported and not sent again;
- a binding whose answer was lost is settled by reading the pod, however the reads are answered (403
  from a restarted API server, 5xx), for as long as the lease is held, and sent again only while unbound.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from kube_fault_proxy import FaultProxy
from kube_framework import get_json, pod_manifest
from test_runtime import make_scheduler, node

from framework.kube.client import ApiClient, KubeConfig, resendable
from framework.kube.events import EventRecorder, Writer
from framework.kube.source import KubeSource
from pluginhost.model import Pod
from pluginhost.status import Status
from tools.localcluster import LocalCluster

PROFILE = "outrigger-scheduler"


RESENDABLE = [
    # (name, method, body, idempotent, whether a second copy may be sent)
    ("a read", "GET", None, False, True),
    ("a HEAD", "HEAD", None, False, True),
    ("a PUT with the resourceVersion read", "PUT", {"metadata": {"name": "v", "resourceVersion": "7"}}, False, True),
    ("a PUT without a resourceVersion", "PUT", {"metadata": {"name": "v"}}, False, False),
    ("a PATCH its caller calls idempotent", "PATCH", {"series": {"count": 2}}, True, True),
    ("a PATCH not called idempotent", "PATCH", {"series": {"count": 2}}, False, False),
    ("a named create (an Event, a binding)", "POST", {"metadata": {"name": "p.1870f2"}}, False, True),
    ("a generateName create", "POST", {"metadata": {"generateName": "p-"}}, False, False),
    ("a create with both", "POST", {"metadata": {"name": "p", "generateName": "p-"}}, False, False),
    ("a create without metadata", "POST", {"spec": {}}, False, False),
    ("a delete with a uid precondition", "DELETE", {"preconditions": {"uid": "u1"}}, False, True),
    ("a delete without one", "DELETE", None, False, False),
    ("a delete with an empty uid", "DELETE", {"preconditions": {"uid": ""}}, False, False),
]


@pytest.mark.parametrize(("method", "body", "idempotent", "expected"), [c[1:] for c in RESENDABLE],
                         ids=[c[0] for c in RESENDABLE])
def test_which_writes_are_sent_again_when_their_first_copy_may_have_landed(
        method: str, body: Any, idempotent: bool, expected: bool) -> None:
    assert resendable(method, body, idempotent=idempotent) is expected


def make_pod(cluster: LocalCluster, namespace: str, name: str) -> Pod:
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod_manifest(name, namespace, PROFILE)))
    uid = get_json(cluster, "pod", name, "-n", namespace)["metadata"]["uid"]
    return Pod(name=name, namespace=namespace, uid=uid, scheduler_name=PROFILE)


def event_series(cluster: LocalCluster, namespace: str) -> dict[str, list[int | None]]:
    """Pod name -> the series count of each of its Events (None: a single occurrence), sorted."""
    out: dict[str, list[int | None]] = {}
    for item in get_json(cluster, "events.events.k8s.io", "-n", namespace)["items"]:
        count = (item.get("series") or {}).get("count")
        out.setdefault(item["regarding"]["name"], []).append(count)
    return {name: sorted(counts, key=lambda c: c or 0) for name, counts in out.items()}


async def started_proxy(cluster: LocalCluster, arrange: Callable[[FaultProxy], None]) -> tuple[FaultProxy, ApiClient]:
    proxy = FaultProxy(cluster.server, cluster.ca_file)
    arrange(proxy)
    await proxy.start()
    return proxy, ApiClient(KubeConfig(server=proxy.url, token=cluster.admin_token), qps=0)


EVENT_CASES = [
    # (name, whether the API server applied the failed requests, expected series counts of each pod's
    #  Events, writes given up, warnings logged)
    ("answered 503 Retry-After after landing: sent again, refused AlreadyExists, done", True,
     {"a": [3], "b": [None]}, 0, []),
    ("answered 500 without landing: the series creates its Event with its count", False,
     {"a": [3]}, 2, ["create events: 500 InternalError: injected: not forwarded (further refusals like this one "
                     "are not logged)"]),
]


@pytest.mark.parametrize(("landed", "expected", "failed", "warnings"), [c[1:] for c in EVENT_CASES],
                         ids=[c[0] for c in EVENT_CASES])
def test_one_event_per_occurrence_with_its_series_count_when_answers_are_lost(
        kube_cluster: LocalCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture,
        landed: bool, expected: dict[str, list[int | None]], failed: int, warnings: list[str]) -> None:
    ns = kube_namespace
    caplog.set_level(logging.WARNING, logger="outrigger")
    a, b = make_pod(kube_cluster, ns, "a"), make_pod(kube_cluster, ns, "b")
    events = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"

    def arrange(proxy: FaultProxy) -> None:
        proxy.fail("POST", events, landed=landed, times=2)  # the first create of each pod's event
        if landed:
            proxy.fail("PATCH", events + "/", landed=True)  # the series count

    async def main() -> tuple[list[tuple[str, str, int | None, int]], int]:
        proxy, client = await started_proxy(kube_cluster, arrange)
        writer = Writer(2)
        writer.start()
        recorder = EventRecorder(client, writer, hostname="test", series_seconds=3600)
        try:
            for _ in range(3):  # one occurrence, then two repeats: a series of 3
                recorder.record(a, type_="Warning", reason="FailedScheduling", action="Scheduling",
                                note="0/0 nodes are available", controller=PROFILE)
            recorder.record(b, type_="Normal", reason="Scheduled", action="Binding", note=f"assigned {ns}/b",
                            controller=PROFILE)
            assert await writer.flush(30)
            await recorder.stop()  # sends the series' count
            assert await writer.flush(30)
            return proxy.log, writer.failed
        finally:
            await writer.stop()
            await client.close()
            await proxy.close()

    log, given_up = asyncio.run(main())
    assert event_series(kube_cluster, ns) == expected
    assert given_up == failed
    assert [r.getMessage() for r in caplog.records
            if r.name.startswith("outrigger") and r.levelno >= logging.WARNING] == warnings
    writes = sorted(((method, real, got) for method, _, real, got in log), key=lambda w: (w[0], w[1] or 0, w[2]))
    if landed:  # each create: applied (201) and answered 503, sent again: 409; the patch: 200 then 503, 200
        assert writes == [("PATCH", 200, 200), ("PATCH", 200, 503), ("POST", 201, 503), ("POST", 201, 503),
                          ("POST", 409, 409), ("POST", 409, 409)]
    else:  # each create answered 500 and not sent again; the series' patch finds no Event and creates it
        assert writes == [("PATCH", 404, 404), ("POST", None, 500), ("POST", None, 500), ("POST", 201, 201)]


DELETE_CASES = [
    # (name, whether the pod deleted is the one of that name now, the fault, expected status message
    #  ("" for success), expected (status from the API server, status the client got) of each DELETE,
    #  whether the pod is there afterwards)
    ("answered 503 Retry-After after landing: sent again, found gone, done", True, True, "",
     [(200, 503), (404, 404)], False),
    ("a different pod of the name: refused 409, reported, not sent again", False, False,
     "pod {ns}/victim not deleted: the name now belongs to another pod (uid stale-uid precondition failed: ",
     [(409, 409)], True),
]


@pytest.mark.parametrize(("same_pod", "fault", "message", "deletes", "remains"), [c[1:] for c in DELETE_CASES],
                         ids=[c[0] for c in DELETE_CASES])
def test_a_victims_delete_is_done_once_whatever_its_answers(
        kube_cluster: LocalCluster, kube_namespace: str, same_pod: bool, fault: bool, message: str,
        deletes: list[tuple[int, int]], remains: bool) -> None:
    ns = kube_namespace
    victim = make_pod(kube_cluster, ns, "victim")
    if not same_pod:
        victim = Pod(name=victim.name, namespace=ns, uid="stale-uid", scheduler_name=PROFILE)
    path = f"/api/v1/namespaces/{ns}/pods/victim"

    def arrange(proxy: FaultProxy) -> None:
        if fault:
            proxy.fail("DELETE", path, landed=True)

    async def main() -> tuple[str, bool, list[tuple[str, str, int | None, int]], dict[str, int]]:
        proxy, client = await started_proxy(kube_cluster, arrange)
        source = KubeSource(None, client)
        try:
            status = await source.delete_pod(victim, "deleted by plugin Test")
            return status.message(), status.ok, proxy.log, dict(client.counts)
        finally:
            await client.close()
            await proxy.close()

    got, ok, log, counts = asyncio.run(main())
    if message:
        assert not ok
        assert got.startswith(message.format(ns=ns)), got
    else:
        assert ok, got
    assert [(real, sent) for method, p, real, sent in log if method == "DELETE" and p == path] == deletes
    assert counts == {"delete pods": len(deletes)}
    names = [p["metadata"]["name"] for p in get_json(kube_cluster, "pods", "-n", ns)["items"]]
    assert names == (["victim"] if remains else [])


# A binding whose answer was lost (its first copy applied, answered 500) is settled by reading the pod:
# the binding cycle keeps the pod assumed, its room held, until the API says. Given up too soon, the pod
# is forgotten while bound, and the next pods take its room: a node over-committed (the live fault harness
# saw it when the API server was restarted and the leader kept its lease).
RENEWED = 0.6  # a lease renewed all along: another replica could lead 0.6 s from any moment
OUTCOME_CASES = [
    # (name, the binding's fault (landed, status), the reads' faults (status, times), the lease's window,
    #  expected message ("" for bound), expected (method, the API server's status, the status the client got))
    ("reads refused 403 while a restarted API server's authorizer catches up: asked again, bound",
     (True, 500), (403, 2), None, "",
     [("POST", 201, 500), ("GET", None, 403), ("GET", None, 403), ("GET", 200, 200)]),
    ("reads failing past the lease window at the send, the lease renewed meanwhile: asked on, bound",
     (True, 500), (500, 3), RENEWED, "",
     [("POST", 201, 500), ("GET", None, 500), ("GET", None, 500), ("GET", None, 500), ("GET", 200, 200)]),
    ("the binding not applied: the pod read unbound, the binding sent again, bound",
     (False, 500), (500, 0), RENEWED, "",
     [("POST", None, 500), ("GET", 200, 200), ("POST", 201, 201)]),
    ("the lease lost while the reads fail: given up (this replica exits, its assumed pods with it)",
     (True, 500), (500, 1000), 0.0, "binding of pod {ns}/web to n1: no answer (get pods: 500 InternalError: "
     "injected: not forwarded), and this replica no longer holds the leader lease", None),
]


@pytest.mark.parametrize(("binding", "reads", "window", "message", "requests"), [c[1:] for c in OUTCOME_CASES],
                         ids=[c[0] for c in OUTCOME_CASES])
def test_a_binding_whose_answer_was_lost_is_settled_by_reading_the_pod_while_the_lease_is_held(
        kube_cluster: LocalCluster, kube_namespace: str, binding: tuple[bool, int], reads: tuple[int, int],
        window: float | None, message: str, requests: list[tuple[str, int | None, int]] | None) -> None:
    ns = kube_namespace
    web = make_pod(kube_cluster, ns, "web")
    path = f"/api/v1/namespaces/{ns}/pods/web"

    def arrange(proxy: FaultProxy) -> None:
        proxy.fail("POST", path + "/binding", landed=binding[0], status=binding[1])
        if reads[1]:
            proxy.fail("GET", path, landed=False, status=reads[0], times=reads[1])

    async def main() -> tuple[Status, list[tuple[str, str, int | None, int]], int]:
        proxy, client = await started_proxy(kube_cluster, arrange)
        scheduler, _ = make_scheduler([])
        source = KubeSource(scheduler, client)
        source.nodes.store["n1"] = node("n1")
        if window is not None:
            # The lease's window at the binding's send: ``window`` as long as it is renewed; a lease lost
            # (0.0) is held for the send and the first reads' second, then gone.
            lost_at = asyncio.get_running_loop().time() + 1.0
            source.fence = lambda: window or max(lost_at - asyncio.get_running_loop().time(), 0.0)
        try:
            status = await source.bind(web, "n1")
            return status, proxy.log, scheduler.stats.bound
        finally:
            await client.close()
            await proxy.close()

    status, log, bound = asyncio.run(main())
    node_name = get_json(kube_cluster, "pod", "web", "-n", ns)["spec"].get("nodeName")
    if message:
        assert (status.ok, status.message(), bound, node_name) == (False, message.format(ns=ns), 0, "n1")
        assert [(method, real, got) for method, _, real, got in log] == [
            ("POST", 201, 500), *[("GET", None, 500)] * (len(log) - 1)]
    else:
        assert (status.ok, bound, node_name) == (True, 1, "n1"), status.message()
        assert [(method, real, got) for method, _, real, got in log] == requests


REFUSED_BINDINGS = [
    # (name, how the Binding sent differs from the pod, the status message kube-scheduler's DefaultBinder
    #  gives: the API server's own message, as client-go's error reads, without the request's verb and code)
    ("another pod's uid", {"uid": "0f0f0f0f-0000-4000-8000-000000000000"},
     "Operation cannot be fulfilled on pods \"web\": StorageError: invalid object, Code: 4, Key: "
     "/registry/pods/{ns}/web, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
     "precondition: 0f0f0f0f-0000-4000-8000-000000000000, UID in object meta: {uid}"),
    ("a pod that does not exist", {"name": "gone"}, 'pods "gone" not found'),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in REFUSED_BINDINGS], ids=[c[0] for c in REFUSED_BINDINGS])
def test_a_binding_the_api_server_refuses_fails_with_its_message_as_kube_scheduler_words_it(
        kube_cluster: LocalCluster, kube_namespace: str, change: dict[str, str], message: str) -> None:
    web = make_pod(kube_cluster, kube_namespace, "web")
    sent = Pod(name=change.get("name", web.name), namespace=web.namespace, uid=change.get("uid", web.uid),
               scheduler_name=PROFILE)

    async def main() -> tuple[Status, int]:
        client = ApiClient(KubeConfig(server=kube_cluster.server, token=kube_cluster.admin_token,
                                      ca_file=str(kube_cluster.ca_file)), qps=0)
        scheduler, _ = make_scheduler([])
        source = KubeSource(scheduler, client)
        source.nodes.store["n1"] = node("n1")
        try:
            return await source.bind(sent, "n1"), scheduler.stats.bound
        finally:
            await client.close()

    status, bound = asyncio.run(main())
    pod = get_json(kube_cluster, "pod", "web", "-n", kube_namespace)
    assert (status.ok, status.message(), bound) == (False, message.format(ns=kube_namespace, uid=web.uid), 0)
    assert pod["spec"].get("nodeName") is None
