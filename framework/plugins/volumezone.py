"""VolumeZone: kube-scheduler's volume zone check (``pkg/scheduler/framework/plugins/volumezone``, v1.35).

PreFilter follows each ``persistentVolumeClaim`` volume to its bound PersistentVolume and collects
the volume's zone and region labels (``topology.kubernetes.io/zone``, ``.../region`` and their
``failure-domain.beta`` forms; a ``__``-separated value names several zones). A claim not bound yet
is skipped when its class binds on the first consumer, otherwise the pod is rejected outright:
``persistentvolumeclaim "data" not found``, ``PersistentVolumeClaim had no pv name and storageClass
name``, ``storageclass.storage.k8s.io "fast" not found``, ``PersistentVolume had no name``,
``persistentvolume "pv-1" not found``. A pod whose volumes have no such labels is Skip.

Filter: a node without any zone or region label passes (a single-zone cluster); otherwise each label
of each volume must be on the node (a beta label may be matched by the node's GA label) with one of
the volume's values, else UnschedulableAndUnresolvable: ``node(s) had no available volume zone``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pluginhost.model import BINDING_WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim, Pod
from pluginhost.plugin import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    FilterResult,
    NodeBatch,
    PreFilterResult,
    QueueingHint,
)
from pluginhost.snapshot import NodeTable, VolumeStore
from pluginhost.status import SUCCESS, Code, Status

from .helpers import BoolArray, IntArray
from .volumeutil import (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    SKIP,
    STORAGE_CLASS,
    TOPOLOGY_LABELS,
    UPDATE,
    VolumeFilterPlugin,
    claim_names,
    not_found,
    pv_topologies,
)

__all__ = ["MSG_ZONE_CONFLICT", "VolumeZone"]

MSG_ZONE_CONFLICT = "node(s) had no available volume zone"

_NAME = "VolumeZone"
_STATE_KEY = "PreFilterVolumeZone"
_GA = {
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
}


@dataclass(frozen=True, slots=True)
class _State:
    topologies: tuple[tuple[str, frozenset[str]], ...]

    def clone(self) -> _State:
        return self


def _label_mask(table: NodeTable, rows: IntArray, key: str, values: frozenset[str] | None = None) -> BoolArray:
    """Rows whose node has label ``key`` (with one of ``values`` when given)."""
    codes, vocab = table.label_codes(key)
    col = codes[rows]
    if values is None:
        out: BoolArray = col >= 0
        return out
    ids = [vocab[v] for v in values if v in vocab]
    if not ids:
        return np.zeros(int(rows.shape[0]), dtype=np.bool_)
    hit: BoolArray = np.isin(col, np.asarray(ids, dtype=np.int32))
    return hit


class VolumeZone(VolumeFilterPlugin):
    """kube-scheduler's VolumeZone (see the module docstring)."""

    name = _NAME

    def _topologies(self, store: VolumeStore, pod: Pod) -> list[tuple[str, frozenset[str]]] | Status:
        out: list[tuple[str, frozenset[str]]] = []
        for _, name, _ in claim_names(pod, ephemeral=False):
            if not name:
                return Status(Code.UnschedulableAndUnresolvable, ("PersistentVolumeClaim had no name",), _NAME)
            pvc = store.claims.get(f"{pod.namespace}/{name}")
            if pvc is None:
                return Status(Code.UnschedulableAndUnresolvable, (not_found(PERSISTENT_VOLUME_CLAIM, name),), _NAME)
            if not pvc.volume_name:
                class_name = pvc.storage_class
                if not class_name:
                    return Status(Code.UnschedulableAndUnresolvable,
                                  ("PersistentVolumeClaim had no pv name and storageClass name",), _NAME)
                cls = store.storage_class(class_name)
                if cls is None:
                    return Status(Code.UnschedulableAndUnresolvable, (not_found(STORAGE_CLASS, class_name),), _NAME)
                if cls.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue  # bound later, on the node chosen
                return Status(Code.UnschedulableAndUnresolvable, ("PersistentVolume had no name",), _NAME)
            pv = store.volumes.get(pvc.volume_name)
            if pv is None:
                return Status(Code.UnschedulableAndUnresolvable, (not_found(PERSISTENT_VOLUME, pvc.volume_name),),
                              _NAME)
            out.extend(pv_topologies(pv))
        return out

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        snapshot = state.snapshot if state.snapshot is not None else (
            self.handle.snapshot() if self.handle is not None else None)
        store = snapshot.volumes if snapshot is not None else VolumeStore()
        found = self._topologies(store, pod)
        if isinstance(found, Status):
            return None, found
        if not found:
            return None, SKIP
        state.write(_STATE_KEY, _State(tuple(found)))
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        n = len(batch)
        if not pod.volumes:
            return FilterResult.passing(n)
        s = state.get(_STATE_KEY)
        if isinstance(s, _State):
            topologies = list(s.topologies)
        else:  # PreFilter did not run: work it out here, as upstream falls back to
            found = self._topologies(batch.snapshot.volumes, pod)
            if isinstance(found, Status):
                return FilterResult.from_mask(np.ones(n, dtype=np.bool_), found.code, *found.reasons)
            topologies = found
        table = batch.snapshot.table
        rows = batch.rows
        constrained = np.zeros(n, dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= _label_mask(table, rows, key)
        ok = np.ones(n, dtype=np.bool_)
        for key, values in topologies:
            has = _label_mask(table, rows, key)
            match = _label_mask(table, rows, key, values)
            ga = _GA.get(key)
            if ga is not None:  # no beta label on the node: the GA label stands in for it
                match |= ~has & _label_mask(table, rows, ga, values)
            ok &= match
        return FilterResult.from_mask(constrained & ~ok, Code.UnschedulableAndUnresolvable, MSG_ZONE_CONFLICT)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(STORAGE_CLASS, ActionType.Add), _after_class_added),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.Add | UPDATE), _after_claim_change),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME, ActionType.Add | UPDATE), _after_volume_change),
        ]


def _after_class_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Only a new class that binds on the first consumer may help."""
    if new is not None and getattr(new, "volume_binding_mode", None) == BINDING_WAIT_FOR_FIRST_CONSUMER:
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return QueueingHint.QueueSkip
    if any(name == new.name for _, name, _ in claim_names(pod, ephemeral=False)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_volume_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A new volume, or one whose zone labels changed."""
    if not isinstance(old, PersistentVolume) or not isinstance(new, PersistentVolume):
        return QueueingHint.Queue
    return QueueingHint.Queue if pv_topologies(old) != pv_topologies(new) else QueueingHint.QueueSkip
