"""Where the scheduler's plugins come from: the in-tree registry and the default configuration."""

from __future__ import annotations

import os

from .config import DEFAULT_MULTIPOINT, UNMODELLED_PLUGINS, SchedulerConfig, default_config, load_config_file
from .plugins import Registry, in_tree_registry

__all__ = ["build_registry", "default_scheduler_config", "load_scheduler_config", "unavailable_plugins"]


def build_registry() -> Registry:
    """Every plugin this build can instantiate (in-tree today; remote plugins join here)."""
    return in_tree_registry()


def unavailable_plugins(registry: Registry) -> frozenset[str]:
    """kube-scheduler default plugins that this build does not provide yet (loaded with a warning)."""
    return frozenset(p.name for p in DEFAULT_MULTIPOINT) - UNMODELLED_PLUGINS - frozenset(registry.points())


def default_scheduler_config(registry: Registry) -> SchedulerConfig:
    """kube-scheduler's default profile, resolved against ``registry``."""
    return default_config(registry.points(), unavailable=unavailable_plugins(registry))


def load_scheduler_config(path: str | os.PathLike[str], registry: Registry) -> SchedulerConfig:
    """A KubeSchedulerConfiguration file, resolved against ``registry``."""
    return load_config_file(path, registry.points(), unavailable=unavailable_plugins(registry))
