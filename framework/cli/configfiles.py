"""The files ``serve`` and ``explain`` schedule with: the KubeSchedulerConfiguration (``--config``; the
warnings it loads with are printed, the unmodelled plugins in one line) and the RemotePlugins document
(``--plugins``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..config import UNMODELLED_PLUGINS, SchedulerConfig
from ..plugins import Registry
from ..profiles import default_scheduler_config, load_scheduler_config
from ..remote import EndpointConfig, load_remote_plugins

__all__ = ["config_warnings", "remote_endpoints", "scheduler_config"]

# kube-scheduler's in-tree plugins Outrigger does not model: the configuration warns about each one the
# defaults bring in; they are reported together, in one line (those a user's file names keep theirs).
_UNMODELLED = {f'plugin "{name}" is not modelled by Outrigger and is ignored': name for name in UNMODELLED_PLUGINS}


def config_warnings(warnings: Sequence[str]) -> list[str]:
    """The warning lines ``serve`` and ``explain`` print for a configuration's warnings."""
    unmodelled = [_UNMODELLED[w] for w in warnings if w in _UNMODELLED]
    lines = [f"warning: {w}" for w in warnings if w not in _UNMODELLED]
    if unmodelled:
        lines.append(f"warning: not modelled: {', '.join(unmodelled)} (ignored: their Filter passes every node)")
    return lines


def scheduler_config(path: str | None, registry: Registry) -> SchedulerConfig:
    """The configuration at ``path`` (None: kube-scheduler's defaults) for ``registry``'s plugins; its
    warnings go to stderr."""
    cfg = load_scheduler_config(path, registry) if path else default_scheduler_config(registry)
    for line in config_warnings(cfg.warnings):
        print(line, file=sys.stderr)
    return cfg


def remote_endpoints(path: str | None) -> list[EndpointConfig]:
    """The remote plugin endpoints of the RemotePlugins document at ``path`` (None: none)."""
    return load_remote_plugins(path) if path else []
