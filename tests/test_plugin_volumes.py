"""The four volume plugins in kube-scheduler's default profile, on one cluster, as users read them.

Every expected FailedScheduling message below is what kube-scheduler v1.35.4 (built by tests/k8s/build.sh,
default profile, VolumeBinding's bindTimeoutSeconds 5) wrote for the same pod on the same objects in a real
API server, verbatim; Outrigger's ``serve --kubeconfig`` wrote the same on the same cluster. The one
difference is by design: with no PV controller running, kube-scheduler's PreBind waits for one and times
out, while Outrigger's completes the binding itself (``p-bind`` is bound, its claim bound to ``pv-b``).

The cluster: n-a and n-b in zone z1, n-c in zone z2 (each labelled with its hostname); n-a's CSINode allows
one volume of ``csi.example.com``; holder pods already on n-a (a CSI claim, a GCE disk) and n-b (a
ReadWriteOncePod claim). The objects are built here with the builders other volume tests import.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from pluginhost.manifest import (
    csinode_from_dict,
    node_from_dict,
    pod_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from pluginhost.model import ClaimRef, CSINode, Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass
from pluginhost.snapshot import StorageObject

NS = "vol"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# ---- builders (other volume tests import these) -------------------------------------------------------


def node(name: str, zone: str = "", **labels: str) -> Node:
    all_labels = {HOSTNAME: name, **labels}
    if zone:
        all_labels[ZONE] = zone
    return node_from_dict({"metadata": {"name": name, "labels": all_labels},
                           "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "20"}}})


def storage_class(name: str, provisioner: str = "kubernetes.io/no-provisioner", mode: str | None = None,
                  zones: tuple[str, ...] = ()) -> StorageClass:
    doc: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner}
    if mode is not None:
        doc["volumeBindingMode"] = mode
    if zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return storage_class_from_dict(doc)


def wffc(name: str = "local", provisioner: str = "kubernetes.io/no-provisioner", zones: tuple[str, ...] = ()
         ) -> StorageClass:
    return storage_class(name, provisioner, "WaitForFirstConsumer", zones)


def pv(name: str, size: str = "1Gi", cls: str = "", *, host: str | None = None, labels: dict[str, str] | None = None,
       claim: str | None = None, claim_uid: str = "", csi: tuple[str, str] | None = None,
       modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str = "Available", volume_mode: str | None = None,
       gce: str | None = None, version: str = "1") -> PersistentVolume:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    elif gce is not None:
        spec["gcePersistentDisk"] = {"pdName": gce}
    elif host is not None:
        spec["local"] = {"path": f"/mnt/{name}"}
    else:
        spec["hostPath"] = {"path": f"/tmp/{name}"}
    if host is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [host]}]}]}}
    if claim is not None:
        spec["claimRef"] = {"namespace": NS, "name": claim, **({"uid": claim_uid} if claim_uid else {})}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    return pv_from_dict({"metadata": {"name": name, "labels": labels or {}, "resourceVersion": version},
                         "spec": spec, "status": {"phase": phase}})


def pvc(name: str, size: str = "1Gi", cls: str | None = None, *, volume: str | None = None,
        modes: tuple[str, ...] = ("ReadWriteOnce",), annotations: dict[str, str] | None = None,
        owner: str = "", phase: str = "Pending", selector: dict[str, str] | None = None,
        volume_mode: str | None = None, deleting: bool = False, uid: str = "", version: str = "1"
        ) -> PersistentVolumeClaim:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    meta: dict[str, Any] = {"name": name, "namespace": NS, "annotations": dict(annotations or {}),
                            "uid": uid or f"uid-{name}", "resourceVersion": version}
    if volume is not None:
        spec["volumeName"] = volume
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner,
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if selector is not None:
        spec["selector"] = {"matchLabels": selector}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    return pvc_from_dict({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def csinode(name: str, driver: str, count: int | None, migrated: str = "") -> CSINode:
    allocatable = {} if count is None else {"allocatable": {"count": count}}
    meta: dict[str, Any] = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return csinode_from_dict({"metadata": meta, "spec": {"drivers": [{"name": driver, "nodeID": name,
                                                                      **allocatable}]}})


def pod(name: str, claims: tuple[str, ...] = (), *, node_name: str = "", selector: str = "",
        volumes: tuple[dict[str, Any], ...] = (), uid: str = "") -> Pod:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                            "volumes": [*vols, *volumes]}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = {HOSTNAME: selector}
    return pod_from_dict({"metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}"}, "spec": spec})


def ephemeral(name: str, cls: str = "local") -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": cls, "resources": {"requests": {"storage": "1Gi"}}}}}}


def gce(disk: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"pd-{disk}", "gcePersistentDisk": {"pdName": disk, "readOnly": read_only}}


# ---- the default profile on one cluster -----------------------------------------------------------------

STORAGE: list[StorageObject] = [
    wffc("local-wffc"),
    wffc("fast-wffc", "example.com/fast", zones=("z2",)),
    storage_class("slow-immediate", "example.com/slow"),
    csinode("n-a", "csi.example.com", 1),
    pv("pv-b", "10Gi", "local-wffc", host="n-b"),
    pv("pv-zone3", labels={ZONE: "z3"}, claim="zone3", phase="Bound"),
    pv("pv-far", host="n-nowhere", claim="far", phase="Bound"),
    pv("pv-rwop", claim="rwop", modes=("ReadWriteOncePod",), phase="Bound"),
    pv("csi-1", claim="c1", csi=("csi.example.com", "h1"), phase="Bound"),
    pv("csi-2", claim="c2", csi=("csi.example.com", "h2"), phase="Bound"),
    pvc("data-0", "5Gi", "local-wffc"),
    pvc("data-big", "50Gi", "local-wffc"),
    pvc("immediate", "1Gi", "slow-immediate"),
    pvc("zone3", cls="", volume="pv-zone3"),
    pvc("far", cls="", volume="pv-far"),
    pvc("rwop", cls="", volume="pv-rwop", modes=("ReadWriteOncePod",)),
    pvc("c1", cls="", volume="csi-1"),
    pvc("c2", cls="", volume="csi-2"),
    pvc("fast-0", "1Gi", "fast-wffc"),
]
HOLDERS = [pod("holder-rwop", ("rwop",), node_name="n-b"), pod("holder-csi", ("c1",), node_name="n-a"),
           pod("holder-gce", node_name="n-a", volumes=(gce("disk-1"),))]


def _unresolvable(reason: str) -> str:
    return (f"0/3 nodes are available: 3 {reason}. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling.")


def _one_node(reason: str) -> str:
    return (f"0/3 nodes are available: 1 {reason}, 2 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
            "pod, 2 Preemption is not helpful for scheduling.")


CASES = [  # (pod, the node it is bound to, or the FailedScheduling message)
    pytest.param(pod("p-bind", ("data-0",)), "n-b", id="wait-for-first-consumer-bound-on-its-volumes-node"),
    pytest.param(pod("p-nopv", ("data-big",)),
                 _unresolvable("node(s) didn't find available persistent volumes to bind"),
                 id="no-volume-big-enough-and-no-provisioner"),
    pytest.param(pod("p-immediate", ("immediate",)),
                 "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
                 id="immediate-claim-not-bound-yet"),
    pytest.param(pod("p-missing", ("ghost",)),
                 '0/3 nodes are available: persistentvolumeclaim "ghost" not found. not found', id="claim-missing"),
    pytest.param(pod("p-zone3", ("zone3",)), _unresolvable("node(s) had no available volume zone"),
                 id="volume-in-a-zone-without-nodes"),
    pytest.param(pod("p-far", ("far",)), _unresolvable("node(s) didn't match PersistentVolume's node affinity"),
                 id="bound-volume-on-no-node-here"),
    pytest.param(pod("p-rwop", ("rwop",)),
                 "0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                 "access mode already in-use by another pod. preemption: 0/3 nodes are "
                 "available: 3 No preemption victims found for incoming pod.", id="read-write-once-pod-in-use"),
    pytest.param(pod("p-csi", ("c2",), selector="n-a"), _one_node("node(s) exceed max volume count"),
                 id="csi-limit-reached"),
    pytest.param(pod("p-gce", selector="n-a", volumes=(gce("disk-1"),)), _one_node("node(s) had no available disk"),
                 id="gce-disk-in-use"),
    pytest.param(pod("p-eph", volumes=(ephemeral("scratch"),)),
                 '0/3 nodes are available: waiting for ephemeral volume controller to create the '
                 'persistentvolumeclaim "p-eph-scratch". not found', id="ephemeral-claim-not-created-yet"),
]


def schedule(target: Pod) -> tuple[str, str, Scheduler]:
    """``target`` through a scheduler holding the cluster: (its node, its failure message) and the scheduler."""

    async def main() -> tuple[str, str, Scheduler]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        await s.apply([node("n-a", "z1"), node("n-b", "z1"), node("n-c", "z2"), *HOLDERS])
        for obj in STORAGE:
            s.cache.volumes.upsert(obj)
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            await s.apply([target])
            for _ in range(250):  # at most 5 s
                rec = s.get_pod(NS, target.name)
                assert rec is not None
                if rec.pod.node_name or rec.last_status is not None:
                    break
                await asyncio.sleep(0.02)
            await s.drain(5)
        finally:
            await s.stop()
            task.cancel()
        rec = s.get_pod(NS, target.name)
        assert rec is not None
        message = rec.last_status.message() if rec.last_status is not None else ""
        return rec.pod.node_name, message, s

    return asyncio.run(main())


@pytest.mark.parametrize(("target", "want"), CASES)
def test_the_default_profile_places_and_words_volume_failures_as_kube_scheduler(target: Pod, want: str) -> None:
    node_name, message, _ = schedule(target)
    if want.startswith("n-"):
        assert (node_name, message) == (want, "")
    else:
        assert (node_name, message) == ("", want)


def test_a_pod_bound_on_its_volumes_node_leaves_claim_and_volume_bound_to_each_other() -> None:
    node_name, _, s = schedule(pod("p-bind", ("data-0",)))
    store = s.cache.volumes
    claim, volume = store.claims[f"{NS}/data-0"], store.volumes["pv-b"]
    assert node_name == "n-b"
    assert (claim.volume_name, claim.phase, claim.annotations) == (
        "pv-b", "Bound", {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"})
    assert (volume.claim_ref, volume.phase, volume.annotations) == (
        ClaimRef(NS, "data-0", "uid-data-0"), "Bound", {"pv.kubernetes.io/bound-by-controller": "yes"})
    assert store.assumed() == []
    assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}


def test_a_claim_provisioned_in_a_zone_is_given_its_node_and_a_new_volume() -> None:
    # The embedded store plays the provisioner and the PV controller: n-c is the only node in zone z2.
    node_name, message, s = schedule(pod("p-provision", ("fast-0",)))
    store = s.cache.volumes
    claim = store.claims[f"{NS}/fast-0"]
    assert (node_name, message) == ("n-c", "")
    assert claim.annotations["volume.kubernetes.io/selected-node"] == "n-c"
    assert (claim.volume_name, claim.phase) == ("pvc-uid-fast-0", "Bound")
    made = store.volumes["pvc-uid-fast-0"]
    assert (made.storage, made.storage_class_name, made.access_modes, made.annotations, made.claim_ref,
            made.node_affinity, made.phase) == (
        1024**3, "fast-wffc", ("ReadWriteOnce",),
        {"pv.kubernetes.io/provisioned-by": "example.com/fast", "pv.kubernetes.io/bound-by-controller": "yes"},
        ClaimRef(NS, "fast-0", "uid-fast-0"), None, "Bound")
