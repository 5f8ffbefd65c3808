"""Cycle-scoped views: the pod and the cluster as one phase of one scheduling cycle sees them.

Transformers (:class:`~pluginhost.plugin.PreFilterTransformer` and friends) do not rewrite objects:
they return *changes*. A :class:`PodChange` edits the pod the rest of the cycle sees; a
:class:`NodeChange` edits one node row (allocatable and requested deltas, labels) for one phase. A
:class:`NodeView` collects the changes of a phase, in transformer order, plus hypothetical nodes and
pods (what-if questions), and :func:`apply_view` turns a snapshot and a view into another
:class:`~pluginhost.snapshot.Snapshot` that vectorized plugins read like any other.

The view snapshot shares every array the view does not touch, keeps the base snapshot's generation
(remote plugins resolve node ids against it and apply the same view, which travels as
``CycleContext.node_view``), gives changed rows fresh negative row versions (so per-row caches redo
them), and is never stored anywhere but the cycle: the cache and the next cycle see nothing of it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pluginhost import pb
from pluginhost.errors import OutriggerError
from pluginhost.model import CPU, MEMORY, Node, Pod
from pluginhost.snapshot import NodeTable, Snapshot, count_pod, zone_order

__all__ = [
    "VIEW_STATE_KEY",
    "NodeChange",
    "NodeView",
    "PodChange",
    "ViewError",
    "apply_pod_change",
    "apply_view",
    "changes_of",
    "next_view_version",
    "next_view_versions",
    "node_change_from_proto",
    "node_change_to_proto",
    "pod_change_from_proto",
    "pod_change_to_proto",
    "view_from_proto",
    "view_to_proto",
]

# CycleState key under which the runtime keeps the NodeView of the phase being run; remote adapters
# send it with their requests so a plugin host sees the same view.
VIEW_STATE_KEY = "outrigger.io/node-view"

# View rows get versions no real row has (tables count up from 1), each one new.
_VERSIONS = itertools.count(-1, -1)


def next_view_version() -> int:
    """A row version no table ever uses (negative, never repeated in this process)."""
    return next(_VERSIONS)


def next_view_versions(n: int) -> Any:
    """``n`` row versions as :func:`next_view_version` gives them, in an int64 array (taken in one step)."""
    return np.fromiter(itertools.islice(_VERSIONS, n), dtype=np.int64, count=n)


class ViewError(OutriggerError, ValueError):
    """A view that cannot be applied (it names a node the snapshot does not have, ...)."""


@dataclass(frozen=True, slots=True)
class NodeChange:
    """How one node looks different in a phase: ``allocatable`` and ``requested`` are *added* to the
    node's amounts (negative ``requested`` makes resources look free; ``"pods"`` counts pods),
    ``labels`` are set and ``remove_labels`` removed."""

    node: str
    allocatable: Mapping[str, int] = field(default_factory=dict)
    requested: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodChange:
    """How the pod looks different for the rest of a scheduling cycle: labels, annotations and
    nodeSelector entries set or removed; ``requests`` replaces the pod's effective request of each
    named resource (canonical units)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    remove_labels: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    remove_annotations: tuple[str, ...] = ()
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeView:
    """A snapshot's differences for one phase: nodes added, pods placed, then node changes in order."""

    added_nodes: tuple[tuple[int, Node], ...] = ()
    added_pods: tuple[Pod, ...] = ()  # each on the node its node_name names
    changes: tuple[NodeChange, ...] = ()
    removed_pods: tuple[tuple[str, str], ...] = ()  # (uid, node name), applied first

    def __bool__(self) -> bool:
        return bool(self.added_nodes or self.added_pods or self.changes or self.removed_pods)

    def then(self, other: NodeView | Sequence[NodeChange] | None) -> NodeView:
        """This view followed by ``other`` (a view or more node changes)."""
        if not other:
            return self
        if not isinstance(other, NodeView):
            return dataclasses.replace(self, changes=self.changes + tuple(other))
        return NodeView(
            self.added_nodes + other.added_nodes, self.added_pods + other.added_pods, self.changes + other.changes,
            self.removed_pods + other.removed_pods,
        )


def apply_pod_change(pod: Pod, change: PodChange | None) -> Pod:
    """A copy of ``pod`` with ``change`` applied (``pod`` itself is untouched)."""
    if change is None:
        return pod
    labels = {k: v for k, v in pod.labels.items() if k not in change.remove_labels}
    labels.update(change.labels)
    annotations = {k: v for k, v in pod.annotations.items() if k not in change.remove_annotations}
    annotations.update(change.annotations)
    requests = dict(pod.requests)
    for resource, amount in change.requests.items():
        if amount < 0:
            raise ViewError(f"pod change sets a negative request for {resource!r}: {amount}")
        requests[resource] = int(amount)
    selector = {**pod.node_selector, **change.node_selector}
    return dataclasses.replace(
        pod, labels=labels, annotations=annotations, requests=requests, node_selector=selector
    )


def _unknown(node: str, snapshot: Snapshot) -> ViewError:
    return ViewError(f"the view names node {node!r}, which is not in the snapshot of generation {snapshot.generation}")


def apply_view(snapshot: Snapshot, view: NodeView | None) -> Snapshot:
    """``snapshot`` as ``view`` shows it (``snapshot`` itself when the view is empty).

    Only the columns the view touches are copied: node changes with only ``requested`` deltas keep the
    node table (labels, taints, per-table memos) and ``allocatable``; labels, allocatable or added
    nodes build a new node table.
    """
    if not view:
        return snapshot
    resources, columns = _resource_columns(snapshot, view)
    rows = _ViewRows.start(snapshot, view, resources, columns)
    # Removed pods first (as NodeView says), so a pod the view moves leaves its old node before it
    # lands on its new one.
    rows.remove_pods(view.removed_pods)
    rows.fill_added_nodes(view.added_nodes)
    rows.place_pods(view.added_pods)
    rows.change_nodes(view.changes)
    table = snapshot.table
    if view.added_nodes or any(ch.allocatable or ch.labels or ch.remove_labels for ch in view.changes):
        table = _node_table(table.generation, rows.nodes, rows.index, rows.ids)
    return Snapshot(
        generation=snapshot.generation,
        table=table,
        resources=tuple(resources),
        columns=columns,
        allocatable=rows.allocatable,
        requested=rows.requested,
        non_zero_requested=rows.non_zero,
        pods=rows.pods,
        row_versions=rows.versions,
        volumes=snapshot.volumes,
        dra=snapshot.dra,
        devices=snapshot.devices,
    )


def _resource_columns(snapshot: Snapshot, view: NodeView) -> tuple[list[str], dict[str, int]]:
    """The snapshot's resources and their columns, plus a new column for each resource only the view
    names (an added node's allocatable, an added pod's requests, a change's deltas)."""
    resources = list(snapshot.resources)
    columns = dict(snapshot.columns)
    named = (
        *(r for _, node in view.added_nodes for r in node.allocatable),
        *(r for pod in view.added_pods for r in pod.requests),
        *(r for ch in view.changes for r in (*ch.allocatable, *ch.requested)),
    )
    for resource in named:
        if resource not in columns:
            columns[resource] = len(resources)
            resources.append(resource)
    return resources, columns


def _widened(arr: Any, n_old: int, n_new: int, cols: int) -> Any:
    """A copy of the ``n_old`` rows of ``arr`` in ``n_new`` rows of ``cols`` columns, zeros elsewhere."""
    out = np.zeros((n_new, cols), dtype=np.int64)
    out[:n_old, : arr.shape[1]] = arr
    return out


def _node_table(generation: int, nodes: list[Node], index: dict[str, int], ids: Any) -> NodeTable:
    """The node table of a view whose nodes differ from its base's (added, relabelled, resized)."""
    return NodeTable(
        generation=generation,
        nodes=tuple(nodes),
        names=tuple(n.name for n in nodes),
        index=index,
        ids=ids,
        order=zone_order(nodes),
        unschedulable=np.fromiter((n.unschedulable for n in nodes), dtype=np.bool_, count=len(nodes)),
    )


@dataclass(slots=True)
class _ViewRows:
    """The rows of a view snapshot while :func:`apply_view` builds it: copies of the columns the view
    touches (widened for added nodes and new resources), the base snapshot's own arrays otherwise.
    Every row a step changes gets a fresh view version."""

    snapshot: Snapshot
    columns: dict[str, int]
    index: dict[str, int]
    nodes: list[Node]
    ids: Any
    pods: Sequence[tuple[Pod, ...]]
    allocatable: Any
    requested: Any
    non_zero: Any
    versions: Any

    @classmethod
    def start(cls, snapshot: Snapshot, view: NodeView, resources: list[str], columns: dict[str, int]) -> _ViewRows:
        table = snapshot.table
        index = dict(table.index) if view.added_nodes else table.index
        nodes = list(table.nodes)
        ids = table.ids
        for _, node in view.added_nodes:
            if node.name in index:
                raise ViewError(f"the view adds node {node.name!r}, which is already in the snapshot")
            index[node.name] = len(nodes)
            nodes.append(node)
        if view.added_nodes:
            ids = np.concatenate((table.ids, np.asarray([nid for nid, _ in view.added_nodes], dtype=np.uint32)))
        n_old = len(snapshot)
        n_new = n_old + len(view.added_nodes)
        width = len(resources)
        alloc_changes = any(ch.allocatable for ch in view.changes)
        req_changes = bool(view.added_pods or view.removed_pods) or any(ch.requested for ch in view.changes)
        grown = n_new != n_old or width != snapshot.allocatable.shape[1]
        allocatable = _widened(snapshot.allocatable, n_old, n_new, width) if grown or alloc_changes \
            else snapshot.allocatable
        requested = _widened(snapshot.requested, n_old, n_new, width) if grown or req_changes else snapshot.requested
        non_zero = _widened(snapshot.non_zero_requested, n_old, n_new, 2) if grown or req_changes \
            else snapshot.non_zero_requested
        pods: Sequence[tuple[Pod, ...]] = snapshot.pods
        if view.added_nodes or view.added_pods or view.removed_pods:
            pods = list(snapshot.pods) + [()] * len(view.added_nodes)
        versions = np.concatenate((snapshot.row_versions, np.zeros(n_new - n_old, dtype=np.int64)))
        return cls(snapshot, columns, index, nodes, ids, pods, allocatable, requested, non_zero, versions)

    def row(self, node: str) -> int:
        """The row of node ``node``; :class:`ViewError` when the snapshot (and the view) has none."""
        row = self.index.get(node)
        if row is None:
            raise _unknown(node, self.snapshot)
        return row

    def remove_pods(self, removed: Iterable[tuple[str, str]]) -> None:
        """Take each ``(uid, node name)`` pod off its node, its requests with it."""
        for uid, node_name in removed:
            row = self.row(node_name)
            pods = self.pods
            assert isinstance(pods, list)
            gone = next((p for p in pods[row] if p.uid == uid), None)
            if gone is None:
                raise ViewError(f"the view removes pod {uid!r} from node {node_name!r}, which does not hold it")
            pods[row] = tuple(p for p in pods[row] if p.uid != uid)
            self._count(row, gone, -1)

    def fill_added_nodes(self, added: Sequence[tuple[int, Node]]) -> None:
        """The allocatable of the rows of added nodes (the last ``len(added)`` rows)."""
        n_old = len(self.snapshot)
        for row in range(n_old, n_old + len(added)):
            _, node = added[row - n_old]
            for r, amount in node.allocatable.items():
                self.allocatable[row, self.columns[r]] = amount
            self.versions[row] = next_view_version()

    def place_pods(self, added: Iterable[Pod]) -> None:
        """Put each pod on the node its ``node_name`` names, its requests with it."""
        for pod in added:
            row = self.row(pod.node_name)
            pods = self.pods
            assert isinstance(pods, list)
            pods[row] = (*pods[row], pod)
            self._count(row, pod, 1)

    def _count(self, row: int, pod: Pod, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``pod``'s requests, its non-zero ones and one pod on
        ``row``. Every resource of a pod the view places has a column; one removed may request a
        resource no node offers."""
        count_pod(self.requested, self.non_zero, self.columns, row, pod, sign)
        self.versions[row] = next_view_version()

    def change_nodes(self, changes: Iterable[NodeChange]) -> None:
        """Apply each node change in order: amounts added, labels set and removed."""
        columns = self.columns
        for ch in changes:
            row = self.row(ch.node)
            for r, amount in ch.allocatable.items():
                self.allocatable[row, columns[r]] += amount
            for r, amount in ch.requested.items():
                self.requested[row, columns[r]] += amount
                if r == CPU:
                    self.non_zero[row, 0] += amount
                elif r == MEMORY:
                    self.non_zero[row, 1] += amount
            if ch.allocatable or ch.labels or ch.remove_labels:
                node = self.nodes[row]
                labels = {k: v for k, v in node.labels.items() if k not in ch.remove_labels}
                labels.update(ch.labels)
                alloc = dict(node.allocatable)
                for r, amount in ch.allocatable.items():
                    alloc[r] = alloc.get(r, 0) + amount
                self.nodes[row] = dataclasses.replace(node, labels=labels, allocatable=alloc)
            self.versions[row] = next_view_version()


# ---- wire form ---------------------------------------------------------------------------------


def node_change_to_proto(ch: NodeChange) -> Any:
    return pb.plugin.NodeChange(
        node_name=ch.node,
        allocatable=dict(ch.allocatable),
        requested=dict(ch.requested),
        labels=dict(ch.labels),
        remove_labels=list(ch.remove_labels),
    )


def node_change_from_proto(msg: Any) -> NodeChange:
    return NodeChange(
        node=msg.node_name,
        allocatable=dict(msg.allocatable),
        requested=dict(msg.requested),
        labels=dict(msg.labels),
        remove_labels=tuple(msg.remove_labels),
    )


def pod_change_to_proto(ch: PodChange) -> Any:
    return pb.plugin.PodChange(
        labels=dict(ch.labels),
        remove_labels=list(ch.remove_labels),
        annotations=dict(ch.annotations),
        remove_annotations=list(ch.remove_annotations),
        requests=dict(ch.requests),
        node_selector=dict(ch.node_selector),
    )


def pod_change_from_proto(msg: Any) -> PodChange:
    return PodChange(
        labels=dict(msg.labels),
        remove_labels=tuple(msg.remove_labels),
        annotations=dict(msg.annotations),
        remove_annotations=tuple(msg.remove_annotations),
        requests=dict(msg.requests),
        node_selector=dict(msg.node_selector),
    )


def view_to_proto(view: NodeView) -> Any:
    from pluginhost.convert import node_to_proto, pod_to_proto

    return pb.plugin.NodeView(
        added_nodes=[pb.plugin.AddedNode(id=nid, node=node_to_proto(node)) for nid, node in view.added_nodes],
        added_pods=[pod_to_proto(p) for p in view.added_pods],
        changes=[node_change_to_proto(ch) for ch in view.changes],
        removed_pods=[pb.plugin.RemovedPod(uid=uid, node_name=node) for uid, node in view.removed_pods],
    )


def view_from_proto(msg: Any) -> NodeView:
    from pluginhost.convert import node_from_proto, pod_from_proto

    return NodeView(
        added_nodes=tuple((int(a.id), node_from_proto(a.node)) for a in msg.added_nodes),
        added_pods=tuple(pod_from_proto(p) for p in msg.added_pods),
        changes=tuple(node_change_from_proto(c) for c in msg.changes),
        removed_pods=tuple((r.uid, r.node_name) for r in msg.removed_pods),
    )


def changes_of(value: Iterable[NodeChange] | None) -> tuple[NodeChange, ...]:
    """A transformer's answer as a tuple of changes (None: no change)."""
    if value is None:
        return ()
    out = tuple(value)
    for ch in out:
        if not isinstance(ch, NodeChange):
            raise TypeError(f"a node-view transformer returned {type(ch).__name__}, not a NodeChange")
    return out
