"""The services the framework offers plugin hosts: Handle and CycleState (``proto/.../handle.proto``,
``cyclestate.proto``).

- **Handle**: the pods waiting at Permit (list, get, allow, reject), binding and deleting pods (a
  remote Bind plugin binds through here, as DefaultBinder binds through the API server), point reads
  of the snapshot, and ``FollowSnapshot``, the snapshot mirror stream (:mod:`framework.remote.publisher`).
- **CycleState**: the slow path to a scheduling context's CycleState, keyed by cycle id. Cycle ids are
  looked up in ``Scheduler.cycle_states`` (the one CycleState per scheduling context that in-process
  and remote plugins share), then among the states of calls in flight (``explain`` runs a cycle that
  the scheduler does not register). Only :class:`~pluginhost.state.StateValue` values cross the wire.

:class:`FrameworkServices` bundles both. It is created before the scheduler exists (the framework's
address must be known before plugin hosts are handshaken, and the scheduler needs their manifests),
and :meth:`FrameworkServices.attach` gives it the scheduler; calls before that get UNAVAILABLE.

Only registered plugin hosts may call: each endpoint gets a credential (:meth:`FrameworkServices.grant`,
sent in its Handshake) that its host returns as ``authorization: Bearer`` metadata; anything else is
UNAUTHENTICATED. A host acts only for the plugins it serves, and reads or writes only the CycleState of
cycles its plugin is part of (the adapters record each plugin they call in the cycle's state,
:func:`join_cycle`); otherwise PERMISSION_DENIED.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from pluginhost import pb
from pluginhost.convert import node_to_proto, pod_placement_to_proto, pod_to_proto, status_to_proto
from pluginhost.plugin import CycleState
from pluginhost.security import bearer_token
from pluginhost.snapshot import Snapshot
from pluginhost.state import StateValue, entry_of, value_of
from pluginhost.status import Status

from .publisher import SnapshotPublisher

__all__ = ["CycleStateService", "FrameworkServices", "Grantee", "HandleService", "join_cycle", "waiting_pod_to_proto"]

# The CycleState key under which the plugins called in a cycle are recorded (framework-private).
PARTICIPANTS_KEY = "outrigger.io/remote/participants"


class _Participants(set[str]):
    """The remote plugins the framework called in one scheduling context."""

    def clone(self) -> _Participants:
        return _Participants(self)


def join_cycle(state: CycleState, plugin: str) -> None:
    """Record that ``plugin`` is part of ``state``'s cycle (it may use that cycle's CycleState)."""
    joined = state.get(PARTICIPANTS_KEY)
    if not isinstance(joined, _Participants):
        joined = _Participants()
        state.write(PARTICIPANTS_KEY, joined)
    joined.add(plugin)


class Grantee(Protocol):
    """What a credential is issued to: a remote plugin endpoint (its name and the plugins it serves)."""

    @property
    def name(self) -> str: ...

    @property
    def manifests(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _Caller:
    endpoint: Grantee

    def serves(self, plugin: str) -> bool:
        return plugin in self.endpoint.manifests

    def describe(self) -> str:
        return f"plugin host {self.endpoint.name!r}"


def _digest(credential: str) -> bytes:
    return hashlib.sha256(credential.encode()).digest()


class FrameworkServices:
    """The Handle and CycleState services over one scheduler (attached once it exists)."""

    def __init__(self) -> None:
        self.scheduler: Any = None  # framework.scheduler.Scheduler (Any: it is attached late)
        self.publisher: SnapshotPublisher | None = None
        self._in_flight: dict[str, list[CycleState]] = {}
        self._grants: dict[bytes, _Caller] = {}  # sha256(credential) -> caller

    # ---- who may call ----------------------------------------------------------------------------

    def grant(self, credential: str, endpoint: Grantee) -> None:
        """Let the host that presents ``credential`` call, on behalf of ``endpoint``'s plugins."""
        self._grants[_digest(credential)] = _Caller(endpoint)

    def revoke(self, credential: str) -> None:
        self._grants.pop(_digest(credential), None)

    async def caller(self, context: grpc.aio.ServicerContext) -> _Caller:
        """The registered host making this call; aborts with UNAUTHENTICATED otherwise."""
        credential = bearer_token(context.invocation_metadata())
        found = self._grants.get(_digest(credential)) if credential else None
        if found is None:
            why = (
                "an unknown credential (issued by an earlier framework? the host gets a new one at its next Handshake)"
                if credential
                else "no credential: send HandshakeRequest.credential as 'authorization: Bearer <credential>' metadata"
            )
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                f"the Handle and CycleState services serve registered plugin hosts only; this call has {why}",
            )
            raise AssertionError("unreachable: abort raises")
        return found

    async def authorize(self, context: grpc.aio.ServicerContext, plugin: str, action: str) -> _Caller:
        """The caller, if it serves ``plugin`` (or ``plugin`` is empty); PERMISSION_DENIED otherwise."""
        found = await self.caller(context)
        if plugin and not found.serves(plugin):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{found.describe()} does not serve plugin {plugin!r}, so it cannot {action} on its behalf",
            )
        return found

    def part_of(self, cycle_id: str, plugin: str) -> bool:
        """Whether the framework called ``plugin`` in the scheduling context ``cycle_id``."""
        states: Iterable[CycleState] = self._in_flight.get(cycle_id, ())
        if self.scheduler is not None:
            registered = self.scheduler.cycle_states.get(cycle_id)
            if registered is not None:
                states = [registered, *states]
        for state in states:
            joined = state.get(PARTICIPANTS_KEY)
            if isinstance(joined, _Participants) and plugin in joined:
                return True
        return False

    def attach(self, scheduler: Any) -> SnapshotPublisher:
        """Serve ``scheduler`` from now on; returns the snapshot publisher over its cache."""
        if self.publisher is not None:
            self.publisher.close()
        self.scheduler = scheduler
        self.publisher = SnapshotPublisher(scheduler.cache.table)
        return self.publisher

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
        self._grants.clear()

    def add_to(self, server: grpc.aio.Server) -> None:
        pb.handle_grpc.add_HandleServicer_to_server(HandleService(self), server)  # type: ignore[no-untyped-call]
        pb.cyclestate_grpc.add_CycleStateServicer_to_server(CycleStateService(self), server)  # type: ignore[no-untyped-call]

    # ---- cycle states --------------------------------------------------------------------------

    @contextmanager
    def in_flight(self, state: CycleState) -> Iterator[None]:
        """Make ``state`` reachable by its cycle id while a remote call runs (for cycles the scheduler
        does not register, e.g. explain's)."""
        states = self._in_flight.setdefault(state.cycle_id, [])
        states.append(state)
        try:
            yield
        finally:
            states.remove(state)
            if not states:
                del self._in_flight[state.cycle_id]

    def cycle_state(self, cycle_id: str) -> CycleState | None:
        if self.scheduler is not None:
            state: CycleState | None = self.scheduler.cycle_states.get(cycle_id)
            if state is not None:
                return state
        states = self._in_flight.get(cycle_id)
        return states[-1] if states else None

    def in_flight_count(self) -> int:
        return sum(len(v) for v in self._in_flight.values())


async def _require(services: FrameworkServices, context: grpc.aio.ServicerContext) -> Any:
    if services.scheduler is None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the framework is starting")
    return services.scheduler


def waiting_pod_to_proto(wp: Any) -> Any:
    """A waiting pod (``WaitingPodHandle``) as ``outrigger.v1.WaitingPod``."""
    loop_now = _loop_time()
    return pb.handle.WaitingPod(
        pod=pod_to_proto(wp.pod),
        pending_plugins=wp.pending_plugins(),
        node_name=wp.node_name,
        # WaitingPodHandle.deadline is on the event loop's clock; the contract wants wall-clock time.
        deadline=time.time() + max(float(wp.deadline) - loop_now, 0.0),
        profile=wp.pod.scheduler_name,
    )


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


def _node_info(snap: Snapshot, row: int) -> Any:
    node = snap.table.nodes[row]
    nid = int(snap.table.ids[row])
    info = pb.types.NodeInfo(node=node_to_proto(node), node_id=nid, generation=snap.generation)
    for res, col in snap.columns.items():
        info.requested[res] = int(snap.requested[row, col])
    info.non_zero_requested["cpu"] = int(snap.non_zero_requested[row, 0])
    info.non_zero_requested["memory"] = int(snap.non_zero_requested[row, 1])
    info.pods.extend(pod_placement_to_proto(p, nid, node.name) for p in snap.pods[row])
    return info


class HandleService(pb.handle_grpc.HandleServicer):  # type: ignore[misc]
    """``outrigger.v1.Handle`` over a scheduler."""

    def __init__(self, services: FrameworkServices) -> None:
        self.services = services

    async def ListWaitingPods(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.caller(context)
        s = await _require(self.services, context)
        pods = [wp for wp in s.waiting_pods if not request.profile or wp.pod.scheduler_name == request.profile]
        return pb.handle.ListWaitingPodsResponse(pods=[waiting_pod_to_proto(wp) for wp in pods])

    async def GetWaitingPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.caller(context)
        s = await _require(self.services, context)
        wp = s.waiting_pods.get(request.uid)
        if wp is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no pod with uid {request.uid!r} is waiting")
        return waiting_pod_to_proto(wp)

    async def AllowWaitingPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.authorize(context, request.plugin, "allow waiting pods")
        s = await _require(self.services, context)
        wp = s.waiting_pods.get(request.uid)
        if wp is None:
            return pb.handle.AllowWaitingPodResponse(found=False)
        wp.allow(request.plugin)
        return pb.handle.AllowWaitingPodResponse(found=True)

    async def RejectWaitingPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.authorize(context, request.plugin, "reject waiting pods")
        s = await _require(self.services, context)
        wp = s.waiting_pods.get(request.uid)
        if wp is None:
            return pb.handle.RejectWaitingPodResponse(found=False)
        wp.reject(request.plugin, request.message or f"rejected by plugin {request.plugin}")
        return pb.handle.RejectWaitingPodResponse(found=True)

    async def BindPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.authorize(context, request.plugin, "bind pods")
        s = await _require(self.services, context)
        rec = s.pods.get(request.pod.uid)
        if rec is None:
            status = Status.failure(f"pod {request.pod.namespace}/{request.pod.name} not found")
        else:
            status = await s.handle.bind_pod(rec.pod, request.node_name)
        return pb.handle.BindPodResponse(status=status_to_proto(status))

    async def DeletePod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.services.authorize(context, request.plugin, "delete pods")
        s = await _require(self.services, context)
        rec = s.pods.get(request.pod.uid)
        if rec is None:
            status = Status.failure(f"pod {request.pod.namespace}/{request.pod.name} not found")
        else:
            status = await s.handle.delete_pod(rec.pod, request.reason or f"deleted by plugin {request.plugin}")
        return pb.handle.DeletePodResponse(status=status_to_proto(status))

    async def _snapshot(self, generation: int, context: grpc.aio.ServicerContext) -> Snapshot:
        await self.services.caller(context)
        s = await _require(self.services, context)
        latest: Snapshot = s.cache.snapshot()
        if generation == 0 or generation == latest.generation:
            return latest
        # "The snapshot of every running cycle is held until the cycle ends."
        for state in list(s.cycle_states.values()):
            if state.snapshot is not None and state.snapshot.generation == generation:
                return state.snapshot  # type: ignore[no-any-return]
        await context.abort(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"snapshot generation {generation} is not held (latest is {latest.generation})",
        )
        raise AssertionError("unreachable: abort raises")

    async def GetNodeInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        snap = await self._snapshot(request.generation, context)
        if request.WhichOneof("node") == "id":
            hits = (snap.table.ids == request.id).nonzero()[0]
            row = int(hits[0]) if hits.shape[0] else None
            what = f"id {request.id}"
        else:
            row = snap.row(request.name)
            what = repr(request.name)
        if row is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"node {what} is not in the snapshot")
            raise AssertionError("unreachable: abort raises")
        return _node_info(snap, row)

    async def ListNodeInfos(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        snap = await self._snapshot(request.generation, context)
        infos = sorted((_node_info(snap, row) for row in range(len(snap))), key=lambda i: i.node_id)
        return pb.handle.ListNodeInfosResponse(generation=snap.generation, nodes=infos)

    async def FollowSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        # Any registered host may follow (its Handshake is still being answered when it starts, so
        # the plugins it serves may not be known yet): the snapshot is the same for every plugin.
        await self.services.caller(context)
        await _require(self.services, context)
        publisher = self.services.publisher
        assert publisher is not None
        async for delta in publisher.follow(request.from_generation, request.plugin, nodes_only=request.nodes_only,
                                            volumes=request.volumes, devices=request.devices):
            yield delta


class CycleStateService(pb.cyclestate_grpc.CycleStateServicer):  # type: ignore[misc]
    """``outrigger.v1.CycleState``: the slow path to a cycle's state."""

    def __init__(self, services: FrameworkServices) -> None:
        self.services = services

    async def _state(self, request: Any, context: grpc.aio.ServicerContext, action: str) -> CycleState:
        services = self.services
        caller = await services.caller(context)
        plugin = request.plugin
        if not plugin or not caller.serves(plugin):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{caller.describe()} does not serve plugin {plugin!r}, so it cannot {action} cycle state for it",
            )
        state = services.cycle_state(request.cycle_id)
        if state is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"no scheduling context with cycle id {request.cycle_id!r} (finished?)"
            )
            raise AssertionError("unreachable: abort raises")
        if not services.part_of(request.cycle_id, plugin):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"plugin {plugin!r} is not part of cycle {request.cycle_id!r}: a plugin may only {action} the "
                "cycle state of scheduling contexts it was called in",
            )
        return state

    async def Read(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        state = await self._state(request, context, "read")
        out = []
        keys = list(request.keys) or state.keys()
        for key in keys:
            value = state.get(key)
            if value is None:
                continue
            if not isinstance(value, StateValue):
                if not request.keys:
                    continue  # reading everything: framework-private values are not shared
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"cycle state key {key!r} holds a {type(value).__name__}, not a StateValue "
                    f"(requested by plugin {request.plugin!r})",
                )
            out.append(entry_of(key, value))
        return pb.cyclestate.ReadStateReply(entries=out)

    async def _check_shared(self, state: CycleState, keys: list[str], request: Any,
                            context: grpc.aio.ServicerContext) -> None:
        """Refuse the whole request before anything changes: an empty key, or a key whose value is
        framework-private (not a StateValue: an in-process plugin's object that no other process may
        replace or remove)."""
        for key in keys:
            if not key:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "cycle state keys must not be empty")
            value = state.get(key)
            if value is not None and not isinstance(value, StateValue):
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"cycle state key {key!r} holds a {type(value).__name__}, not a StateValue "
                    f"(changed by plugin {request.plugin!r})",
                )

    async def Write(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        state = await self._state(request, context, "write")
        await self._check_shared(state, [entry.key for entry in request.entries], request, context)
        for entry in request.entries:
            if entry.deleted:
                state.delete(entry.key)
            else:
                state.write(entry.key, value_of(entry))
        return pb.cyclestate.WriteStateReply()

    async def Delete(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        state = await self._state(request, context, "delete")
        await self._check_shared(state, list(request.keys), request, context)
        deleted = 0
        for key in request.keys:
            if key in state:
                state.delete(key)
                deleted += 1
        return pb.cyclestate.DeleteStateReply(deleted=deleted)
