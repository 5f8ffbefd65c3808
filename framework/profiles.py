"""Where the scheduler's plugins come from: the in-tree registry and the default configuration."""

from __future__ import annotations

from .config import SchedulerConfig, default_config
from .plugins import Registry, in_tree_registry

__all__ = ["build_registry", "default_scheduler_config"]


def build_registry() -> Registry:
    """Every plugin this build can instantiate (in-tree today; remote plugins join here)."""
    return in_tree_registry()


def default_scheduler_config(registry: Registry) -> SchedulerConfig:
    """kube-scheduler's default profile, resolved against ``registry``."""
    return default_config(registry.points())
