"""VolumeRestrictions: kube-scheduler's disk conflict and ReadWriteOncePod checks
(``pkg/scheduler/framework/plugins/volumerestrictions``, v1.35).

- **Disk conflicts**, per node, against the pods placed there: the same GCE persistent disk unless
  every pod mounts it read-only; the same AWS EBS volume, always; the same iSCSI IQN unless both are
  read-only; the same RBD image (a shared Ceph monitor, the same pool and image) unless both are
  read-only. A conflict is Unschedulable: ``node(s) had no available disk``.
- **ReadWriteOncePod**: PreFilter looks up every ``persistentVolumeClaim`` volume's claim (a missing
  one rejects the pod outright, ``persistentvolumeclaim "data" not found``) and counts those with the
  ReadWriteOncePod access mode that a placed pod already uses; any makes every node Unschedulable,
  ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use
  by another pod`` (so preemption may free the claim: AddPod/RemovePod keep the count).
- A pod with neither kind of volume is Skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pluginhost.model import READ_WRITE_ONCE_POD, Pod, Volume
from pluginhost.plugin import (
    ASSIGNED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    FilterResult,
    NodeBatch,
    PreFilterExtensions,
    PreFilterResult,
    QueueingHint,
)
from pluginhost.snapshot import Snapshot, VolumeStore
from pluginhost.status import SUCCESS, Code, Status

from .volumeutil import PERSISTENT_VOLUME_CLAIM, SKIP, VolumeFilterPlugin, claim_names, not_found

__all__ = ["MSG_DISK_CONFLICT", "MSG_RWOP_CONFLICT", "VolumeRestrictions", "used_claims"]

MSG_DISK_CONFLICT = "node(s) had no available disk"
MSG_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)

_NAME = "VolumeRestrictions"
_STATE_KEY = "PreFilterVolumeRestrictions"
_CHECKED = frozenset({"gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi"})


@dataclass(slots=True)
class _State:
    """The pod's ReadWriteOncePod claims and how many placed pods use them."""

    rwop_claims: frozenset[str]
    conflicts: int

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicts)

    def update(self, other: Pod, sign: int) -> None:
        # Upstream counts the other pod's claims by name only (whatever its namespace).
        uses = sum(1 for _, name, _ in claim_names(other, ephemeral=False) if name in self.rwop_claims)
        self.conflicts += sign * uses


def used_claims(snapshot: Snapshot) -> frozenset[str]:
    """``namespace/name`` of every claim a placed pod uses through a ``persistentVolumeClaim`` volume
    (the snapshot's usedPVCSet), worked out once per snapshot."""

    def build(snap: Snapshot) -> frozenset[str]:
        return frozenset(f"{p.namespace}/{name}" for pods in snap.pods for p in pods if p.volumes
                         for _, name, _ in claim_names(p, ephemeral=False))

    out: frozenset[str] = snapshot.memo("volumes:used-claims", build)
    return out


def _conflict(volume: Volume, other: Volume) -> bool:
    """isVolumeConflict for one pair of volumes."""
    if volume.source != other.source or volume.disk != other.disk:
        return False
    both_read_only = volume.read_only and other.read_only
    if volume.source == "awsElasticBlockStore":
        return True
    if volume.source == "rbd":
        return volume.pool == other.pool and bool(set(volume.monitors) & set(other.monitors)) and not both_read_only
    return not both_read_only  # gcePersistentDisk, iscsi


def _disks(snapshot: Snapshot) -> dict[tuple[str, str], list[tuple[int, Volume]]]:
    """(source, disk) -> (node row, volume) of each checked volume of the placed pods."""

    def build(snap: Snapshot) -> dict[tuple[str, str], list[tuple[int, Volume]]]:
        out: dict[tuple[str, str], list[tuple[int, Volume]]] = {}
        for row, pods in enumerate(snap.pods):
            for p in pods:
                for v in p.volumes:
                    if v.source in _CHECKED:
                        out.setdefault((v.source, v.disk), []).append((row, v))
        return out

    out: dict[tuple[str, str], list[tuple[int, Volume]]] = snapshot.memo("volumes:disks", build)
    return out


class VolumeRestrictions(VolumeFilterPlugin, PreFilterExtensions):
    """kube-scheduler's VolumeRestrictions (see the module docstring)."""

    name = _NAME

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        snapshot = state.snapshot if state.snapshot is not None else (
            self.handle.snapshot() if self.handle is not None else None)
        store = snapshot.volumes if snapshot is not None else VolumeStore()
        needs_check = any(v.source in _CHECKED for v in pod.volumes)
        rwop: set[str] = set()
        for _, name, _ in claim_names(pod, ephemeral=False):
            pvc = store.claims.get(f"{pod.namespace}/{name}")
            if pvc is None:
                return None, Status(Code.UnschedulableAndUnresolvable,
                                    (not_found(PERSISTENT_VOLUME_CLAIM, name),), _NAME)
            if READ_WRITE_ONCE_POD in pvc.access_modes:
                rwop.add(pvc.name)
        conflicts = 0
        if rwop and snapshot is not None:
            used = used_claims(snapshot)
            conflicts = sum(1 for name in rwop if f"{pod.namespace}/{name}" in used)
        if not needs_check and conflicts == 0:
            return None, SKIP
        state.write(_STATE_KEY, _State(frozenset(rwop), conflicts))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        s = state.get(_STATE_KEY)
        if not isinstance(s, _State):
            return Status.failure(f'cannot read "{_STATE_KEY}" from cycleState', plugin=_NAME)
        s.update(other, 1)
        return SUCCESS

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        s = state.get(_STATE_KEY)
        if not isinstance(s, _State):
            return Status.failure(f'cannot read "{_STATE_KEY}" from cycleState', plugin=_NAME)
        s.update(other, -1)
        return SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        n = len(batch)
        disk_conflict = np.zeros(n, dtype=np.bool_)
        checked = [v for v in pod.volumes if v.source in _CHECKED]
        if checked:
            snapshot = batch.snapshot
            position = {row: i for i, row in enumerate(batch.rows.tolist())}
            disks = _disks(snapshot)
            for v in checked:
                for row, other in disks.get((v.source, v.disk), ()):
                    i = position.get(row)
                    if i is not None and _conflict(v, other):
                        disk_conflict[i] = True
        s = state.get(_STATE_KEY)
        if not isinstance(s, _State):
            raise RuntimeError(f'cannot read "{_STATE_KEY}" from cycleState')
        codes = np.where(disk_conflict, np.int8(Code.Unschedulable), np.int8(0)).astype(np.int8)
        reasons: list[tuple[str, ...]] = [(MSG_DISK_CONFLICT,)]
        index = np.zeros(n, dtype=np.int32)
        if s.conflicts > 0:
            codes[~disk_conflict] = Code.Unschedulable
            index[~disk_conflict] = 1
            reasons.append((MSG_RWOP_CONFLICT,))
        return FilterResult(codes, index, reasons)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.Delete), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.Add), _after_claim_added),
        ]


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A deleted pod of the same namespace that held a conflicting disk or shares a claim."""
    if not isinstance(old, Pod) or old.namespace != pod.namespace:
        return QueueingHint.QueueSkip
    for v in pod.volumes:
        if v.source in _CHECKED and any(_conflict(v, o) for o in old.volumes):
            return QueueingHint.Queue
    claims = {name for _, name, _ in claim_names(pod, ephemeral=False)}
    if any(name in claims for _, name, _ in claim_names(old, ephemeral=False)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_claim_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A claim the pod uses was created."""
    if new is None or getattr(new, "namespace", None) != pod.namespace:
        return QueueingHint.QueueSkip
    if any(name == new.name for _, name, _ in claim_names(pod, ephemeral=False)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip
