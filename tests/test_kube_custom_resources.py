"""The custom resources plugins register events for, watched on the live test apiserver with the framework's
own RBAC (deploy/kubernetes/rbac.yaml's service account), as kube-scheduler's dynamic informers watch them.

- a PodGroup added, changed and deleted reaches the scheduler as Add, Update and Delete under the GVK string
  Coscheduling registers (``podgroups.v1alpha1.scheduling.x-k8s.io``);
- a custom resource the framework may not read (no RBAC rule, no CRD) is a warning naming the resource,
  retried with backoff: the other informers go on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
import yaml
from kube_framework import outrigger_kubeconfig
from test_go_scheduler_plugins import pod_group, podgroup_crd

from framework.kube.client import ApiClient, KubeConfig
from framework.kube.customresources import custom_resource_informers
from framework.scheduler import Scheduler
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PODGROUPS = "podgroups.v1alpha1.scheduling.x-k8s.io"
WIDGETS = "widgets.v1.example.com"  # neither installed nor granted


class Changes:
    """A scheduler as the informers see it: the resources its plugins registered, and what it is told."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace  # the test's own: other tests' objects of the resource are in the cluster too
        self.seen: list[tuple[str, str, str]] = []

    def custom_resources(self) -> list[str]:
        return [PODGROUPS, WIDGETS]

    def custom_resource_changed(self, resource: str, old: Any, new: Any) -> None:
        what = "Add" if old is None else "Delete" if new is None else "Update"
        meta = (new or old)["metadata"]
        if meta.get("namespace") == self.namespace:
            self.seen.append((resource, what, meta["name"]))


def test_podgroup_changes_reach_the_scheduler_and_an_unreadable_resource_is_a_warning(
    kube_cluster: LocalCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    kube_cluster.kubectl("apply", "-f", str(podgroup_crd()))
    kube_cluster.kubectl("wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=30s")
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    changes = Changes(kube_namespace)

    def kubectl(*args: str, **kw: Any) -> Any:
        return asyncio.to_thread(kube_cluster.kubectl, *args, **kw)

    async def until(cond: Any, what: str) -> None:
        for _ in range(400):
            if cond():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not reached: {what}; seen {changes.seen}")

    async def main() -> None:
        client = ApiClient(KubeConfig.from_file(kubeconfig))
        informers = custom_resource_informers(cast(Scheduler, changes), client)
        assert [(i.path, i.resource) for i in informers] == [
            ("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "podgroups.scheduling.x-k8s.io"),
            ("/apis/example.com/v1/widgets", "widgets.example.com")]
        for informer in informers:
            informer.min_backoff = 0.1
        tasks = [asyncio.get_running_loop().create_task(i.run()) for i in informers]
        try:
            await asyncio.wait_for(informers[0].synced.wait(), 30)
            group = pod_group("crd-watch", kube_namespace, 2)
            await kubectl("create", "-f", "-", input=yaml.safe_dump(group))
            await kubectl("patch", "podgroups.scheduling.x-k8s.io", "crd-watch", "-n", kube_namespace, "--type=merge",
                          "-p", '{"spec": {"minMember": 3}}')
            await kubectl("delete", "podgroups.scheduling.x-k8s.io", "crd-watch", "-n", kube_namespace)
            await until(lambda: len(changes.seen) >= 3, "three PodGroup events")
            assert changes.seen == [(PODGROUPS, "Add", "crd-watch"), (PODGROUPS, "Update", "crd-watch"),
                                    (PODGROUPS, "Delete", "crd-watch")]
            await until(lambda: any("widgets.example.com" in r.getMessage() for r in caplog.records),
                        "the widgets warning")
            assert not informers[1].synced.is_set() and all(not t.done() for t in tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()

    with caplog.at_level(logging.WARNING, logger="outrigger.kube"):
        asyncio.run(main())
    warnings = [r.getMessage() for r in caplog.records if "widgets" in r.getMessage()]
    assert warnings and warnings[0].startswith("list widgets.example.com: 40"), warnings
    assert "retrying with backoff" in warnings[0]
