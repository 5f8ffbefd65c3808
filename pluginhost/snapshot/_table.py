"""The columnar node table and its snapshots: the cluster view that Filter and Score plugins read.

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

The storage objects the volume plugins read are not columns: every snapshot refers to its table's
live :class:`~pluginhost.snapshot.VolumeStore` (:attr:`Snapshot.volumes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    Container,
    Node,
    Pod,
)
from pluginhost.snapshot._devices import DeviceStore
from pluginhost.snapshot._volumes import VolumeStore

__all__ = [
    "BASE_RESOURCES",
    "NODE_REMOVED",
    "NODE_UPSERTED",
    "POD_PLACED",
    "POD_UNPLACED",
    "STORAGE_CHANGED",
    "ChangeListener",
    "ClusterTable",
    "NodeTable",
    "Snapshot",
    "count_pod",
    "non_zero_requests",
    "zone_key",
    "zone_order",
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
# subject: the storage object's new state (None: deleted); where: (kind, key) (see note_storage)
STORAGE_CHANGED = "storage-changed"

ChangeListener = Callable[[str, Any, Any], None]


def zone_key(node: Node) -> str:
    """kube-scheduler's zone key (region and zone labels); "" for a node without them."""
    labels = node.labels
    region = next((labels[k] for k in _REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in _ZONE_LABELS if k in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def count_pod(requested: IntArray, non_zero: IntArray, columns: Mapping[str, int], row: int, pod: Pod,
              sign: int = 1) -> None:
    """Add (``sign`` 1) or take away (-1) ``pod`` on ``row``: its requests in ``requested`` (a resource no
    column holds is passed over), one pod, and its CPU and memory as scoring counts them
    (:func:`non_zero_requests`) in ``non_zero``. The one placement arithmetic: the cluster's table, a
    node view and a what-if snapshot all count a pod with it."""
    pods_col = columns[PODS]
    for resource, amount in pod.requests.items():
        col = columns.get(resource)
        if col is not None and col != pods_col:
            requested[row, col] += sign * amount
    requested[row, pods_col] += sign
    cpu, mem = non_zero_requests(pod)
    non_zero[row, 0] += sign * cpu
    non_zero[row, 1] += sign * mem


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
    #: The scheduler's DRA objects (``framework.dra.store.DraStore``, live like :attr:`volumes`); None
    #: in a snapshot made without a scheduler's cache.
    dra: Any = None
    #: The device objects a remote host's mirror follows (live: the table's store; empty unless some
    #: plugin of the host declared ``needs_devices``; in-process plugins read :attr:`dra`).
    devices: DeviceStore = field(default_factory=lambda: DeviceStore())
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
        #: The DRA objects every snapshot refers to: set by the scheduler's cache (a DraStore, which
        #: lives in the framework: the SDK holds it without knowing it).
        self.dra: Any = None
        #: The device objects a host's snapshot mirror follows (see :class:`DeviceStore`).
        self.devices = DeviceStore()

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
            dra=self.dra,
            devices=self.devices,
        )
        self._shared_usage = self._shared_alloc = True
        self._snapshot = snap
        return snap

    def note_storage(self, kind: str, key: str, obj: Any) -> None:
        """Count a change of the storage objects (``obj`` of ``kind`` named ``key``, None when it was
        deleted) as a mutation: the generation advances and listeners hear ``STORAGE_CHANGED``. The
        snapshot publisher calls it while a host follows storage objects, so they reach the host in
        the same order and generations as node and pod changes; nodes and pods are unchanged."""
        self.generation += 1
        if self._listeners:
            self._notify(STORAGE_CHANGED, obj, (kind, key))

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
        count_pod(self._req, self._nz, self._columns, row, pod, sign)

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
            order=zone_order(nodes),
            unschedulable=np.fromiter((n.unschedulable for n in nodes), dtype=np.bool_, count=len(nodes)),
        )
        return self._table


def zone_order(nodes: Sequence[Node]) -> npt.NDArray[np.int64]:
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
