"""The PodGroup points of the Plugin service (GeneratePlacements, ScorePlacement,
NormalizePlacementScore, PodGroupPostFilter): a mixin of :class:`pluginhost.servicer.Servicer`.

Each call rebuilds the group (:class:`~pluginhost.placement.PodGroupInfo`) from the request's
``PodGroupContext`` and gives the plugin a CycleState keyed by the group cycle's id (ScorePlacement:
the placement's id) holding the declared ``state_keys``; its writes go back on the reply. A plugin that
follows the mirror gets the snapshot of the cycle's generation, and node ids are resolved against it.
"""

from __future__ import annotations

from typing import Any

import grpc

from pluginhost import pb
from pluginhost.context import CallContext
from pluginhost.convert import pod_from_proto, status_from_proto, status_to_proto
from pluginhost.cycle_state import RemoteCycleState
from pluginhost.mirror import MirrorError
from pluginhost.placement import (
    Placement,
    PlacementScore,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterResult,
    ProposedAssignment,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.view import NodeView
from pluginhost.wire import read_checked
from pluginhost.workload import BASIC, GANG, PodGroup

__all__ = ["PodGroupServicer"]


def _group(ctx: Any) -> PodGroupInfo:
    pods = [pod_from_proto(p) for p in ctx.pods]
    policy = GANG if ctx.min_count > 1 else BASIC
    group = PodGroup(name=str(ctx.name), namespace=str(ctx.namespace), policy=policy,
                     min_count=max(1, int(ctx.min_count)),
                     topology_keys=tuple(str(k) for k in ctx.topology_keys))
    return PodGroupInfo(group, pods)


def _names(snapshot: Snapshot | None, msg: Any) -> tuple[str, ...]:
    """A placement's node names: by name, or its ids resolved in ``snapshot``."""
    if msg.node_names or not msg.node_ids:
        return tuple(str(n) for n in msg.node_names)
    if snapshot is None:
        raise ValueError("node ids sent to a plugin that does not follow the snapshot mirror")
    by_id = dict(zip(snapshot.table.ids.tolist(), snapshot.names, strict=True))
    missing = [i for i in msg.node_ids if int(i) not in by_id]
    if missing:
        raise ValueError(f"node ids {missing[:5]} are not in the snapshot of generation {snapshot.generation}")
    return tuple(by_id[int(i)] for i in msg.node_ids)


class PodGroupServicer:
    """GeneratePlacements, ScorePlacement, NormalizePlacementScore and PodGroupPostFilter (mixed into
    the Servicer)."""

    async def _group_call(self, request: Any, context: grpc.aio.ServicerContext, point: str,
                          cycle_id: str = "") -> Any:
        ctx = request.ctx
        host: Any = self.host  # type: ignore[attr-defined]  # the Servicer's
        try:
            hosted, inst = self._instance(ctx.plugin, ctx.profile)  # type: ignore[attr-defined]
        except Exception as exc:
            await context.abort(getattr(exc, "code", grpc.StatusCode.INTERNAL), str(exc))
        snapshot: Snapshot | None = None
        if hosted.manifest.needs_snapshot:
            try:
                snapshot = await host.mirror.wait_for(ctx.snapshot_generation, host.mirror_wait)
            except MirrorError as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        state = RemoteCycleState(
            cycle_id or ctx.group_cycle_id, snapshot, plugin=hosted.name, declared=hosted.manifest.state_keys,
            entries=ctx.state, slow=host.handle.cycle_state(),
        )
        call = CallContext(
            plugin=hosted.name, point=point, profile=ctx.profile, args=hosted.args.get(ctx.profile, {}),
            handle=host.handle, pod=None, cycle_id=state.cycle_id, attempt=0,
            snapshot_generation=ctx.snapshot_generation, state=state, trace_context=ctx.trace_context,
        )
        return inst, state, call

    async def GeneratePlacements(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        inst, state, call = await self._group_call(request, context, "PlacementGenerate")

        async def run() -> tuple[list[Placement], Status]:
            parent = Placement(str(request.parent.name), _names(state.snapshot, request.parent))
            placements, status = await inst.generate_placements(state, _group(request.ctx), parent)
            return list(placements), status

        (placements, status), failed = await self._invoke(call, run, ([], SUCCESS))  # type: ignore[attr-defined]
        reply = pb.plugin.GeneratePlacementsReply(
            status=status_to_proto(failed or status), state_writes=state.drain_writes()
        )
        for p in placements if failed is None else ():
            reply.placements.add(name=p.name, node_names=list(p.nodes))
        return reply

    async def ScorePlacement(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        inst, state, call = await self._group_call(request, context, "PlacementScore", request.placement_cycle_id)

        async def run() -> tuple[int, Status]:
            group = _group(request.ctx)
            placement = Placement(str(request.placement.name), _names(state.snapshot, request.placement))
            proposed = [
                ProposedAssignment(group.unscheduled_pods[a.pod], str(a.node_name)) for a in request.assignments
            ]
            score, status = await inst.score_placement(state, group, PodGroupAssignments(placement, proposed))
            return int(score), status

        (score, status), failed = await self._invoke(call, run, (0, SUCCESS))  # type: ignore[attr-defined]
        return pb.plugin.ScorePlacementReply(
            status=status_to_proto(failed or status), score=score, state_writes=state.drain_writes()
        )

    async def NormalizePlacementScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        inst, state, call = await self._group_call(request, context, "NormalizePlacementScore")
        scores = [PlacementScore(Placement(str(n), ()), int(s)) for n, s in zip(request.placements, request.scores,
                                                                                strict=True)]

        async def run() -> Status:
            status: Status = await inst.normalize_placement_score(state, _group(request.ctx), scores)
            return status

        status, failed = await self._invoke(call, run, SUCCESS)  # type: ignore[attr-defined]
        return pb.plugin.NormalizePlacementScoreReply(
            status=status_to_proto(failed or status), scores=[s.score for s in scores],
            state_writes=state.drain_writes(),
        )

    async def PodGroupPostFilter(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        """The stream (see the contract): the start, the plugin's asks to schedule the group again
        (each written, its answer read), then its result."""
        first = await read_checked(context)
        if first is grpc.aio.EOF or not first.HasField("start"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "a PodGroupPostFilter stream must start with PodGroupPostFilterStart")
        start = first.start
        inst, state, call = await self._group_call(start, context, "PodGroupPostFilter")
        group = _group(start.ctx)
        asks = 0

        async def schedule(view: NodeView | None = None) -> tuple[PodGroupAssignments | None, Status]:
            nonlocal asks
            if view is not None and (view.added_nodes or view.added_pods or view.changes):
                raise ValueError("PodGroupPostFilter's schedule takes pods out of the snapshot only (removed_pods)")
            asks += 1
            if asks > start.max_schedules:
                raise ValueError(f"the group may be scheduled again at most {start.max_schedules} times in one "
                                 "PodGroupPostFilter")
            ask = pb.plugin.PodGroupSchedule(removed_pods=[pb.types.PodRef(uid=uid) for uid, _ in
                                                           (view.removed_pods if view else ())])
            await context.write(pb.plugin.PodGroupPostFilterReply(schedule=ask))
            msg = await read_checked(context)
            if msg is grpc.aio.EOF or not msg.HasField("scheduled"):
                raise ValueError("the framework ended the PodGroupPostFilter stream before answering")
            got, pods = msg.scheduled, group.unscheduled_pods
            proposed = [ProposedAssignment(pods[a.pod], str(a.node_name)) for a in got.assignments if a.pod < len(pods)]
            return PodGroupAssignments(Placement(str(got.placement), ()), proposed), status_from_proto(got.status)

        async def run() -> tuple[PodGroupPostFilterResult | None, Status]:
            result, status = await inst.pod_group_post_filter(state, group, schedule)
            return result, status

        (result, status), failed = await self._invoke(call, run, (None, SUCCESS))  # type: ignore[attr-defined]
        if failed is None and result is not None and status.ok:
            try:
                out = _result(group, result, status)
            except ValueError as exc:
                failed = Status.failure(str(exc))
        if failed is not None or result is None or not status.ok:
            out = pb.plugin.PodGroupPostFilterResult(status=status_to_proto(failed or status))
        out.state_writes.extend(state.drain_writes())
        await context.write(pb.plugin.PodGroupPostFilterReply(result=out))


def _result(group: PodGroupInfo, result: PodGroupPostFilterResult, status: Status) -> Any:
    """A successful result as the contract's; ValueError for a nominated pod not of the group."""
    index = {p.key: i for i, p in enumerate(group.unscheduled_pods)}
    out = pb.plugin.PodGroupPostFilterResult(status=status_to_proto(status))
    for key, node in result.nominated.items():
        if key not in index:
            raise ValueError(f"nominated pod {key} is not an unscheduled pod of pod group "
                             f"{group.namespace}/{group.name}")
        out.nominations.add(pod=index[key], node_name=node)
    for pod in result.victims:
        out.victims.add(pod=pb.types.PodRef(uid=pod.uid, namespace=pod.namespace, name=pod.name),
                        node_name=pod.node_name)
    return out
