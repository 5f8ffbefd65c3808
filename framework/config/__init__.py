"""KubeSchedulerConfiguration loading: kube-scheduler's ``--config`` file, resolved into plugin lists.

Outrigger reads the same ``kubescheduler.config.k8s.io/v1`` ``KubeSchedulerConfiguration`` file as
kube-scheduler, so an existing file loads unchanged, and resolves every profile into the ordered list
of plugins that runs at each extension point, exactly as kube-scheduler does:

1. decoding is strict, like kube-scheduler's (:mod:`pluginhost.decode`): every unknown or duplicated
   field, at any depth, is an error naming its path (``unknown field "profiles[0].plugin"``), and so
   is a wrongly typed value (:mod:`framework.config.decoding`);
2. defaulting merges each profile's ``plugins`` into kube-scheduler's default ``multiPoint`` set
   (``mergePlugins``/``mergePluginSet`` in ``pkg/scheduler/apis/config/v1``; :mod:`framework.config.defaults`);
3. validation follows ``pkg/scheduler/apis/config/validation/validation.go``
   (:mod:`framework.config.validation`), as of kube-scheduler v1.37 (with the pod-group plugin sets
   ``placementGenerate``, ``placementScore`` and ``podGroupPostFilter``, resolved but not run);
4. resolution follows ``NewFramework`` (``updatePluginList``, ``expandMultiPointPlugins``,
   ``getScoreWeights``) and the profile map's cross-profile queue-sort check
   (:mod:`framework.config.resolution`).

:mod:`framework.config.loading` runs the four steps; :mod:`framework.config.model` holds what they
resolve to, and :mod:`framework.config.leaderelection` the ``leaderElection`` block a live cluster reads.

Which plugins exist, and at which points, is not hard-coded: the caller passes ``known``, mapping each
plugin name it can instantiate (in-tree or remote) to the extension points that plugin implements.
In-tree kube-scheduler plugins that Outrigger does not model (:data:`UNMODELLED_PLUGINS`, e.g. the
volume plugins) are dropped with a warning instead of failing the load, so the default profile and
real-world files still work.

Every problem is reported as a :class:`ConfigError` whose message names the file and the field path,
e.g. ``scheduler.yaml: profiles[1].plugins.score.enabled[0]: score plugin "Foo" does not exist``.
"""

from .defaults import DEFAULT_MULTIPOINT, UNMODELLED_PLUGINS
from .leaderelection import (
    JITTER_FACTOR,
    LeaderElectionConfig,
    format_duration,
    leader_election_config,
    parse_duration,
)
from .loading import default_config, load_config, load_config_file
from .model import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    KIND,
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    MULTI_POINT,
    PLUGIN_SETS,
    POD_GROUP_POINTS,
    ConfigError,
    PluginRef,
    ProfileConfig,
    SchedulerConfig,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_MULTIPOINT",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "JITTER_FACTOR",
    "KIND",
    "MAX_NODE_SCORE",
    "MAX_TOTAL_SCORE",
    "MULTI_POINT",
    "PLUGIN_SETS",
    "POD_GROUP_POINTS",
    "UNMODELLED_PLUGINS",
    "ConfigError",
    "LeaderElectionConfig",
    "PluginRef",
    "ProfileConfig",
    "SchedulerConfig",
    "default_config",
    "format_duration",
    "leader_election_config",
    "load_config",
    "load_config_file",
    "parse_duration",
]
