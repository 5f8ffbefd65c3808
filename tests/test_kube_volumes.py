"""The volume plugins on a real kube-apiserver: claims bound where their volumes can be reached, as kubectl shows.

One framework process (``outrigger serve --kubeconfig``, with deploy/kubernetes/rbac.yaml's service account)
serves the profile ``volume-scheduler``, kube-scheduler's default plugins. Two nodes, ``kv-a`` and ``kv-b``.
No PV controller runs in the test cluster: each test plays its first step (a new PersistentVolume is made
``Available``), and VolumeBinding's PreBind does the binding itself, the volume's ``claimRef`` and the claim's
``volumeName`` with ``pv.kubernetes.io/bind-completed``. The phases are the PV controller's (the
outrigger-scheduler role, like kube-scheduler's, may not write them): they stay as the API server made them.
Cluster-scoped objects (StorageClasses, PersistentVolumes) are named after the test's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "volume-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 1000, burst: 1000}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
  pluginConfig:
  - name: VolumeBinding
    args: {{bindTimeoutSeconds: 30}}
"""
NODES = ("kv-a", "kv-b")
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def framework(kube_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrameworkProcess]:
    workdir = tmp_path_factory.mktemp("outrigger-volumes")
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    nodes = [node_manifest(n, labels={HOSTNAME: n}) for n in NODES]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(nodes))
    config = workdir / "scheduler.yaml"
    config.write_text(CONFIG)
    proc = FrameworkProcess(kubeconfig, config).start()
    try:
        yield proc
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "node", *NODES)


@pytest.fixture
def storage(kube_cluster: LocalCluster, kube_namespace: str) -> Iterator[str]:
    """A WaitForFirstConsumer StorageClass without a provisioner (local volumes), named after the namespace;
    the test's PersistentVolumes (``<namespace>-...``) and the class are deleted afterwards."""
    name = f"local-{kube_namespace}"
    kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}))
    yield name
    for pv in get_json(kube_cluster, "pv")["items"]:
        if pv["metadata"]["name"].startswith(f"{kube_namespace}-"):
            kube_cluster.kubectl("delete", "pv", pv["metadata"]["name"], "--wait=false")
    kube_cluster.kubectl("delete", "storageclass", name, "--wait=false")


def create(cluster: LocalCluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objects))


def local_pv(cluster: LocalCluster, name: str, storage_class: str, node: str, size: str = "1Gi") -> None:
    """A local PersistentVolume on ``node``, made Available as the PV controller would."""
    create(cluster, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": {
        "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/disks/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}})
    cluster.kubectl("patch", "pv", name, "--subresource=status", "--type=merge", "-p",
                    '{"status": {"phase": "Available"}}')


def claim(cluster: LocalCluster, namespace: str, name: str, storage_class: str, size: str = "1Gi") -> None:
    create(cluster, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": name, "namespace": namespace},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                              "resources": {"requests": {"storage": size}}}})


def stateful_pod(name: str, namespace: str, claim_name: str) -> dict[str, Any]:
    """A pod as a StatefulSet ``web`` makes it: its volume ``data`` is the claim ``data-<pod>``."""
    pod = pod_manifest(name, namespace, PROFILE, cpu="100m",
                       volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])
    pod["metadata"]["labels"] = {"app": "web", "statefulset.kubernetes.io/pod-name": name}
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return pod


def node_of(cluster: LocalCluster, namespace: str, name: str) -> str:
    """The NODE column of ``kubectl get pod -o wide`` ("" while pending)."""
    row = cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "wide", "--no-headers").stdout.split()
    return "" if row[6] == "<none>" else row[6]


def jsonpath(cluster: LocalCluster, *args: str) -> str:
    return cluster.kubectl("get", *args[:-1], "-o", f"jsonpath={args[-1]}").stdout


def failed_scheduling(cluster: LocalCluster, namespace: str, name: str) -> str:
    """The note of the pod's latest FailedScheduling event ("" before there is one)."""
    events = get_json(cluster, "events.events.k8s.io", "-n", namespace, "--field-selector",
                      f"regarding.name={name},reason=FailedScheduling")["items"]
    return events[-1].get("note", "") if events else ""


def fit_error(cluster: LocalCluster, reason: str) -> str:
    """kube-scheduler's FailedScheduling text for a reason every node gives (UnschedulableAndUnresolvable)."""
    n = len(get_json(cluster, "nodes")["items"])
    return (f"0/{n} nodes are available: {n} {reason}. preemption: 0/{n} nodes are "
            f"available: {n} Preemption is not helpful for scheduling.")


def test_a_stateful_pod_lands_where_its_volume_is_and_its_claim_ends_bound_to_that_volume(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str, storage: str) -> None:
    ns = kube_namespace
    pv = f"{ns}-local-b"
    local_pv(kube_cluster, pv, storage, "kv-b")
    claim(kube_cluster, ns, "data-web-0", storage)
    create(kube_cluster, stateful_pod("web-0", ns, "data-web-0"))
    node = wait_for(lambda: node_of(kube_cluster, ns, "web-0"), 30, "web-0 to be bound")
    assert node == "kv-b"
    pvc = get_json(kube_cluster, "pvc", "data-web-0", "-n", ns)
    assert kube_cluster.kubectl("get", "pvc", "data-web-0", "-n", ns, "--no-headers",
                                "-o", "custom-columns=VOLUME:.spec.volumeName").stdout.strip() == pv
    assert {k: v for k, v in pvc["metadata"]["annotations"].items() if k.startswith("pv.kubernetes.io/")} == {
        "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
    volume = get_json(kube_cluster, "pv", pv)
    assert {k: volume["spec"]["claimRef"][k] for k in ("kind", "namespace", "name", "uid")} == {
        "kind": "PersistentVolumeClaim", "namespace": ns, "name": "data-web-0", "uid": pvc["metadata"]["uid"]}
    assert volume["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    # The phases are the PV controller's: the role may not write them, and says so once.
    assert (pvc["status"]["phase"], volume["status"]["phase"]) == ("Pending", "Available")
    assert framework.output().count("the phases are left to the cluster's PV controller") == 1
    events = get_json(kube_cluster, "events.events.k8s.io", "-n", ns, "--field-selector", "regarding.name=web-0")
    assert [(e["reason"], e["note"]) for e in events["items"]] == [
        ("Scheduled", f"Successfully assigned {ns}/web-0 to kv-b")]


def test_a_pod_waits_for_a_volume_and_is_bound_once_one_is_made(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str, storage: str) -> None:
    ns = kube_namespace
    claim(kube_cluster, ns, "data-web-1", storage, size="2Gi")
    local_pv(kube_cluster, f"{ns}-too-small", storage, "kv-b", size="1Gi")
    create(kube_cluster, stateful_pod("web-1", ns, "data-web-1"))
    note = wait_for(lambda: failed_scheduling(kube_cluster, ns, "web-1"), 30, "web-1's FailedScheduling")
    assert note == fit_error(kube_cluster, "node(s) didn't find available persistent volumes to bind")
    # A new volume is a PersistentVolume event: the pod is tried again at once, and binds there.
    local_pv(kube_cluster, f"{ns}-big-a", storage, "kv-a", size="5Gi")
    assert wait_for(lambda: node_of(kube_cluster, ns, "web-1"), 30, "web-1 to be bound") == "kv-a"
    assert jsonpath(kube_cluster, "pvc", "data-web-1", "-n", ns, "{.spec.volumeName}") == f"{ns}-big-a"
    assert jsonpath(kube_cluster, "pv", f"{ns}-too-small", "{.spec.claimRef}") == ""


def test_a_pod_whose_claim_does_not_exist_is_told_so_and_bound_once_it_is_created(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str, storage: str) -> None:
    ns = kube_namespace
    create(kube_cluster, stateful_pod("web-2", ns, "data-web-2"))
    note = wait_for(lambda: failed_scheduling(kube_cluster, ns, "web-2"), 30, "web-2's FailedScheduling")
    n = len(get_json(kube_cluster, "nodes")["items"])
    assert note == f'0/{n} nodes are available: persistentvolumeclaim "data-web-2" not found. not found'
    local_pv(kube_cluster, f"{ns}-local-a", storage, "kv-a")
    claim(kube_cluster, ns, "data-web-2", storage)  # a PersistentVolumeClaim event: the pod is tried again
    assert wait_for(lambda: node_of(kube_cluster, ns, "web-2"), 30, "web-2 to be bound") == "kv-a"
    assert jsonpath(kube_cluster, "pvc", "data-web-2", "-n", ns, "{.spec.volumeName}") == f"{ns}-local-a"


def test_claims_and_volumes_listed_when_the_framework_starts_bind_the_same(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str, storage: str) -> None:
    # Everything is in place before the framework starts: its informers list it, and PreBind writes back
    # objects it read from a list.
    ns = kube_namespace
    framework.stop()
    try:
        local_pv(kube_cluster, f"{ns}-early-b", storage, "kv-b")
        claim(kube_cluster, ns, "data-web-3", storage)
        create(kube_cluster, stateful_pod("web-3", ns, "data-web-3"))
    finally:
        framework.start()
    assert wait_for(lambda: node_of(kube_cluster, ns, "web-3"), 30, "web-3 to be bound") == "kv-b"
    assert jsonpath(kube_cluster, "pvc", "data-web-3", "-n", ns, "{.spec.volumeName}") == f"{ns}-early-b"
    assert jsonpath(kube_cluster, "pv", f"{ns}-early-b", "{.spec.claimRef.name}") == "data-web-3"
