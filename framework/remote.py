"""Remote plugins: the connection to their plugin hosts, and the adapter the runtime calls exactly
like an in-process plugin. Endpoints come from a RemotePlugins document (:mod:`framework.remoteconfig`,
whose names are re-exported here).

At startup :meth:`RemotePlugins.connect` handshakes every endpoint (bounded retries with backoff; an
unreachable one is an error naming it) and :meth:`RemotePlugins.register` puts each hosted plugin in
the :class:`~framework.plugins.Registry` with the extension points of its manifest, so profiles name
it like any in-tree plugin. Once the scheduler exists, :meth:`RemotePlugins.attach` tells each adapter
its profile, starts the snapshot publisher and delivers each plugin's ``pluginConfig`` args (Configure).

The adapter (:class:`RemotePlugin`, one class per set of declared points) calls only those points.
Every call carries the point's deadline. A gRPC failure raises :class:`RemotePluginError` naming the
code, the endpoint and its address; the runtime reports it as ``running Filter plugin 'X': UNAVAILABLE:
...``. A replica that failed is handshaken (and its plugins configured) again before its next call, so a
restarted host is picked up without a framework restart. Filter keeps one stream per (cycle, plugin)
open across the runtime's windows and closes it in ``filter_finished``; Score sends one stream per
cycle; declared CycleState keys ride on requests and writes come back on replies. Binding-cycle
points wait for their replies except PostBind, which is informational and sent without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt

from pluginhost import pb
from pluginhost.convert import pod_to_proto, status_from_proto, status_to_proto
from pluginhost.handle_client import CHANNEL_OPTIONS
from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    POINT_CLASSES,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    Plugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterResult,
    QueuedPodInfo,
    QueueingHint,
    ScoreExtensions,
)
from pluginhost.state import apply_entries, entries_for
from pluginhost.status import SUCCESS, Code, Status

from .handle_service import FrameworkServices
from .mirror import SnapshotPublisher
from .plugins import Registry
from .remoteconfig import (
    API_VERSION,
    DEFAULT_DEADLINE,
    KIND,
    EndpointConfig,
    load_remote_plugins,
    parse_duration,
    parse_remote_plugins,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_DEADLINE",
    "KIND",
    "EndpointConfig",
    "PointStats",
    "RemotePluginError",
    "RemotePlugins",
    "RemotePluginsError",
    "load_remote_plugins",
    "parse_duration",
    "parse_remote_plugins",
]

log = logging.getLogger("outrigger.remote")

FRAMEWORK_VERSION = "0.1.0"
_STATE_PREFIX = "outrigger.io/remote/"  # CycleState keys the adapters keep their per-cycle data under

E = pb.plugin

_ENUM_POINT: dict[int, str] = {
    E.EXTENSION_POINT_PRE_ENQUEUE: "preEnqueue",
    E.EXTENSION_POINT_QUEUE_SORT: "queueSort",
    E.EXTENSION_POINT_PRE_FILTER: "preFilter",
    E.EXTENSION_POINT_FILTER: "filter",
    E.EXTENSION_POINT_POST_FILTER: "postFilter",
    E.EXTENSION_POINT_PRE_SCORE: "preScore",
    E.EXTENSION_POINT_SCORE: "score",
    E.EXTENSION_POINT_RESERVE: "reserve",
    E.EXTENSION_POINT_PERMIT: "permit",
    E.EXTENSION_POINT_PRE_BIND: "preBind",
    E.EXTENSION_POINT_BIND: "bind",
    E.EXTENSION_POINT_POST_BIND: "postBind",
}


# ---------------------------------------------------------------------------------------------------
# Errors and statistics


class RemotePluginsError(RuntimeError):
    """A remote plugin endpoint cannot be used (unreachable, bad manifest, rejected configuration)."""


class RemotePluginError(RuntimeError):
    """A call to a remote plugin failed (the runtime turns it into an Error status naming the plugin)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class PointStats:
    """Calls of one plugin at one point: how many, how long, how many failed, bytes each way."""

    calls: int = 0
    seconds: float = 0.0
    errors: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    latencies: list[float] = field(default_factory=list)

    def record(self, seconds: float, *, error: bool = False) -> None:
        self.calls += 1
        self.seconds += seconds
        self.errors += int(error)
        if len(self.latencies) < 100_000:  # bounded: a long-running framework keeps counting, not listing
            self.latencies.append(seconds)


# ---------------------------------------------------------------------------------------------------
# Endpoints and replicas


class _Replica:
    """One address of an endpoint: a channel, stubs, and whether it must be handshaken again."""

    def __init__(self, endpoint: Endpoint, address: str) -> None:
        self.endpoint = endpoint
        self.address = address
        self.channel = grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self.stub: Any = pb.plugin_grpc.PluginStub(self.channel)  # type: ignore[no-untyped-call]
        self._sync_channel: grpc.Channel | None = None
        self.suspect = False  # a call failed: handshake and reconfigure before the next one
        self.lock = asyncio.Lock()
        self.picked = 0  # calls routed here (how replicas share the load)

    def sync_stub(self) -> Any:
        # QueueSort keys and queueing hints are asked from synchronous queue code.
        if self._sync_channel is None:
            self._sync_channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        return pb.plugin_grpc.PluginStub(self._sync_channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self.channel.close()
        if self._sync_channel is not None:
            self._sync_channel.close()


_CHANNEL_OPTIONS = [*CHANNEL_OPTIONS, ("grpc.max_reconnect_backoff_ms", 1000)]


def _describe(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{getattr(code, 'name', code)}: {details}"


class Endpoint:
    """A plugin host (one or several replicas) and the plugins it serves."""

    def __init__(self, config: EndpointConfig, framework_address: str) -> None:
        self.config = config
        self.framework_address = framework_address
        self.replicas = [_Replica(self, a) for a in config.addresses]
        self.manifests: dict[str, Any] = {}
        self.adapters: list[RemotePlugin] = []
        self._next = 0

    @property
    def name(self) -> str:
        return self.config.name

    def where(self, replica: _Replica) -> str:
        return f"plugin host {self.name!r} at {replica.address}"

    async def _handshake(self, replica: _Replica, timeout: float) -> Any:
        request = pb.plugin.HandshakeRequest(
            framework_version=FRAMEWORK_VERSION, framework_address=self.framework_address
        )
        return await replica.stub.Handshake(request, timeout=timeout)

    async def connect(self) -> None:
        """Handshake every replica (bounded retries with backoff) and check their manifests agree."""
        manifests: list[dict[str, Any]] = []
        for replica in self.replicas:
            reply = await self._handshake_with_retries(replica)
            manifests.append({m.name: m for m in reply.plugins})
        first = manifests[0]
        for replica, other in zip(self.replicas[1:], manifests[1:]):
            if {k: v.SerializeToString() for k, v in other.items()} != {
                k: v.SerializeToString() for k, v in first.items()
            }:
                raise RemotePluginsError(
                    f"{self.where(replica)} serves different plugins than {self.replicas[0].address}: "
                    "every replica of an endpoint must run the same plugins"
                )
        if not first:
            raise RemotePluginsError(f"{self.where(self.replicas[0])} serves no plugins")
        self.manifests = first

    async def _handshake_with_retries(self, replica: _Replica) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.connect_timeout
        backoff = 0.05
        last = ""
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RemotePluginsError(
                    f"{self.where(replica)} is unreachable after {self.config.connect_timeout:g}s: {last}"
                )
            try:
                return await self._handshake(replica, min(remaining, 2.0))
            except grpc.RpcError as exc:
                last = _describe(exc)
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise RemotePluginsError(f"handshake with {self.where(replica)} failed: {last}") from None
            await asyncio.sleep(min(backoff, max(deadline - loop.time(), 0)))
            backoff = min(backoff * 2, 1.0)

    def pick(self, key: str = "") -> _Replica:
        """The replica for a call: by cycle id when there is one (a cycle's calls go to one replica),
        round robin otherwise."""
        if len(self.replicas) == 1:
            replica = self.replicas[0]
        elif key:
            replica = self.replicas[hash(key) % len(self.replicas)]
        else:
            self._next = (self._next + 1) % len(self.replicas)
            replica = self.replicas[self._next]
        replica.picked += 1
        return replica

    async def ready(self, replica: _Replica) -> None:
        """If a call to ``replica`` failed before, handshake and reconfigure it (the host may have
        restarted and lost its configuration and mirror)."""
        if not replica.suspect:
            return
        async with replica.lock:
            if not replica.suspect:
                return
            try:
                reply = await self._handshake(replica, self.config.deadline("configure"))
            except grpc.RpcError as exc:
                raise RemotePluginError(f"{_describe(exc)} ({self.where(replica)})", exc.code()) from None
            served = {m.name for m in reply.plugins}
            missing = [a.name for a in self.adapters if a.name not in served]
            if missing:
                raise RemotePluginError(f"{self.where(replica)} no longer serves {', '.join(missing)}")
            for adapter in self.adapters:
                await adapter.configure_on(replica)
            replica.suspect = False
            log.info("%s is back: handshaken and configured again", self.where(replica))

    async def configure_all(self) -> None:
        for adapter in self.adapters:
            for replica in self.replicas:
                await adapter.configure_on(replica)

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.close()


# ---------------------------------------------------------------------------------------------------
# Per-cycle data the adapters keep in the CycleState (freed with it)


class _FilterStream:
    __slots__ = ("call", "replica", "seq", "with_scores")

    def __init__(self, call: Any, replica: _Replica, with_scores: bool) -> None:
        self.call = call
        self.replica = replica
        self.seq = 0
        self.with_scores = with_scores


class _CycleData:
    """An adapter's per-cycle data: its open Filter stream and the scores Filter brought back.

    Kept in the CycleState so it is freed with the scheduling context. A clone (preemption's what-if
    states) gets an empty one: a what-if never shares the original's stream.
    """

    __slots__ = ("filter", "score_rows", "score_values")

    def __init__(self) -> None:
        self.filter: _FilterStream | None = None
        self.score_rows: list[npt.NDArray[np.int64]] = []
        self.score_values: list[npt.NDArray[np.int64]] = []

    def clone(self) -> _CycleData:
        return _CycleData()


_VALID_CODES = max(int(c) for c in Code)


# ---------------------------------------------------------------------------------------------------
# The adapter


class RemotePlugin(Plugin):
    """A plugin served by a plugin host. Built by :meth:`RemotePlugins.register`'s factories as an
    instance of a class deriving from the base class of every point in the host's manifest."""

    manifest: Any = None
    points: frozenset[str] = frozenset()

    def __init__(self, endpoint: Endpoint, args: dict[str, Any], handle: Handle | None) -> None:
        m = self.manifest
        self.name = str(m.name)
        self.endpoint = endpoint
        self.args = args
        self.handle = handle
        self.profile = ""  # set by RemotePlugins.attach
        self.scores_enabled = "score" in self.points
        self.state_keys = tuple(m.state_keys)
        self.needs_snapshot = bool(m.needs_snapshot)
        self.batch_size = endpoint.config.batch_size or int(m.preferred_batch_size)
        self.with_scores = bool(m.filter_and_score) and "score" in self.points and "preScore" not in self.points
        self.stats: dict[str, PointStats] = {}
        self.publisher: SnapshotPublisher | None = None
        self.services: FrameworkServices | None = None
        self._data_key = _STATE_PREFIX + self.name
        self._informational: set[asyncio.Task[None]] = set()
        endpoint.adapters.append(self)

    # ---- plumbing ------------------------------------------------------------------------------

    def _stat(self, point: str) -> PointStats:
        st = self.stats.get(point)
        if st is None:
            st = self.stats[point] = PointStats()
        return st

    def _error(self, replica: _Replica, exc: grpc.RpcError) -> RemotePluginError:
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNKNOWN,
                    grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED):
            replica.suspect = True  # the host may have restarted: handshake again before the next call
        return RemotePluginError(f"{_describe(exc)} ({self.endpoint.where(replica)})", code)

    async def configure_on(self, replica: _Replica) -> None:
        request = pb.plugin.ConfigureRequest(plugin=self.name, profile=self.profile, args_json=json.dumps(self.args))
        where = self.endpoint.where(replica)
        try:
            reply = await replica.stub.Configure(request, timeout=self.endpoint.config.deadline("configure"))
        except grpc.RpcError as exc:
            raise RemotePluginsError(
                f"configuring remote plugin {self.name!r} for profile {self.profile!r} at {where}: {_describe(exc)}"
            ) from None
        status = status_from_proto(reply.status)
        if not status.ok:
            raise RemotePluginsError(
                f"remote plugin {self.name!r} rejected its configuration for profile {self.profile!r} "
                f"({where}): {status.message() or status.code.name}"
            )

    def _ctx(self, state: CycleState, pod: Pod) -> Any:
        snapshot = state.snapshot
        generation = snapshot.generation if snapshot is not None else 0
        if self.needs_snapshot and self.publisher is not None:
            self.publisher.publish_up_to(generation)
        return pb.plugin.CycleContext(
            cycle_id=state.cycle_id,
            plugin=self.name,
            profile=self.profile,
            snapshot_generation=generation,
            pod=self._pod_proto(state, pod),
            state=entries_for(state, self.state_keys, plugin=self.name) if self.state_keys else (),
            attempt=state.attempt,
        )

    def _pod_proto(self, state: CycleState, pod: Pod) -> Any:
        # The same pod object meets every point of a cycle: convert it once per cycle, not per call.
        key = _STATE_PREFIX + "pod"
        cached = state.get(key)
        if cached is not None and cached[0] is pod:
            return cached[1]
        msg = pod_to_proto(pod)
        state.write(key, (pod, msg))
        return msg

    def _data(self, state: CycleState) -> _CycleData:
        data = state.get(self._data_key)
        if data is None:
            data = _CycleData()
            state.write(self._data_key, data)
        return data  # type: ignore[no-any-return]

    def _deadline(self, point: str) -> float:
        return self.endpoint.config.deadline(point)

    async def _call(self, point: str, method: str, request: Any, *, state: CycleState | None = None,
                    config_point: str = "") -> Any:
        """One unary call with the point's deadline; retried once if the host lost its configuration."""
        key = state.cycle_id if state is not None else ""
        replica = self.endpoint.pick(key)
        stat = self._stat(point)
        stat.bytes_sent += request.ByteSize()
        started = time.perf_counter()
        timeout = self._deadline(config_point or point)
        in_flight = (
            self.services.in_flight(state) if self.services is not None and state is not None
            else contextlib.nullcontext()
        )
        try:
            with in_flight:
                await self.endpoint.ready(replica)
                try:
                    reply = await getattr(replica.stub, method)(request, timeout=timeout)
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                        raise
                    # "not configured": the host restarted between two calls. Configure and retry once.
                    replica.suspect = True
                    await self.endpoint.ready(replica)
                    reply = await getattr(replica.stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            stat.record(time.perf_counter() - started, error=True)
            raise self._error(replica, exc) from None
        except BaseException:
            stat.record(time.perf_counter() - started, error=True)
            raise
        stat.record(time.perf_counter() - started)
        stat.bytes_received += reply.ByteSize()
        return reply

    def _node_request(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        node_id = 0
        snap = state.snapshot
        if snap is not None:
            row = snap.row(node_name)
            if row is not None:
                node_id = int(snap.table.ids[row])
        return pb.plugin.NodeRequest(ctx=self._ctx(state, pod), node_name=node_name, node_id=node_id)

    def _ids(self, batch: NodeBatch) -> list[int]:
        ids: list[int] = batch.snapshot.table.ids[batch.rows].tolist()
        return ids

    # ---- queueing ------------------------------------------------------------------------------

    async def pre_enqueue(self, pod: Pod) -> Status:
        request = pb.plugin.PodRequest(plugin=self.name, profile=self.profile, pod=pod_to_proto(pod))
        reply = await self._call("PreEnqueue", "PreEnqueue", request, config_point="preEnqueue")
        return status_from_proto(reply.status)

    def sort_key(self, info: QueuedPodInfo) -> Any:
        replica = self.endpoint.pick()
        request = pb.plugin.QueueSortKeyRequest(
            pod=pod_to_proto(info.pod), enqueue_timestamp=info.timestamp, attempts=info.attempts,
            plugin=self.name, profile=self.profile,
        )
        stat = self._stat("QueueSortKey")
        started = time.perf_counter()
        try:
            reply = replica.sync_stub().QueueSortKey(request, timeout=self._deadline("queueSort"))
        except grpc.RpcError as exc:
            stat.record(time.perf_counter() - started, error=True)
            # The queue cannot fail a push: a pod whose key is unknown sorts after every other pod.
            log.error("QueueSort plugin %r: %s; the pod sorts last", self.name, self._error(replica, exc))
            self._recover_soon(replica)
            return ((3, ""),)
        stat.record(time.perf_counter() - started)
        # Parts of different kinds order int64 < double < string (the contract's rule).
        out = []
        for part in reply.key:
            kind = part.WhichOneof("value")
            rank = {"int_value": 0, "double_value": 1, "string_value": 2}.get(kind or "", 2)
            out.append((rank, getattr(part, kind) if kind else ""))
        return tuple(out)

    def _recover_soon(self, replica: _Replica) -> None:
        """Synchronous callers (the queue) cannot await a re-handshake: schedule it, so a restarted
        host serves the next call even if this plugin has no asynchronous point."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._recover(replica))
        self._informational.add(task)
        task.add_done_callback(self._informational.discard)

    async def _recover(self, replica: _Replica) -> None:
        try:
            await self.endpoint.ready(replica)
        except Exception as exc:
            log.warning("plugin host of %r is still unavailable: %s", self.name, exc)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return bool(self.sort_key(a) < self.sort_key(b))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        from pluginhost.host import action_from_text

        out = []
        for ev in self.manifest.events:
            event = ClusterEvent(ev.event.resource, action_from_text(ev.event.action))
            hint = functools.partial(self._hint, ev.event) if ev.has_queueing_hint else None
            out.append(ClusterEventWithHint(event, hint))
        if not out:
            out.append(ClusterEventWithHint(ClusterEvent("*", ActionType.All)))
        return out

    def _hint(self, event: Any, pod: Pod, old: Any, new: Any) -> QueueingHint:
        def as_json(obj: Any) -> bytes:
            if isinstance(obj, Pod | Node) and obj.raw:
                return json.dumps(obj.raw).encode()
            return b""

        request = pb.plugin.QueueingHintRequest(
            plugin=self.name, pod=pod_to_proto(pod), profile=self.profile, event=event,
            old_object_json=as_json(old), new_object_json=as_json(new),
        )
        replica = self.endpoint.pick()
        try:
            reply = replica.sync_stub().QueueingHint(request, timeout=self._deadline("preEnqueue"))
        except grpc.RpcError as exc:
            log.warning("queueing hint of plugin %r failed (%s): requeueing", self.name, self._error(replica, exc))
            self._recover_soon(replica)
            return QueueingHint.Queue  # the contract: an error counts as Queue
        return QueueingHint.Queue if reply.queue else QueueingHint.QueueSkip

    # ---- PreFilter -----------------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        reply = await self._call("PreFilter", "PreFilter", pb.plugin.CycleRequest(ctx=self._ctx(state, pod)),
                                 state=state, config_point="preFilter")
        apply_entries(state, reply.state_writes)
        result = PreFilterResult(frozenset(reply.node_names)) if reply.narrowed else None
        return result, status_from_proto(reply.status)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        if E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS not in self.manifest.points:
            return None
        return _RemoteExtensions(self)

    async def _extension(self, state: CycleState, pod: Pod, other: Pod, node_row: int, add: bool) -> Status:
        snap = state.snapshot
        node_id = int(snap.table.ids[node_row]) if snap is not None else 0
        node_name = snap.table.names[node_row] if snap is not None else ""
        request = pb.plugin.PreFilterExtensionRequest(
            ctx=self._ctx(state, pod), other_pod=pod_to_proto(other), node_id=node_id, node_name=node_name
        )
        point = "PreFilterAddPod" if add else "PreFilterRemovePod"
        reply = await self._call(point, point, request, state=state, config_point="preFilter")
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    # ---- Filter --------------------------------------------------------------------------------------

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        data = self._data(state)
        stream = data.filter
        stat = self._stat("Filter")
        started = time.perf_counter()
        in_flight = self.services.in_flight(state) if self.services is not None else contextlib.nullcontext()
        try:
            with in_flight:
                if stream is None:
                    stream = data.filter = await self._open_filter(state, pod)
                result = await self._filter_window(stream, state, batch, data, stat)
        except grpc.RpcError as exc:
            stat.record(time.perf_counter() - started, error=True)
            await self._close_filter(data)
            raise self._error(stream.replica if stream is not None else self.endpoint.pick(), exc) from None
        except BaseException:
            stat.record(time.perf_counter() - started, error=True)
            await self._close_filter(data)
            raise
        stat.record(time.perf_counter() - started)
        return result

    async def _open_filter(self, state: CycleState, pod: Pod) -> _FilterStream:
        replica = self.endpoint.pick(state.cycle_id)
        await self.endpoint.ready(replica)
        with_scores = self.with_scores and self.scores_enabled and self.name not in state.skip_score
        call = replica.stub.Filter(timeout=self._deadline("filter"))
        start = pb.plugin.FilterRequest(start=pb.plugin.FilterStart(ctx=self._ctx(state, pod), with_scores=with_scores))
        self._stat("Filter").bytes_sent += start.ByteSize()
        await call.write(start)
        return _FilterStream(call, replica, with_scores)

    def _batches(self, batch: NodeBatch) -> list[tuple[int, int]]:
        n = len(batch)
        size = self.batch_size or n or 1
        return [(lo, min(lo + size, n)) for lo in range(0, n, size)]

    async def _filter_window(
        self, stream: _FilterStream, state: CycleState, batch: NodeBatch, data: _CycleData, stat: PointStats
    ) -> FilterResult:
        n = len(batch)
        ids = batch.snapshot.table.ids[batch.rows]
        generation = batch.snapshot.generation
        pending: dict[int, tuple[int, int]] = {}
        for lo, hi in self._batches(batch):
            msg = pb.types.NodeBatch(snapshot_generation=generation, batch_seq=stream.seq, node_ids=ids[lo:hi].tolist())
            if not self.needs_snapshot:
                msg.node_names.extend(batch.snapshot.table.names[r] for r in batch.rows[lo:hi].tolist())
            request = pb.plugin.FilterRequest(batch=msg)
            stat.bytes_sent += request.ByteSize()
            await stream.call.write(request)
            pending[stream.seq] = (lo, hi)
            stream.seq += 1
        codes = np.zeros(n, dtype=np.int8)
        reason_index = np.zeros(n, dtype=np.int32)
        reasons: list[tuple[str, ...]] = []
        while pending:
            reply = await stream.call.read()
            if reply is grpc.aio.EOF:
                raise RemotePluginError(
                    f"the plugin closed its Filter stream with {len(pending)} batch(es) unanswered "
                    f"({self.endpoint.where(stream.replica)})"
                )
            stat.bytes_received += reply.ByteSize()
            span = pending.pop(reply.batch_seq, None)
            if span is None:
                raise RemotePluginError(f"answered Filter batch {reply.batch_seq}, which was not sent (or twice)")
            apply_entries(state, reply.state_writes)
            if reply.HasField("error") and reply.error.code != pb.types.CODE_SUCCESS:
                raise RemotePluginError(status_from_proto(reply.error).message() or "Filter batch failed")
            lo, hi = span
            got = np.asarray(reply.codes, dtype=np.int64)
            if got.shape[0] != hi - lo:
                raise RemotePluginError(
                    f"answered {got.shape[0]} of the {hi - lo} nodes of Filter batch {reply.batch_seq}"
                )
            if got.shape[0] and (int(got.min()) < 0 or int(got.max()) > _VALID_CODES):
                raise RemotePluginError("returned an unknown status code")
            codes[lo:hi] = got
            failed = got != 0
            if failed.any() and len(reply.reason_index):
                index = np.asarray(reply.reason_index, dtype=np.int64)
                if index.shape[0] != hi - lo or int(index[failed].max()) >= len(reply.reason_table):
                    raise RemotePluginError(f"sent a bad reason index in Filter batch {reply.batch_seq}")
                reason_index[lo:hi] = index + len(reasons)
                reasons.extend(tuple(rs.reasons) for rs in reply.reason_table)
            elif failed.any():
                reason_index[lo:hi] = len(reasons)
                reasons.append(())
            if stream.with_scores:
                scores = np.asarray(reply.scores, dtype=np.int64)
                if scores.shape[0] != hi - lo:
                    raise RemotePluginError(
                        f"sent {scores.shape[0]} scores for the {hi - lo} nodes of Filter batch {reply.batch_seq}"
                    )
                passing = ~failed
                data.score_rows.append(batch.rows[lo:hi][passing])
                data.score_values.append(scores[passing])
        return FilterResult(codes, reason_index, reasons)

    async def _close_filter(self, data: _CycleData) -> None:
        stream, data.filter = data.filter, None
        if stream is not None:
            # Every batch is answered: cancelling only tells the host that no more nodes will come.
            stream.call.cancel()

    async def filter_finished(self, state: CycleState) -> None:
        data = state.get(self._data_key)
        if isinstance(data, _CycleData):
            await self._close_filter(data)

    # ---- PostFilter ----------------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        request = pb.plugin.PostFilterRequest(ctx=self._ctx(state, pod))
        for name, st in statuses.statuses.items():
            request.node_statuses[name].CopyFrom(status_to_proto(st))
        # The key "" carries the status of every node not listed (NodeToStatus.absent).
        request.node_statuses[""].CopyFrom(status_to_proto(statuses.absent))
        reply = await self._call("PostFilter", "PostFilter", request, state=state, config_point="postFilter")
        apply_entries(state, reply.state_writes)
        result = PostFilterResult(reply.nominated_node_name) if reply.nominated_node_name else None
        return result, status_from_proto(reply.status)

    # ---- PreScore / Score / NormalizeScore -------------------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        request = pb.plugin.PreScoreRequest(ctx=self._ctx(state, pod), feasible_node_ids=self._ids(nodes))
        if not self.needs_snapshot:
            request.feasible_node_names.extend(nodes.names)
        reply = await self._call("PreScore", "PreScore", request, state=state, config_point="preScore")
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        data = state.get(self._data_key)
        if isinstance(data, _CycleData) and data.score_rows:
            cached = self._cached_scores(data, batch)
            if cached is not None:
                self._stat("Score (with Filter)").record(0.0)
                return cached
        return await self._score_stream(state, pod, batch)

    def _cached_scores(self, data: _CycleData, batch: NodeBatch) -> npt.NDArray[np.int64] | None:
        rows = np.concatenate(data.score_rows)
        values = np.concatenate(data.score_values)
        data.score_rows, data.score_values = [], []
        by_row = np.full(len(batch.snapshot), -1, dtype=np.int64)
        have = np.zeros(len(batch.snapshot), dtype=np.bool_)
        by_row[rows] = values
        have[rows] = True
        if not bool(have[batch.rows].all()):
            return None  # a node Filter did not score (it should not happen): ask Score
        return by_row[batch.rows]

    async def _score_stream(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        replica = self.endpoint.pick(state.cycle_id)
        stat = self._stat("Score")
        started = time.perf_counter()
        n = len(batch)
        out = np.zeros(n, dtype=np.int64)
        call = None
        in_flight = self.services.in_flight(state) if self.services is not None else contextlib.nullcontext()
        try:
            with in_flight:
                await self.endpoint.ready(replica)
                call = replica.stub.Score(timeout=self._deadline("score"))
                start = pb.plugin.ScoreRequest(start=pb.plugin.ScoreStart(ctx=self._ctx(state, pod)))
                stat.bytes_sent += start.ByteSize()
                await call.write(start)
                ids = batch.snapshot.table.ids[batch.rows]
                pending: dict[int, tuple[int, int]] = {}
                for seq, (lo, hi) in enumerate(self._batches(batch)):
                    msg = pb.types.NodeBatch(
                        snapshot_generation=batch.snapshot.generation, batch_seq=seq, node_ids=ids[lo:hi].tolist()
                    )
                    if not self.needs_snapshot:
                        msg.node_names.extend(batch.snapshot.table.names[r] for r in batch.rows[lo:hi].tolist())
                    request = pb.plugin.ScoreRequest(batch=msg)
                    stat.bytes_sent += request.ByteSize()
                    await call.write(request)
                    pending[seq] = (lo, hi)
                await call.done_writing()
                while pending:
                    reply = await call.read()
                    if reply is grpc.aio.EOF:
                        raise RemotePluginError(
                            f"the plugin closed its Score stream with {len(pending)} batch(es) unanswered"
                        )
                    stat.bytes_received += reply.ByteSize()
                    span = pending.pop(reply.batch_seq, None)
                    if span is None:
                        raise RemotePluginError(
                            f"answered Score batch {reply.batch_seq}, which was not sent (or twice)"
                        )
                    apply_entries(state, reply.state_writes)
                    if reply.HasField("error") and reply.error.code != pb.types.CODE_SUCCESS:
                        raise RemotePluginError(status_from_proto(reply.error).message() or "Score batch failed")
                    lo, hi = span
                    got = np.asarray(reply.scores, dtype=np.int64)
                    if got.shape[0] != hi - lo:
                        # The runtime's own words for a wrong-length answer, for the whole batch.
                        raise RemotePluginError(f"returned {got.shape[0]} scores for {hi - lo} nodes")
                    out[lo:hi] = got
        except grpc.RpcError as exc:
            stat.record(time.perf_counter() - started, error=True)
            raise self._error(replica, exc) from None
        except BaseException:
            stat.record(time.perf_counter() - started, error=True)
            if call is not None:
                call.cancel()
            raise
        stat.record(time.perf_counter() - started)
        return out

    async def normalize_score(
        self, state: CycleState, pod: Pod, batch: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> Status:
        request = pb.plugin.NormalizeScoreRequest(
            ctx=self._ctx(state, pod), node_ids=self._ids(batch), scores=scores.tolist()
        )
        if not self.needs_snapshot:
            request.node_names.extend(batch.names)
        reply = await self._call("NormalizeScore", "NormalizeScore", request, state=state,
                                 config_point="normalizeScore")
        apply_entries(state, reply.state_writes)
        status = status_from_proto(reply.status)
        if status.ok:
            got = np.asarray(reply.scores, dtype=np.int64)
            if got.shape[0] != scores.shape[0]:
                raise RemotePluginError(f"returned {got.shape[0]} normalized scores for {scores.shape[0]} nodes")
            scores[:] = got
        return status

    # ---- Reserve / Permit / binding -----------------------------------------------------------------

    async def _node_point(self, point: str, method: str, config_point: str, state: CycleState, pod: Pod,
                          node_name: str) -> Any:
        reply = await self._call(point, method, self._node_request(state, pod, node_name), state=state,
                                 config_point=config_point)
        if hasattr(reply, "state_writes"):
            apply_entries(state, reply.state_writes)
        return reply

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Reserve", "Reserve", "reserve", state, pod, node_name)
        return status_from_proto(reply.status)

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        # Awaited (not fire-and-forget): plugins rely on Unreserve running in reverse order before
        # the pod is requeued, e.g. a gang releasing its siblings.
        await self._node_point("Unreserve", "Unreserve", "reserve", state, pod, node_name)

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        reply = await self._node_point("Permit", "Permit", "permit", state, pod, node_name)
        return status_from_proto(reply.status), reply.timeout_ms / 1000.0

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT not in self.manifest.points:
            return SUCCESS
        reply = await self._node_point("PreBindPreFlight", "PreBindPreFlight", "preBind", state, pod, node_name)
        return status_from_proto(reply.status)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("PreBind", "PreBind", "preBind", state, pod, node_name)
        return status_from_proto(reply.status)

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Bind", "Bind", "bind", state, pod, node_name)
        return status_from_proto(reply.status)

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        # Informational: sent without waiting, so binding does not pay a round trip for it.
        request = self._node_request(state, pod, node_name)

        async def send() -> None:
            try:
                await self._call("PostBind", "PostBind", request, config_point="postBind")
            except Exception as exc:
                log.warning("PostBind of remote plugin %r for pod %s failed: %s", self.name, pod.key, exc)

        task = asyncio.get_running_loop().create_task(send())
        self._informational.add(task)
        task.add_done_callback(self._informational.discard)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait for informational calls in flight (PostBind)."""
        if self._informational:
            await asyncio.wait(list(self._informational), timeout=timeout)


class _RemoteExtensions(PreFilterExtensions):
    def __init__(self, adapter: RemotePlugin) -> None:
        self.adapter = adapter

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self.adapter._extension(state, pod, other, node_row, add=True)

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self.adapter._extension(state, pod, other, node_row, add=False)


_ADAPTER_CLASSES: dict[tuple[str, frozenset[int]], type[RemotePlugin]] = {}


def _adapter_class(manifest: Any) -> type[RemotePlugin]:
    """A RemotePlugin subclass that is an instance of every point's base class in ``manifest`` (the
    runtime checks ``isinstance`` per point and for NormalizeScore and events), and of no other."""
    enums = frozenset(int(p) for p in manifest.points)
    points = frozenset(_ENUM_POINT[p] for p in enums if p in _ENUM_POINT)
    cache_key = (manifest.SerializeToString().hex(), enums)
    cls = _ADAPTER_CLASSES.get(cache_key)
    if cls is not None:
        return cls
    bases: list[type] = [RemotePlugin]
    bases += [POINT_CLASSES[p] for p in sorted(points)]
    if E.EXTENSION_POINT_NORMALIZE_SCORE in enums and "score" in points:
        bases.append(ScoreExtensions)
    if E.EXTENSION_POINT_ENQUEUE_EXTENSIONS in enums or len(manifest.events):
        bases.append(EnqueueExtensions)
    cls = type(f"Remote{manifest.name}", tuple(bases), {"manifest": manifest, "points": points})
    _ADAPTER_CLASSES[cache_key] = cls
    return cls


# ---------------------------------------------------------------------------------------------------
# All the endpoints


class RemotePlugins:
    """Every remote plugin endpoint of a framework (see the module docstring)."""

    def __init__(self, endpoints: Sequence[Endpoint], services: FrameworkServices | None = None) -> None:
        self.endpoints = list(endpoints)
        self.services = services or FrameworkServices()
        self.publisher: SnapshotPublisher | None = None

    @classmethod
    async def connect(
        cls,
        configs: Sequence[EndpointConfig],
        framework_address: str,
        services: FrameworkServices | None = None,
    ) -> RemotePlugins:
        """Handshake every endpoint (concurrently); :class:`RemotePluginsError` names the one that fails."""
        endpoints = [Endpoint(c, framework_address) for c in configs]
        out = cls(endpoints, services)
        try:
            await asyncio.gather(*(ep.connect() for ep in endpoints))
        except BaseException:
            await out.close()
            raise
        seen: dict[str, str] = {}
        for ep in endpoints:
            for name in ep.manifests:
                if name in seen:
                    await out.close()
                    raise RemotePluginsError(
                        f"plugin {name!r} is served by both endpoint {seen[name]!r} and {ep.name!r}"
                    )
                seen[name] = ep.name
        return out

    def register(self, registry: Registry) -> None:
        """Register every hosted plugin with the points of its manifest."""
        for ep in self.endpoints:
            for name, manifest in ep.manifests.items():
                if name in registry:
                    raise RemotePluginsError(
                        f"remote plugin {name!r} (endpoint {ep.name!r}) has the name of a plugin that is "
                        "already registered (an in-tree plugin?)"
                    )
                cls = _adapter_class(manifest)

                def factory(args: dict[str, Any], handle: Handle | None, cls: type[RemotePlugin] = cls,
                            ep: Endpoint = ep) -> Plugin:
                    return cls(ep, args, handle)

                registry.register(name, factory, cls.points)

    def adapters(self) -> list[RemotePlugin]:
        return [a for ep in self.endpoints for a in ep.adapters]

    async def attach(self, scheduler: Any) -> None:
        """Tie the adapters to ``scheduler``: their profiles, the snapshot publisher over its cache,
        the CycleState service; then send every plugin its configuration (errors fail startup)."""
        self.publisher = self.services.attach(scheduler)
        for profile, fwk in scheduler.profiles.items():
            for plugin in fwk.plugins.values():
                if isinstance(plugin, RemotePlugin):
                    plugin.profile = profile
                    plugin.scores_enabled = plugin in fwk.score_plugins
                    plugin.publisher = self.publisher
                    plugin.services = self.services
        for ep in self.endpoints:
            ep.adapters[:] = [a for a in ep.adapters if a.publisher is self.publisher]
        await asyncio.gather(*(ep.configure_all() for ep in self.endpoints))

    def stats(self) -> dict[str, dict[str, PointStats]]:
        """Per plugin, per point: calls, latency, errors and bytes (summed over profiles)."""
        out: dict[str, dict[str, PointStats]] = {}
        for adapter in self.adapters():
            mine = out.setdefault(adapter.name, {})
            for point, st in adapter.stats.items():
                agg = mine.setdefault(point, PointStats())
                agg.calls += st.calls
                agg.seconds += st.seconds
                agg.errors += st.errors
                agg.bytes_sent += st.bytes_sent
                agg.bytes_received += st.bytes_received
                agg.latencies.extend(st.latencies)
        return out

    async def drain(self, timeout: float = 5.0) -> None:
        for adapter in self.adapters():
            await adapter.drain(timeout)

    async def close(self) -> None:
        """Finish informational calls, close channels and the publisher. Idempotent."""
        with contextlib.suppress(Exception):
            await self.drain(2.0)
        for ep in self.endpoints:
            await ep.close()
        self.services.close()
