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
from pluginhost.model import CPU, MEMORY, PODS, Node, Pod
from pluginhost.snapshot import NodeTable, Snapshot, non_zero_requests, zone_order

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
    resources = list(snapshot.resources)
    columns = dict(snapshot.columns)

    def col(resource: str) -> int:
        c = columns.get(resource)
        if c is None:
            c = columns[resource] = len(resources)
            resources.append(resource)
        return c

    for _, node in view.added_nodes:
        for r in node.allocatable:
            col(r)
    for pod in view.added_pods:
        for r in pod.requests:
            col(r)
    for ch in view.changes:
        for r in (*ch.allocatable, *ch.requested):
            col(r)
    n_old = len(snapshot)
    n_new = n_old + len(view.added_nodes)
    width = len(resources)

    def widened(arr: Any, cols: int) -> Any:
        out = np.zeros((n_new, cols), dtype=np.int64)
        out[:n_old, : arr.shape[1]] = arr
        return out

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
    alloc_changes = any(ch.allocatable for ch in view.changes)
    label_changes = any(ch.labels or ch.remove_labels for ch in view.changes)
    req_changes = bool(view.added_pods or view.removed_pods) or any(ch.requested for ch in view.changes)
    new_table = bool(view.added_nodes) or alloc_changes or label_changes
    grown = n_new != n_old or width != snapshot.allocatable.shape[1]

    allocatable = widened(snapshot.allocatable, width) if grown or alloc_changes else snapshot.allocatable
    requested = widened(snapshot.requested, width) if grown or req_changes else snapshot.requested
    non_zero = widened(snapshot.non_zero_requested, 2) if grown or req_changes else snapshot.non_zero_requested
    pods: Sequence[tuple[Pod, ...]] = snapshot.pods
    if view.added_nodes or view.added_pods or view.removed_pods:
        pods = list(snapshot.pods) + [()] * len(view.added_nodes)
    versions = np.concatenate((snapshot.row_versions, np.zeros(n_new - n_old, dtype=np.int64)))
    pods_col = columns[PODS]
    for uid, node_name in view.removed_pods:
        row_or_none = index.get(node_name)
        if row_or_none is None:
            raise _unknown(node_name, snapshot)
        row = row_or_none
        assert isinstance(pods, list)
        gone = next((p for p in pods[row] if p.uid == uid), None)
        if gone is None:
            raise ViewError(f"the view removes pod {uid!r} from node {node_name!r}, which does not hold it")
        pods[row] = tuple(p for p in pods[row] if p.uid != uid)
        for r, amount in gone.requests.items():
            if r != PODS and r in columns:
                requested[row, columns[r]] -= amount
        requested[row, pods_col] -= 1
        cpu, mem = non_zero_requests(gone)
        non_zero[row, 0] -= cpu
        non_zero[row, 1] -= mem
        versions[row] = next_view_version()
    for row in range(n_old, n_new):
        _, node = view.added_nodes[row - n_old]
        for r, amount in node.allocatable.items():
            allocatable[row, columns[r]] = amount
        versions[row] = next_view_version()
    for pod in view.added_pods:
        row_or_none = index.get(pod.node_name)
        if row_or_none is None:
            raise _unknown(pod.node_name, snapshot)
        row = row_or_none
        for r, amount in pod.requests.items():
            if r != PODS:
                requested[row, columns[r]] += amount
        requested[row, pods_col] += 1
        cpu, mem = non_zero_requests(pod)
        non_zero[row, 0] += cpu
        non_zero[row, 1] += mem
        assert isinstance(pods, list)
        pods[row] = (*pods[row], pod)
        versions[row] = next_view_version()
    for ch in view.changes:
        row_or_none = index.get(ch.node)
        if row_or_none is None:
            raise _unknown(ch.node, snapshot)
        row = row_or_none
        for r, amount in ch.allocatable.items():
            allocatable[row, columns[r]] += amount
        for r, amount in ch.requested.items():
            requested[row, columns[r]] += amount
            if r == CPU:
                non_zero[row, 0] += amount
            elif r == MEMORY:
                non_zero[row, 1] += amount
        if ch.allocatable or ch.labels or ch.remove_labels:
            node = nodes[row]
            labels = {k: v for k, v in node.labels.items() if k not in ch.remove_labels}
            labels.update(ch.labels)
            alloc = dict(node.allocatable)
            for r, amount in ch.allocatable.items():
                alloc[r] = alloc.get(r, 0) + amount
            nodes[row] = dataclasses.replace(node, labels=labels, allocatable=alloc)
        versions[row] = next_view_version()
    if new_table:
        names = tuple(n.name for n in nodes)
        table = NodeTable(
            generation=table.generation,
            nodes=tuple(nodes),
            names=names,
            index=index,
            ids=ids,
            order=zone_order(nodes),
            unschedulable=np.fromiter((n.unschedulable for n in nodes), dtype=np.bool_, count=len(nodes)),
        )
    return Snapshot(
        generation=snapshot.generation,
        table=table,
        resources=tuple(resources),
        columns=columns,
        allocatable=allocatable,
        requested=requested,
        non_zero_requested=non_zero,
        pods=pods,
        row_versions=versions,
        volumes=snapshot.volumes,
    )


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
