"""KubeSchedulerConfiguration loading: kube-scheduler's ``--config`` file, resolved into plugin lists.

Outrigger reads the same ``kubescheduler.config.k8s.io/v1`` ``KubeSchedulerConfiguration`` file as
kube-scheduler, so an existing file loads unchanged, and resolves every profile into the ordered list
of plugins that runs at each extension point, exactly as kube-scheduler does:

1. decoding is strict, like kube-scheduler's: unknown or duplicated fields and wrongly typed values
   are errors;
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
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml
from yaml.constructor import ConstructorError

from pluginhost.manifest import one_line
from pluginhost.safeyaml import MAX_DEPTH, harden, reader_error, too_deep

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
    "PluginRef",
    "ProfileConfig",
    "SchedulerConfig",
    "default_config",
    "load_config",
    "load_config_file",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: The extension points, in the order a pod meets them.
EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
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
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at a point. ``weight`` only means something at ``score``; elsewhere it is 0."""

    name: str
    weight: int = 0


#: kube-scheduler v1.34's default ``multiPoint`` set (``getDefaultPlugins``), in order, with weights
#: (0 = unset). DynamicResources is there because its feature gate is on by default since v1.34 and
#: ``applyFeatureGates`` puts it right before DefaultPreemption; Outrigger does not model it, so it
#: is dropped with a warning and the resolved lists equal v1.33's.
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
    PluginRef("DynamicResources"),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)

# Names kube-scheduler's v1 validation rejects outright ("was invalid in version ..."): the in-tree
# cloud volume-limit plugins, removed from the registry.
_INVALID_IN_V1: frozenset[str] = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})

#: In-tree kube-scheduler plugin names that Outrigger does not model. Where one is enabled (by the
#: defaults or by the user) or configured, it is dropped with one warning instead of failing the
#: load. A name the caller lists in ``known`` is never treated as unmodelled. The four removed
#: cloud volume-limit plugins are listed for completeness, but like kube-scheduler, enabling or
#: configuring them in a v1 file is an error.
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

# Top-level fields of the v1 type that Outrigger accepts but does not use; kept verbatim in `extra`.
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
_TOP_LEVEL_FIELDS = frozenset(
    {
        "apiVersion",
        "kind",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "profiles",
    }
    | set(_EXTRA_FIELDS)
)
_LEADER_ELECTION_FIELDS = frozenset(
    {
        "leaderElect",
        "leaseDuration",
        "renewDeadline",
        "retryPeriod",
        "resourceLock",
        "resourceName",
        "resourceNamespace",
    }
)
_CLIENT_CONNECTION_FIELDS = frozenset({"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"})
_PROFILE_FIELDS = frozenset({"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"})
_PLUGINS_FIELDS = frozenset((MULTI_POINT, *EXTENSION_POINTS))


class ConfigError(ValueError):
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

    def names(self, point: str) -> list[str]:
        """The names of the plugins at ``point``, in order."""
        return [ref.name for ref in self.plugins[point]]


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
    #: Top-level fields accepted but not used by Outrigger (leaderElection, parallelism, ...), verbatim.
    extra: dict[str, Any] = field(default_factory=dict)

    def profile(self, scheduler_name: str) -> ProfileConfig | None:
        """The profile serving pods whose ``spec.schedulerName`` is ``scheduler_name``, if any."""
        for prof in self.profiles:
            if prof.scheduler_name == scheduler_name:
                return prof
        return None


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
# YAML parsing


@harden
class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicated mapping keys, as kube-scheduler's strict decoder does
    (PyYAML would silently keep the last value)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` may legitimately be overridden by explicit keys
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key; SafeLoader reports it below
                continue
            if duplicate:
                raise ConstructorError(None, None, f"duplicate field {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(text: str, source: str) -> Any:
    try:
        where = too_deep(text)
        if where is not None:
            raise ConfigError(source, [(where, f"invalid YAML: collections nested deeper than {MAX_DEPTH} levels")])
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except UnicodeError as exc:  # lone surrogates: only Python callers can pass such a str
        raise ConfigError(source, [("", f"not valid Unicode text: {getattr(exc, 'reason', exc)}")]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        detail = exc.problem or exc.context or str(exc)
        raise ConfigError(source, [(where, f"invalid YAML: {detail}")]) from None
    except yaml.YAMLError as exc:
        refused = reader_error(exc, text)
        if refused is not None:
            raise ConfigError(source, [(refused[0], f"invalid YAML: {refused[1]}")]) from None
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(source, [("", f"invalid YAML: {first}")]) from None


# ---------------------------------------------------------------------------------------------------
# Strict decoding: shape and types, like kube-scheduler's strict decoder. The first problem aborts.


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Decoder:
    def __init__(self, source: str, warnings: list[str]) -> None:
        self.source = source
        self.warnings = warnings

    def fail(self, path: str, msg: str) -> NoReturn:
        raise ConfigError(self.source, [(path, msg)])

    def mapping(self, value: Any, path: str, allowed: frozenset[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {_kind_of(value)}")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                self.fail(path, f'unknown field "{key}"')
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be a list, got {_kind_of(value)}")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            self.fail(path, f"must be a string, got {_kind_of(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"must be a boolean, got {_kind_of(value)}")
        return value

    def integer(self, value: Any, path: str, bounds: tuple[int, int]) -> int:
        # Go decodes into int32/int64: booleans and non-integral numbers are type errors.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer, got {_kind_of(value)}")
        lo, hi = bounds
        if not lo <= value <= hi:
            self.fail(path, f"Invalid value: {value}: must fit in a {hi.bit_length() + 1}-bit integer")
        return value

    def opt_integer(self, value: Any, path: str, bounds: tuple[int, int]) -> int | None:
        return None if value is None else self.integer(value, path, bounds)

    # -- the document ------------------------------------------------------------------------------

    def config(self, doc: Any) -> _RawConfig:
        if not isinstance(doc, dict):
            self.fail("", f"must be a mapping, got {_kind_of(doc)}")
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
        self.mapping(doc, "", _TOP_LEVEL_FIELDS)

        raw = _RawConfig()
        raw.percentage = self.opt_integer(
            doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore", _INT32
        )
        raw.initial_backoff = self.opt_integer(
            doc.get("podInitialBackoffSeconds"), "podInitialBackoffSeconds", _INT64
        )
        raw.max_backoff = self.opt_integer(doc.get("podMaxBackoffSeconds"), "podMaxBackoffSeconds", _INT64)
        for i, prof in enumerate(self.seq(doc.get("profiles"), "profiles")):
            raw.profiles.append(self.profile(prof, f"profiles[{i}]"))
        for name in _EXTRA_FIELDS:
            if name in doc:
                raw.extra[name] = self.extra_field(name, doc[name])
        return raw

    def extra_field(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if name == "parallelism":
            self.integer(value, name, _INT32)
        elif name in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
            self.boolean(value, name)
        elif name == "leaderElection":
            self.mapping(value, name, _LEADER_ELECTION_FIELDS)
        elif name == "clientConnection":
            self.mapping(value, name, _CLIENT_CONNECTION_FIELDS)
        elif name == "extenders":
            if self.seq(value, name):
                self.warnings.append(
                    _located(
                        self.source,
                        name,
                        "scheduler extenders are not supported by Outrigger and are ignored",
                    )
                )
        elif name in ("healthzBindAddress", "metricsBindAddress"):
            self.string(value, name)
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
        m = self.mapping(value, path, _PROFILE_FIELDS)
        name = m.get("schedulerName")
        if name is not None:
            self.string(name, _child(path, "schedulerName"))
        percentage = self.opt_integer(
            m.get("percentageOfNodesToScore"), _child(path, "percentageOfNodesToScore"), _INT32
        )
        plugins: dict[str, _PluginSet] | None = None
        if m.get("plugins") is not None:
            ppath = _child(path, "plugins")
            pm = self.mapping(m["plugins"], ppath, _PLUGINS_FIELDS)
            plugins = {
                point: self.plugin_set(pm.get(point), _child(ppath, point)) for point in _PLUGINS_FIELDS
            }
        configs = []
        for i, item in enumerate(self.seq(m.get("pluginConfig"), _child(path, "pluginConfig"))):
            configs.append(self.plugin_config(item, f"{_child(path, 'pluginConfig')}[{i}]"))
        return _RawProfile(path, name, percentage, plugins, configs)

    def plugin_set(self, value: Any, path: str) -> _PluginSet:
        if value is None:
            return _PluginSet()
        m = self.mapping(value, path, frozenset({"enabled", "disabled"}))
        out = _PluginSet()
        for i, item in enumerate(self.seq(m.get("enabled"), _child(path, "enabled"))):
            out.enabled.append(self.plugin(item, f"{_child(path, 'enabled')}[{i}]"))
        for i, item in enumerate(self.seq(m.get("disabled"), _child(path, "disabled"))):
            out.disabled.append(self.plugin(item, f"{_child(path, 'disabled')}[{i}]").name)
        return out

    def plugin(self, value: Any, path: str) -> _Entry:
        m = self.mapping(value, path, frozenset({"name", "weight"}))
        if m.get("name") is None or m.get("name") == "":
            self.fail(_child(path, "name"), "Required value")
        name = self.string(m["name"], _child(path, "name"))
        weight = self.opt_integer(m.get("weight"), _child(path, "weight"), _INT32)
        return _Entry(name, weight or 0, path)

    def plugin_config(self, value: Any, path: str) -> _PluginConfigEntry:
        m = self.mapping(value, path, frozenset({"name", "args"}))
        if m.get("name") is None or m.get("name") == "":
            self.fail(_child(path, "name"), "Required value")
        name = self.string(m["name"], _child(path, "name"))
        args = m.get("args")
        if args is not None and not isinstance(args, dict):
            self.fail(_child(path, "args"), f"must be a mapping, got {_kind_of(args)}")
        return _PluginConfigEntry(name, args, path)


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

    def load(self, doc: Any | None) -> SchedulerConfig:
        decoder = _Decoder(self.source, self.warnings)
        raw = _RawConfig() if doc is None else decoder.config(doc)

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
        # kube-scheduler accepts negative score weights; they are almost always a mistake.
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
        le = raw.extra.get("leaderElection") or {}
        # kube-scheduler defaults leaderElect to true and an empty resourceLock to "leases".
        lock = le.get("resourceLock") or "leases"
        if le.get("leaderElect", True) and lock != "leases":
            problems.append(
                (
                    "leaderElection.resourceLock",
                    f'Invalid value: "{lock}": resourceLock value must be "leases"',
                )
            )
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
    doc = None if text is None else _parse_yaml(text, source)
    if text is not None and doc is None:
        # An empty or comment-only file: kube-scheduler fails on it too (no apiVersion/kind).
        raise ConfigError(
            source, [("", f'the file is empty: expected apiVersion "{API_VERSION}" and kind "{KIND}"')]
        )
    return _Loader(source, known_points, unavailable).load(doc)


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
