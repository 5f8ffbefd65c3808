"""Every remote plugin endpoint of a framework: :class:`RemotePlugins`.

At startup :meth:`RemotePlugins.connect` handshakes every endpoint (bounded retries with backoff; an
unreachable one is an error naming it) and :meth:`RemotePlugins.register` puts each hosted plugin in
the :class:`~framework.plugins.Registry` with the extension points of its manifest, so profiles name
it like any in-tree plugin. Once the scheduler exists, :meth:`RemotePlugins.attach` tells each adapter
its profile, starts the snapshot publisher and delivers each plugin's ``pluginConfig`` args (Configure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.plugin import Handle, Plugin

from ..plugins import Registry
from .adapter import RemotePlugin
from .classes import adapter_class
from .config import EndpointConfig
from .endpoint import Endpoint, Replica
from .errors import RemotePluginsError, describe
from .publisher import SnapshotPublisher
from .services import FrameworkServices
from .stats import PointStats, merged

__all__ = ["RemotePlugins"]

log = logging.getLogger("outrigger.remote")

E = pb.plugin


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
                cls = adapter_class(manifest)

                def factory(args: dict[str, Any], handle: Handle | None, cls: type[RemotePlugin] = cls,
                            ep: Endpoint = ep) -> Plugin:
                    return cls(ep, args, handle)

                registry.register(name, factory, cls.points)

    def adapters(self) -> list[RemotePlugin]:
        return [a for ep in self.endpoints for a in ep.adapters if isinstance(a, RemotePlugin)]

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
            ep.adapters[:] = [a for a in ep.adapters if isinstance(a, RemotePlugin) and a.publisher is self.publisher]
        await asyncio.gather(*(ep.configure_all() for ep in self.endpoints))

    def stats(self) -> dict[str, dict[str, PointStats]]:
        """Per plugin, per point: calls, latency, errors and bytes (summed over profiles)."""
        return merged((a.name, a.stats) for a in self.adapters())

    async def drain(self, timeout: float = 5.0) -> None:
        for adapter in self.adapters():
            await adapter.drain(timeout)

    async def stop_controllers(self, reason: str = "framework shutting down", timeout: float = 2.0) -> None:
        """Tell every host whose plugins run controllers to stop them (best effort, bounded)."""

        async def stop(ep: Endpoint, replica: Replica) -> None:
            try:
                await replica.stub.Stop(pb.plugin.StopRequest(reason=reason), timeout=timeout)
            except grpc.RpcError as exc:
                log.info("stopping the controllers of %s: %s", ep.where(replica), describe(exc))

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
