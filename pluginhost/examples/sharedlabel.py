"""SharedLabelPlacement: a PlacementScore plugin (a PodGroup cycle with TopologyAwareWorkloadScheduling)
that prefers placements whose proposed nodes share one value of a node label.

For each placement in which the whole group fits, **ScorePlacement** gives ``100 * pods on the most
common value of the label / pods placed`` (a pod on a node without the label counts for no value).
With ``label: power-domain``, a group spread over two power domains scores 50; one inside a single
domain scores 100. It reads the proposed nodes' labels from the snapshot mirror (``needs_snapshot``),
so it works the same in-process and in a plugin host.

Args (``pluginConfig``): ``label`` (required), the node label key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pluginhost.placement import PlacementScorePlugin, PodGroupAssignments, PodGroupInfo
from pluginhost.plugin import MAX_NODE_SCORE, CycleState, Handle, check_args
from pluginhost.status import SUCCESS, Status

__all__ = ["SharedLabelPlacement"]


class SharedLabelPlacement(PlacementScorePlugin):
    """Placements on nodes sharing a label value score higher (see the module docstring)."""

    name = "SharedLabelPlacement"
    needs_snapshot = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name, "label")
        label = self.args.get("label")
        if not isinstance(label, str) or not label:
            raise ValueError(f"{self.name}: args.label must be a non-empty node label key, got {label!r}")
        self.label = label

    async def score_placement(self, state: CycleState, group: PodGroupInfo,
                              assignments: PodGroupAssignments) -> tuple[int, Status]:
        snapshot = state.snapshot
        if snapshot is None or not assignments.proposed:
            return 0, SUCCESS
        values: Counter[str] = Counter()
        for proposed in assignments.proposed:
            row = snapshot.row(proposed.node_name)
            value = snapshot.table.nodes[row].labels.get(self.label) if row is not None else None
            if value is not None:
                values[value] += 1
        top = max(values.values(), default=0)
        return MAX_NODE_SCORE * top // len(assignments.proposed), SUCCESS
