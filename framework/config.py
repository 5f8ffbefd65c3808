"""KubeSchedulerConfiguration loading: kube-scheduler's ``--config`` file, resolved into plugin lists.

Outrigger reads the same ``kubescheduler.config.k8s.io/v1`` ``KubeSchedulerConfiguration`` file as
kube-scheduler, so an existing file loads unchanged, and resolves every profile into the ordered list
of plugins that runs at each extension point, exactly as kube-scheduler does:

1. decoding is strict, like kube-scheduler's (:mod:`pluginhost.decode`): every unknown or duplicated
   field, at any depth, is an error naming its path (``unknown field "profiles[0].plugin"``), and so
   is a wrongly typed value;
2. defaulting merges each profile's ``plugins`` into kube-scheduler's default ``multiPoint`` set
   (``mergePlugins``/``mergePluginSet`` in ``pkg/scheduler/apis/config/v1``);
3. validation follows ``pkg/scheduler/apis/config/validation/validation.go``;
4. resolution follows ``NewFramework`` (``updatePluginList``, ``expandMultiPointPlugins``,
   ``getScoreWeights``) and the profile map's cross-profile queue-sort check.

Which plugins exist, and at which points, is not hard-coded: the caller passes ``known``, mapping each
plugin name it can instantiate (in-tree or remote) to the extension points that plugin implements.
In-tree kube-scheduler plugins that Outrigger does not model (:data:`UNMODELLED_PLUGINS`, e.g. the
volume plugins) are dropped with a warning instead of failing the load, so the default profile and
real-world files still work.

Every problem is reported as a :class:`ConfigError` whose message names the file and the field path,
e.g. ``scheduler.yaml: profiles[1].plugins.score.enabled[0]: score plugin "Foo" does not exist``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pluginhost import decode
from pluginhost.decode import Document, FieldError, TextError, one_line
from pluginhost.errors import OutriggerError
from pluginhost.plugin import CONFIGURED_POINTS

__all__ = [
    "API_VERSION",
    "DEFAULT_MULTIPOINT",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "KIND",
    "MAX_NODE_SCORE",
    "MAX_TOTAL_SCORE",
    "MULTI_POINT",
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

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: The extension points, in the order a pod meets them (the points table, pluginhost.plugin.POINTS).
EXTENSION_POINTS: tuple[str, ...] = tuple(p.name for p in CONFIGURED_POINTS)
MULTI_POINT = "multiPoint"

# The order in which NewFramework (getExtensionPoints) walks the points. It decides which error is
# reported first when a profile has several, so it is kept distinct from EXTENSION_POINTS.
_FRAMEWORK_ORDER: tuple[str, ...] = (
    "preFilter",
    "filter",
    "postFilter",
    "reserve",
    "preScore",
    "score",
    "preBind",
    "bind",
    "postBind",
    "permit",
    "preEnqueue",
    "queueSort",
)

MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at a point. ``weight`` only means something at ``score``; elsewhere it is 0."""

    name: str
    weight: int = 0


#: kube-scheduler v1.35's default ``multiPoint`` set (``getDefaultPlugins``), in order, with weights
#: (0 = unset). DynamicResources is there because its feature gate is locked on since v1.35 and
#: ``applyFeatureGates`` puts it right before DefaultPreemption with weight 2; the in-tree registry
#: models it for pods without ResourceClaims (framework/plugins/dynamicresources.py). A registry
#: without it drops it with a warning.
DEFAULT_MULTIPOINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DynamicResources", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)

# Names kube-scheduler's v1 validation rejects outright ("was invalid in version ..."): the in-tree
# cloud volume-limit plugins, removed from the registry.
_INVALID_IN_V1: frozenset[str] = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})

#: In-tree kube-scheduler plugin names that a registry may lack. Where one is enabled (by the
#: defaults or by the user) or configured and the registry does not have it, it is dropped with one
#: warning instead of failing the load. A name the caller lists in ``known`` is never treated as
#: unmodelled: the in-tree registry models the volume plugins (framework/plugins/volume*.py) and
#: DynamicResources, so only registries built without them (a test's, say) drop them. The four
#: removed cloud volume-limit plugins are listed for completeness, but like kube-scheduler, enabling
#: or configuring them in a v1 file is an error.
UNMODELLED_PLUGINS: frozenset[str] = frozenset(
    {
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "DynamicResources",
        "GangScheduling",
        "NodeDeclaredFeatures",
    }
    | _INVALID_IN_V1
)

# Top-level fields of the v1 type outside the scheduling model, kept verbatim in `extra`. On a live cluster
# `outrigger serve` reads clientConnection (kubeconfig, qps, burst: framework/kube/source.py's
# client_connection) and leaderElection (leader_election_config below); the others are accepted and not used.
_EXTRA_FIELDS = (
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "extenders",
    "delayCacheUntilActive",
    # Not in the v1 type (removed in v1beta3, so kube-scheduler rejects them); accepted with a
    # warning so files carried over from older setups still load.
    "healthzBindAddress",
    "metricsBindAddress",
)

# The v1 types for strict decoding (k8s.io/kube-scheduler config/v1 and component-base config/v1alpha1),
# written as pluginhost.decode.schemas reads them. Plugin args are free-form here: each plugin decodes
# its own.
_SCHEMAS = decode.schemas(
    {
        "KubeSchedulerConfiguration": (
            "apiVersion kind parallelism leaderElection:LeaderElectionConfiguration "
            "clientConnection:ClientConnectionConfiguration enableProfiling enableContentionProfiling "
            "percentageOfNodesToScore podInitialBackoffSeconds podMaxBackoffSeconds "
            "profiles:[KubeSchedulerProfile] extenders:[Extender] delayCacheUntilActive "
            "healthzBindAddress metricsBindAddress"
        ),
        "LeaderElectionConfiguration": (
            "leaderElect leaseDuration renewDeadline retryPeriod resourceLock resourceName resourceNamespace"
        ),
        "ClientConnectionConfiguration": "kubeconfig acceptContentTypes contentType qps burst",
        "KubeSchedulerProfile": "schedulerName percentageOfNodesToScore plugins:Plugins pluginConfig:[PluginConfig]",
        "Plugins": " ".join(f"{point}:PluginSet" for point in (MULTI_POINT, *EXTENSION_POINTS)),
        "PluginSet": "enabled:[Plugin] disabled:[Plugin]",
        "Plugin": "name weight",
        "PluginConfig": "name args",
        "Extender": (
            "urlPrefix filterVerb preemptVerb prioritizeVerb weight bindVerb enableHTTPS "
            "tlsConfig:ExtenderTLSConfig httpTimeout nodeCacheCapable managedResources:[ExtenderManagedResource] "
            "ignorable"
        ),
        "ExtenderTLSConfig": "insecure serverName certFile keyFile caFile certData keyData caData",
        "ExtenderManagedResource": "name ignoredByScheduler",
    }
)
_CONFIG_SCHEMA = _SCHEMAS["KubeSchedulerConfiguration"]
_TOP_LEVEL_FIELDS = _CONFIG_SCHEMA.fields
_LEADER_ELECTION_FIELDS = _SCHEMAS["LeaderElectionConfiguration"].fields
_CLIENT_CONNECTION_FIELDS = _SCHEMAS["ClientConnectionConfiguration"].fields
_PROFILE_FIELDS = _SCHEMAS["KubeSchedulerProfile"].fields


class ConfigError(OutriggerError, ValueError):
    """A configuration that kube-scheduler would reject (or that Outrigger cannot run).

    ``problems`` holds one ``(path, message)`` pair per problem (``path`` is ``""`` when the problem
    has no field); ``str()`` gives one ``"<source>: <path>: <message>"`` line per problem.
    """

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        super().__init__("\n".join(_located(source, path, msg) for path, msg in self.problems))


def _located(source: str, path: str, msg: str) -> str:
    # One line per problem, whatever the file's values hold (they are quoted in messages).
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


# ---- leaderElection (component-base's LeaderElectionConfiguration, kube-scheduler's defaults) ------


@dataclass(frozen=True)
class LeaderElectionConfig:
    """KubeSchedulerConfiguration's ``leaderElection`` with kube-scheduler's v1 defaults: on, a Lease
    ``kube-system/kube-scheduler`` held 15 s, renewed within 10 s, tried every 2 s. Durations in seconds.

    Beside kube-scheduler, name a Lease of Outrigger's own (``resourceNamespace``, ``resourceName``):
    two schedulers contending for one Lease would take turns scheduling."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_namespace: str = "kube-system"
    resource_name: str = "kube-scheduler"


# JitterFactor of client-go's leaderelection: a standby tries again after retryPeriod to 2.2 x retryPeriod.
JITTER_FACTOR = 1.2
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                   "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration (``"15s"``, ``"1m30s"``, ``"500ms"``, ``"0"``) in seconds; ValueError otherwise."""
    rest, sign = text, 1.0
    if rest[:1] in ("+", "-"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(text)
    total, pos = 0.0, 0
    while pos < len(rest):
        m = _DURATION_PART.match(rest, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(text)
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """``seconds`` as Go prints a duration: ``15s``, ``1m30s``, ``500ms``, ``0s``."""
    if seconds == 0:
        return "0s"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 1:
        for unit, size in (("ms", 1e-3), ("\u00b5s", 1e-6), ("ns", 1e-9)):
            if s >= size:
                return f"{sign}{round(s / size, 6):g}{unit}"
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    out = (f"{int(hours)}h" if hours else "") + (f"{int(minutes)}m" if hours or minutes else "")
    return f"{sign}{out}{round(secs, 9):g}s"


def leader_election_config(raw: Mapping[str, Any] | None) -> tuple[LeaderElectionConfig, list[tuple[str, str]]]:
    """``leaderElection`` defaulted (SetDefaults_KubeSchedulerConfiguration) and validated
    (component-base's ValidateLeaderElectionConfiguration, client-go's NewLeaderElector, kube-scheduler's
    resourceLock check): the configuration and the problems, ``(path, message)`` each."""
    raw = raw or {}
    base = "leaderElection"
    problems: list[tuple[str, str]] = []
    defaults = LeaderElectionConfig()

    def flag(name: str, default: bool) -> bool:
        value = raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            problems.append((f"{base}.{name}", f"must be true or false, got {value!r}"))
            return default
        return value

    def duration(name: str, default: float) -> float:
        value = raw.get(name)
        if value is None:
            return default
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            seconds = parse_duration(value)
        except ValueError:
            problems.append((f"{base}.{name}", f'invalid duration {value!r}: write it as Go does, e.g. "15s", "1m30s"'))
            return default
        return seconds or default  # a zero duration is unset: defaulted, as in kube-scheduler

    def text(name: str, default: str) -> str:
        value = raw.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            problems.append((f"{base}.{name}", f"must be a string, got {value!r}"))
            return default
        return value or default

    cfg = LeaderElectionConfig(
        leader_elect=flag("leaderElect", defaults.leader_elect),
        lease_duration=duration("leaseDuration", defaults.lease_duration),
        renew_deadline=duration("renewDeadline", defaults.renew_deadline),
        retry_period=duration("retryPeriod", defaults.retry_period),
        resource_lock=text("resourceLock", defaults.resource_lock),
        resource_namespace=text("resourceNamespace", defaults.resource_namespace),
        resource_name=text("resourceName", defaults.resource_name),
    )
    if problems or not cfg.leader_elect:
        return cfg, problems
    for name, value in (("leaseDuration", cfg.lease_duration), ("renewDeadline", cfg.renew_deadline),
                        ("retryPeriod", cfg.retry_period)):
        if value <= 0:
            problems.append((f"{base}.{name}", f"Invalid value: {format_duration(value)}: must be greater than zero"))
    if cfg.lease_duration <= cfg.renew_deadline:
        problems.append((f"{base}.leaseDuration", f"Invalid value: {format_duration(cfg.renew_deadline)}: "
                                                  "LeaseDuration must be greater than RenewDeadline"))
    elif cfg.retry_period > 0 and cfg.renew_deadline <= JITTER_FACTOR * cfg.retry_period:
        problems.append((f"{base}.renewDeadline", f"Invalid value: {format_duration(cfg.renew_deadline)}: "
                                                  "renewDeadline must be greater than retryPeriod*JitterFactor "
                                                  f"({format_duration(cfg.retry_period)} x {JITTER_FACTOR:g})"))
    if cfg.resource_lock != "leases":
        problems.append((f"{base}.resourceLock", f'Invalid value: "{cfg.resource_lock}": resourceLock value must be '
                                                 '"leases"'))
    return cfg, problems


# ---------------------------------------------------------------------------------------------------
# Internal model of the decoded file (the v1 types, with each value's field path kept for messages).


@dataclass
class _Entry:
    """A ``{name, weight}`` plugin entry; ``path`` is None for kube-scheduler's defaults."""

    name: str
    weight: int
    path: str | None


@dataclass
class _PluginSet:
    enabled: list[_Entry] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass
class _PluginConfigEntry:
    name: str
    args: dict[str, Any] | None  # None when `args` is absent or null
    path: str


@dataclass
class _RawProfile:
    path: str
    scheduler_name: str | None  # None when the field is absent
    percentage: int | None
    plugins: dict[str, _PluginSet] | None  # keys: MULTI_POINT and EXTENSION_POINTS; None if absent
    plugin_config: list[_PluginConfigEntry]


@dataclass
class _RawConfig:
    percentage: int | None = None
    initial_backoff: int | None = None
    max_backoff: int | None = None
    profiles: list[_RawProfile] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# Text


def _document(text: str, source: str) -> Document:
    """The one YAML or JSON document of ``text`` (shared with the RemotePlugins loader)."""
    try:
        return decode.load_document(text)
    except TextError as exc:
        raise ConfigError(source, [(exc.where, exc.reason)]) from None


def _strict(document: Document, schema: decode.Schema, source: str) -> None:
    """Strict decoding: every duplicated and unknown field is a problem, all reported together."""
    try:
        unknown = decode.unknown_fields(document.value, schema)
    except FieldError as exc:
        raise ConfigError(source, [(exc.path, exc.reason)]) from None
    problems = [(where, f'duplicate field "{path}"') for path, where in document.duplicates]
    problems += [("", f'unknown field "{path}"') for path in unknown]
    if problems:
        raise ConfigError(source, problems)


# ---------------------------------------------------------------------------------------------------
# Reading the decoded document: types and shapes. The first problem aborts.


class _Decoder:
    def __init__(self, source: str, warnings: list[str]) -> None:
        self.source = source
        self.warnings = warnings

    def fail(self, path: str, msg: str) -> NoReturn:
        raise ConfigError(self.source, [(path, msg)])

    def config(self, document: Document) -> _RawConfig:
        try:
            return self._config(document)
        except FieldError as exc:
            raise ConfigError(self.source, [(exc.path, exc.reason)]) from None

    def _config(self, document: Document) -> _RawConfig:
        doc = decode.as_map(document.value, "")
        # apiVersion/kind first: a different kind of file deserves that message, not "unknown field".
        api_version = doc.get("apiVersion")
        if api_version is None:
            self.fail("apiVersion", f'Required value: must be "{API_VERSION}"')
        if api_version != API_VERSION:
            self.fail("apiVersion", f'Unsupported value: "{api_version}": supported values: "{API_VERSION}"')
        kind = doc.get("kind")
        if kind is None:
            self.fail("kind", f'Required value: must be "{KIND}"')
        if kind != KIND:
            self.fail("kind", f'Unsupported value: "{kind}": supported values: "{KIND}"')
        _strict(document, _CONFIG_SCHEMA, self.source)

        raw = _RawConfig()
        raw.percentage = _opt_int(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore", 32)
        raw.initial_backoff = _opt_int(doc.get("podInitialBackoffSeconds"), "podInitialBackoffSeconds", 64)
        raw.max_backoff = _opt_int(doc.get("podMaxBackoffSeconds"), "podMaxBackoffSeconds", 64)
        for i, prof in enumerate(decode.as_list(doc.get("profiles"), "profiles")):
            raw.profiles.append(self.profile(prof, f"profiles[{i}]"))
        for name in _EXTRA_FIELDS:
            if name in doc:
                raw.extra[name] = self.extra_field(name, doc[name])
        return raw

    def extra_field(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if name == "parallelism":
            decode.as_int(value, name, 32)
        elif name in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
            decode.as_bool(value, name)
        elif name in ("leaderElection", "clientConnection"):
            decode.as_map(value, name)
        elif name == "extenders":
            if decode.as_list(value, name):
                self.warnings.append(
                    _located(
                        self.source,
                        name,
                        "scheduler extenders are not supported by Outrigger and are ignored",
                    )
                )
        elif name in ("healthzBindAddress", "metricsBindAddress"):
            decode.as_str(value, name)
            self.warnings.append(
                _located(
                    self.source,
                    name,
                    "this field was removed from KubeSchedulerConfiguration in v1beta3 (kube-scheduler "
                    "rejects it in v1); Outrigger ignores it",
                )
            )
        return value

    def profile(self, value: Any, path: str) -> _RawProfile:
        m = decode.as_map(value, path)
        name = m.get("schedulerName")
        if name is not None:
            decode.as_str(name, _child(path, "schedulerName"))
        percentage = _opt_int(m.get("percentageOfNodesToScore"), _child(path, "percentageOfNodesToScore"), 32)
        plugins: dict[str, _PluginSet] | None = None
        if m.get("plugins") is not None:
            ppath = _child(path, "plugins")
            pm = decode.as_map(m["plugins"], ppath)
            points = (MULTI_POINT, *EXTENSION_POINTS)
            plugins = {point: self.plugin_set(pm.get(point), _child(ppath, point)) for point in points}
        configs = []
        for i, item in enumerate(decode.as_list(m.get("pluginConfig"), _child(path, "pluginConfig"))):
            configs.append(self.plugin_config(item, f"{_child(path, 'pluginConfig')}[{i}]"))
        return _RawProfile(path, name, percentage, plugins, configs)

    def plugin_set(self, value: Any, path: str) -> _PluginSet:
        if value is None:
            return _PluginSet()
        m = decode.as_map(value, path)
        out = _PluginSet()
        for i, item in enumerate(decode.as_list(m.get("enabled"), _child(path, "enabled"))):
            out.enabled.append(self.plugin(item, f"{_child(path, 'enabled')}[{i}]"))
        for i, item in enumerate(decode.as_list(m.get("disabled"), _child(path, "disabled"))):
            out.disabled.append(self.plugin(item, f"{_child(path, 'disabled')}[{i}]").name)
        return out

    def plugin(self, value: Any, path: str) -> _Entry:
        m = decode.as_map(value, path)
        if m.get("name") is None or m.get("name") == "":
            self.fail(_child(path, "name"), "Required value")
        name = decode.as_str(m["name"], _child(path, "name"))
        weight = _opt_int(m.get("weight"), _child(path, "weight"), 32)
        return _Entry(name, weight or 0, path)

    def plugin_config(self, value: Any, path: str) -> _PluginConfigEntry:
        m = decode.as_map(value, path)
        if m.get("name") is None or m.get("name") == "":
            self.fail(_child(path, "name"), "Required value")
        name = decode.as_str(m["name"], _child(path, "name"))
        args = m.get("args")
        if args is not None:
            decode.as_map(args, _child(path, "args"))
        return _PluginConfigEntry(name, args, path)


def _opt_int(value: Any, path: str, bits: int) -> int | None:
    """An optional Go ``int32``/``int64`` field: booleans and non-integral numbers are type errors."""
    return None if value is None else decode.as_int(value, path, bits)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ---------------------------------------------------------------------------------------------------
# Defaulting: mergePluginSet


def _merge_plugin_set(default: _PluginSet, custom: _PluginSet) -> _PluginSet:
    """kube-scheduler's mergePluginSet.

    Custom disabled names (or ``*``) drop default plugins; a default the user enables again is
    replaced in place (default position, user's weight); other custom plugins are appended, even
    duplicates (resolution rejects those). The merged ``disabled`` list is kept because multiPoint
    expansion honours it.
    """
    disabled = [*custom.disabled, *default.disabled]
    disabled_set = set(disabled)
    # Later duplicates win, as with Go's map assignment.
    custom_index = {entry.name: i for i, entry in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[_Entry] = []
    if "*" not in disabled_set:
        for entry in default.enabled:
            if entry.name in disabled_set:
                continue
            if entry.name in custom_index:
                i = custom_index[entry.name]
                entry = custom.enabled[i]
                replaced.add(i)
            enabled.append(entry)
    enabled.extend(entry for i, entry in enumerate(custom.enabled) if i not in replaced)
    return _PluginSet(enabled, disabled)


def _default_plugins() -> dict[str, _PluginSet]:
    sets = {point: _PluginSet() for point in EXTENSION_POINTS}
    sets[MULTI_POINT] = _PluginSet([_Entry(ref.name, ref.weight, None) for ref in DEFAULT_MULTIPOINT])
    return sets


def _merged_plugins(custom: dict[str, _PluginSet] | None) -> dict[str, _PluginSet]:
    defaults = _default_plugins()
    if custom is None:
        return defaults
    return {point: _merge_plugin_set(defaults[point], custom[point]) for point in defaults}


# ---------------------------------------------------------------------------------------------------
# Loading


def _normalize_known(known: Mapping[str, frozenset[str]] | Mapping[str, Any]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for name, points in known.items():
        pts = frozenset(points)
        bad = pts - set(EXTENSION_POINTS)
        if bad:
            # A caller bug, not a configuration problem.
            raise ValueError(f"known[{name!r}] lists unknown extension points {sorted(bad)}")
        out[name] = pts
    return out


class _Loader:
    def __init__(
        self, source: str, known: dict[str, frozenset[str]], unavailable: frozenset[str] = frozenset()
    ) -> None:
        self.source = source
        self.known = known
        self.unavailable = unavailable - known.keys()
        self.unmodelled = (UNMODELLED_PLUGINS | self.unavailable) - known.keys()
        self.warnings: list[str] = []
        self._warned_unmodelled: set[str] = set()

    def warn_unmodelled(self, name: str, path: str | None) -> None:
        if name in self._warned_unmodelled:
            return
        self._warned_unmodelled.add(name)
        if name in self.unavailable:
            msg = f'plugin "{name}" is not available in this build of Outrigger yet and is ignored'
        else:
            msg = f'plugin "{name}" is not modelled by Outrigger and is ignored'
        self.warnings.append(_located(self.source, path, msg) if path else msg)

    def load(self, document: Document | None) -> SchedulerConfig:
        decoder = _Decoder(self.source, self.warnings)
        raw = _RawConfig() if document is None else decoder.config(document)

        # Defaulting (SetDefaults_KubeSchedulerConfiguration).
        if not raw.profiles:
            raw.profiles = [_RawProfile("profiles[0]", None, None, None, [])]
        if len(raw.profiles) == 1 and raw.profiles[0].scheduler_name is None:
            raw.profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
        merged = [_merged_plugins(prof.plugins) for prof in raw.profiles]

        self.warn_user_unmodelled(raw)
        problems = self.validate(raw, merged)
        if problems:
            raise ConfigError(self.source, problems)

        profiles = [self.resolve(prof, plugins) for prof, plugins in zip(raw.profiles, merged, strict=True)]
        self.check_common_queue_sort(raw, profiles)
        for prof in raw.profiles:
            self.warn_negative_weights(prof)
        return SchedulerConfig(
            profiles=profiles,
            percentage_of_nodes_to_score=raw.percentage,
            pod_initial_backoff_seconds=float(1 if raw.initial_backoff is None else raw.initial_backoff),
            pod_max_backoff_seconds=float(10 if raw.max_backoff is None else raw.max_backoff),
            warnings=self.warnings,
            extra=raw.extra,
        )

    def warn_user_unmodelled(self, raw: _RawConfig) -> None:
        # Warn at the user's own mention first (document order), so the message points at the file;
        # names only the defaults bring in are warned about while resolving.
        for prof in raw.profiles:
            if prof.plugins is not None:
                for point in (MULTI_POINT, *EXTENSION_POINTS):
                    for entry in prof.plugins[point].enabled:
                        if entry.name in self.unmodelled and entry.name not in _INVALID_IN_V1:
                            self.warn_unmodelled(entry.name, entry.path)
            for pc in prof.plugin_config:
                if pc.name in self.unmodelled and pc.name not in _INVALID_IN_V1:
                    self.warn_unmodelled(pc.name, pc.path)

    def warn_negative_weights(self, prof: _RawProfile) -> None:
        # kube-scheduler v1.35 puts no range on score weights (validation.go has none; getScoreWeights
        # only refuses a total that could overflow), so a weight of 101 or -5 loads as it does there.
        # A negative weight is almost always a mistake, so it is named.
        if prof.plugins is None:
            return
        for entry in (*prof.plugins[MULTI_POINT].enabled, *prof.plugins["score"].enabled):
            if entry.weight < 0 and entry.name not in self.unmodelled:
                self.warnings.append(
                    _located(
                        self.source,
                        f"{entry.path}.weight",
                        f'negative weight {entry.weight} inverts the preference of plugin "{entry.name}"',
                    )
                )

    # -- validation.go -----------------------------------------------------------------------------

    def validate(self, raw: _RawConfig, merged: list[dict[str, _PluginSet]]) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        problems.extend(leader_election_config(raw.extra.get("leaderElection"))[1])
        parallelism = raw.extra.get("parallelism")
        if parallelism is not None and parallelism <= 0:
            problems.append(
                ("parallelism", f"Invalid value: {parallelism}: should be an integer value greater than zero")
            )

        first_with_name: dict[str, int] = {}
        for i, prof in enumerate(raw.profiles):
            problems.extend(self.validate_profile(prof))
            name = prof.scheduler_name or ""
            if name and name in first_with_name:
                problems.append((_child(prof.path, "schedulerName"), f'Duplicate value: "{name}"'))
            first_with_name.setdefault(name, i)
        problems.extend(self.validate_common_queue_sort(raw, merged))

        if raw.percentage is not None and not 0 <= raw.percentage <= 100:
            problems.append(
                ("percentageOfNodesToScore", f"Invalid value: {raw.percentage}: not in valid range [0-100]")
            )
        initial = 1 if raw.initial_backoff is None else raw.initial_backoff
        maximum = 10 if raw.max_backoff is None else raw.max_backoff
        if initial <= 0:
            problems.append(("podInitialBackoffSeconds", f"Invalid value: {initial}: must be greater than 0"))
        if maximum < initial:
            problems.append(
                (
                    "podMaxBackoffSeconds",
                    f"Invalid value: {maximum}: must be greater than or equal to PodInitialBackoffSeconds",
                )
            )
        return problems

    def validate_profile(self, prof: _RawProfile) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if not prof.scheduler_name:
            problems.append((_child(prof.path, "schedulerName"), "Required value"))
        if prof.percentage is not None and not 0 <= prof.percentage <= 100:
            problems.append(
                (
                    _child(prof.path, "percentageOfNodesToScore"),
                    f"Invalid value: {prof.percentage}: not in valid range [0-100]",
                )
            )
        invalid_msg = (
            f'was invalid in version "{API_VERSION}" (KubeSchedulerConfiguration is version "{API_VERSION}")'
        )
        if prof.plugins is not None:
            # kube-scheduler checks only the per-point sets here, but a removed plugin in multiPoint
            # fails later anyway ("does not exist"), so the same message is given for it.
            for point in (MULTI_POINT, *EXTENSION_POINTS):
                for entry in prof.plugins[point].enabled:
                    if entry.name in _INVALID_IN_V1 and entry.name not in self.known:
                        problems.append((entry.path or "", f'Invalid value: "{entry.name}": {invalid_msg}'))
        seen: set[str] = set()
        for pc in prof.plugin_config:
            if pc.name in seen:
                problems.append((pc.path, f'Duplicate value: "{pc.name}"'))
            seen.add(pc.name)
            if pc.name in _INVALID_IN_V1 and pc.name not in self.known:
                problems.append((pc.path, f'Invalid value: "{pc.name}": {invalid_msg}'))
            elif pc.name not in self.known and pc.name not in self.unmodelled:
                problems.append(
                    (_child(pc.path, "name"), f'Invalid value: "{pc.name}": plugin does not exist')
                )
        return problems

    def validate_common_queue_sort(
        self, raw: _RawConfig, merged: list[dict[str, _PluginSet]]
    ) -> list[tuple[str, str]]:
        """validateCommonQueueSort: the queueSort set (and its args) must match profile 0's."""
        problems: list[tuple[str, str]] = []

        def canon(ps: _PluginSet) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
            return tuple((e.name, e.weight) for e in ps.enabled), tuple(ps.disabled)

        first = merged[0]["queueSort"]
        if len(first.enabled) > 1:
            problems.append(
                (
                    f"{raw.profiles[0].path}.plugins.queueSort.enabled",
                    f"Invalid value: {len(first.enabled)}: only one queue sort plugin can be enabled",
                )
            )
        name = first.enabled[0].name if first.enabled else ""
        args = next((pc.args for pc in raw.profiles[0].plugin_config if name and pc.name == name), None)
        for prof, plugins in zip(raw.profiles[1:], merged[1:], strict=True):
            if canon(plugins["queueSort"]) != canon(first):
                problems.append((f"{prof.path}.plugins.queueSort", "must be the same for all profiles"))
            for pc in prof.plugin_config:
                if pc.name == name and pc.args != args:
                    problems.append((f"{pc.path}.args", "queueSort must be the same for all profiles"))
        return problems

    # -- NewFramework ------------------------------------------------------------------------------

    def resolve(self, prof: _RawProfile, merged: dict[str, _PluginSet]) -> ProfileConfig:
        name = prof.scheduler_name or ""
        ppath = _child(prof.path, "plugins")

        def fail(path: str | None, fallback: str, msg: str) -> NoReturn:
            raise ConfigError(self.source, [(path or fallback, msg)])

        # Unmodelled plugins are dropped before anything looks at the lists.
        for point, ps in merged.items():
            kept = []
            for entry in ps.enabled:
                if entry.name in self.unmodelled:
                    self.warn_unmodelled(entry.name, entry.path)
                else:
                    kept.append(entry)
            merged[point] = _PluginSet(kept, ps.disabled)

        # updatePluginList: the plugins enabled explicitly at each point.
        lists: dict[str, list[str]] = {}
        for point in _FRAMEWORK_ORDER:
            names: list[str] = []
            for entry in merged[point].enabled:
                here = _child(ppath, point)
                if entry.name not in self.known:
                    fail(entry.path, here, f'{point} plugin "{entry.name}" does not exist')
                if point not in self.known[entry.name]:
                    fail(entry.path, here, f'plugin "{entry.name}" does not extend {point} plugin')
                if entry.name in names:
                    fail(entry.path, here, f'plugin "{entry.name}" already registered as "{point}"')
                names.append(entry.name)
            lists[point] = names

        # expandMultiPointPlugins.
        multi = merged[MULTI_POINT].enabled
        mpath = _child(ppath, MULTI_POINT)
        for entry in multi:
            if entry.name not in self.known:
                msg = f'{MULTI_POINT} plugin "{entry.name}" does not exist'
                if entry.path is None:
                    msg += " (it is a kube-scheduler default: disable it in multiPoint if it is unavailable)"
                fail(entry.path, mpath, msg)
        if multi:
            for point in _FRAMEWORK_ORDER:
                disabled = set(merged[point].disabled)
                if "*" in disabled:
                    continue  # the user took this point over entirely
                specific = lists[point]
                overrides: set[str] = set()
                expanded: list[str] = []
                for entry in multi:
                    if point not in self.known[entry.name] or entry.name in disabled:
                        continue
                    if entry.name in specific:
                        # Also enabled at the point itself: that entry decides (and its position).
                        overrides.add(entry.name)
                        continue
                    if entry.name in expanded:
                        fail(entry.path, mpath, f'plugin "{entry.name}" already registered as "{point}"')
                    expanded.append(entry.name)
                lists[point] = (
                    [n for n in specific if n in overrides]
                    + expanded
                    + [n for n in specific if n not in overrides]
                )

        if len(lists["queueSort"]) != 1:
            fail(
                None,
                _child(ppath, "queueSort"),
                f'only one queue sort plugin required for profile with scheduler name "{name}", '
                f"but got {len(lists['queueSort'])}",
            )
        if not lists["bind"]:
            fail(
                None,
                _child(ppath, "bind"),
                f'at least one bind plugin is needed for profile with scheduler name "{name}"',
            )

        # getScoreWeights: the Score point's own entries first, then multiPoint's, first one wins.
        weights: dict[str, int] = {}
        total = 0
        for entry in (*merged["score"].enabled, *multi):
            if "score" not in self.known[entry.name] or entry.name in weights:
                continue
            weight = entry.weight or 1  # a weight of zero means "unset"
            weights[entry.name] = weight
            if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
                fail(entry.path, _child(ppath, "score"), "total score of Score plugins could overflow")
            total += weight * MAX_NODE_SCORE

        plugins = {
            point: [PluginRef(n, weights[n] if point == "score" else 0) for n in lists[point]]
            for point in EXTENSION_POINTS
        }
        plugin_args: dict[str, dict[str, Any]] = {}
        for pc in prof.plugin_config:
            if pc.name in self.known:
                plugin_args[pc.name] = dict(pc.args or {})
            # else: unmodelled (warned about already); unknown names failed validation
        for point in EXTENSION_POINTS:
            for n in lists[point]:
                plugin_args.setdefault(n, {})
        return ProfileConfig(
            scheduler_name=name,
            plugins=plugins,
            score_weights={n: weights[n] for n in lists["score"]},
            plugin_args=plugin_args,
            percentage_of_nodes_to_score=prof.percentage,
            source=self.source,
            path=prof.path,
            plugin_config_paths={pc.name: pc.path[len(prof.path) + 1 :] for pc in prof.plugin_config},
        )

    def check_common_queue_sort(self, raw: _RawConfig, profiles: list[ProfileConfig]) -> None:
        """The profile map's check: every profile must resolve to the same queue sort plugin, with
        the same args, because all profiles share one scheduling queue."""
        first = profiles[0].plugins["queueSort"][0].name

        def args_of(prof: _RawProfile, plugin: str) -> dict[str, Any] | None:
            return next((pc.args for pc in prof.plugin_config if pc.name == plugin), None)

        first_args = args_of(raw.profiles[0], first)
        for prof, resolved in zip(raw.profiles[1:], profiles[1:], strict=True):
            qs = resolved.plugins["queueSort"][0].name
            path = f"{prof.path}.plugins.queueSort"
            if qs != first:
                msg = (
                    f'different queue sort plugins for profile "{resolved.scheduler_name}": '
                    f'"{qs}", first: "{first}"'
                )
                raise ConfigError(self.source, [(path, msg)])
            if args_of(prof, qs) != first_args:
                msg = f'different queue sort plugin args for profile "{resolved.scheduler_name}"'
                raise ConfigError(self.source, [(f"{prof.path}.pluginConfig", msg)])


def load_config(
    text: str | None,
    known: Mapping[str, frozenset[str]],
    source: str = "<config>",
    *,
    unavailable: frozenset[str] = frozenset(),
) -> SchedulerConfig:
    """Load a KubeSchedulerConfiguration from YAML or JSON ``text`` (None: kube-scheduler's defaults).

    ``known`` maps every plugin name the caller can instantiate to the extension points it
    implements. ``unavailable`` names in-tree plugins this build does not have yet: like the
    unmodelled ones, they are dropped with a warning instead of failing the load. ``source`` names
    the text in messages (normally the file name).

    Raises :class:`ConfigError` for anything kube-scheduler would reject, plus plugins that are
    neither in ``known`` nor in :data:`UNMODELLED_PLUGINS`.
    """
    known_points = _normalize_known(known)
    document = None if text is None else _document(text, source)
    if document is not None and document.value is None:
        # An empty or comment-only file: kube-scheduler fails on it too (no apiVersion/kind).
        raise ConfigError(
            source, [("", f'the file is empty: expected apiVersion "{API_VERSION}" and kind "{KIND}"')]
        )
    return _Loader(source, known_points, unavailable).load(document)


def load_config_file(
    path: str | os.PathLike[str],
    known: Mapping[str, frozenset[str]],
    *,
    unavailable: frozenset[str] = frozenset(),
) -> SchedulerConfig:
    """:func:`load_config` on the file at ``path``, which is named in messages."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(source, [("", f"cannot read the file: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [("", f"the file is not UTF-8 text: {getattr(exc, 'reason', exc)}")]) from None
    return load_config(text, known, source, unavailable=unavailable)


def default_config(
    known: Mapping[str, frozenset[str]], *, unavailable: frozenset[str] = frozenset()
) -> SchedulerConfig:
    """kube-scheduler's defaults: one profile, ``default-scheduler``, with the default plugins."""
    return load_config(None, known, "<defaults>", unavailable=unavailable)
