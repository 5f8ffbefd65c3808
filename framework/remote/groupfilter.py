"""PodGroupPostFilter for a remote plugin: a mixin a :class:`~framework.remote.adapter.RemotePlugin` class
derives from when its manifest declares ``EXTENSION_POINT_POD_GROUP_POST_FILTER``
(:func:`framework.remote.classes.adapter_class`).

One bidirectional stream per call: the framework sends the group cycle (:func:`.placement.group_context`),
the host may ask up to :data:`MAX_SCHEDULES` times to schedule the group again with pods taken out of the
cycle's snapshot (the :data:`~pluginhost.placement.PodGroupSchedulingFunc` the in-process point gets),
then answers with its result. The whole exchange has the point's deadline. A result is checked before
anything happens: each nominated pod must be one of the group's, on a node of the snapshot, and each
victim a pod of the snapshot on the node it names; only then are the victims evicted (as DefaultPreemption
evicts a group's victims) and the nominations returned. A bad answer, a broken stream or the deadline
is an Error status naming what is wrong (under failurePolicy Ignore, Unschedulable): nothing is evicted,
nothing nominated.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import grpc

from pluginhost import pb
from pluginhost.convert import status_from_proto, status_to_proto
from pluginhost.model import Pod
from pluginhost.placement import (
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from pluginhost.plugin import CycleState
from pluginhost.snapshot import Snapshot
from pluginhost.state import apply_entries
from pluginhost.status import Code, Status
from pluginhost.view import NodeView

from ..observe import tracing
from ..plugins.podgrouppreemption import GroupPreemptionHandle, evict_group_victims
from .adapter import RemotePlugin
from .errors import RemotePluginError, describe
from .placement import group_context

__all__ = ["MAX_SCHEDULES", "RemotePodGroupPostFilter", "check_result"]

#: How many times one PodGroupPostFilter call may ask to schedule the group again.
MAX_SCHEDULES = 16

_POINT = "PodGroupPostFilter"


class RemotePodGroupPostFilter(PodGroupPostFilterPlugin):
    """PodGroupPostFilter on the plugin's host (see the module docstring)."""

    async def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo,
                                    schedule: PodGroupSchedulingFunc) -> tuple[PodGroupPostFilterResult | None, Status]:
        adapter = cast(RemotePlugin, self)
        stat = adapter.stat(_POINT)
        started = time.perf_counter()
        timeout = adapter.deadline("podGroupPostFilter")
        try:
            replica = adapter.endpoint.route(adapter.name, _POINT, state.cycle_id)[0]
            await adapter.endpoint.ready(replica)
            reply = await asyncio.wait_for(_exchange(adapter, replica, state, group, schedule, timeout), timeout)
            nominated, victims, status = check_result(state.snapshot, group, reply)
        except (RemotePluginError, TimeoutError) as exc:
            stat.record(time.perf_counter() - started, error=True)
            error = exc if isinstance(exc, RemotePluginError) else RemotePluginError(
                f"PodGroupPostFilter did not end within its deadline of {timeout:g}s",
                grpc.StatusCode.DEADLINE_EXCEEDED)
            if adapter._ignored(_POINT, state, error):
                return None, Status(Code.Unschedulable, (f"remote plugin {adapter.name} failed and was ignored",))
            # An Error status, not the exception: the group's cycle ends with it (SchedulerError).
            return None, Status.failure(str(error), plugin=adapter.name, error=error)
        stat.record(time.perf_counter() - started)
        apply_entries(state, reply.state_writes)
        if not status.ok:
            return None, status
        handle = cast(GroupPreemptionHandle, adapter.handle)
        evicted = await evict_group_victims(adapter.name, handle, group.pod_group, victims)
        if not evicted.ok:
            return None, evicted.with_plugin(adapter.name)
        return PodGroupPostFilterResult(nominated), status


async def _exchange(adapter: RemotePlugin, replica: Any, state: CycleState, group: PodGroupInfo,
                    schedule: PodGroupSchedulingFunc, timeout: float) -> Any:
    """The stream: the start, each ask answered, until the host's result (returned)."""
    start = pb.plugin.PodGroupPostFilterStart(ctx=group_context(adapter, state, group), max_schedules=MAX_SCHEDULES)
    call = replica.stub.PodGroupPostFilter(timeout=timeout, metadata=tracing.grpc_metadata())
    asks = 0
    try:
        await call.write(pb.plugin.PodGroupPostFilterRequest(start=start))
        while True:
            msg = await call.read()
            if msg is grpc.aio.EOF:
                raise RemotePluginError("PodGroupPostFilter: the host ended the stream without a result")
            if msg.HasField("result"):
                return msg.result
            asks += 1
            if asks > MAX_SCHEDULES:
                raise RemotePluginError(f"PodGroupPostFilter asked to schedule the group more than {MAX_SCHEDULES} "
                                        "times")
            view = _removed(state.snapshot, msg.schedule.removed_pods)
            assignments, status = await schedule(view)
            answer = _scheduled(group, assignments, status)
            await call.write(pb.plugin.PodGroupPostFilterRequest(scheduled=answer))
    except grpc.RpcError as exc:
        raise RemotePluginError(f"PodGroupPostFilter failed: {describe(exc)}", exc.code()) from None
    finally:
        call.cancel()


def _removed(snapshot: Snapshot | None, refs: Any) -> NodeView:
    """The view of the snapshot without the pods ``refs`` names; :class:`RemotePluginError` for a pod
    the snapshot does not hold."""
    where = _pods_by_uid(snapshot)
    unknown = [f"{r.namespace}/{r.name} (uid {r.uid!r})" for r in refs if r.uid not in where]
    if unknown:
        raise RemotePluginError("PodGroupPostFilter asked to remove pods not in the snapshot: "
                                f"{', '.join(unknown[:5])}")
    return NodeView(removed_pods=tuple((str(r.uid), where[r.uid].node_name) for r in refs))


def _pods_by_uid(snapshot: Snapshot | None) -> dict[str, Pod]:
    if snapshot is None:
        return {}
    return {p.uid: p for pods in snapshot.pods for p in pods}


def _scheduled(group: PodGroupInfo, assignments: PodGroupAssignments | None, status: Status) -> Any:
    out = pb.plugin.PodGroupScheduleResult(status=status_to_proto(status))
    if assignments is None:
        return out
    out.placement = assignments.placement.name
    index = {p.uid: i for i, p in enumerate(group.unscheduled_pods)}
    for a in assignments.proposed:
        i = index.get(a.pod.uid)
        if i is not None:
            out.assignments.add(pod=i, node_name=a.node_name)
    return out


def check_result(snapshot: Snapshot | None, group: PodGroupInfo,
                 reply: Any) -> tuple[dict[str, str], list[Pod], Status]:
    """A host's PodGroupPostFilterResult as (nominations by pod key, victims, status);
    :class:`RemotePluginError` naming what is wrong when a nomination or a victim does not hold."""
    status = status_from_proto(reply.status)
    if not status.ok and (reply.nominations or reply.victims):
        raise RemotePluginError(f"PodGroupPostFilter returned nominations or victims with {status.code.name}")
    pods = group.unscheduled_pods
    nominated: dict[str, str] = {}
    for a in reply.nominations:
        if a.pod >= len(pods):
            raise RemotePluginError(f"PodGroupPostFilter nominated pod index {a.pod}; the group has {len(pods)} pods")
        if snapshot is not None and snapshot.row(a.node_name) is None:
            raise RemotePluginError(f"PodGroupPostFilter nominated pod {pods[a.pod].key} to node {a.node_name!r}, "
                                    "which is not in the snapshot")
        nominated[pods[a.pod].key] = str(a.node_name)
    where = _pods_by_uid(snapshot)
    victims: list[Pod] = []
    for v in reply.victims:
        pod = where.get(v.pod.uid)
        if pod is None:
            raise RemotePluginError(f"PodGroupPostFilter victim {v.pod.namespace}/{v.pod.name} (uid {v.pod.uid!r}) "
                                    "is not a pod in the snapshot")
        if pod.node_name != v.node_name:
            raise RemotePluginError(f"PodGroupPostFilter victim {pod.key} is on node {pod.node_name!r}, "
                                    f"not {v.node_name!r}")
        victims.append(pod)
    return nominated, victims, status
