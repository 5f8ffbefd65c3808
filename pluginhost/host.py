"""The plugin host: serves plugin classes to the Outrigger framework over gRPC.

A host process (a sidecar) runs one or more plugins written against :mod:`pluginhost.plugin` (the
same base classes in-tree plugins use) and answers the framework's Plugin service::

    from pluginhost import serve
    from mypkg import Gang, GpuTopology

    serve([Gang, GpuTopology], listen="127.0.0.1:50061")     # or: outrigger plugin serve mypkg:PLUGINS

What the host does for the plugin author:

- **Manifest**: each class is checked when the host is built (a name, at least one extension point,
  valid ``state_keys`` / ``batch_size`` / ``filter_and_score`` / ``needs_snapshot`` declarations) and
  described to the framework at Handshake, which then calls only the points a class implements.
- **Configure**: the framework sends each plugin's ``pluginConfig`` args per profile; the host builds
  the instance as ``cls(args, handle)``, exactly as the in-process registry does.
- **Node batches**: Filter and Score arrive as streams of node ids at a snapshot generation; the host's
  :class:`~pluginhost.mirror.SnapshotMirror` turns them into real ``NodeBatch`` objects, so batch-shaped
  (and per-node, ``NodeFilterPlugin``) code runs unchanged.
- **CycleState**: a per-call proxy holds the declared keys sent with the request; writes go back on
  the reply; other keys are read through the framework's CycleState service (one round trip).
- **Context**: :func:`pluginhost.context` gives the call's point, profile, cycle id, args and Handle.
- **Errors**: an exception in plugin code becomes an ``Error`` status with the exception's message
  (the framework reports it as ``running <Point> plugin 'X': <message>``), never a crashed host.
- **Lifecycle**: the standard gRPC health service (SERVING, NOT_SERVING on shutdown), ``start`` /
  ``stop(grace)`` / ``async with``, and SIGTERM/SIGINT handling in :func:`serve`.
- **Security** (optional, docs/security.md): serve TLS or mutual TLS (``tls``), require a bearer token
  from the framework (``token``), dial the framework over TLS (``framework_tls``); calls to the
  framework carry the credential it sent in its Handshake.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import logging
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pluginhost import pb
from pluginhost.context import CallContext
from pluginhost.definition import Hosted, PluginDefinitionError, declared_manifest
from pluginhost.handle_client import HandleClient
from pluginhost.mirror import SnapshotMirror
from pluginhost.plugin import Controller, Plugin
from pluginhost.security import BearerTokenInterceptor, ClientTLS, ServerTLS, add_port
from pluginhost.servicer import Servicer
from pluginhost.snapshot import Snapshot
from pluginhost.tracing import TraceMetadataInterceptor
from pluginhost.tracing import enabled as tracing_enabled
from pluginhost.tracing import enter as _enter
from pluginhost.tracing import leave as _leave
from pluginhost.wire import SERVER_OPTIONS, server_interceptors

__all__ = ["DEFAULT_LISTEN", "HealthServiceName", "PluginHost", "load_plugins", "serve"]

log = logging.getLogger("outrigger.pluginhost")

HealthServiceName = "outrigger.v1.Plugin"
DEFAULT_LISTEN = "127.0.0.1:50061"
# How long a request naming a snapshot generation waits for the mirror to reach it.
MIRROR_WAIT_SECONDS = 5.0


# ---------------------------------------------------------------------------------------------------
# The host


class PluginHost:
    """A gRPC server hosting plugin classes (see the module docstring).

    ``async with PluginHost([MyPlugin], listen="127.0.0.1:0") as host: ...`` starts it on a free port
    (``host.address``) and stops it gracefully on exit.
    """

    def __init__(
        self,
        plugins: Iterable[type[Plugin]],
        *,
        listen: str = DEFAULT_LISTEN,
        framework: str | None = None,
        mirror_wait: float = MIRROR_WAIT_SECONDS,
        tls: ServerTLS | None = None,
        token: str | None = None,
        framework_tls: ClientTLS | None = None,
    ) -> None:
        self.plugins: dict[str, Hosted] = {}
        for cls in plugins:
            manifest = declared_manifest(cls)
            if manifest.name in self.plugins:
                raise PluginDefinitionError(f"two hosted plugins are named {manifest.name!r}")
            self.plugins[manifest.name] = Hosted(cls, manifest)
        if not self.plugins:
            raise PluginDefinitionError("a plugin host needs at least one plugin class")
        # Every plugin reading the snapshot reads node objects only (nodes_only, or lookahead): the
        # mirror needs nodes, not the pods placed on them.
        self.nodes_only = all(h.manifest.nodes_only for h in self.plugins.values() if h.manifest.needs_snapshot)
        # Some plugin reads storage objects: the mirror follows them too (FollowRequest.volumes).
        self.volumes = any(h.manifest.needs_volumes for h in self.plugins.values())
        # Some plugin reads device objects: the mirror follows them too (FollowRequest.devices).
        self.devices = any(h.manifest.needs_devices for h in self.plugins.values())
        self.listen = listen
        self.mirror_wait = mirror_wait
        self.mirror = SnapshotMirror()
        self.tls = tls  # serve TLS (mutual TLS with tls.client_ca_file)
        self.token = token  # the bearer token callers must present
        self.handle = HandleClient(self.mirror, tls=framework_tls)
        self.port = 0
        self._fixed_framework = framework
        if framework:
            self.handle.connect(framework)
        self._needs_mirror = any(h.manifest.needs_snapshot for h in self.plugins.values())
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._follower: asyncio.Task[None] | None = None
        self._credential = ""  # the credential of the framework's last Handshake
        self._stopped = False
        self.views: dict[tuple[int, bytes], tuple[Snapshot, Snapshot]] = {}
        self.controllers: dict[tuple[str, str], Controller] = {}  # (plugin, profile) -> running controller
        # Filter/Score streams opened by frameworks, and cycles started on them (a framework reuses
        # a stream for many cycles).
        self.streams_opened: collections.Counter[str] = collections.Counter()
        self.cycles_started: collections.Counter[str] = collections.Counter()
        self.lookahead_pods = 0  # pods answered ahead of their cycles (Plugin.Lookahead)

    @property
    def address(self) -> str:
        host = self.listen.rsplit(":", 1)[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    async def start(self) -> PluginHost:
        auth = [BearerTokenInterceptor(self.token, "this plugin host")] if self.token else []
        tracing = [TraceMetadataInterceptor()] if tracing_enabled() else []
        server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[*auth, *tracing, *server_interceptors()])
        pb.plugin_grpc.add_PluginServicer_to_server(Servicer(self), server)  # type: ignore[no-untyped-call]
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        self.port = add_port(server, self.listen, self.tls)
        await server.start()
        self._server = server
        await self._health.set(HealthServiceName, health_pb2.HealthCheckResponse.SERVING)
        await self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        if self._fixed_framework and self._needs_mirror:
            self._start_following()
        return self

    def framework_connected(self, address: str, credential: str = "") -> None:
        """A Handshake: follow the framework at ``address`` (unless the host was given one), presenting
        ``credential`` on every call to it. A new framework (another address, or a new credential: the
        framework issues one per start) makes the mirror resync; the same framework handshaking again
        (it does after any failed call, to find out whether the host restarted) keeps the mirror it
        follows: a resync then would leave every call waiting for it, fail them at their deadlines
        and bring the next handshake, and a loaded host would never catch up."""
        target = self.handle.address if self._fixed_framework or not address else address
        same = (target, credential) == (self.handle.address, self._credential)
        following = self._follower is not None and not self._follower.done()
        self._credential = credential
        self.handle.set_credential(credential)
        if not self._fixed_framework and address:
            self.handle.connect(address)
        if self._needs_mirror and self.handle.address and not (same and following):
            self._start_following()

    def _start_following(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
        self.mirror.reset()
        self._follower = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        """Follow the framework's snapshot forever, reconnecting with bounded backoff."""
        backoff = 0.05
        name = next(iter(self.plugins))
        channel, stub = self.handle.follow_channel()
        try:
            while True:
                ready = asyncio.Event()
                try:
                    await self.mirror.follow_once(stub, name, ready, nodes_only=self.nodes_only,
                                                  volumes=self.volumes, devices=self.devices)
                except grpc.RpcError as exc:
                    log.debug("snapshot mirror stream from %s ended: %s", self.handle.address, exc)
                if ready.is_set():
                    backoff = 0.05
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        finally:
            await channel.close()

    # ---- controllers ---------------------------------------------------------------------------

    async def start_controller(self, hosted: Hosted, profile: str, inst: Controller) -> None:
        """Start a configured plugin's controller (the framework is active for ``profile``)."""
        token = _enter(CallContext(plugin=hosted.name, point="Controller", profile=profile,
                                   args=hosted.args.get(profile, {}), handle=self.handle))
        try:
            await inst.start()
        finally:
            _leave(token)
        self.controllers[(hosted.name, profile)] = inst

    async def stop_controller(self, hosted: Hosted, profile: str, inst: object) -> None:
        running = self.controllers.get((hosted.name, profile))
        if running is None or running is not inst:
            return
        del self.controllers[(hosted.name, profile)]
        try:
            await running.stop()
        except Exception:
            log.exception("stopping the controller of %s for profile %r failed", hosted.name, profile)

    async def stop_controllers(self, profile: str = "") -> None:
        """Stop the running controllers (of ``profile``, or all)."""
        for (name, prof), inst in list(self.controllers.items()):
            if not profile or prof == profile:
                await self.stop_controller(self.plugins[name], prof, inst)

    async def stop(self, grace: float = 5.0) -> None:
        """Graceful stop: NOT_SERVING, controllers stopped, in-flight calls get ``grace`` seconds.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.stop_controllers()
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        if self._server is not None:
            await self._server.stop(grace)
        self.handle.close()

    async def wait_for_termination(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> PluginHost:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(1.0)


def load_plugins(target: str) -> list[type[Plugin]]:
    """The plugin classes named by ``MODULE:ATTR``: a class, a list/tuple of classes, or a function
    returning either."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise PluginDefinitionError(f"expected MODULE:ATTR (e.g. mypkg.plugins:PLUGINS), got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginDefinitionError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise PluginDefinitionError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, type):
        value = value()
    classes = list(value) if isinstance(value, list | tuple) else [value]
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Plugin)):
            raise PluginDefinitionError(f"{target}: {cls!r} is not a plugin class")
    return classes


async def _serve(plugins: Sequence[type[Plugin]], listen: str, framework: str | None,
                 security: dict[str, Any]) -> None:
    from pluginhost.tracing import configure_from_env

    try:
        provider = configure_from_env()  # OTEL_* variables; off unless OTEL_TRACES_EXPORTER names an exporter
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # before saying we listen: a SIGTERM right after is graceful
    host = PluginHost(plugins, listen=listen, framework=framework, **security)
    await host.start()
    names = ", ".join(host.plugins)
    secured = ("; mutual TLS" if host.tls.client_ca_file else "; TLS") if host.tls else ""
    secured += "; bearer token required" if host.token else ""
    # The first line of output says where the host listens (tests and the demo read the port from it).
    print(f"outrigger plugin host listening on {host.address} (plugins: {names}{secured})", flush=True)
    await stop.wait()
    log.info("plugin host shutting down")
    await host.stop()
    if provider is not None:
        provider.shutdown()  # type: ignore[attr-defined]  # export the spans still buffered


def serve(
    plugins: Sequence[type[Plugin]],
    listen: str = DEFAULT_LISTEN,
    framework: str | None = None,
    *,
    tls: ServerTLS | None = None,
    token: str | None = None,
    framework_tls: ClientTLS | None = None,
) -> None:
    """Host ``plugins`` until SIGTERM or SIGINT (the blocking entry point of a sidecar). ``tls``,
    ``token`` and ``framework_tls`` are :class:`PluginHost`'s security settings."""
    security: dict[str, Any] = {"tls": tls, "token": token, "framework_tls": framework_tls}
    try:
        import uvloop

        uvloop.run(_serve(plugins, listen, framework, security))
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(_serve(plugins, listen, framework, security))


if __name__ == "__main__":  # python -m pluginhost.host MODULE:ATTR [LISTEN]
    serve(load_plugins(sys.argv[1]), *(sys.argv[2:3] or [DEFAULT_LISTEN]))

