"""tools/workloads.py: the one set of scheduler_perf templates and the one watch of bound pods
(:class:`BoundWatch`), driven here by an in-memory client that plays a watch's events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from framework.kube.client import ApiError
from tools.workloads import BoundWatch, node_manifest, pod_manifest, scheduler_perf_node, scheduler_perf_pod


class PlayedWatch:
    """A :class:`~tools.workloads.WatchClient` whose first watch plays ``events`` (then raises ``error``
    when one is given); a later watch waits until cancelled. Records the paths it was asked for."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]], error: BaseException | None = None) -> None:
        self.events, self.error = events, error
        self.paths: list[str] = []

    async def request(self, method: str, path: str, /, *, verb: str, resource: str,
                      params: dict[str, str] | None = None) -> Any:
        return {"metadata": {"resourceVersion": "7"}, "items": []}

    async def watch(self, path: str, rv: str, /, *, resource: str,
                    timeout_seconds: int = 1800) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        self.paths.append(f"{path} from {rv}")
        if len(self.paths) > 1:
            await asyncio.Event().wait()
        for event in self.events:
            yield event
        if self.error is not None:
            raise self.error


def pod(name: str, node: str = "", unschedulable: str = "") -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}]
    return {"metadata": {"name": name, "resourceVersion": "9"}, "spec": {"nodeName": node} if node else {},
            "status": {"conditions": conditions if unschedulable else []}}


async def _watched(client: PlayedWatch, all_pods: bool, total: int) -> tuple[BoundWatch, bool]:
    watch = BoundWatch(client, "ns", all_pods=all_pods)
    await watch.start()
    try:
        settled = await watch.settle(total, time.monotonic() + 2.0)
    finally:
        await watch.stop()
    return watch, settled


@pytest.mark.parametrize(
    ("all_pods", "events", "total", "want"),
    [
        pytest.param(False, [("ADDED", pod("a", "n1")), ("MODIFIED", pod("a", "n2")), ("ADDED", pod("b", "n1"))], 2,
                     ({"a": "n1", "b": "n1"}, {}, True, "/api/v1/namespaces/ns/pods?fieldSelector=spec.nodeName%21%3D"),
                     id="bound-only: the first node seen is kept"),
        pytest.param(True, [("ADDED", pod("a", unschedulable="0/3 nodes are available")), ("ADDED", pod("b", "n1"))],
                     2, ({"b": "n1"}, {"a": "0/3 nodes are available"}, True, "/api/v1/namespaces/ns/pods"),
                     id="all-pods: unschedulable counted"),
        pytest.param(True, [("ADDED", pod("a", unschedulable="taint")), ("MODIFIED", pod("a", "n3"))], 1,
                     ({"a": "n3"}, {}, True, "/api/v1/namespaces/ns/pods"), id="all-pods: bound later"),
        pytest.param(True, [("ADDED", pod("a")), ("DELETED", pod("b", "n1"))], 1,
                     ({}, {}, False, "/api/v1/namespaces/ns/pods"), id="pending and deleted pods are neither"),
    ],
)
def test_bound_watch_sees_bound_and_unschedulable_pods(
        all_pods: bool, events: list[tuple[str, dict[str, Any]]], total: int,
        want: tuple[dict[str, str], dict[str, str], bool, str]) -> None:
    client = PlayedWatch(events)
    watch, settled = asyncio.run(_watched(client, all_pods, total))
    bound, unschedulable, want_settled, path = want
    assert ({n: node for n, (_t, node) in watch.bound.items()}, watch.unschedulable, settled) == (
        bound, unschedulable, want_settled)
    assert client.paths[0] == f"{path} from 7"  # from the list's resourceVersion


def test_bound_watch_raises_what_broke_the_watch() -> None:
    client = PlayedWatch([("ADDED", pod("a", "n1"))], ApiError.from_status("watch", "pods", 403, b"{}"))
    with pytest.raises(RuntimeError, match=r"^watching pods of ns: ") as caught:
        asyncio.run(_watched(client, True, 2))
    assert isinstance(caught.value.__cause__, ApiError)


def test_one_set_of_templates_for_the_api_and_in_process() -> None:
    api, bare = scheduler_perf_node(3, {"zone": "a"}, api=True), scheduler_perf_node(3, {"zone": "a"})
    assert api == node_manifest("scheduler-perf-00003", {"zone": "a"})
    assert api["metadata"]["labels"] == {"zone": "a", "kubernetes.io/hostname": "scheduler-perf-00003"}
    assert bare == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "scheduler-perf-00003",
                                                                     "labels": {"zone": "a"}},
                    "spec": {}, "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"}}}
    bound = scheduler_perf_pod("init", 12, node="scheduler-perf-00001")
    assert (bound["metadata"], {k: v for k, v in bound["spec"].items() if k != "containers"}) == (
        {"name": "pod-000012", "namespace": "init"}, {"nodeName": "scheduler-perf-00001"})
    named = pod_manifest("p", "ns", "kube", labels={"app": "x"}, priority=3)
    assert ({k: v for k, v in named["spec"].items() if k != "containers"}, named["metadata"]["labels"]) == (
        {"schedulerName": "kube", "priority": 3}, {"app": "x"})
