"""Starting and stopping the framework service: :func:`start_server` (in-process plugins),
:func:`start_service` (remote plugins: bind, handshake the endpoints, load the configuration, build the
scheduler, serve), :func:`start_plugin_services` (only the Handle and CycleState services), and
:func:`serve`, which runs until SIGTERM or SIGINT and then stops gracefully (:meth:`Server.stop`)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pluginhost import pb
from pluginhost.security import ServerTLS, add_port
from pluginhost.wire import SERVER_OPTIONS, server_interceptors

from ..config import SchedulerConfig
from ..liveconfig import WatchedFiles, watch_files
from ..observe.observability import Observability, ObservabilityConfig
from ..plugins import Registry
from ..profiles import build_registry_with_remote
from ..remote import EndpointConfig, RemotePlugins
from ..remote.services import FrameworkServices
from ..scheduler import Scheduler
from .servicer import SERVICE_NAME, SchedulerService
from .tlsfiles import ReloadingCredentials

__all__ = [
    "PluginServices",
    "Server",
    "advertised_address",
    "ready_line",
    "serve",
    "start_plugin_services",
    "start_server",
    "start_service",
]

log = logging.getLogger("outrigger.service")


@dataclass
class Server:
    """A running framework service (see :func:`start_server` and :func:`start_service`)."""

    scheduler: Scheduler
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    loop_task: asyncio.Task[None]
    services: FrameworkServices | None = None
    remote: RemotePlugins | None = None
    observability: Observability | None = None
    #: The gRPC port's TLS files, read again when they change (None without TLS).
    tls_files: ReloadingCredentials | None = None
    _stopped: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Graceful stop: NOT_SERVING, no new pods, binding cycles finished, server stopped. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.health.enter_graceful_shutdown()
        if self.observability is not None:
            await self.observability.stop_http()
        await self.scheduler.stop()
        self.loop_task.cancel()
        try:
            await self.loop_task
        except asyncio.CancelledError:
            pass
        if self.remote is not None:
            await self.remote.close()
        elif self.services is not None:
            self.services.close()
        await self.server.stop(grace)
        if self.observability is not None:
            self.observability.shutdown()  # after the last binding cycle: every trace is complete


def _new_server() -> grpc.aio.Server:
    # The message size limits and the undecodable-request guard are pluginhost.wire's, shared by every server.
    return grpc.aio.server(options=SERVER_OPTIONS, interceptors=server_interceptors())


def _bind(server: grpc.aio.Server, listen: str,
          tls: ServerTLS | None = None) -> tuple[int, ReloadingCredentials | None]:
    """Bind ``listen``; with ``tls``, its files are read again when they change (:mod:`.tlsfiles`)."""
    if tls is None:
        return add_port(server, listen, None), None
    files = ReloadingCredentials(tls)
    port = server.add_secure_port(listen, files.credentials)
    if port == 0:
        raise OSError(f"cannot listen on {listen!r}")
    return int(port), files


def advertised_address(listen: str, port: int) -> str:
    """Where plugin hosts reach a framework listening on ``listen`` (a wildcard host becomes loopback:
    sidecars run next to the framework; use ``--advertise`` otherwise)."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host in ("", "0.0.0.0", "::", "*"):
        host = "127.0.0.1"
    return f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"


async def _start(
    config: SchedulerConfig,
    registry: Registry,
    server: grpc.aio.Server,
    port: int,
    services: FrameworkServices,
    remote: RemotePlugins | None,
    seed: int | None,
    observability: ObservabilityConfig | None = None,
) -> Server:
    scheduler = Scheduler(config, registry, seed=seed)
    if remote is not None:
        await remote.attach(scheduler)  # profiles, snapshot publisher, Configure (errors fail startup)
    else:
        services.attach(scheduler)
    obs = await Observability.start(observability, scheduler, remote) if observability is not None else None
    servicer = SchedulerService(scheduler, obs)
    pb.scheduler_grpc.add_SchedulerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await server.start()
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    loop_task = asyncio.get_running_loop().create_task(scheduler.run())
    return Server(scheduler, server, health_servicer, port, loop_task, services, remote, obs)


async def start_server(config: SchedulerConfig, registry: Registry, listen: str = "127.0.0.1:0",
                       *, seed: int | None = None, observability: ObservabilityConfig | None = None,
                       tls: ServerTLS | None = None) -> Server:
    """Build the scheduler and start serving on ``listen`` (port 0 picks a free port)."""
    server = _new_server()
    port, files = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    srv = await _start(config, registry, server, port, services, None, seed, observability)
    srv.tls_files = files
    return srv


async def start_service(
    config_for: Callable[[Registry], SchedulerConfig],
    endpoints: Sequence[EndpointConfig] = (),
    listen: str = "127.0.0.1:0",
    *,
    advertise: str | None = None,
    seed: int | None = None,
    observability: ObservabilityConfig | None = None,
    tls: ServerTLS | None = None,
) -> Server:
    """The whole framework with remote plugins: bind ``listen``, handshake ``endpoints`` (telling them to
    connect back to ``advertise``, by default the bound address), load the configuration with
    ``config_for(registry)``, configure the remote plugins, start serving."""
    server = _new_server()
    port, files = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    remote: RemotePlugins | None = None
    try:
        registry, remote = await build_registry_with_remote(
            endpoints, advertise or advertised_address(listen, port), services
        )
        srv = await _start(config_for(registry), registry, server, port, services, remote, seed, observability)
        srv.tls_files = files
        if remote is not None:  # a host upgraded to another manifest: the profiles are resolved again
            remote.follow_manifests(srv.scheduler, config_for)
            await remote.start_shadows(srv.scheduler)
        return srv
    except BaseException:
        if remote is not None:
            await remote.close()
        await server.stop(0)
        raise


@dataclass
class PluginServices:
    """Handle and CycleState served on their own port: for a scheduler without the Scheduler API
    (``explain`` offline, tests) whose remote plugins must still reach back."""

    server: grpc.aio.Server
    services: FrameworkServices
    port: int
    #: The port's TLS files, read again when they change (None without TLS).
    tls_files: ReloadingCredentials | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float = 1.0) -> None:
        self.services.close()
        await self.server.stop(grace)


async def start_plugin_services(listen: str = "127.0.0.1:0", *, tls: ServerTLS | None = None) -> PluginServices:
    """Serve the Handle and CycleState services (attach a scheduler with ``services.attach`` or
    :meth:`RemotePlugins.attach`)."""
    server = _new_server()
    port, files = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    await server.start()
    return PluginServices(server, services, port, files)


def ready_line(listen: str, srv: Server) -> str:
    """The line ``outrigger serve`` prints once it serves: where the Scheduler API (and the secure and
    plain HTTP ports) can be reached."""
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    line = f"outrigger: serving the Scheduler API on {host}:{srv.port}"
    if srv.observability is not None and srv.observability.secure is not None:
        line += f", HTTPS on {srv.observability.secure.address}"
    if srv.observability is not None and srv.observability.http is not None:
        line += f", HTTP on {srv.observability.http.address}"
    return line


async def serve(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig] = (),
    advertise: str | None = None,
    observability: ObservabilityConfig | None = None,
    *,
    tls: ServerTLS | None = None,
    watch: WatchedFiles | None = None,
) -> None:
    """Run the framework service until SIGTERM or SIGINT; with ``watch``, a change of its files is
    applied live (:mod:`framework.liveconfig`)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # before announcing: a SIGTERM right after is graceful
    srv = await start_service(config_for, endpoints, listen, advertise=advertise, observability=observability,
                              tls=tls)
    live = watch_files(srv, watch, advertise or advertised_address(listen, srv.port)) if watch else None
    log.info("outrigger framework serving on %s (profiles: %s)", listen, ", ".join(srv.scheduler.profiles))
    print(ready_line(listen, srv), flush=True)
    await stop.wait()
    log.info("shutting down")
    if live is not None:
        await live.stop()
    await srv.stop()
    if live is not None:
        await live.close()
