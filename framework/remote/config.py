"""The RemotePlugins document: where remote plugin hosts are and how to call them.

Endpoints are declared in their own YAML document (the KubeSchedulerConfiguration stays unchanged),
passed with ``--plugins FILE`` to ``outrigger serve``, ``explain`` and ``demo``::

    apiVersion: outrigger.io/v1alpha1
    kind: RemotePlugins
    plugins:
    - name: gang                          # the endpoint (a plugin host); it may serve several plugins
      address: 127.0.0.1:50061            # or addresses: [127.0.0.1:50061, 127.0.0.1:50062] (replicas),
                                          # or dns:///gang.plugins.svc:50061 (every address of the name)
      deadlines: {default: 5s, permit: 1s, filter: 250ms}
      failurePolicy: Fail                 # or Ignore: a failed call skips the plugin for that cycle
      resolveInterval: 10s                # how often dns:/// names are looked up again
      batchSize: 512                      # nodes per Filter/Score batch (default: the host's preference)
      connectTimeout: 10s                 # how long startup keeps trying to reach the host
      tls:                                # dial the host with TLS (absent: plaintext)
        caFile: ca.pem                    #   verify the host against this CA (absent: the system's CAs)
        certFile: framework.pem           #   client certificate for mutual TLS, and its key
        keyFile: framework-key.pem
        serverName: gang.example          #   name to verify instead of the address's host
      tokenFile: gang.token               # the bearer token the host requires (--token-file)
    - name: gang-v2                       # a new version, tried on live cycles without deciding any
      address: 127.0.0.1:50071
      shadow:                             # its plugins are shadows, not registered for profiles
        plugins: [Gang]                   #   which of its plugins (default: all)
        points: [Filter, Score]           #   what is compared with the live cycle (default: both)
        budget: 50ms                      #   per cycle; longer evaluations are abandoned, counted
        queue: 100                        #   cycles waiting for evaluation; more are dropped, counted
        examples: 20                      #   disagreements kept for the report
        weight: 1                         #   its Score's weight when no live plugin of its name scores
    - name: gang-v3                       # a new version deciding for some pods (a variant of the profiles)
      address: 127.0.0.1:50081
      canary:
        plugin: Gang                      #   the plugin it serves in place of endpoint `of`'s
        of: gang                          #   the stable endpoint
        fraction: 0.1                     #   of the pods, stable by uid (default 1 with a selector)
        selector: {matchLabels: {canary: "true"}}   # only pods with these labels (optional)
        args: {groupTimeout: 30}          #   the variant's args for the plugin (optional: the profile's)
        weight: 2                         #   the variant's Score weight for it (optional: the profile's)

Deadlines are per extension point (the configuration names: ``filter``, ``permit``, ...; plus
``normalizeScore``, ``configure`` and ``default``); durations are Kubernetes-style (``250ms``, ``2s``,
``1m``). File paths are used as given (relative to the working directory) and read when the framework
connects. Problems are :class:`~framework.config.ConfigError` s naming the field. See docs/security.md,
and docs/plugins-live.md for shadow and canary plugins.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pluginhost import decode
from pluginhost.decode import FieldError
from pluginhost.security import ClientTLS

from ..config import EXTENSION_POINTS, ConfigError
from ..config.decoding import read_document
from .security import parse_tls_block

__all__ = [
    "API_VERSION",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DEADLINE",
    "KIND",
    "MAX_DURATION",
    "CanaryConfig",
    "EndpointConfig",
    "ShadowConfig",
    "load_remote_plugins",
    "parse_duration",
    "parse_remote_plugins",
]

API_VERSION = "outrigger.io/v1alpha1"
KIND = "RemotePlugins"
DEFAULT_DEADLINE = 5.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_RESOLVE_INTERVAL = 10.0
FAILURE_POLICIES = ("Fail", "Ignore")
# The longest deadline or timeout (also keeps infinite and absurd values away from gRPC's timers).
MAX_DURATION = 24 * 3600.0
# Deadline keys besides the extension points' configuration names.
_EXTRA_DEADLINES = ("default", "normalizeScore", "configure")
# The document's fields for strict decoding (pluginhost.decode); `tls` and `deadlines` are checked
# by their own readers, which name the allowed keys.
_SCHEMAS = decode.schemas(
    {
        KIND: "apiVersion kind plugins:[Endpoint]",
        "Endpoint": (
            "name address addresses deadlines failurePolicy batchSize connectTimeout resolveInterval tls tokenFile "
            "shadow:Shadow canary:Canary"
        ),
        "Shadow": "plugins points budget queue examples weight",
        "Canary": "plugin of fraction selector:Selector args weight",
        "Selector": "matchLabels",
    }
)
SHADOW_POINTS = ("Filter", "Score")
DEFAULT_SHADOW_BUDGET = 0.1
DEFAULT_SHADOW_QUEUE = 100
DEFAULT_SHADOW_EXAMPLES = 20


@dataclass(frozen=True, slots=True)
class ShadowConfig:
    """An endpoint's ``shadow`` block: its plugins are called on live cycles, off the critical path,
    and compared with what the cycle decided; they never decide (docs/plugins-live.md)."""

    plugins: tuple[str, ...] = ()  # empty: every plugin of the endpoint
    points: tuple[str, ...] = SHADOW_POINTS
    budget: float = DEFAULT_SHADOW_BUDGET
    queue: int = DEFAULT_SHADOW_QUEUE
    examples: int = DEFAULT_SHADOW_EXAMPLES
    weight: int = 1

    def covers(self, plugin: str) -> bool:
        return not self.plugins or plugin in self.plugins


@dataclass(frozen=True, slots=True)
class CanaryConfig:
    """An endpoint's ``canary`` block: its ``plugin`` replaces the one endpoint ``of`` serves in a
    variant of each profile running it, which schedules the pods chosen (docs/plugins-live.md)."""

    plugin: str
    of: str  # the endpoint serving the stable version
    fraction: float  # of the pods (selected by match_labels, if any), stable by uid
    match_labels: Mapping[str, str] | None = None  # None: every pod is a candidate
    args: Mapping[str, Any] | None = None  # the variant's args for the plugin (None: the profile's)
    weight: int | None = None  # the variant's Score weight for the plugin (None: the profile's)


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One ``plugins`` entry of a RemotePlugins document."""

    name: str
    addresses: tuple[str, ...]
    deadlines: Mapping[str, float] = field(default_factory=dict)  # point (or "default") -> seconds
    failure_policy: str = "Fail"
    batch_size: int = 0
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    resolve_interval: float = DEFAULT_RESOLVE_INTERVAL
    tls: ClientTLS | None = None  # None: plaintext
    token_file: str = ""  # the bearer token the host requires; empty: none
    shadow: ShadowConfig | None = None  # None: its plugins are live
    canary: CanaryConfig | None = None  # None: its plugins are not a canary

    def deadline(self, point: str) -> float:
        return self.deadlines.get(point, self.deadlines.get("default", DEFAULT_DEADLINE))


_DNS_TARGET = re.compile(r"^dns:(///|//[^/]*/)?[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _shown(value: Any) -> str:
    """``repr(value)``, cut short so that a pasted blob cannot flood an error message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_duration(value: Any, path: str = "", source: str = "") -> float:
    """``"250ms"``, ``"2s"``, ``"1.5m"`` (Kubernetes' duration style) or a number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(source, [(path, f"expected a duration like 250ms or 2s, got {_shown(value)}")])
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if m is None:
            raise ConfigError(source, [(path, f"invalid duration {_shown(value)} (use e.g. 250ms, 2s, 1m)")])
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if math.isnan(seconds) or seconds <= 0:
        raise ConfigError(source, [(path, f"duration must be positive, got {_shown(value)}")])
    if seconds > MAX_DURATION:
        raise ConfigError(source, [(path, f"duration must be at most 24h, got {_shown(value)}")])
    return seconds


def _optional_duration(entry: Mapping[str, Any], key: str, default: float, path: str, source: str,
                       problems: list[tuple[str, str]]) -> float:
    """``entry[key]`` as a duration (``default`` when absent; a problem noted when invalid)."""
    if key not in entry:
        return default
    try:
        return parse_duration(entry[key], f"{path}.{key}", source)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return default


def parse_remote_plugins(text: str, source: str = "<remote plugins>") -> list[EndpointConfig]:
    """A RemotePlugins YAML document; :class:`ConfigError` naming the field otherwise."""
    document = read_document(text, source)
    doc = document.value
    problems: list[tuple[str, str]] = []

    def fail(path: str, msg: str) -> None:
        problems.append((path, msg))

    if not isinstance(doc, dict):
        raise ConfigError(source, [("", f"expected a {KIND} document, got {decode.type_name(doc)}")])
    # Strict decoding: duplicated and unknown fields, each named with the fields allowed there.
    problems.extend((where, f'duplicate field "{path}"') for path, where in document.duplicates)
    try:
        unknown = decode.unknown_fields(doc, _SCHEMAS[KIND])
    except FieldError as exc:
        raise ConfigError(source, [*problems, (exc.path, exc.reason)]) from None
    for path in unknown:
        schema = ("Selector" if ".selector." in path else "Canary" if ".canary." in path
                  else "Shadow" if ".shadow." in path else "Endpoint" if path.startswith("plugins[") else KIND)
        allowed = _SCHEMAS[schema].names
        fail(path, f"unknown field (allowed: {', '.join(allowed)})")
    if doc.get("apiVersion") != API_VERSION:
        fail("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        fail("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    entries = doc.get("plugins") or []  # a list: strict decoding said so
    out: list[EndpointConfig] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        endpoint = _endpoint(entry, f"plugins[{i}]", seen, source, problems)
        if endpoint is not None:
            out.append(endpoint)
    if not problems:  # (its paths index `out` as `plugins`: no entry was dropped)
        _check_canaries(out, problems)
    if problems:
        raise ConfigError(source, problems)
    return out


def _endpoint(entry: Any, path: str, seen: set[str], source: str,
              problems: list[tuple[str, str]]) -> EndpointConfig | None:
    """One entry of ``plugins`` (None when it is too broken to go on; its problems are noted)."""

    def fail(where: str, msg: str) -> None:
        problems.append((where, msg))

    if not isinstance(entry, dict):
        fail(path, "expected a mapping, got null")
        return None
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        fail(f"{path}.name", "required")
        return None
    if name in seen:
        fail(f"{path}.name", f"duplicate endpoint name {name!r}")
    seen.add(name)
    address, addresses = entry.get("address"), entry.get("addresses")
    if (address is None) == (addresses is None):
        fail(path, "exactly one of address or addresses is required")
        return None
    addrs = [address] if address is not None else addresses
    if not isinstance(addrs, list) or not addrs or not all(isinstance(a, str) and ":" in a for a in addrs):
        fail(f"{path}.{'address' if address is not None else 'addresses'}", "expected host:port address(es)")
        return None
    bad_dns = [a for a in addrs if a.startswith("dns:") and not _DNS_TARGET.match(a)]
    if bad_dns:
        fail(f"{path}.{'address' if address is not None else 'addresses'}",
             f"invalid dns target {bad_dns[0]!r} (use dns:///name:port)")
        return None
    policy = entry.get("failurePolicy", "Fail")
    if policy not in FAILURE_POLICIES:
        fail(f"{path}.failurePolicy", f"unsupported value {policy!r} (use Fail or Ignore)")
    deadlines = _deadlines(entry.get("deadlines") or {}, f"{path}.deadlines", source, problems)
    batch = entry.get("batchSize", 0)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
        fail(f"{path}.batchSize", f"must be a non-negative integer, got {batch!r}")
        batch = 0
    connect = _optional_duration(entry, "connectTimeout", DEFAULT_CONNECT_TIMEOUT, path, source, problems)
    resolve = _optional_duration(entry, "resolveInterval", DEFAULT_RESOLVE_INTERVAL, path, source, problems)
    tls = parse_tls_block(entry.get("tls"), f"{path}.tls", fail) if "tls" in entry else None
    token_file = entry.get("tokenFile", "")
    if not isinstance(token_file, str) or ("tokenFile" in entry and not token_file):
        fail(f"{path}.tokenFile", "must be the path of a file holding the host's bearer token")
        token_file = ""
    shadow = _shadow(entry["shadow"], f"{path}.shadow", source, problems) if "shadow" in entry else None
    canary = _canary(entry["canary"], f"{path}.canary", problems) if "canary" in entry else None
    if shadow is not None and canary is not None:
        fail(f"{path}.canary", "an endpoint is either a shadow or a canary, not both")
    return EndpointConfig(name, tuple(addrs), deadlines, policy, batch, connect, resolve,
                          tls=tls, token_file=token_file, shadow=shadow, canary=canary)


def _canary(raw: Any, path: str, problems: list[tuple[str, str]]) -> CanaryConfig | None:
    """An endpoint's ``canary`` block (None when it is unusable; its problems are noted)."""
    if not isinstance(raw, dict):
        problems.append((path, "must be a mapping (plugin, of, fraction, selector, args, weight)"))
        return None
    before = len(problems)
    plugin, of = raw.get("plugin"), raw.get("of")
    for key, value in (("plugin", plugin), ("of", of)):
        if not isinstance(value, str) or not value:
            problems.append((f"{path}.{key}", "required: " + ("the plugin this endpoint serves as a canary"
                                                             if key == "plugin" else "the stable endpoint's name")))
    labels: dict[str, str] | None = None
    if "selector" in raw:
        selector = raw["selector"]
        match = selector.get("matchLabels") if isinstance(selector, dict) else None
        if not isinstance(match, dict) or not match or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in match.items()):
            problems.append((f"{path}.selector.matchLabels", "must be a non-empty mapping of label to value"))
        else:
            labels = dict(match)
    if "fraction" not in raw and labels is None:
        problems.append((f"{path}.fraction", "required (from 0 to 1) unless a selector chooses the pods"))
    fraction = raw.get("fraction", 1.0)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
        problems.append((f"{path}.fraction", f"must be a number from 0 to 1, got {_shown(fraction)}"))
    args, weight = raw.get("args"), raw.get("weight")
    if "args" in raw and not isinstance(args, dict):
        problems.append((f"{path}.args", f"must be a mapping (the plugin's args), got {_shown(args)}"))
    if "weight" in raw and (isinstance(weight, bool) or not isinstance(weight, int) or weight < 1):
        problems.append((f"{path}.weight", f"must be a positive integer, got {_shown(weight)}"))
    if len(problems) > before:
        return None
    return CanaryConfig(str(plugin), str(of), float(fraction), labels, args, weight)


def _check_canaries(endpoints: list[EndpointConfig], problems: list[tuple[str, str]]) -> None:
    """Each canary's ``of`` names a live endpoint of the document whose hosts are not the canary's,
    and a plugin has one canary."""
    by_name = {ep.name: ep for ep in endpoints}
    plugins: dict[str, str] = {}
    for i, ep in enumerate(endpoints):
        if ep.canary is None:
            continue
        where = f"plugins[{i}].canary"
        stable = by_name.get(ep.canary.of)
        if stable is None or stable is ep:
            problems.append((f"{where}.of", f"no other endpoint named {ep.canary.of!r} in this document"))
        elif stable.shadow is not None or stable.canary is not None:
            problems.append((f"{where}.of", f"endpoint {ep.canary.of!r} is a shadow or a canary, not a live one"))
        elif shared := sorted(set(ep.addresses) & set(stable.addresses)):
            # A host keeps one configuration per (plugin, profile): the variant's would replace the stable one's.
            problems.append((where, f"{shared[0]} is also an address of endpoint {stable.name!r}: a canary "
                                    "needs plugin hosts of its own"))
        if ep.canary.plugin in plugins:
            problems.append((f"{where}.plugin", f"plugin {ep.canary.plugin!r} already has a canary "
                                                f"(endpoint {plugins[ep.canary.plugin]!r})"))
        plugins.setdefault(ep.canary.plugin, ep.name)


def _count(raw: Mapping[str, Any], key: str, default: int, low: int, path: str,
           problems: list[tuple[str, str]]) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 1_000_000:
        problems.append((f"{path}.{key}", f"must be an integer from {low} to 1000000, got {_shown(value)}"))
        return default
    return value


def _shadow(raw: Any, path: str, source: str, problems: list[tuple[str, str]]) -> ShadowConfig | None:
    """An endpoint's ``shadow`` block (None when it is not a mapping; its problems are noted)."""
    if not isinstance(raw, dict):
        problems.append((path, "must be a mapping (plugins, points, budget, queue, examples, weight)"))
        return None
    plugins = raw.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) and p for p in plugins):
        problems.append((f"{path}.plugins", "must be a list of plugin names"))
        plugins = []
    points = raw.get("points", list(SHADOW_POINTS))
    if not isinstance(points, list) or not points or any(p not in SHADOW_POINTS for p in points):
        problems.append((f"{path}.points", f"must be a non-empty list of {' and '.join(SHADOW_POINTS)}"))
        points = list(SHADOW_POINTS)
    budget = _optional_duration(raw, "budget", DEFAULT_SHADOW_BUDGET, path, source, problems)
    return ShadowConfig(
        tuple(plugins), tuple(dict.fromkeys(points)), budget,
        _count(raw, "queue", DEFAULT_SHADOW_QUEUE, 1, path, problems),
        _count(raw, "examples", DEFAULT_SHADOW_EXAMPLES, 0, path, problems),
        _count(raw, "weight", 1, 1, path, problems),
    )


def _deadlines(raw: Any, path: str, source: str, problems: list[tuple[str, str]]) -> dict[str, float]:
    """An endpoint's ``deadlines`` mapping: extension point (or configure, default) -> seconds."""
    if not isinstance(raw, dict):
        problems.append((path, "must be a mapping of extension point to duration"))
        return {}
    valid = (*EXTENSION_POINTS, *_EXTRA_DEADLINES)
    out: dict[str, float] = {}
    for point, value in raw.items():
        where = f"{path}.{point}"
        if point not in valid:
            problems.append((where, f"unknown extension point (use one of {', '.join(valid)})"))
            continue
        try:
            out[point] = parse_duration(value, where, source)
        except ConfigError as exc:
            problems.extend(exc.problems)
    return out


def load_remote_plugins(path: str | os.PathLike[str]) -> list[EndpointConfig]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(str(path), [("", f"cannot read: {exc.strerror or exc}")]) from None
    return parse_remote_plugins(text, str(path))
