"""What-if snapshots: the cluster as it would be with a different set of pods on one node.

Preemption asks "would the pod fit here without these victims?" and the nominator asks "does it
still fit once the pods nominated here arrive?". Both run the real Filter plugins on a copy of the
snapshot whose one node row holds other pods; the cache is never touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pluginhost.model import PODS, Pod
from pluginhost.snapshot import Snapshot, non_zero_requests

__all__ = ["with_node_pods"]

# What-if rows get versions no real row has (tables count up from 1), each one new, so plugins that
# keep per-row data between snapshots redo the row.
_WHAT_IF_VERSIONS = itertools.count(-1, -1)


def with_node_pods(snapshot: Snapshot, row: int, pods: Sequence[Pod]) -> Snapshot:
    """``snapshot`` with node ``row`` holding exactly ``pods`` (its requested columns recomputed)."""
    requested = snapshot.requested.copy()
    non_zero = snapshot.non_zero_requested.copy()
    requested[row] = 0
    non_zero[row] = 0
    columns = snapshot.columns
    pods_col = columns[PODS]
    for pod in pods:
        for resource, amount in pod.requests.items():
            col = columns.get(resource)
            if col is not None and col != pods_col:
                requested[row, col] += amount
        requested[row, pods_col] += 1
        cpu, mem = non_zero_requests(pod)
        non_zero[row, 0] += cpu
        non_zero[row, 1] += mem
    placed = list(snapshot.pods)
    placed[row] = tuple(pods)
    versions = snapshot.row_versions.copy()
    versions[row] = next(_WHAT_IF_VERSIONS)
    return Snapshot(
        generation=snapshot.generation,
        table=snapshot.table,
        resources=snapshot.resources,
        columns=columns,
        allocatable=snapshot.allocatable,
        requested=requested,
        non_zero_requested=non_zero,
        pods=placed,
        row_versions=versions,
    )
