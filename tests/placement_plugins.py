"""A PlacementGenerate plugin for tests/test_remote_placement.py, served by a real plugin host; no
tests here (a plugin host imports this module, so it does not import pytest).

:class:`SplitByGroupKey` splits the parent placement by the node label named by the group's first
topology key (``PodGroupInfo.pod_group.topology_keys``, from the PodGroup's
``spec.schedulingConstraints``), one placement per label value named by it, in the order of the
parent's nodes; nodes without the label are left out, and a group without a key gets the parent.
"""

from __future__ import annotations

from typing import Any

from pluginhost.placement import Placement, PlacementGeneratePlugin, PodGroupInfo
from pluginhost.plugin import CycleState, Handle, check_args
from pluginhost.status import SUCCESS, Status

__all__ = ["SplitByGroupKey"]


class SplitByGroupKey(PlacementGeneratePlugin):
    """One placement per value of the group's topology key (see the module docstring)."""

    name = "SplitByGroupKey"
    needs_snapshot = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name)

    async def generate_placements(self, state: CycleState, group: PodGroupInfo,
                                  parent: Placement) -> tuple[list[Placement], Status]:
        keys = group.pod_group.topology_keys
        snapshot = state.snapshot
        if not keys:
            return [parent], SUCCESS
        if snapshot is None:
            return [], Status.failure("SplitByGroupKey: no snapshot (it needs the snapshot mirror)")
        domains: dict[str, list[str]] = {}
        for name in parent.nodes:
            row = snapshot.row(name)
            value = snapshot.table.nodes[row].labels.get(keys[0]) if row is not None else None
            if value is not None:
                domains.setdefault(value, []).append(name)
        return [Placement(value, tuple(nodes)) for value, nodes in domains.items()], SUCCESS
