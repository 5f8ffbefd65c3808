"""The objects the volume plugins read: pod volumes, PersistentVolumeClaims, PersistentVolumes, StorageClasses
and CSINodes decoded from manifests (strictly, with the API server's defaults and checks), the volume store's
assume cache (kube-scheduler's assume cache: assumed objects read until the API's newer version arrives), its
in-memory writer, and the requeueing its changes cause.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from framework_thread import FrameworkThread
from test_plugin_volumes import NS, node, pod, pv, pvc, wffc

from clients.client import SchedulerClient
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from pluginhost.manifest import (
    ManifestError,
    csinode_from_dict,
    pod_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from pluginhost.model import ClaimRef, CSINodeDriver, NodeSelectorRequirement, NodeSelectorTerm, Volume
from pluginhost.snapshot import MemoryVolumeWriter, VolumeStore, VolumeStoreError

# ---- pod volumes ----------------------------------------------------------------------------------------


def pod_doc(*volumes: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-0", "namespace": NS}, "spec": {"containers": [{"name": "c"}],
                                                                     "volumes": list(volumes)}}


VOLUMES = [  # (a volume, what the model keeps)
    pytest.param({"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": True}},
                 (Volume("data", "persistentVolumeClaim", claim_name="data-web-0", read_only=True),),
                 id="claim"),
    pytest.param({"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
        (Volume("tmp", "ephemeral"),), id="ephemeral"),
    pytest.param({"name": "c", "csi": {"driver": "csi.example.com"}}, (Volume("c", "csi", driver="csi.example.com"),),
                 id="csi-inline"),
    pytest.param({"name": "pd", "gcePersistentDisk": {"pdName": "d1"}}, (Volume("pd", "gcePersistentDisk", disk="d1"),),
                 id="gce"),
    pytest.param({"name": "r", "rbd": {"monitors": ["m1"], "image": "i"}},
                 (Volume("r", "rbd", disk="i", pool="rbd", monitors=("m1",)),), id="rbd-pool-defaulted"),
    pytest.param({"name": "px", "portworxVolume": {"volumeID": "px-1"}}, (Volume("px", "portworxVolume", disk="px-1"),),
                 id="portworx"),
    pytest.param({"name": "img", "image": {"reference": "models/llm:v2", "pullPolicy": "IfNotPresent"}},
                 (Volume("img", "image", disk="models/llm:v2"),), id="image-kept-for-image-locality"),
    pytest.param({"name": "cfg", "configMap": {"name": "x"}}, (), id="config-map-not-kept"),
    pytest.param({"name": "e", "emptyDir": {}}, (), id="empty-dir-not-kept"),
]


@pytest.mark.parametrize(("volume", "want"), VOLUMES)
def test_pod_volumes_keep_what_the_volume_plugins_read(volume: dict[str, Any], want: tuple[Volume, ...]) -> None:
    assert pod_from_dict(pod_doc(volume)).volumes == want


def test_ephemeral_claims_are_named_after_the_pod() -> None:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1"}}}}
    target = pod_from_dict(pod_doc({"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
                                   {"name": "tmp", "ephemeral": {"volumeClaimTemplate": template}}))
    assert target.claim_names() == [("shared", False), ("web-0-tmp", True)]


BAD_VOLUMES = [  # (volumes, the error)
    pytest.param([{"name": "v"}], "spec.volumes[0]: must specify a volume type", id="no-source"),
    pytest.param([{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}],
                 "spec.volumes[0].secret: may not specify more than 1 volume type", id="two-sources"),
    pytest.param([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}],
                 'spec.volumes[1].name: Duplicate value: "v"', id="duplicate-names"),
    pytest.param([{"emptyDir": {}}], "spec.volumes[0].name: required field is missing", id="no-name"),
    pytest.param([{"name": "V", "emptyDir": {}}],
                 'spec.volumes[0].name: Invalid value: "V": a lowercase RFC 1123 label must consist of lower case '
                 "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
                 "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                 id="name-not-a-dns-label"),
    pytest.param([{"name": "v", "persistentVolumeClaim": {}}],
                 "spec.volumes[0].persistentVolumeClaim.claimName: required field is missing", id="claim-without-name"),
    pytest.param([{"name": "v", "ephemeral": {}}], "spec.volumes[0].ephemeral.volumeClaimTemplate: required field "
                 "is missing", id="ephemeral-without-template"),
    pytest.param([{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}],
                 'spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests.storage: required for claim '
                 '"web-0-v"', id="ephemeral-without-a-size"),
    pytest.param([{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
        {"name": "w", "persistentVolumeClaim": {"claimName": "web-0-v"}}],
        'spec.volumes[1].persistentVolumeClaim.claimName: Invalid value: "web-0-v": must not reference a PVC that '
        "gets created for an ephemeral volume", id="claim-of-an-ephemeral-volume"),
    pytest.param([{"name": "v", "rbd": {"image": "i"}}], "spec.volumes[0].rbd.monitors: required field is missing",
                 id="rbd-without-monitors"),
    pytest.param([{"name": "v", "image": {"pullPolicy": "Always"}}],
                 "spec.volumes[0].image.reference: required field is missing", id="image-without-reference"),
]


@pytest.mark.parametrize(("volumes", "error"), BAD_VOLUMES)
def test_pod_volumes_the_api_server_would_refuse_are_one_line_errors(volumes: list[Any], error: str) -> None:
    with pytest.raises(ManifestError) as exc:
        pod_from_dict(pod_doc(*volumes))
    assert str(exc.value) == f"Pod {NS}/web-0: {error}"


# ---- storage objects ------------------------------------------------------------------------------------


def test_a_claim_keeps_what_scheduling_reads_with_the_api_servers_defaults() -> None:
    claim = pvc_from_dict({"metadata": {"name": "d", "namespace": NS, "uid": "u", "resourceVersion": "7",
                                        "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"},
                                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                                             "uid": "pod-uid", "controller": True}]},
                           "spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "ga",
                                    "resources": {"requests": {"storage": "1Ki"}}}})
    assert (claim.key, claim.uid, claim.resource_version, claim.access_modes, claim.storage, claim.storage_class,
            claim.storage_class_name, claim.volume_mode, claim.phase, claim.owner_uid, claim.fully_bound) == (
        f"{NS}/d", "u", "7", ("ReadWriteOncePod",), 1024, "beta", "ga", "Filesystem", "Pending", "pod-uid", False)
    unset = pvc_from_dict({"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                "resources": {"requests": {"storage": "1"}}}})
    assert (unset.namespace, unset.storage_class_name, unset.storage_class) == ("default", None, "")


def test_a_volume_keeps_its_affinity_claim_and_source() -> None:
    volume = pv_from_dict({"metadata": {"name": "pv"}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
        "claimRef": {"namespace": NS, "name": "data", "uid": "u1"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}]}}}})
    assert (volume.storage, volume.claim_ref, volume.source, volume.driver, volume.disk, volume.phase) == (
        10 * 1024**3, ClaimRef(NS, "data", "u1"), "csi", "ebs.csi.aws.com", "vol-1", "Bound")
    assert volume.node_affinity == [NodeSelectorTerm([NodeSelectorRequirement("topology.kubernetes.io/zone", "In",
                                                                              ("z1",))])]
    # No status: where the PV controller puts a new volume (Available, or Bound when claimed with a uid).
    fresh = pv_from_dict({"metadata": {"name": "x"}, "spec": {
        "capacity": {"storage": "1"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})
    assert fresh.phase == "Available"


def test_classes_and_csinodes_decode_with_their_defaults() -> None:
    cls = storage_class_from_dict({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                   "metadata": {"name": "fast"}, "provisioner": "example.com/fast",
                                   "allowedTopologies": [{"matchLabelExpressions": [
                                       {"key": "topology.kubernetes.io/zone", "values": ["z1", "z2"]}]}]})
    assert (cls.volume_binding_mode, cls.allowed_topologies) == ("Immediate", [NodeSelectorTerm([
        NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("z1", "z2"))])])
    csi = csinode_from_dict({"metadata": {"name": "n1", "annotations": {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs,kubernetes.io/gce-pd"}},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                             {"name": "other", "nodeID": "n1", "topologyKeys": ["zone"]}]}})
    assert csi.drivers == (CSINodeDriver("ebs.csi.aws.com", "i-1", (), 25), CSINodeDriver("other", "n1", ("zone",)))
    assert (csi.limits(), csi.migrated("kubernetes.io/gce-pd"), csi.migrated("kubernetes.io/cinder")) == (
        {"ebs.csi.aws.com": 25}, True, False)


BAD_OBJECTS = [  # (decoder, object, the error)
    pytest.param(pvc_from_dict, {"metadata": {"name": "d"}, "spec": {"resources": {"requests": {"storage": "1"}}}},
                 "PersistentVolumeClaim default/d: spec.accessModes: at least 1 access mode is required",
                 id="claim-without-access-modes"),
    pytest.param(pvc_from_dict, {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
                 'PersistentVolumeClaim default/d: spec.resources.requests.storage: required for claim "d"',
                 id="claim-without-a-size"),
    pytest.param(pvc_from_dict, {"metadata": {"name": "d"}, "spec": {
        "accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "resources": {"requests": {"storage": "1"}}}},
        "PersistentVolumeClaim default/d: spec.accessModes: may not use ReadWriteOncePod with other access modes",
        id="read-write-once-pod-with-others"),
    pytest.param(pvc_from_dict, {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                     "storageClasName": "x"}},
                 'PersistentVolumeClaim default/d: unknown field "spec.storageClasName"', id="claim-unknown-field"),
    pytest.param(pv_from_dict, {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1"},
                                                                     "accessModes": ["ReadWriteOnce"]}},
                 "PersistentVolume pv: spec: must specify a volume type", id="volume-without-a-source"),
    pytest.param(pv_from_dict, {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1"},
                                                                     "accessModes": ["ReadWriteOnce"],
                                                                     "local": {"path": "/d"}}},
                 "PersistentVolume pv: spec.nodeAffinity: Local volumes require node affinity",
                 id="local-volume-without-affinity"),
    pytest.param(pv_from_dict, {"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                     "hostPath": {"path": "/d"}}},
                 "PersistentVolume pv: spec.capacity.storage: required field is missing", id="volume-without-size"),
    pytest.param(storage_class_from_dict, {"metadata": {"name": "s"}, "provisioner": "p",
                                           "volumeBindingMode": "Later"},
                 'StorageClass s: volumeBindingMode: unsupported volumeBindingMode "Later" (supported: Immediate, '
                 "WaitForFirstConsumer)", id="binding-mode"),
    pytest.param(storage_class_from_dict, {"metadata": {"name": "s"}},
                 "StorageClass s: provisioner: required field is missing", id="class-without-provisioner"),
    pytest.param(csinode_from_dict, {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "d", "allocatable": {"count": -1}}]}},
        "CSINode n1: spec.drivers[0].allocatable.count: must be greater than or equal to 0, got -1",
        id="negative-count"),
]


@pytest.mark.parametrize(("decode", "obj", "error"), BAD_OBJECTS)
def test_storage_objects_the_api_server_would_refuse_are_one_line_errors(decode: Any, obj: dict[str, Any],
                                                                          error: str) -> None:
    with pytest.raises(ManifestError) as exc:
        decode(obj)
    assert str(exc.value) == error


# ---- the store's assume cache ---------------------------------------------------------------------------


def test_an_assumed_volume_reads_until_the_api_changes_it_or_it_is_restored() -> None:
    store = VolumeStore()
    store.upsert(pv("pv-1", cls="local", version="5"))
    taken = pv("pv-1", cls="local", claim="data", version="5")
    store.assume_volume(taken)
    assert (store.volume("pv-1"), store.volumes["pv-1"].claim_ref, store.volumes_of_class("local")) == (
        taken, None, [taken])
    store.restore_volume(taken)
    assert store.volume("pv-1") == store.volumes["pv-1"] and store.assumed() == []
    store.assume_volume(taken)
    store.upsert(pv("pv-1", cls="local", version="5"))  # a resync of the same version keeps the assumption
    assert store.volume("pv-1") == taken
    newer = pv("pv-1", cls="local", labels={"a": "b"}, version="6")
    store.upsert(newer)  # the API's newer version wins
    assert (store.volume("pv-1"), store.assumed()) == (newer, [])


def test_only_the_apis_current_version_can_be_assumed() -> None:
    store = VolumeStore()
    store.upsert(pvc("data", cls="local", version="3"))
    with pytest.raises(VolumeStoreError) as exc:
        store.assume_claim(pvc("data", cls="local", version="2"))
    assert str(exc.value) == f'"{NS}/data" is out of sync (stored: 3, assume: 2)'
    with pytest.raises(VolumeStoreError) as missing:
        store.assume_volume(pv("nope"))
    assert str(missing.value) == 'persistentvolumes "nope" not found'


def test_changes_are_told_to_listeners_as_additions_updates_and_deletions() -> None:
    store, seen = VolumeStore(), []
    store.add_listener(lambda kind, old, new: seen.append((kind, old is None, new is None)))
    store.upsert(wffc())
    store.upsert(wffc())
    store.remove("StorageClass", "local")
    store.remove("StorageClass", "local")  # nothing left: nothing told
    assert seen == [("StorageClass", True, False), ("StorageClass", False, False), ("StorageClass", False, True)]


def test_the_in_memory_writer_refuses_a_stale_write_as_the_api_server_does() -> None:
    store = VolumeStore()
    store.upsert(pv("pv-1", version="4"))
    writer = MemoryVolumeWriter(store)
    written = asyncio.run(writer.update_volume(pv("pv-1", claim="data", version="4")))
    assert store.volumes["pv-1"] == written and written.resource_version != "4"
    with pytest.raises(VolumeStoreError) as exc:
        asyncio.run(writer.update_volume(pv("pv-1", version="4")))
    assert str(exc.value) == ('Operation cannot be fulfilled on persistentvolumes "pv-1": the object has been '
                              "modified; please apply your changes to the latest version and try again")


# ---- requeueing ------------------------------------------------------------------------------------------


def test_a_pod_waiting_for_a_volume_is_tried_again_when_one_appears() -> None:
    async def main() -> tuple[str, str]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        await s.apply([node("n1"), node("n2")])
        s.cache.volumes.upsert(wffc())
        s.cache.volumes.upsert(pvc("data", cls="local"))
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            await s.apply([pod("web-0", ("data",))])
            for _ in range(100):
                if s.queue_of("uid-web-0") == "unschedulable":
                    break
                await asyncio.sleep(0.02)
            waiting = s.queue_of("uid-web-0")
            s.cache.volumes.upsert(pv("pv-2", cls="local", host="n2"))
            for _ in range(250):  # the PersistentVolume event moves it at once (backoff is 1 s)
                rec = s.get_pod(NS, "web-0")
                if rec is not None and rec.pod.node_name:
                    break
                await asyncio.sleep(0.02)
            await s.drain(5)
        finally:
            await s.stop()
            task.cancel()
        rec = s.get_pod(NS, "web-0")
        assert rec is not None
        return waiting, rec.pod.node_name

    assert asyncio.run(main()) == ("unschedulable", "n2")


# ---- the embedded store through the Scheduler API -------------------------------------------------------

STATEFUL = f"""\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: local}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: local-n2}}
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {{path: /mnt/disks/1}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [n2]}}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-web-0, namespace: {NS}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web-0, namespace: {NS}}}
spec:
  containers: [{{name: c}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-web-0}}}}]
"""
NODES_YAML = "".join(
    f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {{kubernetes.io/hostname: {n}}}}}\n"
    "status: {allocatable: {cpu: '4', pods: '10'}}\n" for n in ("n1", "n2"))


def test_claims_volumes_and_classes_are_applied_and_deleted_through_the_scheduler_api() -> None:
    with FrameworkThread() as fw, SchedulerClient(fw.address, timeout=10) as c:
        c.apply_text(NODES_YAML)
        applied = [(a.ref.kind, a.ref.namespace, a.ref.name, a.action) for a in c.apply_text(STATEFUL)]
        assert applied == [("StorageClass", "", "local", "created"), ("PersistentVolume", "", "local-n2", "created"),
                           ("PersistentVolumeClaim", NS, "data-web-0", "created"), ("Pod", NS, "web-0", "created")]
        for _ in range(250):  # at most 5 s
            state = c.get_pod("web-0", NS)
            if state.node_name:
                break
            time.sleep(0.02)
        assert state.node_name == "n2"
        # The same manifests again: the claim keeps its binding, as kubectl apply leaves what the server set.
        again = [(a.ref.kind, a.action) for a in c.apply_text(STATEFUL)]
        assert again == [("StorageClass", "unchanged"), ("PersistentVolume", "unchanged"),
                         ("PersistentVolumeClaim", "unchanged"), ("Pod", "unchanged")]
        assert (c.delete("PersistentVolumeClaim", "data-web-0", NS), c.delete("StorageClass", "local"),
                c.delete("StorageClass", "local")) == (True, True, False)
