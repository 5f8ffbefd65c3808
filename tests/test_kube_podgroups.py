"""PodGroups on the real API server (GenericWorkload on; ``scheduling.k8s.io/v1beta1`` on 1.37, ``v1alpha2`` on
1.36): the version asked of the server, the informer that fills the scheduler's PodGroup store (exact fields;
an update and a delete reach it, each a ``PodGroup`` event; an object that does not decode is logged and
left out), the condition writer's strategic-merge PATCH as ``kubectl get -o yaml`` then shows it, and
``outrigger get podgroups`` / ``describe podgroup`` next to kubectl's own output."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from framework_thread import FrameworkThread
from kube_framework import get_json, node_manifest, outrigger_kubeconfig, pod_manifest

from framework import features
from framework.cli import main as cli_main
from framework.config import default_config, load_config
from framework.kube.client import ApiClient, KubeConfig
from framework.kube.events import Writer
from framework.kube.podgroups import ApiPodGroupStatusWriter, pod_group_converter, served_version
from framework.kube.source import KubeSource
from framework.plugins import in_tree_registry
from framework.podgroups.store import PodGroupStore
from framework.scheduler import Scheduler
from pluginhost.workload import PodGroup, PodGroupCondition
from tools.localcluster import LocalCluster

KUBECTL_TIME = "2026-11-28T10:00:00Z"


@pytest.fixture(autouse=True)
def generic_workload() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(previous)


@pytest.fixture
def version(kube_cluster: LocalCluster) -> str:
    """The version PodGroups are served in (the tests below need one: 1.35 serves none)."""
    if not kube_cluster.workload_api:
        pytest.skip("Kubernetes 1.35 serves no PodGroups (test_the_version_asked_is_the_one_served covers it)")
    return kube_cluster.workload_api


def pod_group(version: str, name: str, namespace: str, min_count: int | None, **meta: Any) -> dict[str, Any]:
    """A PodGroup manifest: a gang of ``min_count`` (basic when None), gangs in zones."""
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if min_count is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": "topology.kubernetes.io/zone"}]}
    return {"apiVersion": version, "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": spec}


async def until(check: Any, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "not in time"
        await asyncio.sleep(0.05)


def scheduler() -> Scheduler:
    registry = in_tree_registry()
    return Scheduler(default_config(registry.points()), registry, seed=0)


def test_the_version_asked_is_the_one_served(kube_cluster: LocalCluster) -> None:
    expected = kube_cluster.workload_api.split("/")[-1] or None  # None on 1.35: no PodGroup there

    async def main() -> str | None:
        client = ApiClient(KubeConfig.from_file(outrigger_kubeconfig(kube_cluster)))
        try:
            return await served_version(client)
        finally:
            await client.close()

    assert asyncio.run(main()) == expected


def test_podgroups_reach_the_store_and_each_change_is_a_podgroup_event(
        kube_cluster: LocalCluster, kube_namespace: str, version: str) -> None:
    ns = kube_namespace
    alpha = version.endswith("v1alpha2")
    kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(pod_group(version, "train", ns, 3, labels={"app": "t"})))

    async def main() -> tuple[PodGroup, PodGroup, list[tuple[str, str, int]], list[str]]:
        sched = scheduler()
        seen: list[tuple[str, str, int]] = []

        def listener(kind: str, old: Any, new: Any) -> None:
            obj = new if new is not None else old
            if kind == "PodGroup" and obj.namespace == ns:
                seen.append(("Add" if old is None else "Delete" if new is None else "Update", obj.name, obj.min_count))

        sched.cache.podgroups.add_listener(listener)
        # deploy/kubernetes/rbac.yaml's account: its rules are enough to list and watch them.
        source = KubeSource(sched, ApiClient(KubeConfig.from_file(outrigger_kubeconfig(kube_cluster))))
        try:
            await source.start()
            await source.wait_synced(30)
            first = sched.cache.podgroups.get(ns, "train")
            assert first is not None
            # minCount changes from 1.37 on (1.36 has the policy immutable: a label changes there).
            change = {"metadata": {"labels": {"app": "u"}}} if alpha else \
                {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
            await asyncio.to_thread(kube_cluster.kubectl, "patch", "podgroup", "train", "-n", ns, "--type=merge",
                                    "-p", json.dumps(change))
            await until(lambda: (pg := sched.cache.podgroups.get(ns, "train")) is not None
                        and pg.resource_version != first.resource_version)
            second = sched.cache.podgroups.get(ns, "train")
            assert second is not None
            await asyncio.to_thread(kube_cluster.kubectl, "delete", "podgroup", "train", "-n", ns)
            await until(lambda: sched.cache.podgroups.get(ns, "train") is None)
            return first, second, seen, [i.resource for i in source.informers()]
        finally:
            await source.stop()

    first, second, seen, informers = asyncio.run(main())
    assert (first.api_version, first.namespace, first.name, first.labels, first.policy, first.min_count,
            first.topology_keys, first.priority, first.conditions) == (
        version, ns, "train", {"app": "t"}, "gang", 3, ("topology.kubernetes.io/zone",), None if alpha else 0, ())
    assert first.uid and second.uid == first.uid and second.resource_version != first.resource_version
    updated = 3 if alpha else 2
    assert (second.min_count, second.topology_keys, second.labels) == (
        updated, ("topology.kubernetes.io/zone",), {"app": "u" if alpha else "t"})
    assert seen == [("Add", "train", 3), ("Update", "train", updated), ("Delete", "train", updated)]
    # Listed before pods, after the other objects the plugins read.
    assert informers[-2:] == ["podgroups.scheduling.k8s.io", "pods"]


def test_a_podgroup_that_does_not_decode_is_logged_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    # The API server keeps nothing this strict decoder refuses (unknown fields are pruned, and what it
    # validates is validated here alike), so the object is one a newer server could send.
    obj = pod_group("scheduling.k8s.io/v1beta1", "g", "ns", 2)
    obj["spec"]["schedulingPolicy"]["gang"]["minCount"] = 0
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    with caplog.at_level(logging.WARNING, "outrigger.kube"):
        assert pod_group_converter(obj) is None
    assert caplog.messages == ["PodGroup ns/g: spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be "
                               "greater than zero; the scheduler leaves it out until it is fixed"]
    good = pod_group_converter(pod_group("scheduling.k8s.io/v1beta1", "g", "ns", 2))
    assert good is not None and good.min_count == 2


def _conditions(kube_cluster: LocalCluster, ns: str, name: str) -> list[dict[str, Any]]:
    got = yaml.safe_load(kube_cluster.kubectl("get", "podgroup", name, "-n", ns, "-o", "yaml").stdout)
    return list((got.get("status") or {}).get("conditions") or [])


def _decoded(kube_cluster: LocalCluster, ns: str, name: str) -> PodGroup:
    pg = PodGroupStore.decode("PodGroup", get_json(kube_cluster, "podgroup", name, "-n", ns))
    assert isinstance(pg, PodGroup)
    return pg


UNSCHEDULABLE = PodGroupCondition("PodGroupInitiallyScheduled", "False", "Unschedulable",
                                  "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, "
                                  "0 remaining, ", 0, "2026-11-28T10:01:02Z")
SCHEDULED = PodGroupCondition("PodGroupInitiallyScheduled", "True", "Scheduled", "", 0, "2026-11-28T10:03:04Z")
OTHER = {"type": "Other", "status": "True", "reason": "ByHand", "message": "kept", "lastTransitionTime": KUBECTL_TIME}


def test_the_condition_writer_patches_the_status_as_kubectl_then_shows_it(
        kube_cluster: LocalCluster, kube_namespace: str, version: str) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        pod_group(version, name, ns, 3) for name in ("g", "gone", "replaced", "fenced")]))
    kube_cluster.kubectl("patch", "podgroup", "g", "-n", ns, "--subresource=status", "--type=merge",
                         "-p", json.dumps({"status": {"conditions": [OTHER]}}))
    groups = {name: _decoded(kube_cluster, ns, name) for name in ("g", "gone", "replaced", "fenced")}
    kube_cluster.kubectl("delete", "podgroup", "gone", "replaced", "-n", ns)
    kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(pod_group(version, "replaced", ns, 3)))
    outrigger = outrigger_kubeconfig(kube_cluster)

    async def write(name: str, condition: PodGroupCondition, window: float | None = None) -> tuple[int, int, int]:
        client = ApiClient(KubeConfig.from_file(outrigger))
        writer = Writer(2)
        writer.start()
        source = SimpleNamespace(client=client, writer=writer, fence=None if window is None else lambda: window)
        api = ApiPodGroupStatusWriter(source, lambda: version.split("/")[1])
        try:
            await api.write_condition(groups[name], condition)
            assert await api.flush(30)
            return api.written, api.failed, client.counts.get("patch podgroups/status", 0)
        finally:
            await writer.stop()
            await client.close()

    assert asyncio.run(write("g", UNSCHEDULABLE)) == (1, 0, 1)
    assert _conditions(kube_cluster, ns, "g") == [OTHER, {
        "type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
        "message": "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 0 remaining, ",
        "lastTransitionTime": "2026-11-28T10:01:02Z"}]
    # Its type is the merge key: the condition is replaced, the other one stays.
    assert asyncio.run(write("g", SCHEDULED)) == (1, 0, 1)
    assert _conditions(kube_cluster, ns, "g") == [OTHER, {
        "type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "",
        "lastTransitionTime": "2026-11-28T10:03:04Z"}]
    # A 1.36 API server's table reads the condition under its 1.36 name, PodGroupScheduled.
    assert kube_cluster.kubectl("get", "podgroup", "g", "-n", ns, "--no-headers").stdout.split()[:4] == [
        "g", "Gang", "<none>", "Pending" if version.endswith("v1alpha2") else "Scheduled"]
    # Gone, or another group of the name now: not written, and not a failure; out of the lease: not sent.
    assert asyncio.run(write("gone", SCHEDULED)) == (0, 0, 1)
    assert asyncio.run(write("replaced", SCHEDULED)) == (0, 0, 1)
    assert _conditions(kube_cluster, ns, "replaced") == []
    assert asyncio.run(write("fenced", SCHEDULED, window=0.0)) == (0, 0, 0)
    assert _conditions(kube_cluster, ns, "fenced") == []


def _ages_blank(text: str) -> str:
    # kubectl and outrigger read the clock a moment apart: the AGE column (last) may differ by a second.
    return re.sub(r"(?m)\d+s$", "<age>", text)


def test_get_and_describe_print_a_podgroup_as_kubectl_does(
        kube_cluster: LocalCluster, kube_namespace: str, version: str, capsys: pytest.CaptureFixture[str]) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        pod_group(version, "train-workers", ns, 4, labels={"app": "train", "tier": "gpu"},
                  annotations={"team": "ml"}),
        pod_group(version, "solo", ns, None),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker-0", "namespace": ns},
         "spec": {"schedulingGroup": {"podGroupName": "train-workers"},
                  "containers": [{"name": "c", "image": "trainer"}]}},
    ]))
    kube_cluster.kubectl("patch", "podgroup", "train-workers", "-n", ns, "--subresource=status", "--type=merge",
                         "-p", json.dumps({"status": {"conditions": [UNSCHEDULABLE.as_dict()]}}))
    rv = get_json(kube_cluster, "podgroup", "train-workers", "-n", ns)["metadata"]["resourceVersion"]

    with FrameworkThread() as fw:
        assert fw.server is not None
        sched = fw.server.scheduler
        source = KubeSource(sched, ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig)))
        fw.call(source.start())
        try:
            fw.call(source.wait_synced(30))
            fw.call(until(lambda: (pg := sched.cache.podgroups.get(ns, "train-workers")) is not None
                          and pg.resource_version == rv and len(sched.cache.podgroups.members(ns, pg.name)) == 1))

            def ours(*args: str) -> str:
                assert cli_main([*args, "--server", fw.address]) == 0
                return capsys.readouterr().out

            cases = [("get", "podgroups", "-n", ns), ("get", "podgroup", "solo", "train-workers", "-n", ns),
                     ("get", "podgroups", "-n", ns, "-o", "wide"), ("get", "podgroups", "-n", ns, "-o", "name"),
                     ("get", "podgroups", "-n", ns, "-l", "app=train")]
            for case in cases:
                assert _ages_blank(ours(*case)) == _ages_blank(kube_cluster.kubectl(*case).stdout), case
            # -A lists every namespace's groups: ours are the ones kubectl lists in this namespace.
            mine = [line for line in ours("get", "podgroups", "-A").splitlines() if line.startswith(f"{ns} ")]
            theirs = [line for line in kube_cluster.kubectl("get", "podgroups", "-A").stdout.splitlines()
                      if line.startswith(f"{ns} ")]
            assert [line.split()[:5] for line in mine] == [line.split()[:5] for line in theirs]
            # describe: kubectl's lines, and Outrigger's own Pods line before the events.
            pods, described = {}, {}
            for name in ("train-workers", "solo"):
                described[name] = ours("describe", "podgroup", name, "-n", ns)
                kubectl = kube_cluster.kubectl("describe", "podgroup", name, "-n", ns).stdout
                assert [line for line in described[name].splitlines() if not line.startswith("Pods:")] == \
                    kubectl.splitlines(), name
                pods[name] = [line for line in described[name].splitlines() if line.startswith("Pods:")]
            assert pods == {"train-workers": ["Pods:                      worker-0"], "solo": ["Pods:    <none>"]}
            assert "    Message:               pod group is unschedulable, minCount (3) cannot be satisfied: " \
                   "1 scheduled, 0 remaining, \n" in described["train-workers"]
            assert cli_main(["get", "podgroup", "nope", "-n", ns, "--server", fw.address]) == 1
            assert 'podgroups.scheduling.k8s.io "nope" not found' in capsys.readouterr().err
        finally:
            fw.call(source.stop())


PROFILE = "outrigger-scheduler"
CONFIG = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
          f"profiles:\n- schedulerName: {PROFILE}\n")


def test_a_gang_is_placed_whole_and_its_condition_is_written_by_a_replica_that_took_over(
        kube_cluster: LocalCluster, kube_namespace: str, version: str) -> None:
    """A standby's informer holds the group when it takes over; the group cycle places the gang, and the
    condition it writes is what kubectl then shows."""
    ns = kube_namespace
    node = f"{ns.split('-', 1)[0]}-gang-node"  # the namespace fixture deletes it
    members = [pod_manifest(f"w{i}", ns, PROFILE, cpu="1", schedulingGroup={"podGroupName": "train"})
               for i in range(2)]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        node_manifest(node, cpu="4", labels={"topology.kubernetes.io/zone": "a"}), pod_group(version, "train", ns, 2),
        *members]))

    async def main() -> dict[str, str]:
        registry = in_tree_registry()
        sched = Scheduler(load_config(CONFIG, registry.points()), registry, seed=0)
        source = KubeSource(None, ApiClient(KubeConfig.from_file(outrigger_kubeconfig(kube_cluster))))
        try:
            await source.start()
            await source.wait_synced(30)
            assert [pg.name for pg in source.podgroups.informer.store.values() if pg and pg.namespace == ns] == [
                "train"]
            await source.attach(sched)
            assert sched.cache.podgroups.get(ns, "train") is not None
            run = asyncio.get_running_loop().create_task(sched.run())
            try:
                await until(lambda: all((rec := sched.get_pod(ns, p)) is not None and rec.phase == "Bound"
                                        for p in ("w0", "w1")), 60)
                assert await source.podgroups.writer.flush(30)
            finally:
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
            return {p: rec.pod.node_name for p in ("w0", "w1") if (rec := sched.get_pod(ns, p)) is not None}
        finally:
            await source.stop()

    assert asyncio.run(main()) == {"w0": node, "w1": node}
    got = _conditions(kube_cluster, ns, "train")
    assert [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in got] == [
        {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""}]
    assert kube_cluster.kubectl("get", "podgroup", "train", "-n", ns, "--no-headers").stdout.split()[:4] == [
        "train", "Gang", "<none>", "Pending" if version.endswith("v1alpha2") else "Scheduled"]
