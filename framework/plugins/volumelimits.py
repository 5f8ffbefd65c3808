"""NodeVolumeLimits: kube-scheduler's CSI volume limits (``pkg/scheduler/framework/plugins/nodevolumelimits``,
``csi.go``, v1.37).

A node's CSINode says, per CSI driver, how many of its volumes the node can attach
(``spec.drivers[].allocatable.count``). A pod's volumes that attach through a CSI driver are counted:
claims (``persistentVolumeClaim`` and ``ephemeral``) whose bound volume is a CSI volume, or an in-tree
disk (GCE PD, AWS EBS, Azure Disk, Cinder, Portworx) whose CSI driver took it over, which is the case on
every node with a CSINode, or, while unbound, whose class's provisioner is the driver; and the in-tree
disks of the pod itself the same way. Each volume is counted once per node (by driver and volume
handle), with the volumes of the pods already there; more than the limit is Unschedulable:
``node(s) exceed max volume count``.

PreFilter is Skip for a pod without such volumes. A claim the pod names that does not exist rejects
the node outright (``looking up PVC ns/data: persistentvolumeclaim "data" not found``); an
ephemeral claim another pod owns is an error. VolumeAttachments are not modelled (volumes attached
without a pod are not counted), nor are CSIDriver objects: VolumeLimitScaling's check
(``<driver> CSI driver is not installed on the node``) rejects only for a CSIDriver that sets
``preventPodSchedulingIfMissing``, and without CSIDriver objects it never does.
"""

from __future__ import annotations

import uuid
from typing import Any

from pluginhost.model import CSINode, PersistentVolumeClaim, Pod
from pluginhost.plugin import (
    ASSIGNED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterResult,
    QueueingHint,
)
from pluginhost.snapshot import VolumeStore
from pluginhost.status import Code, Status

from .volumeutil import (
    CSI_NODE,
    MIGRATED_DRIVERS,
    MIGRATED_PROVISIONERS,
    PERSISTENT_VOLUME_CLAIM,
    SKIP,
    UPDATE,
    VolumeFilterPlugin,
    claim_names,
    migrated_disk,
    not_found,
    not_owner,
    owned_by,
)

__all__ = ["MSG_MAX_VOLUME_COUNT", "NodeVolumeLimits"]

MSG_MAX_VOLUME_COUNT = "node(s) exceed max volume count"

_OK = Status()
_NAME = "NodeVolumeLimits"


class _Missing(Exception):
    """A claim of the pod being scheduled does not exist (UnschedulableAndUnresolvable)."""


class _NotOwner(Exception):
    """An ephemeral claim another pod owns (an error, as upstream)."""


class NodeVolumeLimits(VolumeFilterPlugin):
    """kube-scheduler's NodeVolumeLimits (CSILimits; see the module docstring)."""

    name = _NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        # Unbound claims are counted under a made-up handle that no real volume has.
        self._prefix = uuid.uuid4().hex

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        for v in pod.volumes:
            if v.source in ("persistentVolumeClaim", "ephemeral") or v.source in MIGRATED_DRIVERS:
                return None, Status()
        return None, SKIP

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        n = len(batch)
        if not pod.volumes:
            return FilterResult.passing(n)
        snapshot = batch.snapshot
        store = snapshot.volumes
        table = snapshot.table
        statuses: list[Status] = []
        # The pod's own volumes depend on the node only through its CSINode: worked out once per CSINode
        # (nodes without one share the answer).
        wanted: dict[int, dict[str, str] | Status] = {}
        for row in batch.rows.tolist():
            csinode = store.csinode(table.nodes[row].name)
            new = wanted.get(id(csinode))
            if new is None:
                new = wanted[id(csinode)] = self._new_volumes(store, pod, csinode)
            if isinstance(new, Status):
                statuses.append(new)
            elif not new or csinode is None or not csinode.limits():
                statuses.append(_OK)
            else:
                statuses.append(self._node(store, dict(new), csinode, snapshot.pods[row]))
        return FilterResult.from_statuses(statuses)

    def _new_volumes(self, store: VolumeStore, pod: Pod, csinode: CSINode | None) -> dict[str, str] | Status:
        """The pod's attachable volumes on a node with ``csinode``, or why they cannot be worked out."""
        new: dict[str, str] = {}
        try:
            self._attachable(store, pod, csinode, True, new)
        except _Missing as exc:
            return Status(Code.UnschedulableAndUnresolvable, (str(exc),), _NAME)
        except _NotOwner as exc:
            return Status(Code.Error, (str(exc),), _NAME)
        return new

    def _node(self, store: VolumeStore, new: dict[str, str], csinode: CSINode, placed: tuple[Pod, ...]) -> Status:
        """Whether ``new`` (the pod's volumes) fit the node's limits with the volumes of ``placed``."""
        limits = csinode.limits()
        attached: dict[str, str] = {}
        try:
            for other in placed:
                if other.volumes:
                    self._attachable(store, other, csinode, False, attached)
        except _NotOwner as exc:
            return Status(Code.Error, (str(exc),), _NAME)
        counts: dict[str, int] = {}
        for handle, driver in attached.items():
            new.pop(handle, None)  # a volume already attached there is not attached again
            counts[driver] = counts.get(driver, 0) + 1
        wanted: dict[str, int] = {}
        for driver in new.values():
            wanted[driver] = wanted.get(driver, 0) + 1
        for driver, count in wanted.items():
            limit = limits.get(driver)
            if limit is not None and counts.get(driver, 0) + count > limit:
                return Status(Code.Unschedulable, (MSG_MAX_VOLUME_COUNT,), _NAME)
        return Status()

    def _attachable(self, store: VolumeStore, pod: Pod, csinode: CSINode | None, is_new: bool,
                    out: dict[str, str]) -> None:
        """filterAttachableVolumes: ``driver/handle`` -> driver for each volume of ``pod`` a CSI
        driver attaches on this node."""
        for v in pod.volumes:
            if v.source in MIGRATED_DRIVERS:
                found = migrated_disk(v.source, v.disk, csinode)
                if found is not None:
                    out[f"{found[0]}/{found[1]}"] = found[0]
                continue
            if v.source not in ("persistentVolumeClaim", "ephemeral"):
                continue
            name = v.claim(pod.name)
            pvc = store.claims.get(f"{pod.namespace}/{name}")
            if pvc is None:
                if is_new:
                    raise _Missing(f"looking up PVC {pod.namespace}/{name}: {not_found(PERSISTENT_VOLUME_CLAIM, name)}")
                continue  # a placed pod's claim that is gone is not counted
            if v.source == "ephemeral" and not owned_by(pvc, pod):
                raise _NotOwner(not_owner(pvc, pod))
            driver, handle = self._driver_of(store, csinode, pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver

    def _driver_of(self, store: VolumeStore, csinode: CSINode | None, pvc: PersistentVolumeClaim) -> tuple[str, str]:
        """getCSIDriverInfo: the claim's driver and volume handle ("" when it is not a CSI volume here)."""
        if pvc.volume_name:
            pv = store.volumes.get(pvc.volume_name)
            if pv is not None:
                if pv.source == "csi":
                    return pv.driver, pv.disk
                found = migrated_disk(pv.source, pv.disk, csinode, pv.labels)
                return found if found is not None else ("", "")
        # Unbound, or its volume is gone: counted by its class's provisioner.
        class_name = pvc.storage_class
        cls = store.storage_class(class_name) if class_name else None
        if cls is None:
            return "", ""
        handle = f"{self._prefix}-{pvc.namespace}/{pvc.name}"
        migrated = MIGRATED_PROVISIONERS.get(cls.provisioner)
        if migrated is not None:
            if csinode is None:  # isCSIMigrationOn: migrated wherever the node has a CSINode
                return "", ""
            return migrated, handle
        return cls.provisioner, handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Upstream also registers VolumeAttachment deletions, objects no source here keeps.
        return [
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(CSI_NODE, UPDATE), _after_csinode_update),
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.Delete), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.Add), _after_claim_added),
        ]


def _after_csinode_update(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A driver's limit went up."""
    if not isinstance(old, CSINode) or not isinstance(new, CSINode):
        return QueueingHint.Queue
    before = {d.name: d.allocatable or 0 for d in old.drivers}
    for d in new.drivers:
        if (d.allocatable or 0) > before.get(d.name, 0):
            return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A deleted pod that was on a node (or nominated to one) with a volume that may count."""
    if not isinstance(old, Pod) or not old.volumes:
        return QueueingHint.QueueSkip
    if not old.node_name and not old.nominated_node_name:
        return QueueingHint.QueueSkip
    for v in old.volumes:
        if v.source in ("persistentVolumeClaim", "ephemeral") or v.source in MIGRATED_DRIVERS:
            return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_claim_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return QueueingHint.QueueSkip
    if any(name == new.name for _, name, _ in claim_names(pod)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip

