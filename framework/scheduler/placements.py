"""A placement's nodes as a snapshot of their own (kube-scheduler 1.37's ``AssumePlacement``): in a
topology-aware PodGroup cycle, each candidate placement is tried on a snapshot that holds only its
nodes, so Filter walks them alone and a fit error counts them (``0/2 nodes are available``, as
``NumNodesInPlacement`` does)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pluginhost.snapshot import NodeTable, Snapshot, zone_order
from pluginhost.view import next_view_versions

__all__ = ["placement_snapshot"]


def placement_snapshot(snapshot: Snapshot, names: Sequence[str]) -> Snapshot:
    """``snapshot`` narrowed to the nodes ``names`` (in the snapshot's row order; unknown names are
    left out). Node ids and the generation stay the base's (remote plugins resolve ids against it);
    every row gets a fresh version, so per-row caches do not take its rows for the base's."""
    if names == snapshot.names:  # the parent placement (every node): nothing to narrow
        return snapshot
    # A placement's rows are kept with the node table too: PlacementGenerate proposes the same node
    # sets (the same tuples, for TopologyPlacementGenerator) cycle after cycle.
    found: dict[tuple[str, ...], tuple[int, ...]] = snapshot.table.memo("placements/rows", lambda _: {})
    key = names if isinstance(names, tuple) else tuple(names)
    keep = found.get(key)
    if keep is None:
        keep = found[key] = tuple(sorted({row for name in key if (row := snapshot.row(name)) is not None}))
    if len(keep) == len(snapshot):
        return snapshot
    rows = np.asarray(keep, dtype=np.int64)
    # The narrowed node table is kept with the base's as long as the nodes do not change: the next
    # cycles' placements of the same rows reuse it, and with it what plugins keep per node table
    # (taint sets, label codes, the zone order).
    narrowed: dict[tuple[int, ...], NodeTable] = snapshot.table.memo("placements/tables", lambda _: {})
    table = narrowed.get(keep)
    if table is None:
        table = narrowed[keep] = _narrowed_table(snapshot.table, keep, rows)
    return Snapshot(
        generation=snapshot.generation,
        table=table,
        resources=snapshot.resources,
        columns=snapshot.columns,
        allocatable=snapshot.allocatable[rows],
        requested=snapshot.requested[rows],
        non_zero_requested=snapshot.non_zero_requested[rows],
        pods=[snapshot.pods[r] for r in keep],
        row_versions=next_view_versions(len(keep)),
        volumes=snapshot.volumes,
        dra=snapshot.dra,
    )


def _narrowed_table(base: NodeTable, keep: Sequence[int], rows: npt.NDArray[np.int64]) -> NodeTable:
    nodes = tuple(base.nodes[r] for r in keep)
    return NodeTable(
        generation=base.generation,
        nodes=nodes,
        names=tuple(n.name for n in nodes),
        index={n.name: i for i, n in enumerate(nodes)},
        ids=base.ids[rows],
        order=zone_order(nodes),
        unschedulable=base.unschedulable[rows],
    )
