"""A plugin host's endpoint and its replicas: addresses (``dns:///`` names followed), channels, the
handshake, health, failover order, and the Filter/Score streams each replica keeps open.

An :class:`Endpoint` is one entry of the RemotePlugins document; each of its addresses is a
:class:`Replica`. A replica that failed is handshaken (and its plugins configured) again before its
next call, and left out of new work for a while when others are up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
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
        return NodeStream(getattr(self.stub, method)(), self, method)

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
        for m in first.values():
            if m.needs_volumes and (m.nodes_only or m.lookahead):
                raise RemotePluginsError(
                    f"{self.where(self.replicas[0])}: plugin {m.name!r} declares needs_volumes, which excludes "
                    "nodes_only and lookahead (storage changes alter answers without a node change)"
                )
        self.manifests = first
        # Its snapshot-reading plugins all read node objects only: its hosts follow the mirror nodes-only
        # (a plugin reading storage objects is never nodes_only: its host needs every generation).
        self.nodes_only = all(m.nodes_only for m in first.values() if m.needs_snapshot or m.needs_volumes)

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

    def pick(self, key: str = "") -> Replica:
        """The replica for a call: by cycle id when there is one, round robin otherwise."""
        replica = self.usable(key)[0] if len(self.replicas) > 1 else self.replicas[0]
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
            await adapter.close()
        for task in [self._resolver, *self._closing]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for replica in self.replicas:
            await replica.close()


async def _close_later(replica: Replica, delay: float) -> None:
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


class NodeStream:
    """A Filter or Score stream to one replica, kept open and reused by consecutive cycles (one cycle
    at a time). ``seq`` numbers batches over the stream's whole life, so the answer to a batch of an
    abandoned cycle (``seq < base``, e.g. a prefetched window no plugin asked for) is recognised and
    dropped by the next cycle."""

    __slots__ = ("base", "broken", "call", "method", "replica", "seq", "start")

    def __init__(self, call: Any, replica: Replica, method: str) -> None:
        self.call = call
        self.replica = replica
        self.method = method
        self.seq = 0
        self.base = 0
        self.broken = False
        self.start: Any = None  # this cycle's start message, held to carry the first batch

