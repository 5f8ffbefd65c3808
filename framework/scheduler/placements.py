"""A placement's nodes as a snapshot of their own (kube-scheduler 1.37's ``AssumePlacement``): in a
topology-aware PodGroup cycle, each candidate placement is tried on a snapshot that holds only its
nodes, so Filter walks them alone and a fit error counts them (``0/2 nodes are available``, as
``NumNodesInPlacement`` does)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pluginhost.snapshot import NodeTable, Snapshot, zone_order
from pluginhost.view import next_view_version

__all__ = ["placement_snapshot"]


def placement_snapshot(snapshot: Snapshot, names: Sequence[str]) -> Snapshot:
    """``snapshot`` narrowed to the nodes ``names`` (in the snapshot's row order; unknown names are
    left out). Node ids and the generation stay the base's (remote plugins resolve ids against it);
    every row gets a fresh version, so per-row caches do not take its rows for the base's."""
    keep = sorted({row for name in names if (row := snapshot.row(name)) is not None})
    if len(keep) == len(snapshot):
        return snapshot
    rows = np.asarray(keep, dtype=np.int64)
    base = snapshot.table
    nodes = tuple(base.nodes[r] for r in keep)
    table = NodeTable(
        generation=base.generation,
        nodes=nodes,
        names=tuple(n.name for n in nodes),
        index={n.name: i for i, n in enumerate(nodes)},
        ids=base.ids[rows],
        order=zone_order(nodes),
        unschedulable=base.unschedulable[rows],
    )
    return Snapshot(
        generation=snapshot.generation,
        table=table,
        resources=snapshot.resources,
        columns=snapshot.columns,
        allocatable=snapshot.allocatable[rows],
        requested=snapshot.requested[rows],
        non_zero_requested=snapshot.non_zero_requested[rows],
        pods=[snapshot.pods[r] for r in keep],
        row_versions=np.asarray([next_view_version() for _ in keep], dtype=np.int64),
        volumes=snapshot.volumes,
        dra=snapshot.dra,
    )
