"""The columnar cluster view that Filter and Score plugins read.

A :class:`ClusterTable` is the mutable store (nodes, the pods placed on them, and their resource
usage as NumPy arrays, one row per node). The framework's cache owns one; a plugin host's snapshot
mirror keeps another, fed by deltas. :meth:`ClusterTable.snapshot` hands out an immutable
:class:`Snapshot` at the current generation: arrays are shared until the table is next mutated, at
which point the table copies them (copy-on-write), so a snapshot costs nothing when nothing changed
and one array copy per changed column otherwise.

Rows are in insertion order; :attr:`Snapshot.order` is kube-scheduler's node-tree order (nodes taken
round-robin across zones), the order in which Filter walks the cluster.

A table tells its change listeners (:meth:`ClusterTable.add_listener`) about every mutation, after it
is applied: that is how the framework turns its cache into the versioned deltas plugin hosts follow.

The storage objects the volume plugins read (claims, volumes, classes, CSINodes) are not columns: a
table's :class:`VolumeStore` is live, like kube-scheduler's listers, and every snapshot refers to it
(:attr:`Snapshot.volumes`). A cluster without them has an empty store, and pods without volumes never
look at it.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pluginhost.errors import OutriggerError
from pluginhost.model import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    EPHEMERAL_STORAGE,
    MEMORY,
    NO_PROVISIONER,
    PODS,
    ClaimRef,
    Container,
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)

__all__ = [
    "BASE_RESOURCES",
    "NODE_REMOVED",
    "NODE_UPSERTED",
    "POD_PLACED",
    "POD_UNPLACED",
    "ChangeListener",
    "ClusterTable",
    "MemoryVolumeWriter",
    "NodeTable",
    "Snapshot",
    "StorageListener",
    "StorageObject",
    "VolumeStore",
    "VolumeStoreError",
    "VolumeWriter",
    "non_zero_requests",
    "storage_kind",
    "zone_key",
]

BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
_REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")

IntArray = npt.NDArray[np.int64]

# The changes a ClusterTable reports to its listeners, as ``listener(kind, subject, where)``:
NODE_UPSERTED = "node-upserted"  # subject: the Node; where: its id
NODE_REMOVED = "node-removed"  # subject: the node's name; where: its id (its pods went with it)
POD_PLACED = "pod-placed"  # subject: the Pod; where: the node's name
POD_UNPLACED = "pod-unplaced"  # subject: the pod's uid; where: the node's name

ChangeListener = Callable[[str, Any, Any], None]


def zone_key(node: Node) -> str:
    """kube-scheduler's zone key (region and zone labels); "" for a node without them."""
    labels = node.labels
    region = next((labels[k] for k in _REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in _ZONE_LABELS if k in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def non_zero_requests(pod: Pod) -> tuple[int, int]:
    """CPU and memory as kube-scheduler counts them for *scoring*: every container (and init
    container) without a CPU or memory request counts as requesting the default (100m, 200Mi);
    then the usual pod formula (sum, init-container max, overhead) applies."""
    defaults = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
    containers = (*pod.containers, *pod.init_containers)
    if all(CPU in c.requests and MEMORY in c.requests for c in containers):
        return pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0)
    from pluginhost.manifest import compute_requests  # local: manifest is heavier than this module

    def defaulted(cs: Sequence[Container]) -> list[Container]:
        return [replace(c, requests={**defaults, **c.requests}) for c in cs]

    view = replace(pod, containers=defaulted(pod.containers), init_containers=defaulted(pod.init_containers))
    req = compute_requests(view)
    return req.get(CPU, 0), req.get(MEMORY, 0)


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable:
    """The node-shaped half of a snapshot: what changes only when nodes are added, updated or removed."""

    generation: int
    nodes: tuple[Node, ...]
    names: tuple[str, ...]
    index: dict[str, int]
    ids: npt.NDArray[np.uint32]
    order: npt.NDArray[np.int64]
    unschedulable: npt.NDArray[np.bool_]
    _label_cache: dict[str, tuple[npt.NDArray[np.int32], dict[str, int]]] = field(default_factory=dict)
    _memo: dict[str, Any] = field(default_factory=dict)

    def memo(self, key: str, build: Callable[[NodeTable], Any]) -> Any:
        """``build(self)``, computed once per node table: plugins keep their per-node indexes
        (taint arrays, image counts, ...) here, so they are rebuilt only when nodes change."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = build(self)
            return value

    def label_codes(self, key: str) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
        """Per-node codes of label ``key`` (-1 where absent) and the value → code vocabulary.

        Built once per node table and key, so selector matching is array work afterwards.
        """
        hit = self._label_cache.get(key)
        if hit is not None:
            return hit
        vocab: dict[str, int] = {}
        codes = np.full(len(self.nodes), -1, dtype=np.int32)
        for i, node in enumerate(self.nodes):
            value = node.labels.get(key)
            if value is not None:
                codes[i] = vocab.setdefault(value, len(vocab))
        self._label_cache[key] = (codes, vocab)
        return codes, vocab


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """An immutable view of the cluster at one generation, column-wise.

    ``allocatable``, ``requested`` are ``(nodes, resources)`` int64 arrays whose columns are named by
    ``resources`` (``requested[:, col(PODS)]`` is the pod count); ``non_zero_requested`` has the CPU
    and memory columns as scoring counts them. ``pods[i]`` are the pods on node row ``i``.
    """

    generation: int
    table: NodeTable
    resources: tuple[str, ...]
    columns: dict[str, int]
    allocatable: IntArray
    requested: IntArray
    non_zero_requested: IntArray
    pods: Sequence[tuple[Pod, ...]]
    # A version per row, changed whenever the row's pods (or the node itself) change: plugins that keep
    # per-row derived data between cycles find the rows to redo with one array comparison.
    row_versions: IntArray
    #: The storage objects (live: the table's store; a view made without one has an empty store).
    volumes: VolumeStore = field(default_factory=lambda: VolumeStore())
    _memo: dict[str, Any] = field(default_factory=dict)

    def memo(self, key: str, build: Callable[[Snapshot], Any]) -> Any:
        """``build(self)``, computed once per snapshot: per-cycle indexes that several plugins read
        (e.g. every placed pod column-wise) are built by the first plugin that needs them."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = build(self)
            return value

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.table.nodes

    @property
    def names(self) -> tuple[str, ...]:
        return self.table.names

    def __len__(self) -> int:
        return len(self.table.nodes)

    def row(self, name: str) -> int | None:
        return self.table.index.get(name)

    def col(self, resource: str) -> int | None:
        return self.columns.get(resource)

    def allocatable_of(self, resource: str) -> IntArray:
        c = self.columns.get(resource)
        if c is None:
            return np.zeros(len(self), dtype=np.int64)
        return self.allocatable[:, c]

    def requested_of(self, resource: str) -> IntArray:
        c = self.columns.get(resource)
        if c is None:
            return np.zeros(len(self), dtype=np.int64)
        return self.requested[:, c]


class ClusterTable:
    """Nodes and the pods placed on them, kept column-wise; the store behind every snapshot.

    Not thread-safe: the framework mutates it from its event loop only.
    """

    def __init__(self) -> None:
        self.generation = 0
        self._node_generation = 0
        self._rows: dict[str, int] = {}
        self._nodes: list[Node] = []
        self._ids: list[int] = []
        self._next_id = 1
        self._id_of: dict[str, int] = {}
        self._resources: list[str] = list(BASE_RESOURCES)
        self._columns: dict[str, int] = {r: i for i, r in enumerate(self._resources)}
        self._cap = 0
        self._alloc = np.zeros((0, len(self._resources)), dtype=np.int64)
        self._req = np.zeros((0, len(self._resources)), dtype=np.int64)
        self._nz = np.zeros((0, 2), dtype=np.int64)
        self._ver = np.zeros(0, dtype=np.int64)
        self._ver_seq = 0
        self._pods: list[tuple[Pod, ...]] = []
        self._placement: dict[str, int] = {}  # pod uid -> node row
        # Arrays referenced by the last snapshot, copied before the next write: the usage arrays
        # (requested, non-zero requested, row versions) change with every pod, allocatable only with nodes.
        self._shared_usage = False
        self._shared_alloc = False
        self._table: NodeTable | None = None
        self._snapshot: Snapshot | None = None
        self._listeners: list[ChangeListener] = []
        #: The storage objects every snapshot of this table refers to.
        self.volumes = VolumeStore()

    # ---- change listeners ----------------------------------------------------------------------

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener(kind, subject, where)`` after every mutation (see ``NODE_UPSERTED`` and
        friends); :attr:`generation` already has the mutation's value when it is called."""
        self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, kind: str, subject: Any, where: Any) -> None:
        for listener in self._listeners:
            listener(kind, subject, where)

    # ---- reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def node(self, name: str) -> Node | None:
        row = self._rows.get(name)
        return None if row is None else self._nodes[row]

    def node_id(self, name: str) -> int | None:
        return self._id_of.get(name)

    def node_names(self) -> list[str]:
        return list(self._rows)

    def snapshot(self) -> Snapshot:
        """The cluster at the current generation; the same object until something changes."""
        snap = self._snapshot
        if snap is not None and snap.generation == self.generation:
            return snap
        table = self._node_table()
        n = len(self._nodes)
        snap = Snapshot(
            generation=self.generation,
            table=table,
            resources=tuple(self._resources),
            columns=dict(self._columns),
            allocatable=self._alloc[:n],
            requested=self._req[:n],
            non_zero_requested=self._nz[:n],
            pods=self._pods[:],
            row_versions=self._ver[:n],
            volumes=self.volumes,
        )
        self._shared_usage = self._shared_alloc = True
        self._snapshot = snap
        return snap

    # ---- nodes ---------------------------------------------------------------------------------

    def upsert_node(self, node: Node, node_id: int | None = None) -> int:
        """Add or replace a node (keeping its pods); returns its stable id."""
        self._unshare(alloc=True)
        self._add_columns(node.allocatable)
        row = self._rows.get(node.name)
        if row is None:
            row = len(self._nodes)
            self._grow(row + 1)
            self._rows[node.name] = row
            self._nodes.append(node)
            self._pods.append(())
            nid = node_id if node_id is not None else self._next_id
            self._next_id = max(self._next_id, nid + 1)
            self._ids.append(nid)
            self._id_of[node.name] = nid
            self._req[row] = 0
            self._nz[row] = 0
        else:
            self._nodes[row] = node
            if node_id is not None and node_id != self._ids[row]:
                self._ids[row] = node_id
                self._id_of[node.name] = node_id
        self._alloc[row] = 0
        for res, amount in node.allocatable.items():
            self._alloc[row, self._columns[res]] = amount
        self._bump(row)
        self._touch_nodes()
        if self._listeners:
            self._notify(NODE_UPSERTED, node, self._ids[row])
        return self._ids[row]

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it (they are no longer placed)."""
        row = self._rows.pop(name, None)
        if row is None:
            return []
        self._unshare(alloc=True)
        orphans = list(self._pods[row])
        for pod in orphans:
            self._placement.pop(pod.uid, None)
        last = len(self._nodes) - 1
        if row != last:
            moved = self._nodes[last]
            self._nodes[row] = moved
            self._pods[row] = self._pods[last]
            self._ids[row] = self._ids[last]
            self._alloc[row] = self._alloc[last]
            self._req[row] = self._req[last]
            self._nz[row] = self._nz[last]
            self._bump(row)
            self._rows[moved.name] = row
            for pod in self._pods[row]:
                self._placement[pod.uid] = row
        self._nodes.pop()
        self._pods.pop()
        self._ids.pop()
        nid = self._id_of.pop(name, 0)
        self._touch_nodes()
        if self._listeners:
            self._notify(NODE_REMOVED, name, nid)
        return orphans

    # ---- pods ----------------------------------------------------------------------------------

    def place_pod(self, pod: Pod, node_name: str) -> bool:
        """Count ``pod`` on ``node_name``. False if the node is unknown or the pod already placed."""
        row = self._rows.get(node_name)
        if row is None or pod.uid in self._placement:
            return False
        self._unshare()
        self._add_columns(pod.requests)
        self._apply(row, pod, +1)
        self._bump(row)
        self._pods[row] = self._pods[row] + (pod,)
        self._placement[pod.uid] = row
        self.generation += 1
        if self._listeners:
            self._notify(POD_PLACED, pod, node_name)
        return True

    def unplace_pod(self, uid: str) -> Pod | None:
        """Stop counting the pod with ``uid``; returns it, or None if it was not placed."""
        row = self._placement.pop(uid, None)
        if row is None:
            return None
        self._unshare()
        pods = self._pods[row]
        pod = next(p for p in pods if p.uid == uid)
        self._pods[row] = tuple(p for p in pods if p.uid != uid)
        self._apply(row, pod, -1)
        self._bump(row)
        self.generation += 1
        if self._listeners:
            self._notify(POD_UNPLACED, uid, self._nodes[row].name)
        return pod

    # ---- internals -----------------------------------------------------------------------------

    def _apply(self, row: int, pod: Pod, sign: int) -> None:
        req = self._req
        cols = self._columns
        for res, amount in pod.requests.items():
            if res != PODS:
                req[row, cols[res]] += sign * amount
        req[row, cols[PODS]] += sign
        cpu, mem = non_zero_requests(pod)
        self._nz[row, 0] += sign * cpu
        self._nz[row, 1] += sign * mem

    def _bump(self, row: int) -> None:
        self._ver_seq += 1
        self._ver[row] = self._ver_seq

    def _unshare(self, alloc: bool = False) -> None:
        # The pods list is copied by snapshot(); the tuples inside are immutable.
        if self._shared_usage:
            self._req = self._req.copy()
            self._nz = self._nz.copy()
            self._ver = self._ver.copy()
            self._shared_usage = False
        if alloc and self._shared_alloc:
            self._alloc = self._alloc.copy()
            self._shared_alloc = False

    def _grow(self, n: int) -> None:
        if n <= self._cap:
            return
        cap = max(16, self._cap * 2, n)
        width = len(self._resources)
        for name in ("_alloc", "_req"):
            old = getattr(self, name)
            new = np.zeros((cap, width), dtype=np.int64)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        nz = np.zeros((cap, 2), dtype=np.int64)
        nz[: self._nz.shape[0]] = self._nz
        self._nz = nz
        ver = np.zeros(cap, dtype=np.int64)
        ver[: self._ver.shape[0]] = self._ver
        self._ver = ver
        self._cap = cap

    def _add_columns(self, resources: Iterable[str]) -> None:
        new = [r for r in resources if r not in self._columns]
        if not new:
            return
        for r in new:
            self._columns[r] = len(self._resources)
            self._resources.append(r)
        pad = ((0, 0), (0, len(new)))
        self._alloc = np.pad(self._alloc, pad)
        self._req = np.pad(self._req, pad)
        self._shared_alloc = False  # both are new arrays; callers unshared the others already
        self._touch_nodes()

    def _touch_nodes(self) -> None:
        self.generation += 1
        self._node_generation = self.generation
        self._table = None

    def _node_table(self) -> NodeTable:
        if self._table is not None:
            return self._table
        nodes = tuple(self._nodes)
        names = tuple(n.name for n in nodes)
        self._table = NodeTable(
            generation=self._node_generation,
            nodes=nodes,
            names=names,
            index={name: i for i, name in enumerate(names)},
            ids=np.asarray(self._ids, dtype=np.uint32),
            order=_zone_order(nodes),
            unschedulable=np.fromiter((n.unschedulable for n in nodes), dtype=np.bool_, count=len(nodes)),
        )
        return self._table


def _zone_order(nodes: Sequence[Node]) -> npt.NDArray[np.int64]:
    """Rows in kube-scheduler's node-tree order: one node from each zone in turn."""
    zones: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        zones.setdefault(zone_key(node), []).append(i)
    if len(zones) <= 1:
        return np.arange(len(nodes), dtype=np.int64)
    out: list[int] = []
    lists = list(zones.values())
    depth = max(len(rows) for rows in lists)
    for k in range(depth):
        for rows in lists:
            if k < len(rows):
                out.append(rows[k])
    return np.asarray(out, dtype=np.int64)


# ---- storage objects (the volume plugins' listers) --------------------------------------------

StorageObject = PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode
#: A change to the storage objects, as ``listener(kind, old, new)``: ``kind`` is the object's kind
#: (``PersistentVolumeClaim``, ...), ``old`` None for an addition, ``new`` None for a deletion.
StorageListener = Callable[[str, Any, Any], None]


class VolumeStoreError(OutriggerError, RuntimeError):
    """An assume or write that contradicts the store (an object changed or went away meanwhile)."""


class VolumeWriter(Protocol):
    """Where the volume binder's writes go (PreBind): the embedded store itself, or a cluster's API
    server. Each write needs the object's current ``resource_version`` and returns the object as
    stored (with its new one); a conflict (the object changed meanwhile, or is gone) raises
    :class:`VolumeStoreError`, anything else a source's own error."""

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Store ``pv``'s ``claim_ref`` and annotations (a PUT of the volume)."""
        ...

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Store ``pvc``'s ``volume_name`` and annotations (a PUT of the claim)."""
        ...

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        """Set the volume's ``status.phase``."""
        ...

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        """Set the claim's status as bound to ``pv``: phase ``Bound``, the volume's access modes and capacity."""
        ...


# Annotations of a binding, kept when a claim or volume is applied again without them.
_BINDING_ANNOTATIONS = frozenset({ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ANN_PROVISIONED_BY})


def storage_kind(obj: StorageObject) -> str:
    return type(obj).__name__


class VolumeStore:
    """The PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes of the cluster, as
    kube-scheduler's volume plugins read them through their listers, with the volume binder's assume
    cache on top: a PV or PVC changed by a scheduling cycle's Reserve (:meth:`assume_volume`,
    :meth:`assume_claim`) reads as changed until the API's own newer version arrives (:meth:`upsert`)
    or the change is rolled back (:meth:`restore_volume`, :meth:`restore_claim`).

    Unlike the node columns, the store is live (as listers are): every snapshot of a table shares its
    table's store. ``writer`` takes PreBind's writes; the embedded default applies them here (it
    is the API server, and it plays the PV controller's part of a binding, see
    :class:`MemoryVolumeWriter`); a live cluster's source replaces it.
    """

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        self._by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._assumed_volumes: dict[str, PersistentVolume] = {}
        self._assumed_claims: dict[str, PersistentVolumeClaim] = {}
        self._listeners: list[StorageListener] = []
        # Versions above any a manifest is likely to carry, increasing with every change made here.
        self._versions = itertools.count(1_000_000_001)
        self.writer: VolumeWriter = MemoryVolumeWriter(self)

    def __len__(self) -> int:
        return len(self.claims) + len(self.volumes) + len(self.classes) + len(self.csinodes)

    def add_listener(self, listener: StorageListener) -> None:
        """Call ``listener(kind, old, new)`` after every change :meth:`upsert` and :meth:`remove` make."""
        self._listeners.append(listener)

    # ---- reading (assumed objects first, as the binder's assume cache) --------------------------

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        key = f"{namespace}/{name}"
        api = self.claims.get(key)
        if api is None:
            return None
        assumed = self._assumed_claims.get(key)
        return assumed if assumed is not None and assumed.resource_version == api.resource_version else api

    def volume(self, name: str) -> PersistentVolume | None:
        api = self.volumes.get(name)
        if api is None:
            return None
        assumed = self._assumed_volumes.get(name)
        return assumed if assumed is not None and assumed.resource_version == api.resource_version else api

    def volumes_of_class(self, class_name: str) -> list[PersistentVolume]:
        """The PVs of a storage class (by the API's class; assumed versions in place), by name."""
        out = []
        for name in sorted(self._by_class.get(class_name, ())):
            pv = self.volume(name)
            if pv is not None:
                out.append(pv)
        return out

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def csinode(self, name: str) -> CSINode | None:
        return self.csinodes.get(name)

    # ---- changes from the cluster (a source's informers, or the embedded store) ---------------

    def upsert(self, obj: StorageObject) -> StorageObject | None:
        """Add or replace an object as the cluster now has it; returns the one it replaced. An assumed
        version of it that the new one supersedes (another resourceVersion) is dropped."""
        old: StorageObject | None
        if isinstance(obj, PersistentVolumeClaim):
            old = self.claims.get(obj.key)
            self.claims[obj.key] = obj
            self._expire(self._assumed_claims, obj.key, obj.resource_version)
        elif isinstance(obj, PersistentVolume):
            old = self.volumes.get(obj.name)
            if old is not None:
                self._by_class.get(old.storage_class, {}).pop(old.name, None)
            self.volumes[obj.name] = obj
            self._by_class.setdefault(obj.storage_class, {})[obj.name] = obj
            self._expire(self._assumed_volumes, obj.name, obj.resource_version)
        elif isinstance(obj, StorageClass):
            old = self.classes.get(obj.name)
            self.classes[obj.name] = obj
        else:
            old = self.csinodes.get(obj.name)
            self.csinodes[obj.name] = obj
        self._notify(storage_kind(obj), old, obj)
        return old

    def apply(self, obj: StorageObject, *, dry_run: bool = False) -> str:
        """An object applied to the embedded store (where this store is the API server): ``created``,
        ``configured`` or ``unchanged`` (the same manifest again). As ``kubectl apply`` leaves what the
        server set: a re-applied claim keeps the volume it was bound to (with its annotations and phase),
        a volume its ``claimRef``; the uid stays the first one; every change gets a new resourceVersion."""
        kind = storage_kind(obj)
        key = obj.key
        stores: dict[str, dict[str, Any]] = {"PersistentVolumeClaim": self.claims, "PersistentVolume": self.volumes,
                                             "StorageClass": self.classes, "CSINode": self.csinodes}
        old = stores[kind].get(key)
        if old is not None:
            if obj.raw and obj.raw == old.raw:
                return "unchanged"
            obj.uid = old.uid
            if isinstance(obj, PersistentVolumeClaim) and not obj.volume_name and old.volume_name:
                keep = {k: v for k, v in old.annotations.items() if k in _BINDING_ANNOTATIONS}
                obj.volume_name, obj.phase = old.volume_name, old.phase
                obj.annotations = {**keep, **obj.annotations}
            elif isinstance(obj, PersistentVolume) and obj.claim_ref is None and old.claim_ref is not None:
                keep = {k: v for k, v in old.annotations.items() if k in _BINDING_ANNOTATIONS}
                obj.claim_ref, obj.phase = old.claim_ref, old.phase
                obj.annotations = {**keep, **obj.annotations}
        if not dry_run:
            obj.resource_version = self.next_version()
            self.upsert(obj)
        return "created" if old is None else "configured"

    def next_version(self) -> str:
        """A resourceVersion for a change made here (the embedded store's own, always increasing)."""
        return str(next(self._versions))

    def remove(self, kind: str, key: str) -> StorageObject | None:
        """Forget the object of ``kind`` (``PersistentVolume``, ...) named ``key`` (``namespace/name``
        for a claim); returns it (None if it was not there)."""
        old: StorageObject | None
        if kind == "PersistentVolumeClaim":
            old = self.claims.pop(key, None)
            self._assumed_claims.pop(key, None)
        elif kind == "PersistentVolume":
            old = self.volumes.pop(key, None)
            if old is not None:
                self._by_class.get(old.storage_class, {}).pop(key, None)
            self._assumed_volumes.pop(key, None)
        elif kind == "StorageClass":
            old = self.classes.pop(key, None)
        elif kind == "CSINode":
            old = self.csinodes.pop(key, None)
        else:
            raise ValueError(f"not a storage kind: {kind!r}")
        if old is not None:
            self._notify(kind, old, None)
        return old

    def _notify(self, kind: str, old: Any, new: Any) -> None:
        for listener in self._listeners:
            listener(kind, old, new)

    @staticmethod
    def _expire(assumed: dict[str, Any], key: str, version: str) -> None:
        held = assumed.get(key)
        if held is not None and held.resource_version != version:
            del assumed[key]

    # ---- the assume cache ----------------------------------------------------------------------

    def assume_volume(self, pv: PersistentVolume) -> None:
        """Read ``pv`` in place of the API's version until that changes (it must be the API's current
        version, changed in memory only)."""
        self._assume(self.volumes, self._assumed_volumes, pv.name, pv, "persistentvolumes")

    def assume_claim(self, pvc: PersistentVolumeClaim) -> None:
        self._assume(self.claims, self._assumed_claims, pvc.key, pvc, "persistentvolumeclaims")

    @staticmethod
    def _assume(api: dict[str, Any], assumed: dict[str, Any], key: str, obj: Any, resource: str) -> None:
        stored = api.get(key)
        if stored is None:
            raise VolumeStoreError(f'{resource} "{key}" not found')
        if stored.resource_version != obj.resource_version:
            raise VolumeStoreError(
                f'"{key}" is out of sync (stored: {stored.resource_version}, assume: {obj.resource_version})'
            )
        assumed[key] = obj

    def restore_volume(self, pv: PersistentVolume) -> None:
        """Drop the assumed version of ``pv`` (if it is still the one assumed)."""
        held = self._assumed_volumes.get(pv.name)
        if held is not None and held.resource_version == pv.resource_version:
            del self._assumed_volumes[pv.name]

    def restore_claim(self, pvc: PersistentVolumeClaim) -> None:
        held = self._assumed_claims.get(pvc.key)
        if held is not None and held.resource_version == pvc.resource_version:
            del self._assumed_claims[pvc.key]

    def assumed(self) -> list[str]:
        """What is assumed now (``PersistentVolume/<name>``, ``PersistentVolumeClaim/<ns>/<name>``):
        empty once every binding finished or was rolled back."""
        return [*(f"PersistentVolume/{k}" for k in self._assumed_volumes),
                *(f"PersistentVolumeClaim/{k}" for k in self._assumed_claims)]


class MemoryVolumeWriter:
    """PreBind's writes applied to the store itself (the embedded cluster, where the scheduler's store
    is the API server): each write needs the stored ``resource_version`` (else a conflict, as the API
    server's optimistic concurrency) and stores the object with the next one.

    With ``provision`` (the default) it also plays a dynamic provisioner and the PV controller: a
    claim given a node (``volume.kubernetes.io/selected-node``) whose class names a provisioner gets a
    new volume of its size, class and access modes (``pvc-<claim uid>``, without node affinity), and
    both are bound at once."""

    def __init__(self, store: VolumeStore, *, provision: bool = True) -> None:
        self.store = store
        self.provision = provision

    def _next(self) -> str:
        return self.store.next_version()

    def _check(self, kind: str, key: str, stored: Any, obj: Any) -> None:
        resource = "persistentvolumeclaims" if kind == "PersistentVolumeClaim" else "persistentvolumes"
        if stored is None:
            raise VolumeStoreError(f'{resource} "{key}" not found')
        if stored.resource_version != obj.resource_version:
            raise VolumeStoreError(
                f'Operation cannot be fulfilled on {resource} "{key}": the object has been modified; please apply '
                "your changes to the latest version and try again"
            )

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        self._check("PersistentVolume", pv.name, self.store.volumes.get(pv.name), pv)
        new = replace(pv, resource_version=self._next())
        self.store.upsert(new)
        return new

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        self._check("PersistentVolumeClaim", pvc.key, self.store.claims.get(pvc.key), pvc)
        new = replace(pvc, resource_version=self._next())
        self.store.upsert(new)
        if self.provision and ANN_SELECTED_NODE in new.annotations and not new.volume_name:
            self._provision(new)
        return new

    def _provision(self, pvc: PersistentVolumeClaim) -> None:
        cls = self.store.storage_class(pvc.storage_class) if pvc.storage_class else None
        if cls is None or not cls.provisioner or cls.provisioner == NO_PROVISIONER:
            return
        pv = PersistentVolume(
            name=f"pvc-{pvc.uid}",
            uid=str(uuid.uuid4()),
            resource_version=self._next(),
            annotations={ANN_PROVISIONED_BY: cls.provisioner, ANN_BOUND_BY_CONTROLLER: "yes"},
            storage=pvc.storage or 0,
            access_modes=pvc.access_modes,
            storage_class_name=cls.name,
            claim_ref=ClaimRef(pvc.namespace, pvc.name, pvc.uid),
            volume_mode=pvc.volume_mode,
            phase="Bound",
        )
        self.store.upsert(pv)
        annotations = {**pvc.annotations, ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
        self.store.upsert(replace(pvc, volume_name=pv.name, annotations=annotations, phase="Bound",
                                  resource_version=self._next()))

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        return await self.update_volume(replace(pv, phase=phase))

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        return await self.update_claim(replace(pvc, phase="Bound"))
