"""Reading a KubeSchedulerConfiguration: text to one document (:func:`read_document`), then strictly
decoded into the v1 types, each value keeping its field path for messages (:class:`RawConfig`).

Decoding is strict, like kube-scheduler's (:mod:`pluginhost.decode`): every unknown or duplicated
field, at any depth, is an error naming its path (``unknown field "profiles[0].plugin"``), and so is a
wrongly typed value. Nothing is defaulted or validated here (:mod:`framework.config.defaults`,
:mod:`framework.config.validation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

from pluginhost import decode
from pluginhost.decode import Document, FieldError, TextError

from .model import API_VERSION, KIND, PLUGIN_SETS, ConfigError, located

__all__ = [
    "Entry",
    "PluginConfigEntry",
    "PluginSet",
    "RawConfig",
    "RawProfile",
    "child",
    "decode_config",
    "read_document",
]

# Top-level fields of the v1 type outside the scheduling model, kept verbatim in `extra`. On a live cluster
# `outrigger serve` reads clientConnection (kubeconfig, qps, burst: framework/kube/settings.py's
# client_connection) and leaderElection (framework/config/leaderelection.py); the others are accepted and not used.
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
        "Plugins": " ".join(f"{point}:PluginSet" for point in PLUGIN_SETS),
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


# ---------------------------------------------------------------------------------------------------
# The decoded file: the v1 types, with each value's field path kept for messages.


@dataclass
class Entry:
    """A ``{name, weight}`` plugin entry; ``path`` is None for kube-scheduler's defaults."""

    name: str
    weight: int
    path: str | None


@dataclass
class PluginSet:
    """A ``{enabled, disabled}`` set of one extension point (or ``multiPoint``)."""

    enabled: list[Entry] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass
class PluginConfigEntry:
    """A ``pluginConfig`` entry: a plugin's args."""

    name: str
    args: dict[str, Any] | None  # None when `args` is absent or null
    path: str


@dataclass
class RawProfile:
    """A profile as written (``path``: where, e.g. ``profiles[1]``)."""

    path: str
    scheduler_name: str | None  # None when the field is absent
    percentage: int | None
    plugins: dict[str, PluginSet] | None  # keys: PLUGIN_SETS; None if absent
    plugin_config: list[PluginConfigEntry]


@dataclass
class RawConfig:
    """The file as written, before defaulting; ``extra``: the top-level fields outside the scheduling model."""

    percentage: int | None = None
    initial_backoff: int | None = None
    max_backoff: int | None = None
    profiles: list[RawProfile] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def child(path: str, name: str) -> str:
    """The field path of ``name`` inside ``path`` (``profiles[0]`` + ``plugins``)."""
    return f"{path}.{name}" if path else name


# ---------------------------------------------------------------------------------------------------
# Text


def read_document(text: str, source: str) -> Document:
    """The one YAML or JSON document of ``text``, a KubeSchedulerConfiguration or a RemotePlugins
    document (:mod:`framework.remote.config`); :class:`ConfigError` naming ``source`` and where the text
    breaks otherwise."""
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


def decode_config(document: Document, source: str, warnings: list[str]) -> RawConfig:
    """The KubeSchedulerConfiguration ``document`` in the v1 types (``source`` names it in messages);
    fields accepted but ignored add a line to ``warnings``."""
    return _Decoder(source, warnings).config(document)


class _Decoder:
    def __init__(self, source: str, warnings: list[str]) -> None:
        self.source = source
        self.warnings = warnings

    def fail(self, path: str, msg: str) -> NoReturn:
        raise ConfigError(self.source, [(path, msg)])

    def config(self, document: Document) -> RawConfig:
        try:
            return self._config(document)
        except FieldError as exc:
            raise ConfigError(self.source, [(exc.path, exc.reason)]) from None

    def _config(self, document: Document) -> RawConfig:
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

        raw = RawConfig()
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
                    located(
                        self.source,
                        name,
                        "scheduler extenders are not supported by Outrigger and are ignored",
                    )
                )
        elif name in ("healthzBindAddress", "metricsBindAddress"):
            decode.as_str(value, name)
            self.warnings.append(
                located(
                    self.source,
                    name,
                    "this field was removed from KubeSchedulerConfiguration in v1beta3 (kube-scheduler "
                    "rejects it in v1); Outrigger ignores it",
                )
            )
        return value

    def profile(self, value: Any, path: str) -> RawProfile:
        m = decode.as_map(value, path)
        name = m.get("schedulerName")
        if name is not None:
            decode.as_str(name, child(path, "schedulerName"))
        percentage = _opt_int(m.get("percentageOfNodesToScore"), child(path, "percentageOfNodesToScore"), 32)
        plugins: dict[str, PluginSet] | None = None
        if m.get("plugins") is not None:
            ppath = child(path, "plugins")
            pm = decode.as_map(m["plugins"], ppath)
            plugins = {point: self.plugin_set(pm.get(point), child(ppath, point)) for point in PLUGIN_SETS}
        configs = []
        for i, item in enumerate(decode.as_list(m.get("pluginConfig"), child(path, "pluginConfig"))):
            configs.append(self.plugin_config(item, f"{child(path, 'pluginConfig')}[{i}]"))
        return RawProfile(path, name, percentage, plugins, configs)

    def plugin_set(self, value: Any, path: str) -> PluginSet:
        if value is None:
            return PluginSet()
        m = decode.as_map(value, path)
        out = PluginSet()
        for i, item in enumerate(decode.as_list(m.get("enabled"), child(path, "enabled"))):
            out.enabled.append(self.plugin(item, f"{child(path, 'enabled')}[{i}]"))
        for i, item in enumerate(decode.as_list(m.get("disabled"), child(path, "disabled"))):
            out.disabled.append(self.plugin(item, f"{child(path, 'disabled')}[{i}]").name)
        return out

    def plugin(self, value: Any, path: str) -> Entry:
        m = decode.as_map(value, path)
        if m.get("name") is None or m.get("name") == "":
            self.fail(child(path, "name"), "Required value")
        name = decode.as_str(m["name"], child(path, "name"))
        weight = _opt_int(m.get("weight"), child(path, "weight"), 32)
        return Entry(name, weight or 0, path)

    def plugin_config(self, value: Any, path: str) -> PluginConfigEntry:
        m = decode.as_map(value, path)
        if m.get("name") is None or m.get("name") == "":
            self.fail(child(path, "name"), "Required value")
        name = decode.as_str(m["name"], child(path, "name"))
        args = m.get("args")
        if args is not None:
            decode.as_map(args, child(path, "args"))
        return PluginConfigEntry(name, args, path)


def _opt_int(value: Any, path: str, bits: int) -> int | None:
    """An optional Go ``int32``/``int64`` field: booleans and non-integral numbers are type errors."""
    return None if value is None else decode.as_int(value, path, bits)
