"""The Plugin service a host serves: each RPC finds the plugin instance, rebuilds the call (pod,
CycleState proxy, node batch from the mirror), runs the plugin inside its call context and turns the
answer, or the exception it raised, into the reply.

:meth:`Servicer._invoke` is the one place a plugin method runs: it enters the call's context (for
:func:`pluginhost.context` and the trace), turns an exception into an ``Error`` status naming it, and
leaves the context, whatever happens.
"""

from __future__ import annotations

import collections
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import grpc
import numpy as np

from pluginhost import pb
from pluginhost.context import CallContext
from pluginhost.convert import pod_from_proto, status_from_proto, status_to_proto
from pluginhost.cycle_state import RemoteCycleState
from pluginhost.definition import Hosted, action_from_text
from pluginhost.handle_client import HandleClient
from pluginhost.mirror import MirrorError, SnapshotMirror, rows_of_ids
from pluginhost.model import Pod
from pluginhost.plugin import (
    ClusterEvent,
    Controller,
    CycleState,
    FilterResult,
    NodeBatch,
    NodeToStatus,
    Plugin,
    QueuedPodInfo,
    QueueingHint,
)
from pluginhost.replies import fill_filter_reply, lookahead_verdict, sort_key_parts
from pluginhost.servicer_podgroup import PodGroupServicer
from pluginhost.servicer_sign import SignServicer
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.tracing import enter as _enter
from pluginhost.tracing import leave as _leave
from pluginhost.view import (
    ViewError,
    apply_view,
    changes_of,
    node_change_to_proto,
    pod_change_to_proto,
    view_from_proto,
)

__all__ = ["HOST_FEATURES", "HOST_VERSION", "HostState", "Servicer"]

T = TypeVar("T")

log = logging.getLogger("outrigger.pluginhost")

HOST_FEATURES = ("start-batch",)  # optional contract features this host understands (HandshakeResponse)
HOST_VERSION = "0.1.0"
# Views (CycleContext.node_view) applied recently, by (generation, wire bytes): a cycle's Filter
# stream, PreScore and Score calls share one.
_VIEW_CACHE_SIZE = 8


class _CallError(Exception):
    """Abort the RPC with a gRPC status (the framework maps it to an Error status for the plugin)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _failure(exc: BaseException) -> Status:
    return Status.failure(str(exc) or type(exc).__name__)


def _pod_json(data: bytes, kind: str) -> Any:
    if not data:
        return None
    from pluginhost.manifest import node_from_dict, pod_from_dict

    try:
        doc = json.loads(data)
        # The framework already accepted the object (maybe with --validate=warn|ignore): fields it does
        # not model must not cost the hint its object.
        if kind == "Pod":
            return pod_from_dict(doc, validate="ignore")
        return node_from_dict(doc, validate="ignore")
    except Exception:  # a hint gets what could be read; the contract says old/new may be partial
        return None


class HostState(Protocol):
    """What the servicer reads and calls of its :class:`~pluginhost.host.PluginHost`."""

    plugins: dict[str, Hosted]
    mirror: SnapshotMirror
    nodes_only: bool
    mirror_wait: float
    handle: HandleClient
    views: dict[tuple[int, bytes], tuple[Snapshot, Snapshot]]
    streams_opened: collections.Counter[str]
    cycles_started: collections.Counter[str]
    lookahead_pods: int
    controllers: dict[tuple[str, str], Controller]

    def framework_connected(self, address: str, credential: str = "") -> None: ...

    async def start_controller(self, hosted: Hosted, profile: str, inst: Controller) -> None: ...

    async def stop_controller(self, hosted: Hosted, profile: str, inst: object) -> None: ...

    async def stop_controllers(self, profile: str = "") -> None: ...


class Servicer(PodGroupServicer, SignServicer, pb.plugin_grpc.PluginServicer):  # type: ignore[misc]
    """The Plugin service of one host (see the module docstring)."""

    def __init__(self, host: HostState) -> None:
        self.host = host

    # ---- plumbing ------------------------------------------------------------------------------

    def _hosted(self, plugin: str) -> Hosted:
        hosted = self.host.plugins.get(plugin)
        if hosted is None:
            raise _CallError(
                grpc.StatusCode.NOT_FOUND,
                f"this plugin host has no plugin named {plugin!r} (it hosts {', '.join(self.host.plugins)})",
            )
        return hosted

    def _instance(self, plugin: str, profile: str) -> tuple[Hosted, Any]:
        hosted = self._hosted(plugin)
        inst = hosted.instances.get(profile)
        if inst is None:
            # The framework reconfigures and retries on this code (e.g. after the host restarted).
            raise _CallError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"plugin {plugin!r} is not configured for profile {profile!r}",
            )
        return hosted, inst

    async def _state(self, hosted: Hosted, ctx: Any, *, exact: bool) -> RemoteCycleState:
        """The CycleState proxy of a cycle-scoped request, with the snapshot of its generation
        (``exact``: wait for the mirror to reach it; otherwise whatever the mirror holds)."""
        snapshot: Snapshot | None = None
        if hosted.manifest.needs_snapshot:
            mirror = self.host.mirror
            if exact and self.host.nodes_only and ctx.node_generation:
                # Node objects are all this host's plugins read: any snapshot with the cycle's node
                # set will do, so no waiting for the placements of the pods before this one.
                try:
                    snapshot = await mirror.with_nodes_of(ctx.node_generation, ctx.snapshot_generation,
                                                          self.host.mirror_wait)
                except MirrorError as exc:
                    raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
            elif exact:
                try:
                    snapshot = await mirror.wait_for(ctx.snapshot_generation, self.host.mirror_wait)
                except MirrorError as exc:
                    raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
            else:
                snapshot = mirror.at(ctx.snapshot_generation) or mirror.latest()
            if snapshot is not None and ctx.HasField("node_view"):
                snapshot = self._view(snapshot, ctx.node_view)
        return RemoteCycleState(
            ctx.cycle_id,
            snapshot,
            plugin=hosted.name,
            declared=hosted.manifest.state_keys,
            entries=ctx.state,
            slow=self.host.handle.cycle_state(),
        )

    def _view(self, snapshot: Snapshot, msg: Any) -> Snapshot:
        """``snapshot`` as the request's node view shows it (transformers' changes, what-if nodes)."""
        key = (snapshot.generation, msg.SerializeToString(deterministic=True))
        cache = self.host.views
        hit = cache.get(key)
        if hit is not None and hit[0] is snapshot:
            return hit[1]
        try:
            view = apply_view(snapshot, view_from_proto(msg))
        except (ViewError, ValueError) as exc:
            raise _CallError(grpc.StatusCode.INVALID_ARGUMENT, f"bad node view: {exc}") from None
        cache[key] = (snapshot, view)
        while len(cache) > _VIEW_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        return view

    def _context(self, hosted: Hosted, point: str, profile: str, ctx: Any = None, pod: Pod | None = None,
                 state: CycleState | None = None) -> CallContext:
        return CallContext(
            plugin=hosted.name,
            point=point,
            profile=profile,
            args=hosted.args.get(profile, {}),
            handle=self.host.handle,
            pod=pod,
            cycle_id=ctx.cycle_id if ctx is not None else "",
            attempt=ctx.attempt if ctx is not None else 0,
            snapshot_generation=ctx.snapshot_generation if ctx is not None else 0,
            state=state,
            trace_context=ctx.trace_context if ctx is not None else {},
        )

    async def _rows(self, snapshot: Snapshot | None, ids: Sequence[int]) -> Any:
        if snapshot is None:
            raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, "this plugin does not follow the snapshot mirror")
        try:
            return rows_of_ids(snapshot, np.asarray(ids, dtype=np.int64))
        except MirrorError as exc:
            raise _CallError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None

    async def _abort(self, context: grpc.aio.ServicerContext, exc: _CallError) -> None:
        await context.abort(exc.code, str(exc))

    @staticmethod
    async def _invoke(call: CallContext, run: Callable[[], Awaitable[T]], otherwise: T) -> tuple[T, Status | None]:
        """Run a plugin method inside ``call``'s context: (its answer, None), or (``otherwise``, the
        Error status of the exception it raised)."""
        token = _enter(call)
        try:
            return await run(), None
        except _CallError as exc:
            return otherwise, Status.failure(str(exc))
        except Exception as exc:
            return otherwise, _failure(exc)
        finally:
            _leave(token)

    # ---- handshake ----------------------------------------------------------------------------------

    async def Handshake(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.host.framework_connected(request.framework_address, request.credential)
        return pb.plugin.HandshakeResponse(
            plugins=[h.manifest for h in self.host.plugins.values()], host_version=HOST_VERSION,
            features=list(HOST_FEATURES),
        )

    async def Configure(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            return pb.plugin.ConfigureReply(status=status_to_proto(Status.failure(str(exc))))
        try:
            args = json.loads(request.args_json) if request.args_json else {}
            if not isinstance(args, dict):
                raise ValueError(f"args must be a JSON object, got {type(args).__name__}")
        except ValueError as exc:
            return pb.plugin.ConfigureReply(status=status_to_proto(Status.failure(f"invalid args: {exc}")))
        kept = hosted.instances.get(request.profile)
        running = self.host.controllers.get((hosted.name, request.profile))
        if (kept is not None and hosted.args.get(request.profile) == args
                and (not isinstance(kept, Controller) or running is kept)):
            # The framework configures again after any failed call, as it cannot tell a slow host from a
            # restarted one: the same args keep the instance, its state and its running controller.
            return pb.plugin.ConfigureReply(status=status_to_proto(Status()))

        async def build() -> Plugin | None:
            return hosted.cls(args, self.host.handle)  # type: ignore[call-arg]

        inst, failed = await self._invoke(self._context(hosted, "Configure", request.profile), build, None)
        if inst is None or failed is not None:
            reason = failed.message() if failed is not None else "no instance"
            log.warning("configuring plugin %s for profile %r failed: %s", hosted.name, request.profile, reason)
            return pb.plugin.ConfigureReply(status=status_to_proto(failed or Status.failure(reason)))
        inst.name = hosted.name
        old = hosted.instances.get(request.profile)
        if old is not None:
            await self.host.stop_controller(hosted, request.profile, old)
        hosted.instances[request.profile] = inst
        hosted.args[request.profile] = args
        if isinstance(inst, Controller):
            try:
                await self.host.start_controller(hosted, request.profile, inst)
            except Exception as exc:
                log.warning("starting the controller of %s for profile %r failed: %s", hosted.name,
                            request.profile, exc)
                return pb.plugin.ConfigureReply(status=status_to_proto(_failure(exc)))
        return pb.plugin.ConfigureReply(status=status_to_proto(Status()))

    async def Stop(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        log.info("stopping controllers (profile %r): %s", request.profile or "*", request.reason)
        await self.host.stop_controllers(request.profile)
        return pb.plugin.Ack()

    # ---- transformers --------------------------------------------------------------------------

    async def BeforePreFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "BeforePreFilter", exact=True)
        call = self._context(hosted, "BeforePreFilter", request.ctx.profile, request.ctx, pod, state)
        (change, status), failed = await self._invoke(call, lambda: inst.before_pre_filter(state, pod), (None, SUCCESS))
        status = failed or status
        reply = pb.plugin.TransformPodReply(status=status_to_proto(status), state_writes=state.drain_writes())
        if change is not None and status.ok:
            reply.change.CopyFrom(pod_change_to_proto(change))
        return reply

    async def _transform_nodes(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=True)

        async def run() -> tuple[tuple[Any, ...], Status]:
            snapshot = state.snapshot
            if snapshot is None:
                raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, "this plugin does not follow the snapshot mirror")
            if method == "before_score":
                rows = await self._rows(snapshot, request.node_ids) if len(request.node_ids) else snapshot.table.order
                answer, status = await inst.before_score(state, pod, NodeBatch(snapshot, rows))
            else:
                answer, status = await getattr(inst, method)(state, pod, snapshot)
            return (changes_of(answer) if status.ok else ()), status

        call = self._context(hosted, point, request.ctx.profile, request.ctx, pod, state)
        no_changes: tuple[Any, ...] = ()
        (changes, status), failed = await self._invoke(call, run, (no_changes, SUCCESS))
        status = failed or status
        return pb.plugin.TransformNodesReply(
            status=status_to_proto(status), changes=[node_change_to_proto(c) for c in changes],
            state_writes=state.drain_writes(),
        )

    async def BeforeFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforeFilter", "before_filter")

    async def BeforeScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforeScore", "before_score")

    async def BeforePostFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforePostFilter", "before_post_filter")
    async def Debug(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            await self._abort(context, exc)
        if request.path not in hosted.manifest.debug_paths:
            have = ", ".join(hosted.manifest.debug_paths) or "none"
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"plugin {hosted.name!r} has no debug endpoint {request.path!r} (it has: {have})")
        first = next(iter(hosted.instances.values()), None)
        inst = hosted.instances.get(request.profile) if request.profile else first
        if inst is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"plugin {hosted.name!r} is not configured for profile {request.profile!r}")
            raise AssertionError("unreachable: abort raises")

        async def answer() -> str:
            value = inst.debug_endpoints()[request.path]()
            if inspect.isawaitable(value):
                value = await value
            return json.dumps(value)

        text, failed = await self._invoke(self._context(hosted, "Debug", request.profile), answer, "")
        if failed is not None:
            await context.abort(grpc.StatusCode.INTERNAL,
                                f"debug endpoint {request.path!r} of plugin {hosted.name!r} failed: {failed.message()}")
        return pb.plugin.DebugReply(json=text)

    # ---- queueing ------------------------------------------------------------------------------

    async def PreEnqueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        pod = pod_from_proto(request.pod)
        call = self._context(hosted, "PreEnqueue", request.profile, pod=pod)
        status, failed = await self._invoke(call, lambda: inst.pre_enqueue(pod), SUCCESS)
        return pb.plugin.StatusReply(status=status_to_proto(failed or status))

    async def QueueSortKey(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        pod = pod_from_proto(request.pod)
        info = QueuedPodInfo(pod, timestamp=request.enqueue_timestamp, attempts=request.attempts)

        async def sort_key() -> Any:
            return inst.sort_key(info)

        call = self._context(hosted, "QueueSortKey", request.profile, pod=pod)
        key, failed = await self._invoke(call, sort_key, None)
        if failed is not None:
            await context.abort(grpc.StatusCode.INTERNAL, f"sort_key failed: {failed.message()}")
        return pb.plugin.QueueSortKeyReply(key=sort_key_parts(key))

    async def EventsToRegister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            await self._abort(context, exc)
        return pb.plugin.EventsReply(events=list(hosted.manifest.events))

    async def QueueingHint(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            _, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        event = ClusterEvent(request.event.resource, action_from_text(request.event.action))
        kind = "Node" if event.resource == "Node" else "Pod"
        pod = pod_from_proto(request.pod)
        old, new = _pod_json(request.old_object_json, kind), _pod_json(request.new_object_json, kind)
        try:
            for reg in inst.events_to_register():
                hinted = reg.hint is not None and reg.event.matches(event)
                if hinted and reg.hint(pod, old, new) is QueueingHint.Queue:  # type: ignore[misc]
                    return pb.plugin.QueueingHintReply(queue=True)
            return pb.plugin.QueueingHintReply(queue=False)
        except Exception:
            log.exception("queueing hint of plugin %s failed", request.plugin)
            return pb.plugin.QueueingHintReply(queue=True)  # an error counts as Queue

    # ---- PreFilter -----------------------------------------------------------------------------------

    async def _cycle_call(self, request: Any, context: grpc.aio.ServicerContext, point: str, *, exact: bool) -> Any:
        ctx = request.ctx
        try:
            hosted, inst = self._instance(ctx.plugin, ctx.profile)
            state = await self._state(hosted, ctx, exact=exact)
        except _CallError as exc:
            await self._abort(context, exc)
        return hosted, inst, state, pod_from_proto(ctx.pod)

    async def PreFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PreFilter", exact=True)
        call = self._context(hosted, "PreFilter", request.ctx.profile, request.ctx, pod, state)
        (result, status), failed = await self._invoke(call, lambda: inst.pre_filter(state, pod), (None, SUCCESS))
        status = failed or status
        reply = pb.plugin.PreFilterReply(status=status_to_proto(status), state_writes=state.drain_writes())
        if result is not None and result.node_names is not None:
            reply.narrowed = True
            reply.node_names.extend(sorted(result.node_names))
        return reply

    async def _extension(self, request: Any, context: grpc.aio.ServicerContext, add: bool) -> Any:
        point = "PreFilterAddPod" if add else "PreFilterRemovePod"
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=True)

        async def run() -> Status:
            ext = inst.pre_filter_extensions()
            if ext is None:
                return Status()
            row = -1
            if state.snapshot is not None:
                row = int((await self._rows(state.snapshot, [request.node_id]))[0])
            other = pod_from_proto(request.other_pod)
            fn = ext.add_pod if add else ext.remove_pod
            return await fn(state, pod, other, row)  # type: ignore[no-any-return]

        call = self._context(hosted, point, request.ctx.profile, request.ctx, pod, state)
        status, failed = await self._invoke(call, run, SUCCESS)
        return pb.plugin.StatusReply(status=status_to_proto(failed or status), state_writes=state.drain_writes())

    async def PreFilterAddPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._extension(request, context, add=True)

    async def PreFilterRemovePod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._extension(request, context, add=False)

    # ---- Filter / Score streams -------------------------------------------------------------------

    async def _open_stream(self, first: Any, context: grpc.aio.ServicerContext, point: str) -> Any:
        ctx = first.ctx
        try:
            hosted, inst = self._instance(ctx.plugin, ctx.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        try:
            state = await self._state(hosted, ctx, exact=True)
            error = None
        except _CallError as exc:
            # Answer every batch with the failure (the contract's per-batch error), not a torn stream.
            state = RemoteCycleState(ctx.cycle_id, None, plugin=hosted.name)
            error = Status.failure(str(exc))
        return hosted, inst, state, pod_from_proto(ctx.pod), error

    async def Filter(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def answer(inst: Any, state: RemoteCycleState, pod: Pod, batch: NodeBatch, reply: Any,
                         with_scores: bool) -> None:
            res = await inst.filter(state, pod, batch)
            if not isinstance(res, FilterResult):
                raise TypeError(f"filter returned {type(res).__name__}, not a FilterResult")
            fill_filter_reply(reply, res)
            if with_scores and len(res) == len(batch):
                passing = res.codes == 0
                scores = np.zeros(len(batch), dtype=np.int64)
                if passing.any():
                    scores[passing] = np.asarray(await inst.score(state, pod, batch.take(passing)), np.int64)
                reply.scores.extend(scores.tolist())

        async for reply in self._batches(request_iterator, context, "Filter", pb.plugin.FilterReply, answer):
            yield reply

    async def Score(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def answer(inst: Any, state: RemoteCycleState, pod: Pod, batch: NodeBatch, reply: Any,
                         with_scores: bool) -> None:
            scores = await inst.score(state, pod, batch)
            reply.scores.extend(np.asarray(scores, dtype=np.int64).reshape(-1).tolist())

        async for reply in self._batches(request_iterator, context, "Score", pb.plugin.ScoreReply, answer):
            yield reply

    async def _batches(
        self,
        request_iterator: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        point: str,
        reply_type: Any,
        answer: Callable[[Any, RemoteCycleState, Pod, NodeBatch, Any, bool], Awaitable[None]],
    ) -> AsyncIterator[Any]:
        """A node-batch stream (Filter or Score): a start message, then one reply per batch. A stream
        may carry several cycles one after the other: each new start message begins the next one.
        A failure answers that batch with an error (the contract's per-batch error), never a torn stream."""
        requests = aiter(request_iterator)
        first = await anext(requests, None)
        if first is None:
            return
        if first.WhichOneof("msg") != "start":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"a {point} stream must start with {point}Start")
        self.host.streams_opened[point] += 1
        req = first
        while req is not None:
            if req.WhichOneof("msg") == "start":
                start = req.start
                self.host.cycles_started[point] += 1
                hosted, inst, state, pod, error = await self._open_stream(start, context, point)
                with_scores = bool(getattr(start, "with_scores", False))
                call_ctx = self._context(hosted, point, start.ctx.profile, start.ctx, pod, state)
                batch_msg = start.batch if start.HasField("batch") else None  # the "start-batch" feature
            else:
                batch_msg = req.batch
            if batch_msg is not None:
                reply = reply_type(batch_seq=batch_msg.batch_seq)
                if error is not None:
                    reply.error.CopyFrom(status_to_proto(error))
                else:
                    run = functools.partial(self._answer_batch, answer, inst, state, pod, batch_msg, reply, with_scores)
                    _, failed = await self._invoke(call_ctx, run, None)
                    if failed is not None:
                        reply = reply_type(batch_seq=batch_msg.batch_seq, error=status_to_proto(failed))
                    reply.state_writes.extend(state.drain_writes())
                yield reply
            req = await anext(requests, None)

    async def _answer_batch(
        self, answer: Callable[[Any, RemoteCycleState, Pod, NodeBatch, Any, bool], Awaitable[None]], inst: Any,
        state: RemoteCycleState, pod: Pod, msg: Any, reply: Any, with_scores: bool,
    ) -> None:
        batch = NodeBatch(state.snapshot, await self._rows(state.snapshot, msg.node_ids))  # type: ignore[arg-type]
        await answer(inst, state, pod, batch, reply, with_scores)

    # ---- Lookahead ---------------------------------------------------------------------------------

    async def Lookahead(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        """Filter/Score answers over every node for pods ahead of their cycles (PluginManifest.lookahead):
        one reply per request, in order. A failure answers that request (or that pod) with an error,
        never a torn stream: the framework then calls Filter/Score in the pod's cycle."""
        self.host.streams_opened["Lookahead"] += 1
        async for req in request_iterator:
            try:
                yield await self._lookahead(req)
            except _CallError as exc:
                yield pb.plugin.LookaheadReply(seq=req.seq, error=status_to_proto(Status.failure(str(exc))))

    async def _lookahead(self, req: Any) -> Any:
        hosted, inst = self._instance(req.plugin, req.profile)
        if not hosted.manifest.lookahead:
            raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, f"plugin {hosted.name!r} did not declare lookahead")
        try:
            snapshot = await self.host.mirror.wait_until(req.node_generation, self.host.mirror_wait)
        except MirrorError as exc:
            raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
        reply = pb.plugin.LookaheadReply(
            seq=req.seq, generation=self.host.mirror.generation, node_ids=snapshot.table.ids.astype("<u4").tobytes()
        )
        everything = NodeBatch(snapshot, np.arange(len(snapshot), dtype=np.int64))
        self.host.lookahead_pods += len(req.pods)
        for msg in req.pods:
            verdict = reply.verdicts.add(uid=msg.metadata.uid)
            try:
                pod = pod_from_proto(msg)
            except Exception as exc:
                failed: Status | None = _failure(exc)
            else:
                state = RemoteCycleState("", snapshot, plugin=hosted.name)
                call = self._context(hosted, "Lookahead", req.profile, pod=pod, state=state)
                answer = functools.partial(lookahead_verdict, inst, state, pod, everything, verdict, req.filter,
                                           req.score)
                _, failed = await self._invoke(call, answer, None)
            if failed is not None:
                verdict.Clear()
                verdict.uid = msg.metadata.uid
                verdict.error.CopyFrom(status_to_proto(failed))
        return reply

    # ---- PostFilter, PreScore, NormalizeScore ------------------------------------------------------

    async def PostFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PostFilter", exact=True)
        statuses = NodeToStatus()
        for name, st in request.node_statuses.items():
            if name == "":
                statuses.absent = status_from_proto(st)
            else:
                statuses.statuses[name] = status_from_proto(st)
        call = self._context(hosted, "PostFilter", request.ctx.profile, request.ctx, pod, state)
        post_filter = functools.partial(inst.post_filter, state, pod, statuses)
        (result, status), failed = await self._invoke(call, post_filter, (None, SUCCESS))
        status = failed or status
        reply = pb.plugin.PostFilterReply(status=status_to_proto(status), state_writes=state.drain_writes())
        # A result nominates its node, or clears the nomination when it names none; no result leaves it.
        if result is None:
            reply.nominating_mode = pb.plugin.NOMINATING_MODE_NOOP
        else:
            reply.nominating_mode = pb.plugin.NOMINATING_MODE_OVERRIDE
            reply.nominated_node_name = result.nominated_node_name
        return reply

    async def PreScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PreScore", exact=True)

        async def run() -> Status:
            rows = await self._rows(state.snapshot, request.feasible_node_ids)
            return await inst.pre_score(state, pod, NodeBatch(state.snapshot, rows))  # type: ignore[arg-type,no-any-return]

        call = self._context(hosted, "PreScore", request.ctx.profile, request.ctx, pod, state)
        status, failed = await self._invoke(call, run, SUCCESS)
        return pb.plugin.StatusReply(status=status_to_proto(failed or status), state_writes=state.drain_writes())

    async def NormalizeScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "NormalizeScore", exact=True)
        scores = np.asarray(request.scores, dtype=np.int64).copy()

        async def run() -> Status | None:
            rows = await self._rows(state.snapshot, request.node_ids)
            return await inst.normalize_score(state, pod, NodeBatch(state.snapshot, rows), scores)  # type: ignore[arg-type,no-any-return]

        call = self._context(hosted, "NormalizeScore", request.ctx.profile, request.ctx, pod, state)
        status, failed = await self._invoke(call, run, None)
        return pb.plugin.NormalizeScoreReply(
            status=status_to_proto(failed or status or SUCCESS), scores=scores.tolist(),
            state_writes=state.drain_writes(),
        )

    # ---- points about one node -----------------------------------------------------------------------

    async def _node_call(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=False)
        call = self._context(hosted, point, request.ctx.profile, request.ctx, pod, state)
        answer, failed = await self._invoke(call, lambda: getattr(inst, method)(state, pod, request.node_name), None)
        return answer, failed, state

    async def _node_status(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        """A point about one node answered with a Status (Reserve, PreBindPreFlight, PreBind, Bind)."""
        status, failed, state = await self._node_call(request, context, point, method)
        return pb.plugin.StatusReply(status=status_to_proto(failed or status), state_writes=state.drain_writes())

    async def _node_notice(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        """An informational point about one node (Unreserve, PostBind): a failure is logged."""
        _, failed, _ = await self._node_call(request, context, point, method)
        if failed is not None:
            log.error("%s of plugin %s failed: %s", point, request.ctx.plugin, failed.message())
        return pb.plugin.Ack()

    async def Reserve(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_status(request, context, "Reserve", "reserve")

    async def Unreserve(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_notice(request, context, "Unreserve", "unreserve")

    async def Permit(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        answer, failed, state = await self._node_call(request, context, "Permit", "permit")
        status, timeout = (failed, 0.0) if failed is not None else answer
        return pb.plugin.PermitReply(
            status=status_to_proto(status), timeout_ms=int(float(timeout) * 1000), state_writes=state.drain_writes()
        )

    async def PreBindPreFlight(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_status(request, context, "PreBindPreFlight", "pre_bind_pre_flight")

    async def PreBind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_status(request, context, "PreBind", "pre_bind")

    async def Bind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_status(request, context, "Bind", "bind")

    async def PostBind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._node_notice(request, context, "PostBind", "post_bind")
