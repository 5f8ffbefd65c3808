"""VolumeRestrictions: kube-scheduler v1.35's disk conflicts and ReadWriteOncePod checks
(``volumerestrictions/volume_restrictions.go``), in tables: which in-tree disks two pods on one node may
share, and when a ReadWriteOncePod claim keeps a pod off every node.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from test_plugin_volumes import node, pod, pv, pvc

from framework.plugins.volumerestrictions import MSG_DISK_CONFLICT, MSG_RWOP_CONFLICT, VolumeRestrictions
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, Snapshot, StorageObject
from pluginhost.status import Code, Status


def cluster(placed: list[Pod], *objects: StorageObject) -> Snapshot:
    """Nodes n1 and n2; ``placed`` on n1."""
    table = ClusterTable()
    for name in ("n1", "n2"):
        table.upsert_node(node(name))
    for p in placed:
        table.place_pod(p, "n1")
    for obj in objects:
        table.volumes.upsert(obj)
    return table.snapshot()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def verdicts(target: Pod, placed: list[Pod], *objects: StorageObject) -> tuple[Status, dict[str, str]]:
    """PreFilter's status, and (unless it ended the cycle) each node's Filter answer."""
    snap = cluster(placed, *objects)
    plugin, state = VolumeRestrictions(), CycleState("c", snap)
    _, status = run(plugin.pre_filter(state, target))
    if not status.ok:
        return status, {}
    res = run(plugin.filter(state, target, NodeBatch(snap, np.arange(2, dtype=np.int64))))
    out = {}
    for i, name in enumerate(snap.names):
        st = res.status_at(i)
        out[name] = "" if st.ok else f"{st.code.name}: {' | '.join(st.reasons)}"
    return status, out


def disk(source: str, read_only: bool = False, **fields: Any) -> dict[str, Any]:
    return {"name": "disk", source: {**fields, "readOnly": read_only}}


def with_disk(name: str, volume: dict[str, Any]) -> Pod:
    return pod(name, volumes=(volume,))


CONFLICT = f"Unschedulable: {MSG_DISK_CONFLICT}"
DISKS = [  # (the disk of the pod on n1, the new pod's disk, whether they conflict)
    pytest.param(disk("gcePersistentDisk", pdName="foo"), disk("gcePersistentDisk", pdName="foo"), True,
                 id="gce-same-disk"),
    pytest.param(disk("gcePersistentDisk", pdName="foo"), disk("gcePersistentDisk", pdName="bar"), False,
                 id="gce-other-disk"),
    pytest.param(disk("gcePersistentDisk", True, pdName="foo"), disk("gcePersistentDisk", True, pdName="foo"),
                 False, id="gce-both-read-only"),
    pytest.param(disk("gcePersistentDisk", True, pdName="foo"), disk("gcePersistentDisk", pdName="foo"), True,
                 id="gce-one-read-write"),
    pytest.param(disk("awsElasticBlockStore", volumeID="vol-1"), disk("awsElasticBlockStore", volumeID="vol-1"),
                 True, id="ebs-same-volume"),
    pytest.param(disk("awsElasticBlockStore", True, volumeID="vol-1"),
                 disk("awsElasticBlockStore", True, volumeID="vol-1"), True, id="ebs-even-read-only"),
    pytest.param(disk("awsElasticBlockStore", volumeID="vol-1"), disk("awsElasticBlockStore", volumeID="vol-2"),
                 False, id="ebs-other-volume"),
    pytest.param(disk("iscsi", targetPortal="t:3260", iqn="iqn.a", lun=0),
                 disk("iscsi", targetPortal="t:3260", iqn="iqn.a", lun=1), True, id="iscsi-same-iqn"),
    pytest.param(disk("iscsi", True, targetPortal="t:3260", iqn="iqn.a", lun=0),
                 disk("iscsi", True, targetPortal="t:3260", iqn="iqn.a", lun=0), False, id="iscsi-both-read-only"),
    pytest.param(disk("iscsi", targetPortal="t:3260", iqn="iqn.a", lun=0),
                 disk("iscsi", targetPortal="t:3260", iqn="iqn.b", lun=0), False, id="iscsi-other-iqn"),
    pytest.param(disk("rbd", monitors=["a", "b"], pool="p", image="i"), disk("rbd", monitors=["b", "c"], pool="p",
                                                                              image="i"), True,
                 id="rbd-a-shared-monitor"),
    pytest.param(disk("rbd", monitors=["a"], image="i"), disk("rbd", monitors=["a"], pool="rbd", image="i"), True,
                 id="rbd-default-pool"),
    pytest.param(disk("rbd", monitors=["a"], pool="p", image="i"), disk("rbd", monitors=["a"], pool="q", image="i"),
                 False, id="rbd-other-pool"),
    pytest.param(disk("rbd", monitors=["a"], pool="p", image="i"), disk("rbd", monitors=["b"], pool="p", image="i"),
                 False, id="rbd-no-shared-monitor"),
    pytest.param(disk("rbd", True, monitors=["a"], pool="p", image="i"),
                 disk("rbd", True, monitors=["a"], pool="p", image="i"), False, id="rbd-both-read-only"),
    pytest.param(disk("gcePersistentDisk", pdName="foo"), disk("awsElasticBlockStore", volumeID="foo"), False,
                 id="different-kinds-same-name"),
]


@pytest.mark.parametrize(("existing", "new", "conflict"), DISKS)
def test_a_disk_in_use_on_a_node_keeps_a_pod_wanting_it_off_that_node(existing: dict[str, Any], new: dict[str, Any],
                                                                       conflict: bool) -> None:
    status, nodes = verdicts(with_disk("new", new), [with_disk("old", existing)])
    assert status == Status()
    assert nodes == {"n1": CONFLICT if conflict else "", "n2": ""}


RWOP = ("ReadWriteOncePod",)
CLAIMS = [  # (the new pod, pods on n1, objects, PreFilter's status, each node's answer)
    pytest.param(pod("new"), [], [], Status(Code.Skip), {}, id="no-volumes"),
    pytest.param(pod("new", ("data",)), [], [pvc("data", cls="")], Status(Code.Skip), {}, id="claim-not-rwop"),
    pytest.param(pod("new", ("data",)), [], [], Status(Code.UnschedulableAndUnresolvable,
                                                       ('persistentvolumeclaim "data" not found',),
                                                       "VolumeRestrictions"), {}, id="claim-missing"),
    pytest.param(pod("new", ("data",)), [], [pvc("data", cls="", modes=RWOP)], Status(Code.Skip), {},
                 id="rwop-claim-unused"),
    pytest.param(pod("new", ("data",)), [pod("old", ("data",))], [pvc("data", cls="", modes=RWOP)], Status(),
                 {"n1": f"Unschedulable: {MSG_RWOP_CONFLICT}", "n2": f"Unschedulable: {MSG_RWOP_CONFLICT}"},
                 id="rwop-claim-in-use"),
    pytest.param(pod("new", ("data",), volumes=(disk("gcePersistentDisk", pdName="foo"),)),
                 [pod("old", ("data",), volumes=(disk("gcePersistentDisk", pdName="foo"),))],
                 [pvc("data", cls="", modes=RWOP)], Status(),
                 {"n1": CONFLICT, "n2": f"Unschedulable: {MSG_RWOP_CONFLICT}"}, id="the-disk-conflict-first"),
]


@pytest.mark.parametrize(("target", "placed", "objects", "pre", "nodes"), CLAIMS)
def test_read_write_once_pod_claims_in_use_keep_a_pod_off_every_node(
        target: Pod, placed: list[Pod], objects: list[StorageObject], pre: Status, nodes: dict[str, str]) -> None:
    assert verdicts(target, placed, *objects) == (pre, nodes)


def test_preemption_what_ifs_count_the_claims_users_as_pods_come_and_go() -> None:
    holder = pod("old", ("data",))
    snap = cluster([holder], pvc("data", cls="", modes=RWOP), pv("pv", claim="data"))
    plugin, state, target = VolumeRestrictions(), CycleState("c", snap), pod("new", ("data",))
    run(plugin.pre_filter(state, target))
    batch = NodeBatch(snap, np.arange(2, dtype=np.int64))
    assert run(plugin.filter(state, target, batch)).codes.tolist() == [Code.Unschedulable, Code.Unschedulable]
    what_if = state.clone()
    assert run(plugin.remove_pod(what_if, target, holder, 0)) == Status()
    assert run(plugin.filter(what_if, target, batch)).codes.tolist() == [0, 0]
    assert run(plugin.add_pod(what_if, target, holder, 0)) == Status()
    assert run(plugin.filter(what_if, target, batch)).codes.tolist() == [Code.Unschedulable, Code.Unschedulable]
    assert run(plugin.filter(state, target, batch)).codes.tolist() == [Code.Unschedulable, Code.Unschedulable]


def test_it_implements_upstreams_extension_points_and_events() -> None:
    assert points_of(VolumeRestrictions) == frozenset({"preFilter", "filter"})
    assert [(r.event.resource, r.event.action) for r in VolumeRestrictions().events_to_register()] == [
        ("AssignedPod", ActionType.Delete), ("Node", ActionType.Add), ("PersistentVolumeClaim", ActionType.Add)]


HINTS = [  # (event resource, old, new, hint for a pod with claim "data" and GCE disk "foo")
    pytest.param("AssignedPod", with_disk("gone", disk("gcePersistentDisk", pdName="foo")), None, QueueingHint.Queue,
                 id="deleted-pod-held-the-disk"),
    pytest.param("AssignedPod", pod("gone", ("data",)), None, QueueingHint.Queue, id="deleted-pod-shared-the-claim"),
    pytest.param("AssignedPod", pod("gone", ("other",)), None, QueueingHint.QueueSkip, id="deleted-pod-unrelated"),
    pytest.param("PersistentVolumeClaim", None, pvc("data", cls=""), QueueingHint.Queue, id="its-claim-created"),
    pytest.param("PersistentVolumeClaim", None, pvc("other", cls=""), QueueingHint.QueueSkip, id="another-claim"),
]


@pytest.mark.parametrize(("resource", "old", "new", "want"), HINTS)
def test_events_requeue_only_pods_they_may_help(resource: str, old: Any, new: Any, want: QueueingHint) -> None:
    target = pod("p", ("data",), volumes=(disk("gcePersistentDisk", pdName="foo"),))
    reg = next(r for r in VolumeRestrictions().events_to_register() if r.event.resource == resource)
    assert reg.hint is not None and reg.hint(target, old, new) is want
