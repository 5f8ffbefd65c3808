"""Where the scheduler's plugins come from: the in-tree registry, remote plugin hosts, and the
default configuration."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .config import DEFAULT_MULTIPOINT, UNMODELLED_PLUGINS, SchedulerConfig, default_config, load_config_file
from .plugins import Registry, in_tree_registry
from .remote import EndpointConfig, RemotePlugins
from .remote.services import FrameworkServices

__all__ = [
    "build_registry",
    "build_registry_with_remote",
    "default_scheduler_config",
    "load_scheduler_config",
    "unavailable_plugins",
]


def build_registry() -> Registry:
    """Every in-tree plugin (remote plugins join in :func:`build_registry_with_remote`)."""
    return in_tree_registry()


async def build_registry_with_remote(
    endpoints: Sequence[EndpointConfig],
    framework_address: str,
    services: FrameworkServices | None = None,
) -> tuple[Registry, RemotePlugins | None]:
    """The in-tree plugins plus every plugin the remote ``endpoints`` serve.

    Each endpoint is handshaken first (``RemotePluginsError`` names one that cannot be reached), so a
    profile can name its plugins like in-tree ones. ``framework_address`` is where the framework
    serves the Handle and CycleState services (hosts connect back there). Call
    :meth:`RemotePlugins.attach` once the scheduler exists.
    """
    registry = in_tree_registry()
    if not endpoints:
        return registry, None
    remote = await RemotePlugins.connect(endpoints, framework_address, services)
    try:
        remote.register(registry)
    except BaseException:
        await remote.abandon()
        raise
    return registry, remote


def unavailable_plugins(registry: Registry) -> frozenset[str]:
    """kube-scheduler default plugins that this build does not provide yet (loaded with a warning)."""
    return frozenset(p.name for p in DEFAULT_MULTIPOINT) - UNMODELLED_PLUGINS - frozenset(registry.points())


def default_scheduler_config(registry: Registry) -> SchedulerConfig:
    """kube-scheduler's default profile, resolved against ``registry``."""
    return default_config(registry.points(), unavailable=unavailable_plugins(registry))


def load_scheduler_config(path: str | os.PathLike[str], registry: Registry) -> SchedulerConfig:
    """A KubeSchedulerConfiguration file, resolved against ``registry``."""
    return load_config_file(path, registry.points(), unavailable=unavailable_plugins(registry))
