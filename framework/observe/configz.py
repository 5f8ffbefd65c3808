"""``/configz``: the effective KubeSchedulerConfiguration, in kube-scheduler's envelope
``{"componentconfig": {...}}``, and beside it ``featureGates``: the effective value of every gate that
changes scheduling and of every gate ``--feature-gates`` set (kube-scheduler shows gates only in its
flags; Outrigger puts them where the rest of its effective configuration is), and, when ``serve`` watches
its files, ``liveConfiguration``: the generation serving (docs/configuration.md).

The configuration is written in its ``kubescheduler.config.k8s.io/v1`` form with every profile's plugins
resolved: each extension point lists the plugins that run there, in order, with their weights at
``score``, the pod-group sets (``placementGenerate``, ``placementScore``, ``podGroupPostFilter``) what
resolved there (weights at ``placementScore``), and ``multiPoint`` disables kube-scheduler's defaults
(``*``), so the document loads back (``outrigger serve --config``) into the same profiles.
(kube-scheduler prints its internal type, whose field names are Go's; the v1 form is the one a user
writes and can reuse.) Fields Outrigger keeps but does not use (``leaderElection``, ``parallelism``,
...) appear as they were given.
"""

from __future__ import annotations

from typing import Any

from framework import features
from framework.config import (
    API_VERSION,
    EXTENSION_POINTS,
    KIND,
    MULTI_POINT,
    POD_GROUP_POINTS,
    ProfileConfig,
    SchedulerConfig,
)

__all__ = ["componentconfig", "configz"]


def _seconds(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _profile(prof: ProfileConfig) -> dict[str, Any]:
    plugins: dict[str, Any] = {MULTI_POINT: {"disabled": [{"name": "*"}]}}
    for point in (*EXTENSION_POINTS, *POD_GROUP_POINTS):
        refs = prof.plugins.get(point) or prof.pod_group_plugins.get(point, [])
        weighted = point in ("score", "placementScore")
        entries = [{"name": r.name, "weight": r.weight} if weighted else {"name": r.name} for r in refs]
        plugins[point] = {"enabled": entries} if entries else {}
    out: dict[str, Any] = {"schedulerName": prof.scheduler_name}
    if prof.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = prof.percentage_of_nodes_to_score
    out["plugins"] = plugins
    out["pluginConfig"] = [{"name": name, "args": args} for name, args in prof.plugin_args.items() if args]
    return out


def componentconfig(config: SchedulerConfig) -> dict[str, Any]:
    """``config`` as a v1 KubeSchedulerConfiguration document (see the module docstring)."""
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, **config.extra}
    if config.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = config.percentage_of_nodes_to_score
    out["podInitialBackoffSeconds"] = _seconds(config.pod_initial_backoff_seconds)
    out["podMaxBackoffSeconds"] = _seconds(config.pod_max_backoff_seconds)
    out["profiles"] = [_profile(p) for p in config.profiles]
    return out


def configz(config: SchedulerConfig, live: Any = None) -> dict[str, Any]:
    """The body of ``/configz``: the configuration and the installed feature gates; with ``live`` (a
    :class:`framework.liveconfig.LiveConfig`), ``liveConfiguration``: the generation serving, its
    files' hashes and the last change refused."""
    out = {"componentconfig": componentconfig(config), "featureGates": features.current().scheduling()}
    if live is not None:
        out["liveConfiguration"] = live.status()
    return out
