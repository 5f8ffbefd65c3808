"""NodeVolumeLimits: kube-scheduler v1.37's CSI volume limits (``nodevolumelimits/csi.go``), in tables: which of a
pod's volumes a node's CSI drivers count, how the volumes of the pods already there add up, and the limit of
the node's CSINode.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from test_plugin_volumes import NS, csinode, ephemeral, gce, node, pod, pv, pvc, storage_class, wffc

from framework.plugins.volumelimits import MSG_MAX_VOLUME_COUNT, NodeVolumeLimits
from pluginhost.manifest import pv_from_dict
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, StorageObject
from pluginhost.status import Code, Status

EBS = "ebs.csi.aws.com"
PXD = "pxd.portworx.com"
EXCEEDED = f"Unschedulable: {MSG_MAX_VOLUME_COUNT}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def csi_claim(name: str, handle: str, driver: str = EBS) -> list[StorageObject]:
    """A claim bound to a CSI volume of ``driver`` with ``handle``."""
    return [pvc(name, cls="", volume=f"pv-{name}"), pv(f"pv-{name}", claim=name, csi=(driver, handle))]


def portworx(volume_id: str) -> dict[str, Any]:
    return {"name": f"px-{volume_id}", "portworxVolume": {"volumeID": volume_id}}


def pv_portworx(name: str, claim: str, volume_id: str) -> StorageObject:
    return pv_from_dict({"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "portworxVolume": {"volumeID": volume_id},
        "claimRef": {"namespace": NS, "name": claim}}, "status": {"phase": "Bound"}})


def verdict(target: Pod, placed: list[Pod], *objects: StorageObject) -> tuple[Status, str]:
    """PreFilter's status and n1's Filter answer, with ``placed`` on n1."""
    table = ClusterTable()
    table.upsert_node(node("n1"))
    for p in placed:
        table.place_pod(p, "n1")
    for obj in objects:
        table.volumes.upsert(obj)
    snap = table.snapshot()
    plugin, state = NodeVolumeLimits(), CycleState("c", snap)
    _, status = run(plugin.pre_filter(state, target))
    if not status.ok:
        return status, ""
    st = run(plugin.filter(state, target, NodeBatch(snap, np.arange(1, dtype=np.int64)))).status_at(0)
    return status, "" if st.ok else f"{st.code.name}: {' | '.join(st.reasons)}"


ONE, TWO, THREE = csi_claim("one", "vol-1"), csi_claim("two", "vol-2"), csi_claim("three", "vol-3")
USING_ONE, USING_TWO = pod("a", ("one",)), pod("b", ("two",))
LIMITS = [  # (the new pod, pods on n1, objects, n1's answer)
    pytest.param(pod("new", ("three",)), [USING_ONE, USING_TWO], [*ONE, *TWO, *THREE], "", id="no-csinode"),
    pytest.param(pod("new", ("three",)), [USING_ONE, USING_TWO], [*ONE, *TWO, *THREE, csinode("n1", EBS, None)], "",
                 id="driver-without-a-limit"),
    pytest.param(pod("new", ("two",)), [USING_ONE], [*ONE, *TWO, csinode("n1", EBS, 2)], "", id="up-to-the-limit"),
    pytest.param(pod("new", ("three",)), [USING_ONE, USING_TWO], [*ONE, *TWO, *THREE, csinode("n1", EBS, 2)],
                 EXCEEDED, id="over-the-limit"),
    pytest.param(pod("new", ("one",)), [USING_ONE, USING_TWO], [*ONE, *TWO, csinode("n1", EBS, 2)], "",
                 id="a-volume-already-attached-counts-once"),
    pytest.param(pod("new", ("other",)), [USING_ONE], [*ONE, *csi_claim("other", "h", "other.csi.io"),
                                                       csinode("n1", EBS, 1)], "", id="another-drivers-volume"),
    pytest.param(pod("new", ("fresh",)), [USING_ONE],
                 [*ONE, wffc("ebs", EBS), pvc("fresh", cls="ebs"), csinode("n1", EBS, 1)], EXCEEDED,
                 id="unbound-claim-counted-by-its-class"),
    pytest.param(pod("new", ("fresh",)), [USING_ONE], [*ONE, pvc("fresh", cls="gone"), csinode("n1", EBS, 1)], "",
                 id="unbound-claim-of-a-missing-class"),
    pytest.param(pod("new", ("fresh",)), [USING_ONE],
                 [*ONE, storage_class("gp2", "kubernetes.io/aws-ebs"), pvc("fresh", cls="gp2"),
                  csinode("n1", EBS, 1, migrated="kubernetes.io/aws-ebs")], EXCEEDED,
                 id="in-tree-class-taken-over-by-the-driver"),
    # isCSIMigrationOn: the in-tree plugins are migrated wherever the node has a CSINode, with or without
    # its migrated-plugins annotation (only Portworx read it, up to 1.36)
    pytest.param(pod("new", ("fresh",)), [USING_ONE],
                 [*ONE, storage_class("gp2", "kubernetes.io/aws-ebs"), pvc("fresh", cls="gp2"),
                  csinode("n1", EBS, 1)], EXCEEDED, id="in-tree-class-without-the-annotation"),
    pytest.param(pod("new", ("fresh",)), [],
                 [storage_class("gp2", "kubernetes.io/aws-ebs"), pvc("fresh", cls="gp2")], "",
                 id="in-tree-class-on-a-node-without-csinode"),
    pytest.param(pod("new", volumes=(gce("disk-2"),)), [pod("a", volumes=(gce("disk-1"),))],
                 [csinode("n1", "pd.csi.storage.gke.io", 1, migrated="kubernetes.io/gce-pd")], EXCEEDED,
                 id="inline-gce-disks-taken-over"),
    pytest.param(pod("new", volumes=(gce("disk-1"),)), [pod("a", volumes=(gce("disk-1"),))],
                 [csinode("n1", "pd.csi.storage.gke.io", 1, migrated="kubernetes.io/gce-pd")], "",
                 id="inline-gce-same-disk"),
    pytest.param(pod("new", volumes=(gce("disk-2"),)), [pod("a", volumes=(gce("disk-1"),))],
                 [csinode("n1", "pd.csi.storage.gke.io", 1)], EXCEEDED, id="inline-gce-without-the-annotation"),
    pytest.param(pod("new", volumes=(gce("disk-2"),)), [pod("a", volumes=(gce("disk-1"),))], [], "",
                 id="inline-gce-on-a-node-without-csinode"),
    # Portworx is migrated like the others since 1.37 (1.35 wanted the annotation to list it)
    pytest.param(pod("new", volumes=(portworx("px-2"),)), [pod("a", volumes=(portworx("px-1"),))],
                 [csinode("n1", PXD, 1)], EXCEEDED, id="inline-portworx-counted"),
    pytest.param(pod("new", volumes=(portworx("px-1"),)), [pod("a", volumes=(portworx("px-1"),))],
                 [csinode("n1", PXD, 1)], "", id="inline-portworx-same-volume"),
    pytest.param(pod("new", ("px",)), [pod("a", volumes=(portworx("px-1"),))],
                 [pvc("px", cls="", volume="pv-px"), pv_portworx("pv-px", "px", "px-2"), csinode("n1", PXD, 1)],
                 EXCEEDED, id="in-tree-portworx-volume"),
    pytest.param(pod("new", ("fresh",)), [pod("a", volumes=(portworx("px-1"),))],
                 [storage_class("px", "kubernetes.io/portworx-volume"), pvc("fresh", cls="px"),
                  csinode("n1", PXD, 1)], EXCEEDED, id="portworx-class"),
    pytest.param(pod("new", ("pd",)), [pod("a", volumes=(gce("disk-1"),))],
                 [pvc("pd", cls="", volume="pv-pd"), pv("pv-pd", claim="pd", gce="disk-2"),
                  csinode("n1", "pd.csi.storage.gke.io", 1, migrated="kubernetes.io/gce-pd")], EXCEEDED,
                 id="in-tree-gce-volume-taken-over"),
    pytest.param(pod("new", ("ghost",)), [], [csinode("n1", EBS, 1)],
                 f'UnschedulableAndUnresolvable: looking up PVC {NS}/ghost: persistentvolumeclaim "ghost" not found',
                 id="the-pods-claim-missing"),
    pytest.param(pod("new", ("two",)), [pod("a", ("ghost",)), USING_ONE], [*ONE, *TWO, csinode("n1", EBS, 2)], "",
                 id="a-placed-pods-missing-claim-is-not-counted"),
    pytest.param(pod("new", volumes=(ephemeral("scratch", "ebs"),)), [],
                 [wffc("ebs", EBS), pvc("new-scratch", cls="ebs", owner="someone"), csinode("n1", EBS, 1)],
                 f"Error: PVC {NS}/new-scratch was not created for pod {NS}/new (pod is not owner)",
                 id="ephemeral-claim-of-another-pod"),
    pytest.param(pod("new", volumes=(ephemeral("scratch", "ebs"),)), [USING_ONE],
                 [*ONE, wffc("ebs", EBS), pvc("new-scratch", cls="ebs", owner="uid-new"), csinode("n1", EBS, 1)],
                 EXCEEDED, id="ephemeral-claim-counted"),
]


@pytest.mark.parametrize(("target", "placed", "objects", "want"), LIMITS)
def test_a_node_takes_no_more_csi_volumes_than_its_csinode_allows(target: Pod, placed: list[Pod],
                                                                   objects: list[StorageObject], want: str) -> None:
    assert verdict(target, placed, *objects) == (Status(), want)


@pytest.mark.parametrize("target", [pod("p"), pod("p", volumes=({"name": "c", "csi": {"driver": EBS}},)),
                                    pod("p", volumes=({"name": "i", "iscsi": {"targetPortal": "t", "iqn": "q",
                                                                              "lun": 0}},))],
                         ids=["no-volumes", "inline-csi", "iscsi"])
def test_pods_without_counted_volumes_are_skipped(target: Pod) -> None:
    assert verdict(target, [], csinode("n1", EBS, 0)) == (Status(Code.Skip), "")


def test_it_implements_upstreams_extension_points_and_events() -> None:
    assert points_of(NodeVolumeLimits) == frozenset({"preFilter", "filter"})
    assert [(r.event.resource, r.event.action, r.hint is not None)
            for r in NodeVolumeLimits().events_to_register()] == [
        ("CSINode", ActionType.Add, False), ("CSINode", ActionType.Update, True),
        ("AssignedPod", ActionType.Delete, True), ("PersistentVolumeClaim", ActionType.Add, True)]


HINTS = [  # (resource, action, old, new, the hint for a pod using claim "data")
    pytest.param("CSINode", ActionType.Update, csinode("n1", EBS, 1), csinode("n1", EBS, 2), QueueingHint.Queue,
                 id="limit-raised"),
    pytest.param("CSINode", ActionType.Update, csinode("n1", EBS, 2), csinode("n1", EBS, 1), QueueingHint.QueueSkip,
                 id="limit-lowered"),
    pytest.param("AssignedPod", ActionType.Delete, pod("gone", ("x",), node_name="n1"), None, QueueingHint.Queue,
                 id="a-placed-pod-with-a-claim-deleted"),
    pytest.param("AssignedPod", ActionType.Delete, pod("gone", ("x",)), None, QueueingHint.QueueSkip,
                 id="a-pending-pod-deleted"),
    pytest.param("AssignedPod", ActionType.Delete, pod("gone", node_name="n1"), None, QueueingHint.QueueSkip,
                 id="a-pod-without-volumes-deleted"),
    pytest.param("PersistentVolumeClaim", ActionType.Add, None, pvc("data", cls=""), QueueingHint.Queue,
                 id="its-claim-created"),
]


@pytest.mark.parametrize(("resource", "action", "old", "new", "want"), HINTS)
def test_events_requeue_only_pods_they_may_help(resource: str, action: ActionType, old: Any, new: Any,
                                                 want: QueueingHint) -> None:
    reg = next(r for r in NodeVolumeLimits().events_to_register()
               if r.event.resource == resource and r.event.action == action)
    assert reg.hint is not None and reg.hint(pod("p", ("data",)), old, new) is want
