"""What a KubeSchedulerConfiguration resolves to: the profiles, the plugins at each extension point, and
:class:`ConfigError`, the one error a configuration that cannot load raises.

The names of kube-scheduler's configuration live here too (``API_VERSION``, ``KIND``, the extension
points in the order a pod meets them), so every step of loading (:mod:`framework.config.loading`)
speaks of them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pluginhost.decode import one_line
from pluginhost.errors import OutriggerError
from pluginhost.plugin import CONFIGURED_POINTS

from .leaderelection import LeaderElectionConfig, leader_election_config

__all__ = [
    "API_VERSION",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "KIND",
    "MAX_NODE_SCORE",
    "MAX_TOTAL_SCORE",
    "MULTI_POINT",
    "PLUGIN_SETS",
    "POD_GROUP_POINTS",
    "ConfigError",
    "PluginRef",
    "ProfileConfig",
    "SchedulerConfig",
    "located",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: The extension points, in the order a pod meets them (the points table, pluginhost.plugin.POINTS).
EXTENSION_POINTS: tuple[str, ...] = tuple(p.name for p in CONFIGURED_POINTS)
MULTI_POINT = "multiPoint"
#: The plugin sets kube-scheduler v1.37 added for pod-group (workload) scheduling cycles. They are
#: decoded, defaulted, validated and resolved like the others, but nothing runs them: kube-scheduler
#: only does in a pod-group cycle (its GenericWorkload feature gate, off by default), which Outrigger
#: does not model.
POD_GROUP_POINTS: tuple[str, ...] = ("placementGenerate", "placementScore", "podGroupPostFilter")
#: Every plugin set of a profile's ``plugins``, as the v1 ``Plugins`` type has them.
PLUGIN_SETS: tuple[str, ...] = (MULTI_POINT, *EXTENSION_POINTS, *POD_GROUP_POINTS)

MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at a point. ``weight`` only means something at ``score``; elsewhere it is 0."""

    name: str
    weight: int = 0


class ConfigError(OutriggerError, ValueError):
    """A configuration that kube-scheduler would reject (or that Outrigger cannot run).

    ``problems`` holds one ``(path, message)`` pair per problem (``path`` is ``""`` when the problem
    has no field); ``str()`` gives one ``"<source>: <path>: <message>"`` line per problem.
    """

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        super().__init__("\n".join(located(source, path, msg) for path, msg in self.problems))


def located(source: str, path: str, msg: str) -> str:
    """A problem as one ``"<source>: <path>: <message>"`` line, whatever the file's values hold (they are
    quoted in messages)."""
    return one_line(f"{source}: {path}: {msg}" if path else f"{source}: {msg}")


@dataclass
class ProfileConfig:
    """One resolved scheduling profile."""

    scheduler_name: str
    #: Every name in EXTENSION_POINTS, each with its plugins in the order they run.
    plugins: dict[str, list[PluginRef]]
    #: Weight of each plugin in ``plugins["score"]`` (never 0: an unset weight counts as 1).
    score_weights: dict[str, int]
    #: ``pluginConfig[].args`` by plugin name, as written (``{}`` where none was given); has an entry
    #: for every plugin enabled in the profile and for every configured plugin.
    plugin_args: dict[str, dict[str, Any]]
    #: The profile's own ``percentageOfNodesToScore``; None when unset (the global value applies).
    percentage_of_nodes_to_score: int | None = None
    #: Every name in POD_GROUP_POINTS, each with its plugins in order (weights at ``placementScore``),
    #: as kube-scheduler resolves them; not run (see POD_GROUP_POINTS), so not part of equality.
    pod_group_plugins: dict[str, list[PluginRef]] = field(default_factory=dict, compare=False)
    #: Where the profile was written, for messages (not part of its meaning: equal profiles from two
    #: files are equal): the file (``source``), the profile's field path (``profiles[0]``) and each
    #: configured plugin's ``pluginConfig`` entry (``pluginConfig[2]``).
    source: str = field(default="", compare=False)
    path: str = field(default="", compare=False)
    plugin_config_paths: dict[str, str] = field(default_factory=dict, compare=False)

    def names(self, point: str) -> list[str]:
        """The names of the plugins at ``point``, in order."""
        return [ref.name for ref in self.plugins[point]]

    def args_location(self, plugin: str) -> str:
        """Where ``plugin``'s args come from, to begin a message about them:
        ``sched.yaml: profiles[0] (default-scheduler): pluginConfig[2] (NodeResourcesFit)``."""
        entry = self.plugin_config_paths.get(plugin)
        parts = [p for p in (self.source, f"{self.path} ({self.scheduler_name})" if self.path else "") if p]
        parts.append(f"{entry} ({plugin})" if entry else f"plugin {plugin}")
        return ": ".join(parts)


@dataclass
class SchedulerConfig:
    """A loaded, validated and resolved KubeSchedulerConfiguration."""

    profiles: list[ProfileConfig]
    #: None when unset: kube-scheduler's adaptive default (as is an explicit 0).
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    #: Things that load but deserve attention (ignored plugins, unsupported fields), one line each.
    warnings: list[str] = field(default_factory=list)
    #: Top-level fields outside the scheduling model, verbatim: clientConnection and leaderElection (read
    #: on a live cluster), and those accepted but not used (parallelism, enableProfiling, ...).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def leader_election(self) -> LeaderElectionConfig:
        """``leaderElection`` with kube-scheduler's defaults (validated when the file was loaded)."""
        return leader_election_config(self.extra.get("leaderElection"))[0]

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        """The profile serving pods whose ``spec.schedulerName`` is ``scheduler_name``, if any."""
        for prof in self.profiles:
            if prof.scheduler_name == scheduler_name:
                return prof
        return None
