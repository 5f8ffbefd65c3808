"""Every remote plugin endpoint of a framework: :class:`RemotePlugins`.

At startup :meth:`RemotePlugins.connect` handshakes every endpoint (bounded retries with backoff; an
unreachable one is an error naming it) and :meth:`RemotePlugins.register` puts each hosted plugin in
the :class:`~framework.plugins.Registry` with the extension points of its manifest, so profiles name
it like any in-tree plugin. Once the scheduler exists, :meth:`RemotePlugins.attach` tells each adapter
its profile, starts the snapshot publisher and delivers each plugin's ``pluginConfig`` args (Configure).

When the replicas of an endpoint agree on a new manifest (a rolling upgrade finished), its plugins are
registered again with their new points and the scheduler's profiles are resolved again and rebuilt
(:meth:`RemotePlugins.manifest_changed`), without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.plugin import Handle, Plugin

from ..canary import CanarySource, with_variants
from ..plugins import Registry
from .adapter import RemotePlugin
from .classes import adapter_class
from .config import EndpointConfig
from .endpoint import Endpoint, Replica
from .errors import RemotePluginsError, describe
from .publisher import SnapshotPublisher
from .services import FrameworkServices
from .shadow import Shadows
from .stats import PointStats, merged

__all__ = ["RemotePlugins"]

log = logging.getLogger("outrigger.remote")

E = pb.plugin


class RemotePlugins:
    """Every remote plugin endpoint of a framework (see the module docstring)."""

    def __init__(self, endpoints: Sequence[Endpoint], services: FrameworkServices | None = None) -> None:
        self.endpoints = list(endpoints)
        self.services = services or FrameworkServices()
        # Services given by the caller are the caller's to close (a live change shares the server's).
        self._owns_services = services is None
        self.publisher: SnapshotPublisher | None = None
        self.registry: Registry | None = None
        #: The scheduler, and how to resolve its configuration against the registry: what
        #: :meth:`rebuild_profiles` needs (set by whoever builds the scheduler; None: a changed
        #: manifest changes where calls go, not which points the profiles call).
        self.scheduler: Any = None
        self.config_for: Callable[[Registry], Any] | None = None
        #: What rebuilds the profiles once a manifest changed (default: :meth:`rebuild_profiles`); a
        #: live-configuration engine may put its own here. Given the names of the plugins changed.
        self.on_change: Callable[[set[str]], Awaitable[None]] | None = None
        #: Manifests taken up, and those whose profiles could not be rebuilt (the old ones go on).
        self.manifest_changes = 0
        self.manifest_failures = 0
        #: The shadow plugins (:meth:`start_shadows`).
        self.shadows = Shadows(self.endpoints)
        self._tasks: set[asyncio.Task[None]] = set()
        for ep in self.endpoints:  # their hosts may call back as soon as they are handshaken
            self.services.grant(ep.transport.credential, ep)
            ep.on_manifest_change = self.manifest_changed

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
            await out.abandon()
            raise
        for ep in endpoints:
            ep.watch_health()
            ep.follow_dns()
        seen: dict[str, str] = {}
        for ep in endpoints:
            for name in ep.manifests:
                if _shadowed(ep, name) or _canary(ep, name):
                    continue  # a shadow or canary may have the name of the live plugin it is a new version of
                if name in seen:
                    await out.abandon()
                    raise RemotePluginsError(
                        f"plugin {name!r} is served by both endpoint {seen[name]!r} and {ep.name!r}"
                    )
                seen[name] = ep.name
        try:
            _check_canaries(endpoints)
        except RemotePluginsError:
            await out.abandon()
            raise
        return out

    def register(self, registry: Registry) -> None:
        """Register every hosted plugin with the points of its manifest."""
        for ep in self.endpoints:
            for name, manifest in ep.manifests.items():
                if _shadowed(ep, name):
                    continue  # never in a profile: called beside the live cycles (.shadow)
                if _canary(ep, name):  # a variant of the profiles runs it (framework.canary)
                    cls = adapter_class(manifest)
                    registry.canary = CanarySource(ep.config.canary, ep.name, _factory(cls, ep), cls.points)
                    continue
                if name in registry:
                    raise RemotePluginsError(
                        f"remote plugin {name!r} (endpoint {ep.name!r}) has the name of a plugin that is "
                        "already registered (an in-tree plugin?)"
                    )
                cls = adapter_class(manifest)
                registry.register(name, _factory(cls, ep), cls.points)
        self.registry = registry

    async def start_shadows(self, scheduler: Any) -> None:
        """Start the shadow plugins on ``scheduler``'s cycles (after :meth:`attach`; none: nothing).
        Once: a second call does nothing."""
        if self.shadows.scheduler is not None:
            return
        self.shadows = Shadows(self.endpoints)  # the manifests are known now
        self.shadows.scheduler = scheduler  # started (a concurrent call returns)
        await self.shadows.start(scheduler, self.publisher, self.services)

    def follow_manifests(self, scheduler: Any, config_for: Callable[[Registry], Any]) -> None:
        """This RemotePlugins serves ``scheduler`` (after :meth:`attach`): rebuild its profiles,
        resolved with ``config_for(registry)``, when a host's manifest changes
        (:meth:`rebuild_profiles`), and start the shadow plugins if they are not yet (a configuration
        applied live brings its own)."""
        self.scheduler, self.config_for = scheduler, config_for
        if self.shadows.scheduler is None and any(ep.config.shadow is not None for ep in self.endpoints):
            task = asyncio.get_running_loop().create_task(self._start_shadows_later(scheduler))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _start_shadows_later(self, scheduler: Any) -> None:
        try:
            await self.start_shadows(scheduler)
        except Exception as exc:  # its endpoints are up (handshaken): a Configure it refused
            log.error("the shadow plugins did not start: %s", exc)

    async def manifest_changed(self, ep: Endpoint, old: dict[str, Any]) -> None:
        """``ep``'s replicas agree on a new manifest: its plugins are registered with their new points
        and the profiles rebuilt (:attr:`on_change`). A failure is logged and counted; the profiles
        built from the old manifest go on (calls still reach only replicas declaring them)."""
        changed = {n for n, m in ep.manifests.items() if (n not in old or old[n] != m) and not _shadowed(ep, n)
                   and not _canary(ep, n)}  # a canary's new manifest is taken up by a change of --plugins
        if self.registry is None or not changed:
            return
        for name in sorted(changed):
            cls = adapter_class(ep.manifests[name])
            if name in self.registry:
                self.registry.replace(name, _factory(cls, ep), cls.points)
            else:
                self.registry.register(name, _factory(cls, ep), cls.points)
        try:
            if self.on_change is not None:
                await self.on_change(changed)
            elif self.scheduler is not None and self.config_for is not None:
                await self.rebuild_profiles(changed)
            else:
                return
        except Exception as exc:
            self.manifest_failures += 1
            log.error("endpoint %r: the profiles cannot use its new manifest (%s); they go on as they were",
                      ep.name, exc)
            return
        self.manifest_changes += 1

    async def rebuild_profiles(self, changed: set[str]) -> None:
        """Resolve the configuration again (multiPoint follows the new points), build the profiles
        and use them from the next cycle; new (plugin, profile) pairs are configured on their hosts,
        and the adapters no profile uses any more are dropped."""
        assert self.registry is not None and self.config_for is not None
        config = self.config_for(self.registry)
        old = self.adapters()
        before = {(a.name, a.profile) for a in old}
        self.scheduler.rebuild_profiles(config)
        used: set[int] = set()
        for profile, fwk in self.scheduler.profiles.items():
            for plugin in fwk.plugins.values():
                used.add(id(plugin))
                if isinstance(plugin, RemotePlugin) and plugin.publisher is None:
                    plugin.profile = profile
                    plugin.scores_enabled = plugin in fwk.score_plugins and not fwk.score_transformers
                    plugin.publisher = self.publisher
                    plugin.services = self.services
        for ep in self.endpoints:
            ep.adapters[:] = [a for a in ep.adapters if isinstance(a, RemotePlugin) and (a.shadow or id(a) in used)]
        for adapter in self.adapters():
            if (adapter.name, adapter.profile) not in before:
                for replica in adapter.endpoint.replicas:
                    if replica.declares(adapter.name, 0) and not replica.suspect:
                        await adapter.configure_on(replica)
        for adapter in old:
            if id(adapter) not in used:
                await adapter.close()
        log.info("profiles rebuilt for the new manifests of %s", ", ".join(sorted(changed)))

    def unserved(self) -> dict[tuple[str, str, str], int]:
        """Calls no replica could take, by (endpoint, plugin, point)."""
        return {(ep.name, plugin, point): n for ep in self.endpoints for (plugin, point), n in ep.unserved.items()}

    def adapters(self) -> list[RemotePlugin]:
        """The adapters of the plugins the profiles run (shadow plugins' are :attr:`shadows`')."""
        return [a for ep in self.endpoints for a in ep.adapters if isinstance(a, RemotePlugin) and not a.shadow]

    async def attach(self, scheduler: Any, profiles: dict[str, Any] | None = None) -> None:
        """Tie the adapters to ``scheduler``: their profiles, the snapshot publisher over its cache,
        the CycleState service; then send every plugin its configuration (errors fail startup).

        ``profiles``: the Frameworks of a configuration not yet serving (a live change), in place of
        the scheduler's own; the publisher the services already run for ``scheduler`` is kept."""
        services = self.services
        if profiles is not None and services.scheduler is scheduler and services.publisher is not None:
            self.publisher = services.publisher
        else:
            self.publisher = services.attach(scheduler)
        for fwk in with_variants(scheduler.profiles if profiles is None else profiles):
            for plugin in fwk.plugins.values():
                if isinstance(plugin, RemotePlugin):
                    plugin.profile = fwk.profile
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

    async def retire(self) -> None:
        """Close the endpoints of a configuration no longer serving (its cycles are over): informational
        calls finish, channels close and its hosts' credentials are revoked; the services, their
        publisher and the hosts' controllers stay, for the configuration that replaced it."""
        await self.shadows.close()
        with contextlib.suppress(Exception):
            await self.drain(2.0)
        for ep in self.endpoints:
            await ep.close()
            self.services.revoke(ep.transport.credential)

    async def abandon(self) -> None:
        """Undo a connect that cannot be used: :meth:`close` when the services are this object's own,
        :meth:`retire` when they were given (they serve others)."""
        if self._owns_services:
            await self.close()
        else:
            await self.retire()

    async def close(self) -> None:
        """Finish informational calls, stop remote controllers, close channels and the publisher.
        Idempotent."""
        await self.shadows.close()
        with contextlib.suppress(Exception):
            await self.drain(2.0)
        with contextlib.suppress(Exception):
            await self.stop_controllers()
        for ep in self.endpoints:
            await ep.close()
            self.services.revoke(ep.transport.credential)
        self.services.close()


def _factory(cls: type[RemotePlugin], ep: Endpoint) -> Callable[[dict[str, Any], Handle | None], Plugin]:
    def factory(args: dict[str, Any], handle: Handle | None) -> Plugin:
        return cls(ep, args, handle)

    return factory


def _canary(ep: Endpoint, plugin: str) -> bool:
    return ep.config.canary is not None and ep.config.canary.plugin == plugin


def _check_canaries(endpoints: Sequence[Endpoint]) -> None:
    """A canary endpoint serves its plugin, with the points its stable endpoint serves it at."""
    by_name = {ep.name: ep for ep in endpoints}
    for ep in endpoints:
        canary = ep.config.canary
        if canary is None:
            continue
        stable = by_name.get(canary.of)  # the document's parser checked it; configs built in code may not be
        if stable is None or stable is ep:
            raise RemotePluginsError(f"canary endpoint {ep.name!r}: no other endpoint named {canary.of!r}")
        mine, theirs = ep.manifests.get(canary.plugin), stable.manifests.get(canary.plugin)
        if mine is None or theirs is None:
            who = ep.name if mine is None else stable.name
            raise RemotePluginsError(f"canary endpoint {ep.name!r}: endpoint {who!r} does not serve plugin "
                                     f"{canary.plugin!r} (its plugins: {', '.join(sorted(by_name[who].manifests))})")
        if adapter_class(mine).points != adapter_class(theirs).points:
            raise RemotePluginsError(
                f"canary endpoint {ep.name!r}: plugin {canary.plugin!r} has points "
                f"{', '.join(sorted(adapter_class(mine).points))}, but endpoint {stable.name!r} serves it at "
                f"{', '.join(sorted(adapter_class(theirs).points))} (a canary changes the plugin, not its points)")


def _shadowed(ep: Endpoint, plugin: str) -> bool:
    return ep.config.shadow is not None and ep.config.shadow.covers(plugin)
