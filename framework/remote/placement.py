"""The PodGroup points of a remote plugin: mixins a :class:`~framework.remote.adapter.RemotePlugin` class
derives from when its manifest declares ``EXTENSION_POINT_PLACEMENT_GENERATE`` or
``EXTENSION_POINT_PLACEMENT_SCORE`` (:func:`framework.remote.classes.adapter_class`), each a unary call
to the plugin's host.

A group cycle's requests carry a :func:`group_context`: the group cycle's id (the key of its CycleState),
the group and its unscheduled pods. Nodes travel by id in the snapshot of the cycle's generation for a
host that follows the mirror, by name otherwise; the host's answer may use either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from pluginhost import pb
from pluginhost.convert import pod_to_proto, status_from_proto
from pluginhost.placement import (
    Placement,
    PlacementGeneratePlugin,
    PlacementScore,
    PlacementScoreExtensions,
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
)
from pluginhost.plugin import CycleState
from pluginhost.state import apply_entries, entries_for
from pluginhost.status import SUCCESS, Status

from ..observe import tracing
from .adapter import RemotePlugin
from .errors import RemotePluginError

__all__ = [
    "RemotePlacementGenerate",
    "RemotePlacementScore",
    "RemotePlacementScoreExtensions",
    "group_context",
]


def group_context(adapter: RemotePlugin, state: CycleState, group: PodGroupInfo) -> Any:
    """The ``PodGroupContext`` of a call of ``adapter`` in the group cycle of ``state``."""
    snapshot = state.snapshot
    generation = snapshot.generation if snapshot is not None else 0
    if adapter.follows_mirror and adapter.publisher is not None:
        adapter.publisher.publish_up_to(generation)  # the node ids refer to this generation
    ctx = pb.plugin.PodGroupContext(
        group_cycle_id=state.cycle_id,
        plugin=adapter.name,
        profile=adapter.profile,
        snapshot_generation=generation,
        namespace=group.namespace,
        name=group.name,
        min_count=group.pod_group.min_count,
        topology_keys=list(group.pod_group.topology_keys),
        pods=[pod_to_proto(p) for p in group.unscheduled_pods],
        state=entries_for(state, adapter.state_keys, plugin=adapter.name) if adapter.state_keys else (),
    )
    tracing.inject(ctx.trace_context)
    return ctx


def _node_id(state: CycleState, name: str) -> int:
    snap = state.snapshot
    row = snap.row(name) if snap is not None else None
    return int(snap.table.ids[row]) if snap is not None and row is not None else 0


def _placement_proto(adapter: RemotePlugin, state: CycleState, placement: Placement) -> Any:
    msg = pb.plugin.PlacementNodes(name=placement.name)
    if adapter.needs_snapshot:
        msg.node_ids.extend(_node_id(state, n) for n in placement.nodes)
    else:
        msg.node_names.extend(placement.nodes)
    return msg


def _placement_from_proto(state: CycleState, msg: Any, parent: Placement) -> Placement:
    """A placement of a reply; :class:`RemotePluginError` when a node is not in ``parent``."""
    allowed = set(parent.nodes)
    if msg.node_ids:
        snap = state.snapshot
        by_id: dict[int, str] = {}
        if snap is not None:
            by_id = dict(zip(snap.table.ids.tolist(), snap.names, strict=True))
        unknown = [i for i in msg.node_ids if by_id.get(int(i)) not in allowed]
        if unknown:
            raise RemotePluginError(f"placement {msg.name!r} names node ids {unknown[:5]} outside its parent")
        return Placement(str(msg.name), tuple(by_id[int(i)] for i in msg.node_ids))
    names = tuple(str(n) for n in msg.node_names)
    outside = [n for n in names if n not in allowed]
    if outside:
        raise RemotePluginError(f"placement {msg.name!r} names nodes {outside[:5]} outside its parent")
    return Placement(str(msg.name), names)


class RemotePlacementGenerate(PlacementGeneratePlugin):
    """GeneratePlacements on the plugin's host."""

    async def generate_placements(self, state: CycleState, group: PodGroupInfo,
                                  parent: Placement) -> tuple[list[Placement], Status]:
        adapter = cast(RemotePlugin, self)
        request = pb.plugin.GeneratePlacementsRequest(
            ctx=group_context(adapter, state, group), parent=_placement_proto(adapter, state, parent)
        )
        try:
            reply = await adapter._call("PlacementGenerate", "GeneratePlacements", request, state=state,
                                        config_point="placementGenerate")
        except RemotePluginError as exc:
            if adapter._ignored("PlacementGenerate", state, exc):
                return [parent], SUCCESS  # as if the profile had no PlacementGenerate plugin
            raise
        apply_entries(state, reply.state_writes)
        status = status_from_proto(reply.status)
        if not status.ok:
            return [], status
        return [_placement_from_proto(state, p, parent) for p in reply.placements], SUCCESS


def _assignments(ctx: Any, group: PodGroupInfo, assignments: PodGroupAssignments, state: CycleState) -> list[Any]:
    index = {p.uid: i for i, p in enumerate(group.unscheduled_pods)}
    out = []
    for proposed in assignments.proposed:
        i = index.get(proposed.pod.uid)
        if i is None:  # not among the group's unscheduled pods: sent along so the index resolves
            i = index[proposed.pod.uid] = len(ctx.pods)
            ctx.pods.append(pod_to_proto(proposed.pod))
        out.append(pb.plugin.PlacementAssignment(
            pod=i, node_id=_node_id(state, proposed.node_name), node_name=proposed.node_name
        ))
    return out


class RemotePlacementScore(PlacementScorePlugin):
    """ScorePlacement on the plugin's host."""

    async def score_placement(self, state: CycleState, group: PodGroupInfo,
                              assignments: PodGroupAssignments) -> tuple[int, Status]:
        adapter = cast(RemotePlugin, self)
        ctx = group_context(adapter, state, group)
        request = pb.plugin.ScorePlacementRequest(
            ctx=ctx,
            placement=_placement_proto(adapter, state, assignments.placement),
            assignments=_assignments(ctx, group, assignments, state),
            placement_cycle_id=f"{state.cycle_id}/placement/{assignments.placement.name}",
        )
        try:
            reply = await adapter._call("PlacementScore", "ScorePlacement", request, state=state,
                                        config_point="placementScore")
        except RemotePluginError as exc:
            if adapter._ignored("PlacementScore", state, exc):
                return 0, SUCCESS
            raise
        apply_entries(state, reply.state_writes)
        return int(reply.score), status_from_proto(reply.status)


class RemotePlacementScoreExtensions(PlacementScoreExtensions):
    """NormalizePlacementScore on the plugin's host."""

    async def normalize_placement_score(self, state: CycleState, group: PodGroupInfo,
                                        scores: list[PlacementScore]) -> Status:
        adapter = cast(RemotePlugin, self)
        request = pb.plugin.NormalizePlacementScoreRequest(
            ctx=group_context(adapter, state, group),
            placements=[s.placement.name for s in scores],
            scores=[s.score for s in scores],
        )
        try:
            reply = await adapter._call("NormalizePlacementScore", "NormalizePlacementScore", request, state=state,
                                        config_point="placementScore")
        except RemotePluginError as exc:
            if adapter._ignored("NormalizePlacementScore", state, exc):
                _set(scores, [0] * len(scores))
                return SUCCESS
            raise
        apply_entries(state, reply.state_writes)
        status = status_from_proto(reply.status)
        if status.ok:
            if len(reply.scores) != len(scores):
                raise RemotePluginError(f"returned {len(reply.scores)} normalized scores for {len(scores)} placements")
            _set(scores, reply.scores)
        return status


def _set(scores: list[PlacementScore], values: Sequence[int]) -> None:
    for s, v in zip(scores, values, strict=True):
        s.score = int(v)
