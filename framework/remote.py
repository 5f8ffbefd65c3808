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
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
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
    FilterTransformer,
    Handle,
    NodeBatch,
    NodeToStatus,
    Plugin,
    PostFilterResult,
    PostFilterTransformer,
    PreFilterExtensions,
    PreFilterResult,
    PreFilterTransformer,
    QueuedPodInfo,
    QueueingHint,
    ScoreExtensions,
    ScoreTransformer,
)
from pluginhost.state import apply_entries, entries_for
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import (
    VIEW_STATE_KEY,
    NodeChange,
    NodeView,
    node_change_from_proto,
    pod_change_from_proto,
    view_to_proto,
)

from . import tracing
from .handle_service import FrameworkServices, join_cycle
from .lookahead import Lookahead, Verdict
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
from .security import EndpointTransport, is_tls_failure

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
    # A transformer is enabled with its plugin at the point it transforms for.
    E.EXTENSION_POINT_PRE_FILTER_TRANSFORMER: "preFilter",
    E.EXTENSION_POINT_FILTER_TRANSFORMER: "filter",
    E.EXTENSION_POINT_SCORE_TRANSFORMER: "score",
    E.EXTENSION_POINT_POST_FILTER_TRANSFORMER: "postFilter",
}
_TRANSFORMER_ENUMS: dict[int, tuple[str, int, type]] = {
    E.EXTENSION_POINT_PRE_FILTER_TRANSFORMER: ("preFilter", E.EXTENSION_POINT_PRE_FILTER, PreFilterTransformer),
    E.EXTENSION_POINT_FILTER_TRANSFORMER: ("filter", E.EXTENSION_POINT_FILTER, FilterTransformer),
    E.EXTENSION_POINT_SCORE_TRANSFORMER: ("score", E.EXTENSION_POINT_SCORE, ScoreTransformer),
    E.EXTENSION_POINT_POST_FILTER_TRANSFORMER: ("postFilter", E.EXTENSION_POINT_POST_FILTER, PostFilterTransformer),
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
    retries: int = 0  # node batches sent again to another replica after theirs failed
    ignored: int = 0  # failures skipped under failurePolicy Ignore
    batches: int = 0  # node batches sent on Filter/Score streams

    def record(self, seconds: float, *, error: bool = False) -> None:
        self.calls += 1
        self.seconds += seconds
        self.errors += int(error)
        if len(self.latencies) < 100_000:  # bounded: a long-running framework keeps counting, not listing
            self.latencies.append(seconds)


# ---------------------------------------------------------------------------------------------------
# Endpoints and replicas


class _Replica:
    """One address of an endpoint: a channel, stubs, its idle Filter/Score streams, and its health."""

    def __init__(self, endpoint: Endpoint, address: str) -> None:
        self.endpoint = endpoint
        self.address = address
        self.channel = endpoint.transport.aio_channel(address, _CHANNEL_OPTIONS)
        self.stub: Any = endpoint.transport.stub(pb.plugin_grpc.PluginStub(self.channel))  # type: ignore[no-untyped-call]
        self._sync_channel: grpc.Channel | None = None
        self.suspect = False  # a call failed: handshake and reconfigure before the next one
        self.lock = asyncio.Lock()
        self.picked = 0  # cycles and calls routed here (how replicas share the load)
        self.idle: dict[str, list[_NodeStream]] = {"Filter": [], "Score": []}
        self.serving = True  # the host's health service says SERVING (False while it drains or is gone)
        self.down_until = 0.0  # after a failure: skipped until then (loop time), unless no replica is up
        self.backoff = 0.0
        self.watcher: asyncio.Task[None] | None = None
        self.start_batch = False  # the host takes a cycle's first batch inside its start message

    def sync_stub(self) -> Any:
        # QueueSort keys and queueing hints are asked from synchronous queue code.
        if self._sync_channel is None:
            self._sync_channel = self.endpoint.transport.sync_channel(self.address, _CHANNEL_OPTIONS)
        return self.endpoint.transport.stub(pb.plugin_grpc.PluginStub(self._sync_channel))  # type: ignore[no-untyped-call]

    def take_stream(self, method: str) -> _NodeStream:
        """An idle stream for ``method`` or a new one. Streams carry no deadline: the adapter bounds
        each cycle's reads with the point's deadline instead."""
        idle = self.idle[method]
        while idle:
            stream = idle.pop()
            if not stream.broken and not stream.call.done():
                return stream
        return _NodeStream(getattr(self.stub, method)(), self, method)

    def give_back(self, stream: _NodeStream) -> None:
        idle = self.idle[stream.method]
        if stream.broken or self.suspect or not self.serving or len(idle) >= _MAX_IDLE_STREAMS or stream.call.done():
            stream.call.cancel()
            return
        idle.append(stream)

    def drop_idle(self) -> None:
        for streams in self.idle.values():
            for stream in streams:
                stream.call.cancel()
            streams.clear()

    async def close(self) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.watcher
        self.drop_idle()
        await self.channel.close()
        if self._sync_channel is not None:
            self._sync_channel.close()


# Points a failed unary call may be sent again to another replica: they only compute (the binding
# points, Reserve and Permit never are: a second replica might act twice).
_RETRYABLE = frozenset({"PreFilter", "PreFilterAddPod", "PreFilterRemovePod", "PreScore", "NormalizeScore"})
_FAILOVER_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
_MAX_IDLE_STREAMS = 4  # per replica and point: concurrent cycles (explain, preemption) beyond it open their own
# Reconnect quickly to a restarted host: after 100 ms, growing to at most 0.5 s (gRPC: 1 s up to 120 s).
# (Not grpc.min_reconnect_backoff_ms: gRPC takes it as the connect timeout, 20 s by default.)
_CHANNEL_OPTIONS = [
    *CHANNEL_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def _why(exc: BaseException) -> str:
    return _describe(exc) if isinstance(exc, grpc.RpcError) else str(exc) or type(exc).__name__


def _describe(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{getattr(code, 'name', code)}: {details}"


class Endpoint:
    """A plugin host (one or several replicas) and the plugins it serves."""

    def __init__(self, config: EndpointConfig, framework_address: str) -> None:
        self.config = config
        self.framework_address = framework_address
        self.transport = EndpointTransport(config.name, config.tls, config.token_file)  # TLS, tokens
        # dns:/// targets are looked up at connect and every resolveInterval after; plain addresses stay.
        self.replicas = [_Replica(self, a) for a in config.addresses if not _is_dns(a)]
        self.manifests: dict[str, Any] = {}
        self.nodes_only = False
        self.adapters: list[RemotePlugin] = []
        self._next = 0
        self._resolver: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    async def resolve(self) -> list[str]:
        """Every address the endpoint names now: plain ones as given, each dns:/// name's A/AAAA records."""
        loop = asyncio.get_running_loop()
        out: list[str] = []
        for target in self.config.addresses:
            if not _is_dns(target):
                out.append(target)
                continue
            host, port = _split_dns(target)
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                log.warning("cannot resolve %s for endpoint %r: %s", target, self.name, exc)
                continue
            for info in infos:
                ip = str(info[4][0])
                addr = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
                if addr not in out:
                    out.append(addr)
        return out

    async def refresh(self) -> None:
        """Look dns:/// names up again: new addresses become replicas (handshaken and configured before
        their first call), vanished ones are dropped once idle."""
        addresses = await self.resolve()
        if not addresses:
            return  # keep what we have: a resolver hiccup must not empty the endpoint
        known = {r.address: r for r in self.replicas}
        added = [a for a in addresses if a not in known]
        gone = [r for r in self.replicas if r.address not in addresses]
        for address in added:
            replica = _Replica(self, address)
            replica.suspect = bool(self.manifests)  # after startup: handshake + configure on first use
            self.replicas.append(replica)
            log.info("%s added (from %s)", self.where(replica), ", ".join(self.config.addresses))
        for replica in gone:
            self.replicas.remove(replica)
            log.info("%s removed: its name no longer resolves to it", self.where(replica))
            self._closing.add(asyncio.get_running_loop().create_task(_close_later(replica, 30.0)))
        if added and len(self.replicas) > 1 and self.manifests:
            self.watch_health()

    def follow_dns(self) -> None:
        if any(_is_dns(a) for a in self.config.addresses) and self._resolver is None:
            self._resolver = asyncio.get_running_loop().create_task(self._resolve_loop())

    async def _resolve_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.resolve_interval)
            try:
                await self.refresh()
            except Exception:
                log.exception("re-resolving endpoint %r failed", self.name)

    @property
    def name(self) -> str:
        return self.config.name

    def where(self, replica: _Replica) -> str:
        return f"plugin host {self.name!r} at {replica.address}"

    async def _handshake(self, replica: _Replica, timeout: float, wait: bool = False) -> Any:
        request = pb.plugin.HandshakeRequest(
            framework_version=FRAMEWORK_VERSION, framework_address=self.framework_address,
            credential=self.transport.credential,
        )
        reply = await replica.stub.Handshake(request, timeout=timeout, wait_for_ready=wait or None)
        replica.start_batch = "start-batch" in reply.features
        return reply

    async def connect(self) -> None:
        """Handshake every replica (bounded retries with backoff) and check their manifests agree."""
        await self.refresh()
        if not self.replicas:
            raise RemotePluginsError(
                f"endpoint {self.name!r}: {', '.join(self.config.addresses)} resolves to no address"
            )
        manifests: list[dict[str, Any]] = []
        if any(_is_dns(a) for a in self.config.addresses):
            # A name's addresses come and go: start with those that answer, the others are tried later.
            replies = await asyncio.gather(*(self._handshake_with_retries(r) for r in self.replicas),
                                           return_exceptions=True)
            failures = [r for r in replies if isinstance(r, BaseException)]
            if len(failures) == len(replies):
                raise failures[0]
            for replica, reply in zip(list(self.replicas), replies, strict=True):
                if isinstance(reply, BaseException):
                    log.warning("%s", reply)
                    self.failed(replica)
                else:
                    manifests.append({m.name: m for m in reply.plugins})
            self.replicas.sort(key=lambda r: r.suspect)
        else:
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
        # Its snapshot-reading plugins all read node objects only: its hosts follow the mirror nodes-only.
        self.nodes_only = all(m.nodes_only for m in first.values() if m.needs_snapshot)

    async def _handshake_with_retries(self, replica: _Replica) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.connect_timeout
        backoff = 0.05
        last = ""
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                hint = self.transport.hint(last)
                raise RemotePluginsError(
                    f"{self.where(replica)} is unreachable after {self.config.connect_timeout:g}s: {last}"
                    + (f" ({hint})" if hint else "")
                )
            try:
                return await self._handshake(replica, min(remaining, 2.0))
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED or not last:  # keep the informative error
                    last = _describe(exc)
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise RemotePluginsError(f"handshake with {self.where(replica)} failed: {last}") from None
                if is_tls_failure(last):  # a certificate problem: waiting will not fix it
                    hint = self.transport.hint(last)
                    raise RemotePluginsError(
                        f"TLS handshake with {self.where(replica)} failed: {last}" + (f" ({hint})" if hint else "")
                    ) from None
            await asyncio.sleep(min(backoff, max(deadline - loop.time(), 0)))
            backoff = min(backoff * 2, 1.0)

    def usable(self, key: str = "") -> list[_Replica]:
        """Every replica, best first: those serving and not backing off after a failure (rotated by
        the cycle's key, so consecutive cycles start on different replicas), then those whose health
        is unknown or draining, then those that failed recently. New work is spread over the first
        group only (:meth:`spread`); failover walks the whole list."""
        replicas = self.replicas
        if len(replicas) == 1:
            return replicas
        now = asyncio.get_running_loop().time()
        best = [r for r in replicas if r.serving and r.down_until <= now]
        if len(best) > 1:
            if key:
                start = hash(key) % len(best)
            else:
                self._next = (self._next + 1) % len(best)
                start = self._next
            best = best[start:] + best[:start]
        unsure = [r for r in replicas if not r.serving and r.down_until <= now]
        failed = sorted((r for r in replicas if r.down_until > now), key=lambda r: r.down_until)
        return best + unsure + failed

    def spread(self, ordered: list[_Replica]) -> int:
        """How many of :meth:`usable`'s replicas new node batches are spread over: the healthy ones
        (or the first, when none is known healthy)."""
        now = asyncio.get_running_loop().time()
        healthy = sum(1 for r in ordered if r.serving and r.down_until <= now)
        return max(healthy, 1)

    def pick(self, key: str = "") -> _Replica:
        """The replica for a call: by cycle id when there is one, round robin otherwise."""
        replica = self.usable(key)[0] if len(self.replicas) > 1 else self.replicas[0]
        replica.picked += 1
        return replica

    def failed(self, replica: _Replica) -> None:
        """A call to ``replica`` failed: handshake it again before its next call, and leave it out of
        new work for a while (backoff doubling from 0.1 s to 5 s) when other replicas are up."""
        replica.suspect = True
        replica.backoff = min(max(replica.backoff * 2, 0.1), 5.0)
        replica.down_until = asyncio.get_running_loop().time() + replica.backoff
        replica.drop_idle()

    def watch_health(self) -> None:
        """Follow each replica's grpc.health.v1 status: a replica that reports NOT_SERVING (draining
        before it stops) gets no new cycles and its idle streams are closed, so it can stop at once;
        SERVING again puts it back."""
        for replica in self.replicas:
            if replica.watcher is None:
                replica.watcher = asyncio.get_running_loop().create_task(self._watch(replica))

    async def _watch(self, replica: _Replica) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(replica.channel)
        backoff = 0.1
        while True:
            try:
                call = stub.Watch(health_pb2.HealthCheckRequest(service=""))
                async for reply in call:
                    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
                    if serving != replica.serving:
                        log.info("%s is %s", self.where(replica), "serving" if serving else "not serving")
                    replica.serving = serving
                    if not serving:
                        replica.drop_idle()
                    backoff = 0.1
            except asyncio.CancelledError:
                raise
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    replica.serving = True  # a host without the health service: judged by its calls alone
                    return
            replica.serving = False  # the watch ended: the host is gone or restarting
            replica.drop_idle()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def ready(self, replica: _Replica) -> None:
        """If a call to ``replica`` failed before, handshake and reconfigure it (the host may have
        restarted and lost its configuration and mirror)."""
        if not replica.suspect:
            return
        async with replica.lock:
            if not replica.suspect:
                return
            try:
                reply = await self._handshake(replica, self.config.deadline("configure"), wait=replica.serving)
            except grpc.RpcError as exc:
                self.failed(replica)
                raise RemotePluginError(f"{_describe(exc)} ({self.where(replica)})", exc.code()) from None
            served = {m.name for m in reply.plugins}
            missing = [a.name for a in self.adapters if a.name not in served]
            if missing:
                raise RemotePluginError(f"{self.where(replica)} no longer serves {', '.join(missing)}")
            for adapter in self.adapters:
                await adapter.configure_on(replica)
            replica.suspect = False
            replica.backoff = 0.0
            replica.down_until = 0.0
            log.info("%s is back: handshaken and configured again", self.where(replica))

    async def configure_all(self) -> None:
        for adapter in self.adapters:
            for replica in self.replicas:
                await adapter.configure_on(replica)

    async def close(self) -> None:
        for adapter in self.adapters:
            if adapter.ahead is not None:
                await adapter.ahead.close()
        for task in [self._resolver, *self._closing]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for replica in self.replicas:
            await replica.close()


async def _close_later(replica: _Replica, delay: float) -> None:
    await asyncio.sleep(delay)  # let calls already on it finish
    await replica.close()


def _is_dns(address: str) -> bool:
    return address.startswith("dns:")


def _split_dns(target: str) -> tuple[str, int]:
    """``dns:///name:port`` (or ``dns:name:port``) -> (name, port)."""
    rest = target[len("dns:"):]
    if rest.startswith("//"):
        rest = rest[2:].split("/", 1)[1] if "/" in rest[2:] else rest[2:]
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


# ---------------------------------------------------------------------------------------------------
# Per-cycle data the adapters keep in the CycleState (freed with it)


class _NodeStream:
    """A Filter or Score stream to one replica, kept open and reused by consecutive cycles (one cycle
    at a time). ``seq`` numbers batches over the stream's whole life, so the answer to a batch of an
    abandoned cycle (``seq < base``, e.g. a prefetched window no plugin asked for) is recognised and
    dropped by the next cycle."""

    __slots__ = ("base", "broken", "call", "method", "replica", "seq", "start")

    def __init__(self, call: Any, replica: _Replica, method: str) -> None:
        self.call = call
        self.replica = replica
        self.method = method
        self.seq = 0
        self.base = 0
        self.broken = False
        self.start: Any = None  # this cycle's start message, held to carry the first batch


class _Window:
    """The batches of one Filter or Score request in flight: per stream, batch_seq -> (lo, hi), the
    positions of its nodes in ``batch``."""

    __slots__ = ("batch", "codes", "pending", "reason_index", "reasons", "scores", "tried", "want_scores")

    def __init__(self, batch: NodeBatch, want_scores: bool) -> None:
        n = len(batch)
        self.batch = batch
        self.want_scores = want_scores
        self.pending: dict[_NodeStream, dict[int, tuple[int, int]]] = {}
        self.codes = np.zeros(n, dtype=np.int8)
        self.reason_index = np.zeros(n, dtype=np.int32)
        self.reasons: list[tuple[str, ...]] = []
        self.scores = np.zeros(n, dtype=np.int64)
        self.tried: set[_Replica] = set()


class _StreamBroken(Exception):
    """A stream ended or timed out with batches unanswered (retryable on another replica)."""


class _CycleData:
    """An adapter's per-cycle data: the streams it took for the cycle, the scores Filter brought back,
    and whether the cycle is registered with the CycleState service while it runs.

    Kept in the CycleState so it is freed with the scheduling context. A clone (preemption's what-if
    states) gets an empty one: a what-if never shares the original's streams.
    """

    __slots__ = ("in_flight", "score_rows", "score_values", "streams", "with_scores")

    def __init__(self) -> None:
        self.streams: dict[tuple[str, _Replica], _NodeStream] = {}
        self.score_rows: list[npt.NDArray[np.int64]] = []
        self.score_values: list[npt.NDArray[np.int64]] = []
        self.with_scores: bool | None = None
        self.in_flight: contextlib.ExitStack | None = None

    def clone(self) -> _CycleData:
        return _CycleData()


_VALID_CODES = max(int(c) for c in Code)
_NOT_TAKEN = object()


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
        self._ahead_key = _STATE_PREFIX + "ahead/" + self.name  # the cycle's lookahead answer, once taken
        self._informational: set[asyncio.Task[None]] = set()
        # Answers asked for ahead of the pods' cycles, for plugins that declared lookahead (the host
        # checked that their Filter/Score read no CycleState).
        pure = not self.state_keys and not {"preFilter", "preScore"} & self.points
        self.ahead = Lookahead(self) if bool(m.lookahead) and pure and {"filter", "score"} & self.points else None
        endpoint.adapters.append(self)

    # ---- plumbing ------------------------------------------------------------------------------

    def _stat(self, point: str) -> PointStats:
        st = self.stats.get(point)
        if st is None:
            st = self.stats[point] = PointStats()
        return st

    def _error(self, replica: _Replica, exc: grpc.RpcError) -> RemotePluginError:
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            self.endpoint.failed(replica)  # handshake again before its next call; prefer other replicas
        elif code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
                      grpc.StatusCode.CANCELLED):
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
        node_generation = snapshot.table.generation if snapshot is not None else 0
        if self.needs_snapshot and self.publisher is not None:
            # A host that reads node objects only answers once it has the cycle's node set: the pod
            # placements since can follow with the next timed delta instead of before this call.
            self.publisher.publish_up_to(node_generation if self.endpoint.nodes_only else generation)
        join_cycle(state, self.name)  # this plugin may now use the cycle's CycleState
        ctx = pb.plugin.CycleContext(
            cycle_id=state.cycle_id,
            plugin=self.name,
            profile=self.profile,
            snapshot_generation=generation,
            node_generation=node_generation,
            pod=self._pod_proto(state, pod),
            state=entries_for(state, self.state_keys, plugin=self.name) if self.state_keys else (),
            attempt=state.attempt,
            node_view=_view_proto(state),
        )
        tracing.inject(ctx.trace_context)  # the plugin call's span (nothing outside a traced cycle)
        return ctx

    def _pod_proto(self, state: CycleState, pod: Pod) -> Any:
        return _converted(state, _STATE_PREFIX + "pod", pod, pod_to_proto)

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
        """One unary call with the point's deadline; retried once if the host lost its configuration,
        and on another replica when the point is pure and the first replica is unreachable."""
        key = state.cycle_id if state is not None else ""
        replicas = self.endpoint.usable(key) if len(self.endpoint.replicas) > 1 else self.endpoint.replicas
        stat = self._stat(point)
        stat.bytes_sent += request.ByteSize()
        started = time.perf_counter()
        timeout = self._deadline(config_point or point)
        in_flight = (
            self.services.in_flight(state) if self.services is not None and state is not None
            else contextlib.nullcontext()
        )
        tries = replicas if point in _RETRYABLE else replicas[:1]
        with in_flight:
            for i, replica in enumerate(tries):
                replica.picked += 1
                try:
                    reply = await self._call_once(replica, method, request, timeout)
                except grpc.RpcError as exc:
                    error = self._error(replica, exc)
                    if i + 1 < len(tries) and exc.code() in _FAILOVER_CODES:
                        stat.retries += 1
                        log.warning("%s of plugin %r failed on %s (%s): trying %s", point, self.name,
                                    replica.address, _describe(exc), tries[i + 1].address)
                        continue
                    stat.record(time.perf_counter() - started, error=True)
                    raise error from None
                except RemotePluginError:
                    if i + 1 < len(tries):
                        continue
                    stat.record(time.perf_counter() - started, error=True)
                    raise
                except BaseException:
                    stat.record(time.perf_counter() - started, error=True)
                    raise
                stat.record(time.perf_counter() - started)
                stat.bytes_received += reply.ByteSize()
                return reply
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call_once(self, replica: _Replica, method: str, request: Any, timeout: float) -> Any:
        await self.endpoint.ready(replica)
        metadata = tracing.grpc_metadata()  # the plugin call's span (None outside a traced cycle)
        try:
            return await getattr(replica.stub, method)(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            # "not configured": the host restarted between two calls. Configure and retry once.
            replica.suspect = True
            await self.endpoint.ready(replica)
            return await getattr(replica.stub, method)(request, timeout=timeout, metadata=metadata)

    def _ignored(self, point: str, state: CycleState | None, exc: BaseException) -> bool:
        """Under failurePolicy Ignore, a failed call skips the plugin for the rest of the cycle: record
        it (statistics, log, the current trace span) and tell the caller to carry on without it."""
        if self.endpoint.config.failure_policy != "Ignore" or not isinstance(exc, RemotePluginError):
            return False
        self._stat(point).ignored += 1
        if state is not None:
            state.skip_filter.add(self.name)
            state.skip_score.add(self.name)
        log.warning("%s plugin %r failed and is ignored for this cycle (failurePolicy Ignore): %s",
                    point, self.name, exc)
        tracing.add_event(
            "remote plugin failure ignored", {"plugin": self.name, "extension_point": point, "error": str(exc)}
        )
        return True

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
        try:
            reply = await self._call("PreEnqueue", "PreEnqueue", request, config_point="preEnqueue")
        except RemotePluginError as exc:
            if self._ignored("PreEnqueue", None, exc):
                return SUCCESS
            raise
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
        try:
            reply = await self._call("PreFilter", "PreFilter", pb.plugin.CycleRequest(ctx=self._ctx(state, pod)),
                                     state=state, config_point="preFilter")
        except RemotePluginError as exc:
            if self._ignored("PreFilter", state, exc):
                return None, Status(Code.Skip)
            raise
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
        try:
            reply = await self._call(point, point, request, state=state, config_point="preFilter")
        except RemotePluginError as exc:
            if self._ignored(point, state, exc):
                return SUCCESS
            raise
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    # ---- Filter and Score streams ------------------------------------------------------------------

    def _hold(self, state: CycleState, data: _CycleData) -> None:
        """Register the cycle with the CycleState service until its streams are given back."""
        if data.in_flight is None and self.services is not None:
            data.in_flight = contextlib.ExitStack()
            data.in_flight.enter_context(self.services.in_flight(state))

    def _give_back(self, data: _CycleData, method: str) -> None:
        for key in [k for k in data.streams if k[0] == method]:
            stream = data.streams.pop(key)
            stream.replica.give_back(stream)
        if not data.streams and data.in_flight is not None:
            data.in_flight.close()
            data.in_flight = None

    async def _stream_for(self, method: str, replica: _Replica, state: CycleState, pod: Pod, data: _CycleData,
                          stat: PointStats) -> _NodeStream:
        """This cycle's stream to ``replica``: an idle one (or a new one) started with this cycle's context."""
        stream = data.streams.get((method, replica))
        if stream is not None:
            return stream
        try:
            await self.endpoint.ready(replica)
        except RemotePluginError as exc:
            raise _StreamBroken(str(exc)) from None  # unreachable or restarted badly: try another replica
        self._hold(state, data)
        replica.picked += 1
        stream = replica.take_stream(method)
        data.streams[(method, replica)] = stream
        stream.base = stream.seq
        if method == "Filter":
            start: Any = pb.plugin.FilterRequest(
                start=pb.plugin.FilterStart(ctx=self._ctx(state, pod), with_scores=bool(data.with_scores))
            )
        else:
            start = pb.plugin.ScoreRequest(start=pb.plugin.ScoreStart(ctx=self._ctx(state, pod)))
        if replica.start_batch:
            stream.start = start  # sent with the first batch (one message, not two)
            return stream
        stat.bytes_sent += start.ByteSize()
        try:
            await stream.call.write(start)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            stream.broken = True
            raise _StreamBroken(f"cannot start a {method} stream: {_why(exc)}") from None
        return stream

    def _batches(self, batch: NodeBatch, replicas: int = 1) -> list[tuple[int, int]]:
        n = len(batch)
        size = self.batch_size or -(-n // max(replicas, 1)) or 1
        return [(lo, min(lo + size, n)) for lo in range(0, n, size)]

    async def _send_part(self, method: str, replica: _Replica, state: CycleState, pod: Pod, data: _CycleData,
                         window: _Window, lo: int, hi: int, stat: PointStats) -> None:
        stream, request = await self._part(method, replica, state, pod, data, window, lo, hi, stat)
        await self._write(method, stream, request)

    async def _part(self, method: str, replica: _Replica, state: CycleState, pod: Pod, data: _CycleData,
                    window: _Window, lo: int, hi: int, stat: PointStats) -> tuple[_NodeStream, Any]:
        """The message carrying nodes ``lo:hi`` of ``window`` to ``replica``, counted as pending there."""
        stream = await self._stream_for(method, replica, state, pod, data, stat)
        batch = window.batch
        if stream.start is not None:  # the cycle's first batch rides in its start message
            request, stream.start = stream.start, None
            msg = request.start.batch
        else:
            request = pb.plugin.FilterRequest() if method == "Filter" else pb.plugin.ScoreRequest()
            msg = request.batch
        msg.SetInParent()
        msg.snapshot_generation = batch.snapshot.generation
        msg.batch_seq = stream.seq
        msg.node_ids.extend(batch.snapshot.table.ids[batch.rows[lo:hi]].tolist())
        if not self.needs_snapshot:
            msg.node_names.extend(batch.snapshot.table.names[r] for r in batch.rows[lo:hi].tolist())
        stat.bytes_sent += request.ByteSize()
        stat.batches += 1
        window.pending.setdefault(stream, {})[stream.seq] = (lo, hi)
        stream.seq += 1
        return stream, request

    @staticmethod
    async def _write(method: str, stream: _NodeStream, *requests: Any) -> None:
        try:
            for request in requests:
                await stream.call.write(request)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            stream.broken = True
            raise _StreamBroken(f"cannot send a {method} batch: {_why(exc)}") from None

    async def _send(self, method: str, state: CycleState, pod: Pod, batch: NodeBatch, data: _CycleData,
                    stat: PointStats) -> _Window:
        """Send ``batch`` as node batches spread over the healthy replicas; answers are read by _collect."""
        window = _Window(batch, want_scores=method == "Score" or bool(data.with_scores))
        ordered = self.endpoint.usable(state.cycle_id)
        replicas = ordered[: self.endpoint.spread(ordered)]
        outgoing: dict[_NodeStream, list[Any]] = {}
        for i, (lo, hi) in enumerate(self._batches(batch, len(replicas))):
            replica = replicas[i % len(replicas)]
            if replica in window.tried:
                others = [r for r in self.endpoint.usable(state.cycle_id) if r not in window.tried]
                if not others:
                    raise RemotePluginError(f"no replica left for {method} ({self.endpoint.name})",
                                            grpc.StatusCode.UNAVAILABLE)
                replica = others[0]
            try:
                stream, request = await self._part(method, replica, state, pod, data, window, lo, hi, stat)
            except _StreamBroken as exc:  # no stream to it: nothing of this part was sent
                await self._failover(method, state, pod, data, window, replica, str(exc), stat, [(lo, hi)])
                continue
            outgoing.setdefault(stream, []).append(request)
        # The replicas' writes go out together: a write completes only after a trip through gRPC's
        # poller, and the replica written second would otherwise start that much later.
        streams = list(outgoing)
        if len(streams) == 1:
            failed: list[BaseException | None] = [await _caught(self._write(method, streams[0], *outgoing[streams[0]]))]
        else:
            failed = list(await asyncio.gather(
                *(_caught(self._write(method, s, *outgoing[s])) for s in streams)
            ))
        for stream, broke in zip(streams, failed, strict=True):
            if broke is not None and stream in window.pending:  # its batches are pending: send them elsewhere
                await self._failover(method, state, pod, data, window, stream.replica, str(broke), stat, [])
        return window

    async def _failover(self, method: str, state: CycleState, pod: Pod, data: _CycleData, window: _Window,
                        replica: _Replica, why: str, stat: PointStats, unsent: list[tuple[int, int]]) -> None:
        """``replica`` failed with batches of ``window`` unanswered: Filter and Score are pure, so send
        them to another healthy replica (each replica is tried once per window); else fail the call."""
        spans = list(unsent)
        while True:
            window.tried.add(replica)
            self.endpoint.failed(replica)
            for stream in [s for s in window.pending if s.replica is replica]:
                spans.extend(window.pending.pop(stream).values())
            others = [r for r in self.endpoint.usable(state.cycle_id) if r not in window.tried]
            if not others:
                raise RemotePluginError(f"{why} ({self.endpoint.where(replica)})", grpc.StatusCode.UNAVAILABLE)
            target = others[0]
            log.warning("%s batches of plugin %r failed on %s (%s): sending them to %s", method, self.name,
                        replica.address, why, target.address)
            spans.sort()
            stat.retries += len(spans)
            for i, (lo, hi) in enumerate(spans):
                try:
                    await self._send_part(method, target, state, pod, data, window, lo, hi, stat)
                except _StreamBroken as exc:
                    sent = any((lo, hi) in sp.values() for st, sp in window.pending.items() if st.replica is target)
                    spans = spans[i + 1 :] if sent else spans[i:]
                    replica, why = target, str(exc)
                    break
            else:
                return

    async def _collect(self, method: str, state: CycleState, pod: Pod, data: _CycleData, window: _Window,
                       stat: PointStats) -> None:
        """Read every answer of ``window`` (within the point's deadline), failing over a broken replica."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._deadline(method.lower())
        while window.pending:
            stream = next(iter(window.pending))
            try:
                if stream.broken:
                    raise _StreamBroken("the stream broke")
                async with asyncio.timeout_at(deadline):
                    await self._read(method, stream, state, window, stat)
            except (grpc.RpcError, _StreamBroken, TimeoutError) as exc:
                stream.broken = True
                if isinstance(exc, TimeoutError):
                    why = f"DEADLINE_EXCEEDED: no answer within {self._deadline(method.lower()):g}s"
                elif isinstance(exc, grpc.RpcError):
                    why = _describe(exc)
                else:
                    why = str(exc)
                await self._failover(method, state, pod, data, window, stream.replica, why, stat, [])
                deadline = loop.time() + self._deadline(method.lower())
            except BaseException:
                stream.broken = True
                raise

    async def _read(self, method: str, stream: _NodeStream, state: CycleState, window: _Window,
                    stat: PointStats) -> None:
        spans = window.pending[stream]
        while spans:
            reply = await stream.call.read()
            if reply is grpc.aio.EOF:
                raise _StreamBroken(f"the plugin closed its {method} stream with {len(spans)} batch(es) unanswered")
            stat.bytes_received += reply.ByteSize()
            if reply.batch_seq < stream.base:
                continue  # the answer to an abandoned cycle's batch
            span = spans.pop(reply.batch_seq, None)
            if span is None:
                raise RemotePluginError(f"answered {method} batch {reply.batch_seq}, which was not sent (or twice)")
            apply_entries(state, reply.state_writes)
            if reply.HasField("error") and reply.error.code != pb.types.CODE_SUCCESS:
                raise RemotePluginError(status_from_proto(reply.error).message() or f"{method} batch failed")
            if method == "Filter":
                self._take_filter_reply(reply, span, window)
            else:
                lo, hi = span
                got = np.asarray(reply.scores, dtype=np.int64)
                if got.shape[0] != hi - lo:
                    # The runtime's own words for a wrong-length answer, for the whole batch.
                    raise RemotePluginError(f"returned {got.shape[0]} scores for {hi - lo} nodes")
                window.scores[lo:hi] = got
        del window.pending[stream]

    def _take_filter_reply(self, reply: Any, span: tuple[int, int], window: _Window) -> None:
        lo, hi = span
        got = np.asarray(reply.codes, dtype=np.int64)
        if got.shape[0] != hi - lo:
            raise RemotePluginError(f"answered {got.shape[0]} of the {hi - lo} nodes of Filter batch {reply.batch_seq}")
        if got.shape[0] and (int(got.min()) < 0 or int(got.max()) > _VALID_CODES):
            raise RemotePluginError("returned an unknown status code")
        window.codes[lo:hi] = got
        failed = got != 0
        if failed.any() and len(reply.reason_index):
            index = np.asarray(reply.reason_index, dtype=np.int64)
            if index.shape[0] != hi - lo or int(index[failed].max()) >= len(reply.reason_table):
                raise RemotePluginError(f"sent a bad reason index in Filter batch {reply.batch_seq}")
            window.reason_index[lo:hi] = index + len(window.reasons)
            window.reasons.extend(tuple(rs.reasons) for rs in reply.reason_table)
        elif failed.any():
            window.reason_index[lo:hi] = len(window.reasons)
            window.reasons.append(())
        if window.want_scores:
            scores = np.asarray(reply.scores, dtype=np.int64)
            if scores.shape[0] != hi - lo:
                raise RemotePluginError(
                    f"sent {scores.shape[0]} scores for the {hi - lo} nodes of Filter batch {reply.batch_seq}"
                )
            window.scores[lo:hi] = scores

    # ---- Filter --------------------------------------------------------------------------------------

    def _filter_data(self, state: CycleState) -> _CycleData:
        data = self._data(state)
        if data.with_scores is None:
            data.with_scores = self.with_scores and self.scores_enabled and self.name not in state.skip_score
        return data

    async def prefetch_filter(
        self, state: CycleState, pod: Pod, batch: NodeBatch
    ) -> Awaitable[FilterResult] | FilterResult:
        """Send ``batch`` now and return what collects the answers: the runtime sends a window to remote
        plugins first, runs the in-process plugins while the hosts work, then collects (Filter is pure,
        so answering for nodes an earlier plugin rejects changes nothing). An answer already at hand
        (a lookahead answer) is returned as it is."""
        if self.name in state.skip_filter:  # ignored after a failure earlier in this cycle
            return FilterResult.passing(len(batch))
        if self.ahead is not None:
            verdict = await self._verdict(state, pod, batch)
            if verdict is not None and verdict.codes is not None:
                self._stat("Filter (lookahead)").calls += 1  # no exchange: counted, not timed
                return verdict.filter_result(batch.rows)
        data = self._filter_data(state)
        stat = self._stat("Filter")
        started = time.perf_counter()
        try:
            window = await self._send("Filter", state, pod, batch, data, stat)
        except BaseException as exc:
            stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Filter", state, exc):
                return FilterResult.passing(len(batch))
            raise
        return self._finish_filter(state, pod, data, window, stat, started)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        early = await self.prefetch_filter(state, pod, batch)
        return early if isinstance(early, FilterResult) else await early

    async def _verdict(self, state: CycleState, pod: Pod, batch: NodeBatch) -> Verdict | None:
        """The lookahead answer for this cycle's pod, when there is one to use on ``batch``'s snapshot
        (taken once per cycle; never under a transformer's view or a what-if)."""
        view = state.get(VIEW_STATE_KEY)
        if isinstance(view, NodeView) and view:
            return None
        taken = state.get(self._ahead_key, _NOT_TAKEN)
        if taken is _NOT_TAKEN:
            assert self.ahead is not None
            got = self.ahead.take(pod, batch.snapshot.table)
            if isinstance(got, asyncio.Future):  # asked for, on its way
                try:
                    async with asyncio.timeout(self._deadline("filter")):
                        got = self.ahead.counted(await asyncio.shield(got))
                except TimeoutError:
                    got = self.ahead.counted(None)  # slow or stalled: the cycle's own call decides
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise  # this cycle is being cancelled
                    got = self.ahead.counted(None)  # the answer was dropped (stale, or the plugin closing)
            state.write(self._ahead_key, got)
            taken = got
        if taken is None or batch.snapshot.table is not self._table_of(state):
            return None
        return taken  # type: ignore[no-any-return]

    @staticmethod
    def _table_of(state: CycleState) -> Any:
        return state.snapshot.table if state.snapshot is not None else None

    async def _finish_filter(self, state: CycleState, pod: Pod, data: _CycleData, window: _Window,
                             stat: PointStats, started: float) -> FilterResult:
        try:
            await self._collect("Filter", state, pod, data, window, stat)
        except BaseException as exc:
            stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Filter", state, exc):
                return FilterResult.passing(len(window.batch))
            raise
        stat.record(time.perf_counter() - started)
        result = FilterResult(window.codes, window.reason_index, window.reasons)
        if data.with_scores:
            passing = window.codes == 0
            data.score_rows.append(window.batch.rows[passing])
            data.score_values.append(window.scores[passing])
        return result

    async def filter_finished(self, state: CycleState) -> None:
        data = state.get(self._data_key)
        if isinstance(data, _CycleData):
            self._give_back(data, "Filter")

    # ---- PostFilter ----------------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        request = pb.plugin.PostFilterRequest(ctx=self._ctx(state, pod))
        for name, st in statuses.statuses.items():
            request.node_statuses[name].CopyFrom(status_to_proto(st))
        # The key "" carries the status of every node not listed (NodeToStatus.absent).
        request.node_statuses[""].CopyFrom(status_to_proto(statuses.absent))
        try:
            reply = await self._call("PostFilter", "PostFilter", request, state=state, config_point="postFilter")
        except RemotePluginError as exc:
            if self._ignored("PostFilter", state, exc):
                return None, Status(Code.Unschedulable, (f"remote plugin {self.name} failed and was ignored",))
            raise
        apply_entries(state, reply.state_writes)
        result = PostFilterResult(reply.nominated_node_name) if reply.nominated_node_name else None
        return result, status_from_proto(reply.status)

    # ---- PreScore / Score / NormalizeScore -------------------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        request = pb.plugin.PreScoreRequest(ctx=self._ctx(state, pod), feasible_node_ids=self._ids(nodes))
        if not self.needs_snapshot:
            request.feasible_node_names.extend(nodes.names)
        try:
            reply = await self._call("PreScore", "PreScore", request, state=state, config_point="preScore")
        except RemotePluginError as exc:
            if self._ignored("PreScore", state, exc):
                return Status(Code.Skip)
            raise
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        if self.ahead is not None:
            verdict = await self._verdict(state, pod, batch)
            if verdict is not None and verdict.scores is not None:
                self._stat("Score (lookahead)").calls += 1
                return verdict.scores[batch.rows]
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
        data = self._data(state)
        stat = self._stat("Score")
        started = time.perf_counter()
        try:
            window = await self._send("Score", state, pod, batch, data, stat)
            await self._collect("Score", state, pod, data, window, stat)
        except BaseException as exc:
            stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Score", state, exc):
                return np.zeros(len(batch), dtype=np.int64)  # the same for every node: no influence
            raise
        finally:
            self._give_back(data, "Score")
        stat.record(time.perf_counter() - started)
        return window.scores

    async def normalize_score(
        self, state: CycleState, pod: Pod, batch: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> Status:
        request = pb.plugin.NormalizeScoreRequest(
            ctx=self._ctx(state, pod), node_ids=self._ids(batch), scores=scores.tolist()
        )
        if not self.needs_snapshot:
            request.node_names.extend(batch.names)
        try:
            reply = await self._call("NormalizeScore", "NormalizeScore", request, state=state,
                                     config_point="normalizeScore")
        except RemotePluginError as exc:
            if self._ignored("NormalizeScore", state, exc):
                scores[:] = 0
                return SUCCESS
            raise
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
        """A call about one node; None when it failed and failurePolicy Ignore says to go on without it."""
        try:
            reply = await self._call(point, method, self._node_request(state, pod, node_name), state=state,
                                     config_point=config_point)
        except RemotePluginError as exc:
            if self._ignored(point, state, exc):
                return None
            raise
        if hasattr(reply, "state_writes"):
            apply_entries(state, reply.state_writes)
        return reply

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Reserve", "Reserve", "reserve", state, pod, node_name)
        return SUCCESS if reply is None else status_from_proto(reply.status)

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        # Awaited (not fire-and-forget): plugins rely on Unreserve running in reverse order before
        # the pod is requeued, e.g. a gang releasing its siblings.
        await self._node_point("Unreserve", "Unreserve", "reserve", state, pod, node_name)

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        reply = await self._node_point("Permit", "Permit", "permit", state, pod, node_name)
        if reply is None:
            return SUCCESS, 0.0
        return status_from_proto(reply.status), reply.timeout_ms / 1000.0

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT not in self.manifest.points:
            return SUCCESS
        reply = await self._node_point("PreBindPreFlight", "PreBindPreFlight", "preBind", state, pod, node_name)
        return Status(Code.Skip) if reply is None else status_from_proto(reply.status)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("PreBind", "PreBind", "preBind", state, pod, node_name)
        return SUCCESS if reply is None else status_from_proto(reply.status)

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Bind", "Bind", "bind", state, pod, node_name)
        return Status(Code.Skip) if reply is None else status_from_proto(reply.status)  # the next Bind plugin binds

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


    # ---- transformers ------------------------------------------------------------------------------

    async def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Any, Status]:
        request = pb.plugin.CycleRequest(ctx=self._ctx(state, pod))
        reply = await self._call("BeforePreFilter", "BeforePreFilter", request, state=state, config_point="preFilter")
        apply_entries(state, reply.state_writes)
        change = pod_change_from_proto(reply.change) if reply.HasField("change") else None
        return change, status_from_proto(reply.status)

    async def _transform_nodes(self, point: str, config_point: str, state: CycleState, pod: Pod,
                               batch: NodeBatch | None) -> tuple[list[NodeChange], Status]:
        request = pb.plugin.TransformNodesRequest(ctx=self._ctx(state, pod))
        if batch is not None:
            request.node_ids.extend(self._ids(batch))
            if not self.needs_snapshot:
                request.node_names.extend(batch.names)
        reply = await self._call(point, point, request, state=state, config_point=config_point)
        apply_entries(state, reply.state_writes)
        return [node_change_from_proto(c) for c in reply.changes], status_from_proto(reply.status)

    async def before_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforeFilter", "filter", state, pod, None)

    async def before_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforeScore", "score", state, pod, nodes)

    async def before_post_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforePostFilter", "postFilter", state, pod, None)


async def _caught(write: Awaitable[None]) -> BaseException | None:
    """The :class:`_StreamBroken` a write raised, or None."""
    try:
        await write
    except _StreamBroken as exc:
        return exc
    return None


def _converted(state: CycleState, key: str, obj: Any, convert: Callable[[Any], Any]) -> Any:
    """``convert(obj)``, kept in the cycle under ``key`` while the cycle holds that same object (a
    cycle meets one pod and one view per phase at many calls: convert each once)."""
    cached = state.get(key)
    if cached is not None and cached[0] is obj:
        return cached[1]
    msg = convert(obj)
    state.write(key, (obj, msg))
    return msg


def _view_proto(state: CycleState) -> Any:
    """The wire form of the view the current phase runs on (None: none), converted once per view."""
    view = state.get(VIEW_STATE_KEY)
    if not isinstance(view, NodeView) or not view:
        return None
    return _converted(state, VIEW_STATE_KEY + "/proto", view, view_to_proto)


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
    transformers = {_TRANSFORMER_ENUMS[e][0]: _TRANSFORMER_ENUMS[e] for e in enums if e in _TRANSFORMER_ENUMS}
    # A transformer's class derives from its point's class: it takes that class's place in the bases.
    bases: list[type] = [RemotePlugin]
    bases += [transformers[p][2] if p in transformers else POINT_CLASSES[p] for p in sorted(points)]
    transform_only = frozenset(p for p, (_, plain, _) in transformers.items() if plain not in enums)
    if E.EXTENSION_POINT_NORMALIZE_SCORE in enums and "score" in points:
        bases.append(ScoreExtensions)
    if E.EXTENSION_POINT_ENQUEUE_EXTENSIONS in enums or len(manifest.events):
        bases.append(EnqueueExtensions)
    cls = type(
        f"Remote{manifest.name}", tuple(bases),
        {"manifest": manifest, "points": points, "transform_only": transform_only},
    )
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
        for ep in self.endpoints:  # their hosts may call back as soon as they are handshaken
            self.services.grant(ep.transport.credential, ep)

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
        for ep in endpoints:
            ep.watch_health()
            ep.follow_dns()
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
                    # Scores that ride on Filter replies would be computed on the Filter view: with
                    # Score transformers in the profile, Score gets its own stream (and view).
                    plugin.scores_enabled = plugin in fwk.score_plugins and not fwk.score_transformers
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
                agg.retries += st.retries
                agg.ignored += st.ignored
                agg.batches += st.batches
                agg.latencies.extend(st.latencies)
        return out

    async def drain(self, timeout: float = 5.0) -> None:
        for adapter in self.adapters():
            await adapter.drain(timeout)

    async def stop_controllers(self, reason: str = "framework shutting down", timeout: float = 2.0) -> None:
        """Tell every host whose plugins run controllers to stop them (best effort, bounded)."""

        async def stop(ep: Endpoint, replica: _Replica) -> None:
            try:
                await replica.stub.Stop(pb.plugin.StopRequest(reason=reason), timeout=timeout)
            except grpc.RpcError as exc:
                log.info("stopping the controllers of %s: %s", ep.where(replica), _describe(exc))

        calls = [
            stop(ep, r) for ep in self.endpoints for r in ep.replicas
            if any(E.EXTENSION_POINT_CONTROLLER in m.points for m in ep.manifests.values())
        ]
        if calls:
            await asyncio.gather(*calls)

    async def close(self) -> None:
        """Finish informational calls, stop remote controllers, close channels and the publisher.
        Idempotent."""
        with contextlib.suppress(Exception):
            await self.drain(2.0)
        with contextlib.suppress(Exception):
            await self.stop_controllers()
        for ep in self.endpoints:
            await ep.close()
            self.services.revoke(ep.transport.credential)
        self.services.close()
