"""A plugin host's endpoint and its replicas: addresses (``dns:///`` names followed), channels, the
handshake, health, failover order, and the Filter/Score streams each replica keeps open.

An :class:`Endpoint` is one entry of the RemotePlugins document; each of its addresses is a
:class:`Replica`. A replica that failed is handshaken (and its plugins configured) again before its
next call, and left out of new work for a while when others are up.

Each replica keeps the manifest of its last handshake, and a call goes only to replicas that declare
its plugin at its point (:meth:`Endpoint.route`): during a rolling upgrade, old and new hosts each get
only what they declare. The endpoint's own manifest (what profiles were resolved with) changes when
every replica that answers agrees on a new one; then :attr:`Endpoint.on_manifest_change` runs (the
scheduler rebuilds its profiles: a plugin that gained Score is called at Score from the next cycle).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import grpc

from pluginhost import pb
from pluginhost.handle_client import CHANNEL_OPTIONS

from .config import EndpointConfig
from .errors import RemotePluginError, RemotePluginsError, describe
from .security import EndpointTransport, is_tls_failure

__all__ = ["FRAMEWORK_VERSION", "Endpoint", "HostedPlugin", "NodeStream", "Replica"]

log = logging.getLogger("outrigger.remote")

FRAMEWORK_VERSION = "0.1.0"


class HostedPlugin(Protocol):
    """What an endpoint asks of the adapter of each plugin it serves."""

    name: str

    async def configure_on(self, replica: Replica) -> None:
        """Send the plugin its configuration on ``replica`` (a new or restarted host)."""

    async def close(self) -> None:
        """Stop what the adapter runs beside its calls (the endpoint is closing)."""


class Replica:
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
        self.idle: dict[str, list[NodeStream]] = {"Filter": [], "Score": []}
        self.serving = True  # the host's health service says SERVING (False while it drains or is gone)
        self.down_until = 0.0  # after a failure: skipped until then (loop time), unless no replica is up
        self.backoff = 0.0
        self.watcher: asyncio.Task[None] | None = None
        self.start_batch = False  # the host takes a cycle's first batch inside its start message
        #: The plugins of its last handshake by name (None before the first).
        self.manifests: dict[str, Any] | None = None
        #: (plugin, extension point enum) pairs of those manifests; (plugin, 0) for each plugin.
        self.declared: frozenset[tuple[str, int]] = frozenset()
        self.unary_in_flight = 0  # unary calls sent and not answered yet
        self.streams: weakref.WeakSet[NodeStream] = weakref.WeakSet()  # its Filter/Score streams
        self._latency: float | None = None  # seconds, moving average of answered calls and batches

    @property
    def in_flight(self) -> int:
        """Calls and node batches sent to it and not answered yet (a broken stream's are not counted)."""
        batches = sum(len(s.pending) for s in list(self.streams) if s.pending and not s.broken)
        return self.unary_in_flight + batches

    @property
    def latency_ms(self) -> float | None:
        """The moving average of its answer times (unary calls and node batches), in milliseconds."""
        return None if self._latency is None else self._latency * 1000.0

    async def call(self, method: str, request: Any, timeout: float, metadata: Any) -> Any:
        """One unary call, counted in flight until it ends, its answer time observed."""
        self.unary_in_flight += 1
        started = time.perf_counter()
        try:
            reply = await getattr(self.stub, method)(request, timeout=timeout, metadata=metadata)
        finally:
            self.unary_in_flight -= 1
        self.observe(time.perf_counter() - started)
        return reply

    def observe(self, seconds: float) -> None:
        """An answer came ``seconds`` after its request: fold it into the moving average (weight 1/5)."""
        self._latency = seconds if self._latency is None else self._latency + (seconds - self._latency) / 5

    def take(self, reply: Any) -> None:
        """What a handshake said: its manifests and features."""
        self.manifests = {m.name: m for m in reply.plugins}
        self.declared = frozenset(
            {(m.name, 0) for m in reply.plugins} | {(m.name, int(p)) for m in reply.plugins for p in m.points}
        )
        self.start_batch = "start-batch" in reply.features

    def declares(self, plugin: str, point: int) -> bool:
        """Whether its manifest has ``plugin`` at ``point`` (0: at all); yes before its first handshake."""
        return self.manifests is None or (plugin, point) in self.declared

    def sync_stub(self) -> Any:
        # QueueSort keys and queueing hints are asked from synchronous queue code.
        if self._sync_channel is None:
            self._sync_channel = self.endpoint.transport.sync_channel(self.address, _CHANNEL_OPTIONS)
        return self.endpoint.transport.stub(pb.plugin_grpc.PluginStub(self._sync_channel))  # type: ignore[no-untyped-call]

    def take_stream(self, method: str) -> NodeStream:
        """An idle stream for ``method`` or a new one. Streams carry no deadline: the adapter bounds
        each cycle's reads with the point's deadline instead."""
        idle = self.idle[method]
        while idle:
            stream = idle.pop()
            if not stream.broken and not stream.call.done():
                return stream
        stream = NodeStream(getattr(self.stub, method)(), self, method)
        self.streams.add(stream)
        return stream

    def give_back(self, stream: NodeStream) -> None:
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


_MAX_IDLE_STREAMS = 4  # per replica and point: concurrent cycles (explain, preemption) beyond it open their own
# Reconnect quickly to a restarted host: after 100 ms, growing to at most 0.5 s (gRPC: 1 s up to 120 s).
# (Not grpc.min_reconnect_backoff_ms: gRPC takes it as the connect timeout, 20 s by default.)
_CHANNEL_OPTIONS = [
    *CHANNEL_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


class Endpoint:
    """A plugin host (one or several replicas) and the plugins it serves."""

    def __init__(self, config: EndpointConfig, framework_address: str) -> None:
        self.config = config
        self.framework_address = framework_address
        self.transport = EndpointTransport(config.name, config.tls, config.token_file)  # TLS, tokens
        # dns:/// targets are looked up at connect and every resolveInterval after; plain addresses stay.
        self.replicas = [Replica(self, a) for a in config.addresses if not _is_dns(a)]
        self.manifests: dict[str, Any] = {}
        self.nodes_only = False
        #: Called (as a task) when the replicas agree on a new manifest, with the previous one.
        self.on_manifest_change: Callable[[Endpoint, dict[str, Any]], Coroutine[Any, Any, None]] | None = None
        #: Calls no replica could take (plugin, point) -> count: plugin or point gone from every manifest.
        self.unserved: dict[tuple[str, str], int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.adapters: list[HostedPlugin] = []
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
            replica = Replica(self, address)
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

    def where(self, replica: Replica) -> str:
        return f"plugin host {self.name!r} at {replica.address}"

    async def _handshake(self, replica: Replica, timeout: float, wait: bool = False) -> Any:
        request = pb.plugin.HandshakeRequest(
            framework_version=FRAMEWORK_VERSION, framework_address=self.framework_address,
            credential=self.transport.credential,
        )
        reply = await replica.stub.Handshake(request, timeout=timeout, wait_for_ready=wait or None)
        replica.take(reply)
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
        self._check_manifests(self.replicas[0], first)
        self._use(first)

    def _check_manifests(self, replica: Replica, manifests: dict[str, Any]) -> None:
        for m in manifests.values():
            if m.needs_volumes and (m.nodes_only or m.lookahead):
                raise RemotePluginsError(
                    f"{self.where(replica)}: plugin {m.name!r} declares needs_volumes, which excludes "
                    "nodes_only and lookahead (storage changes alter answers without a node change)"
                )
            if m.needs_devices and (m.nodes_only or m.lookahead):
                raise RemotePluginsError(
                    f"{self.where(replica)}: plugin {m.name!r} declares needs_devices, which excludes "
                    "nodes_only and lookahead (device changes alter answers without a node change)"
                )

    def _use(self, manifests: dict[str, Any]) -> None:
        self.manifests = manifests
        # Its snapshot-reading plugins all read node objects only: its hosts follow the mirror nodes-only
        # (a plugin reading storage or device objects is never nodes_only: its host needs every generation).
        self.nodes_only = all(m.nodes_only for m in manifests.values()
                              if m.needs_snapshot or m.needs_volumes or m.needs_devices)

    def take_up(self) -> None:
        """Adopt the manifest every replica that answers now agrees on, if it is a new one (replicas
        that failed and are not handshaken again do not count; a plugin gone from every replica stays
        in the endpoint's manifest, so profiles still resolve: its calls meet the failure policy)."""
        live = [r for r in self.replicas if r.manifests is not None and not r.suspect]
        if not live or not self.manifests:
            return
        first = live[0].manifests
        assert first is not None
        key = _serialized(first)
        if any(_serialized(r.manifests or {}) != key for r in live[1:]):
            return  # a rolling upgrade under way: each replica gets only the calls it declares
        merged = dict(first)
        for name, m in self.manifests.items():
            merged.setdefault(name, m)
        if _serialized(merged) == _serialized(self.manifests):
            return
        try:
            self._check_manifests(live[0], merged)
        except RemotePluginsError as exc:
            log.error("endpoint %r keeps its manifest: %s", self.name, exc)
            return
        old = self.manifests
        self._use(merged)
        line = f"endpoint {self.name!r} takes up its hosts' new manifest: {describe_change(old, merged)}"
        log.info("%s", line)
        print(line, flush=True)  # as an applied generation is: what schedules changes, at any log level
        if self.on_manifest_change is not None:
            self._spawn(self.on_manifest_change(self, old))

    async def _handshake_with_retries(self, replica: Replica) -> Any:
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
                    last = describe(exc)
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise RemotePluginsError(f"handshake with {self.where(replica)} failed: {last}") from None
                if is_tls_failure(last):  # a certificate problem: waiting will not fix it
                    hint = self.transport.hint(last)
                    raise RemotePluginsError(
                        f"TLS handshake with {self.where(replica)} failed: {last}" + (f" ({hint})" if hint else "")
                    ) from None
            await asyncio.sleep(min(backoff, max(deadline - loop.time(), 0)))
            backoff = min(backoff * 2, 1.0)

    def usable(self, key: str = "") -> list[Replica]:
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

    def spread(self, ordered: list[Replica]) -> int:
        """How many of :meth:`usable`'s replicas new node batches are spread over: the healthy ones
        (or the first, when none is known healthy)."""
        now = asyncio.get_running_loop().time()
        healthy = sum(1 for r in ordered if r.serving and r.down_until <= now)
        return max(healthy, 1)

    def route(self, plugin: str, point: str, key: str = "") -> list[Replica]:
        """:meth:`usable`'s replicas that declare ``plugin`` at ``point`` (an adapter's point name:
        "Filter", "PreFilterAddPod", ...); :class:`RemotePluginError` when none does (the plugin or
        the point is gone from every replica's manifest: the endpoint's failure policy applies)."""
        enum = POINT_ENUMS.get(point, 0)
        replicas = self.usable(key) if len(self.replicas) > 1 else self.replicas
        out = [r for r in replicas if r.declares(plugin, enum)]
        if out:
            return out
        n = self.unserved[(plugin, point)] = self.unserved.get((plugin, point), 0) + 1
        served = any(r.declares(plugin, 0) for r in self.replicas)
        what = f"{point} of {plugin!r}" if served else f"plugin {plugin!r}"
        message = f"no replica of endpoint {self.name!r} serves {what} any more"
        if n == 1 or n % 1000 == 0:
            log.error("%s (%d calls so far; failurePolicy %s)", message, n, self.config.failure_policy)
        raise RemotePluginError(message, grpc.StatusCode.UNAVAILABLE)

    def pick(self, key: str = "", plugin: str = "") -> Replica:
        """The replica for a call: by cycle id when there is one, round robin otherwise; one that
        serves ``plugin`` when some does."""
        replicas = self.usable(key) if len(self.replicas) > 1 else self.replicas
        replica = next((r for r in replicas if r.declares(plugin, 0)), replicas[0]) if plugin else replicas[0]
        replica.picked += 1
        return replica

    def failed(self, replica: Replica) -> None:
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

    async def _watch(self, replica: Replica) -> None:
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
                        if serving and replica.suspect and self.manifests:
                            self._spawn(self._back(replica))  # back (maybe upgraded): take its manifest now
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
            if self.manifests and not replica.suspect:
                replica.suspect = True  # it may come back as another version: handshake it again
                self.take_up()  # the replicas left may now agree on a new manifest
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def ready(self, replica: Replica) -> None:
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
                raise RemotePluginError(f"{describe(exc)} ({self.where(replica)})", exc.code()) from None
            served = {m.name for m in reply.plugins}
            missing = sorted({a.name for a in self.adapters if a.name not in served})
            if missing:
                log.error("%s no longer serves %s: their calls go to the replicas that still do (none: "
                          "failurePolicy %s applies)", self.where(replica), ", ".join(missing),
                          self.config.failure_policy)
            for adapter in self.adapters:
                if adapter.name in served:
                    await adapter.configure_on(replica)
            replica.suspect = False
            replica.backoff = 0.0
            replica.down_until = 0.0
            log.info("%s is back: handshaken and configured again", self.where(replica))
        self.take_up()

    async def _back(self, replica: Replica) -> None:
        try:
            await self.ready(replica)
        except Exception as exc:  # its next call tries again
            log.info("handshaking %s again failed: %s", self.where(replica), exc)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def configure_all(self) -> None:
        for adapter in self.adapters:
            for replica in self.replicas:
                await adapter.configure_on(replica)

    async def close(self) -> None:
        for adapter in self.adapters:
            await adapter.close()
        for task in [self._resolver, *self._closing, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for replica in self.replicas:
            await replica.close()


async def _close_later(replica: Replica, delay: float) -> None:
    await asyncio.sleep(delay)  # let calls already on it finish
    await replica.close()


def _serialized(manifests: dict[str, Any]) -> dict[str, bytes]:
    return {name: m.SerializeToString(deterministic=True) for name, m in manifests.items()}


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What changed between two manifests, for the log: ``F: +Score; G: new`` ..."""
    parts = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            parts.append(f"{name}: new")
            continue
        if name not in new or old[name] == new[name]:
            continue
        was = {E.ExtensionPoint.Name(p) for p in old[name].points}
        now = {E.ExtensionPoint.Name(p) for p in new[name].points}
        added = [f"+{p.removeprefix('EXTENSION_POINT_')}" for p in sorted(now - was)]
        removed = [f"-{p.removeprefix('EXTENSION_POINT_')}" for p in sorted(was - now)]
        parts.append(f"{name}: {' '.join(added + removed) or 'state keys, events or options'}")
    return "; ".join(parts) or "no change"


E = pb.plugin
#: An adapter's point names -> the manifest's extension point (what a replica must declare to get the call).
POINT_ENUMS: dict[str, int] = {
    "PreEnqueue": E.EXTENSION_POINT_PRE_ENQUEUE, "QueueSortKey": E.EXTENSION_POINT_QUEUE_SORT,
    "PreFilter": E.EXTENSION_POINT_PRE_FILTER, "PreFilterAddPod": E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS,
    "PreFilterRemovePod": E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS, "Filter": E.EXTENSION_POINT_FILTER,
    "PostFilter": E.EXTENSION_POINT_POST_FILTER, "PreScore": E.EXTENSION_POINT_PRE_SCORE,
    "Score": E.EXTENSION_POINT_SCORE, "NormalizeScore": E.EXTENSION_POINT_NORMALIZE_SCORE,
    "Reserve": E.EXTENSION_POINT_RESERVE, "Unreserve": E.EXTENSION_POINT_RESERVE,
    "Permit": E.EXTENSION_POINT_PERMIT, "PreBindPreFlight": E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT,
    "PreBind": E.EXTENSION_POINT_PRE_BIND, "Bind": E.EXTENSION_POINT_BIND, "PostBind": E.EXTENSION_POINT_POST_BIND,
    "BeforePreFilter": E.EXTENSION_POINT_PRE_FILTER_TRANSFORMER,
    "BeforeFilter": E.EXTENSION_POINT_FILTER_TRANSFORMER, "BeforeScore": E.EXTENSION_POINT_SCORE_TRANSFORMER,
    "BeforePostFilter": E.EXTENSION_POINT_POST_FILTER_TRANSFORMER,
    "PlacementGenerate": E.EXTENSION_POINT_PLACEMENT_GENERATE, "PlacementScore": E.EXTENSION_POINT_PLACEMENT_SCORE,
    "NormalizePlacementScore": E.EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE, "Sign": E.EXTENSION_POINT_SIGN,
    "PodGroupPostFilter": E.EXTENSION_POINT_POD_GROUP_POST_FILTER,
}


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


class NodeStream:
    """A Filter or Score stream to one replica, kept open and reused by consecutive cycles (one cycle
    at a time). ``seq`` numbers batches over the stream's whole life, so the answer to a batch of an
    abandoned cycle (``seq < base``, e.g. a prefetched window no plugin asked for) is recognised and
    dropped by the next cycle."""

    __slots__ = ("__weakref__", "base", "broken", "call", "method", "pending", "replica", "sent", "seq", "start")

    def __init__(self, call: Any, replica: Replica, method: str) -> None:
        self.call = call
        self.replica = replica
        self.method = method
        self.seq = 0
        self.base = 0
        self.broken = False
        self.start: Any = None  # this cycle's start message, held to carry the first batch
        self.pending: dict[int, tuple[int, int]] | None = None  # the current cycle's unanswered batches
        self.sent: dict[int, float] = {}  # batch seq -> when it was sent (perf_counter), until answered

