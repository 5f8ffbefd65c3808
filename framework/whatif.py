"""What-if snapshots: the cluster as it would be with a different set of pods on one node, or with
more nodes.

Preemption asks "would the pod fit here without these victims?" and the nominator asks "does it
still fit once the pods nominated here arrive?". Both run the real Filter plugins on a copy of the
snapshot whose one node row holds other pods; the cache is never touched. An autoscaler asks "which
pending pods would fit if I added these nodes?": :func:`hypothetical_nodes` describes the nodes as a
:class:`~pluginhost.view.NodeView`, which a cycle applies to its snapshot and sends to remote plugins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pluginhost.model import Node, Pod
from pluginhost.snapshot import Snapshot
from pluginhost.view import NodeView, ViewError, apply_view

__all__ = ["HOSTNAME_LABEL", "hypothetical_nodes", "node_pods_view", "with_node_pods"]

HOSTNAME_LABEL = "kubernetes.io/hostname"


def with_node_pods(snapshot: Snapshot, row: int, pods: Sequence[Pod]) -> Snapshot:
    """``snapshot`` with node ``row`` holding exactly ``pods``: :func:`node_pods_view` applied by
    :func:`~pluginhost.view.apply_view`, the one what-if path, so in-process plugins read the same
    snapshot a remote plugin host builds from the view."""
    return apply_view(snapshot, node_pods_view(snapshot, row, pods))


def node_pods_view(snapshot: Snapshot, row: int, pods: Sequence[Pod]) -> NodeView:
    """:func:`with_node_pods` as a view, for remote plugins: the row's pods that are not in ``pods``
    removed, the pods of ``pods`` the row does not hold added (on that node)."""
    node = snapshot.table.names[row]
    now = {p.uid for p in snapshot.pods[row]}
    keep = {p.uid for p in pods}
    removed = tuple((p.uid, node) for p in snapshot.pods[row] if p.uid not in keep)
    added = tuple(p if p.node_name == node else dataclasses.replace(p, node_name=node)
                  for p in pods if p.uid not in now)
    return NodeView(added_pods=added, removed_pods=removed)


def hypothetical_nodes(snapshot: Snapshot, template: Node, count: int) -> NodeView:
    """``count`` nodes shaped like ``template`` (named ``<name>-1`` ... ``<name>-N``, with ids above every
    real node's) as a view of ``snapshot``: the Cluster Autoscaler's "what if I added these nodes"."""
    if count < 1:
        raise ViewError(f"a what-if needs at least one node, got count {count}")
    first = int(snapshot.table.ids.max()) + 1 if len(snapshot) else 1
    added = []
    for i in range(1, count + 1):
        name = f"{template.name}-{i}"
        if snapshot.row(name) is not None:
            raise ViewError(f"what-if node {name!r} has the name of a node in the cluster; rename the template")
        labels = dict(template.labels)
        if HOSTNAME_LABEL in labels:
            labels[HOSTNAME_LABEL] = name
        node = dataclasses.replace(template, name=name, uid=f"what-if-{name}", labels=labels,
                                   allocatable=dict(template.allocatable), raw={})
        added.append((first + i - 1, node))
    return NodeView(added_nodes=tuple(added))
