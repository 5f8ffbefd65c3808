"""The scheduler's cache: nodes, bound pods and *assumed* pods, over a columnar :class:`ClusterTable`.

A pod is *assumed* on a node when its scheduling cycle reserves it there, before it is bound, so the
next cycle already counts its resources. Binding confirms it (the bound pod arrives through
:meth:`add_pod`); a failure after Reserve forgets it. :meth:`assumed` lists the assumed pods, so
tests and the fault harness can check that none is left behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from pluginhost.errors import OutriggerError
from pluginhost.model import Node, Pod
from pluginhost.snapshot import ClusterTable, Snapshot, VolumeStore

from .dra.store import DraStore
from .podgroups.store import ASSIGNED, ASSUMED, PodGroupStore

__all__ = ["Cache", "CacheError"]


class CacheError(OutriggerError, RuntimeError):
    """A cache operation that contradicts the cache's state (a bug in the caller)."""


@dataclass(slots=True)
class _PodEntry:
    pod: Pod
    node: str
    assumed: bool
    binding_finished: bool = False


class Cache:
    def __init__(self) -> None:
        self.table = ClusterTable()
        self.table.dra = DraStore()
        self._pods: dict[str, _PodEntry] = {}
        # Bound pods whose node does not exist (yet): placed when the node arrives.
        self._homeless: dict[str, dict[str, Pod]] = {}
        #: The PodGroups and Workloads, and which of each group's pods this cache holds (assumed or bound).
        self.podgroups = PodGroupStore(self.placement, self.node_of)

    # ---- nodes ---------------------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        self.table.upsert_node(node)
        waiting = self._homeless.pop(node.name, None)
        if waiting:
            for pod in waiting.values():
                self.table.place_pod(pod, node.name)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        orphans = self.table.remove_node(name)
        if orphans:
            self._homeless[name] = {p.uid: p for p in orphans}

    def node(self, name: str) -> Node | None:
        return self.table.node(name)

    # ---- storage objects -----------------------------------------------------------------------

    @property
    def volumes(self) -> VolumeStore:
        """The PVCs, PVs, StorageClasses and CSINodes the volume plugins read (with their assumed
        bindings): filled by the cluster source, shared by every snapshot."""
        return self.table.volumes

    @property
    def dra(self) -> DraStore:
        """The ResourceClaims, templates, DeviceClasses and ResourceSlices DynamicResources reads (with
        its pending and assumed allocations): filled by the cluster source, shared by every snapshot."""
        store: DraStore = self.table.dra
        return store

    # ---- pods ----------------------------------------------------------------------------------

    def assume_pod(self, pod: Pod, node: str) -> None:
        """Count ``pod`` on ``node`` before it is bound (the scheduling cycle reserved it)."""
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} is already in the cache, cannot assume it")
        if not self.table.place_pod(pod, node):
            raise CacheError(f"cannot assume pod {pod.key} on unknown node {node!r}")
        self._pods[pod.uid] = _PodEntry(pod, node, assumed=True)

    def finish_binding(self, uid: str) -> None:
        entry = self._pods.get(uid)
        if entry is not None and entry.assumed:
            entry.binding_finished = True

    def forget_pod(self, uid: str) -> bool:
        """Undo :meth:`assume_pod`. False if the pod was not assumed (already confirmed or gone)."""
        entry = self._pods.get(uid)
        if entry is None or not entry.assumed:
            return False
        del self._pods[uid]
        self.table.unplace_pod(uid)
        return True

    def add_pod(self, pod: Pod) -> None:
        """A bound pod (``pod.node_name`` set): confirms an assumed pod, or adds a new one."""
        entry = self._pods.get(pod.uid)
        if entry is not None:
            if entry.assumed and entry.node == pod.node_name:
                entry.assumed = False
                entry.pod = pod
                return
            self.remove_pod(pod.uid)
        self._pods[pod.uid] = _PodEntry(pod, pod.node_name, assumed=False)
        if not self.table.place_pod(pod, pod.node_name):
            self._homeless.setdefault(pod.node_name, {})[pod.uid] = pod

    def update_pod(self, pod: Pod) -> None:
        self.remove_pod(pod.uid)
        self.add_pod(pod)

    def remove_pod(self, uid: str) -> Pod | None:
        entry = self._pods.pop(uid, None)
        if entry is None:
            return None
        if self.table.unplace_pod(uid) is None:
            self._homeless.get(entry.node, {}).pop(uid, None)
        return entry.pod

    def placement(self, uid: str) -> str | None:
        """``assumed`` or ``assigned`` (bound) for a pod in the cache, None for one that is not."""
        entry = self._pods.get(uid)
        return None if entry is None else ASSUMED if entry.assumed else ASSIGNED

    def assumed(self) -> list[Pod]:
        return [e.pod for e in self._pods.values() if e.assumed]

    def pod_count(self) -> int:
        return len(self._pods)

    def node_of(self, uid: str) -> str | None:
        entry = self._pods.get(uid)
        return None if entry is None else entry.node

    # ---- snapshot ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return self.table.snapshot()

    @property
    def generation(self) -> int:
        return self.table.generation
