"""Resolving a validated profile into the ordered plugin list of each extension point, as kube-scheduler's
``NewFramework`` does (``updatePluginList``, ``expandMultiPointPlugins``, ``getScoreWeights``), and the
profile map's check that every profile sorts the one scheduling queue the same way.

The first problem stops resolution: it raises a :class:`~framework.config.model.ConfigError` naming the
file (``source``) and the field, as kube-scheduler stops at the first profile it cannot build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from .decoding import Entry, PluginSet, RawConfig, RawProfile, child
from .defaults import POD_GROUP_IMPLEMENTERS
from .model import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    MULTI_POINT,
    POD_GROUP_POINTS,
    ConfigError,
    PluginRef,
    ProfileConfig,
)

__all__ = ["check_common_queue_sort", "resolve"]

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
    "placementGenerate",
    "placementScore",
    "podGroupPostFilter",
)


def _implements(known: Mapping[str, frozenset[str]], name: str, point: str) -> bool:
    """Whether plugin ``name`` (in ``known``) implements ``point``: a pod-group point by the in-tree
    plugins kube-scheduler has for it, or by a plugin (remote) whose known points include it."""
    if point in POD_GROUP_IMPLEMENTERS and name in POD_GROUP_IMPLEMENTERS[point]:
        return True
    return point in known[name]


def _fail(source: str, path: str | None, fallback: str, msg: str) -> NoReturn:
    """Stop at a problem: at the entry's ``path``, or at ``fallback`` for an entry of the defaults."""
    raise ConfigError(source, [(path or fallback, msg)])


def resolve(
    prof: RawProfile, merged: dict[str, PluginSet], known: Mapping[str, frozenset[str]], source: str
) -> ProfileConfig:
    """The profile ``prof`` with its merged plugin sets ``merged`` (unmodelled plugins already dropped),
    resolved against ``known`` (each plugin name the caller can instantiate -> its extension points)."""
    name = prof.scheduler_name or ""
    ppath = child(prof.path, "plugins")
    lists = _explicit_lists(merged, known, ppath, source)
    _expand_multi_point(lists, merged, known, ppath, source)
    if len(lists["queueSort"]) != 1:
        _fail(
            source,
            None,
            child(ppath, "queueSort"),
            f'only one queue sort plugin required for profile with scheduler name "{name}", '
            f"but got {len(lists['queueSort'])}",
        )
    if not lists["bind"]:
        _fail(
            source,
            None,
            child(ppath, "bind"),
            f'at least one bind plugin is needed for profile with scheduler name "{name}"',
        )
    if len(lists["placementGenerate"]) > 1:
        _fail(
            source,
            None,
            child(ppath, "placementGenerate"),
            f'at most one placement generate plugin is allowed for profile with scheduler name "{name}"',
        )
    weights = _score_weights(merged, known, ppath, source, "score")
    placement_weights = _score_weights(merged, known, ppath, source, "placementScore")

    plugins = {
        point: [PluginRef(n, weights[n] if point == "score" else 0) for n in lists[point]]
        for point in EXTENSION_POINTS
    }
    plugin_args: dict[str, dict[str, Any]] = {}
    for pc in prof.plugin_config:
        if pc.name in known:
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
        pod_group_plugins={
            point: [PluginRef(n, placement_weights[n] if point == "placementScore" else 0) for n in lists[point]]
            for point in POD_GROUP_POINTS
        },
        source=source,
        path=prof.path,
        plugin_config_paths={pc.name: pc.path[len(prof.path) + 1 :] for pc in prof.plugin_config},
    )


def _explicit_lists(
    merged: dict[str, PluginSet], known: Mapping[str, frozenset[str]], ppath: str, source: str
) -> dict[str, list[str]]:
    """updatePluginList: the plugins enabled explicitly at each point."""
    lists: dict[str, list[str]] = {}
    for point in _FRAMEWORK_ORDER:
        names: list[str] = []
        for entry in merged[point].enabled:
            here = child(ppath, point)
            if entry.name not in known:
                _fail(source, entry.path, here, f'{point} plugin "{entry.name}" does not exist')
            if not _implements(known, entry.name, point):
                _fail(source, entry.path, here, f'plugin "{entry.name}" does not extend {point} plugin')
            if entry.name in names:
                _fail(source, entry.path, here, f'plugin "{entry.name}" already registered as "{point}"')
            names.append(entry.name)
        lists[point] = names
    return lists


def _expand_multi_point(
    lists: dict[str, list[str]],
    merged: dict[str, PluginSet],
    known: Mapping[str, frozenset[str]],
    ppath: str,
    source: str,
) -> None:
    """expandMultiPointPlugins: each ``multiPoint`` plugin joins every point it implements, in ``lists``."""
    multi = merged[MULTI_POINT].enabled
    mpath = child(ppath, MULTI_POINT)
    for entry in multi:
        if entry.name not in known:
            msg = f'{MULTI_POINT} plugin "{entry.name}" does not exist'
            if entry.path is None:
                msg += " (it is a kube-scheduler default: disable it in multiPoint if it is unavailable)"
            _fail(source, entry.path, mpath, msg)
    if not multi:
        return
    for point in _FRAMEWORK_ORDER:
        disabled = set(merged[point].disabled)
        if "*" in disabled:
            continue  # the user took this point over entirely
        specific = lists[point]
        overrides: set[str] = set()
        expanded: list[str] = []
        for entry in multi:
            if not _implements(known, entry.name, point) or entry.name in disabled:
                continue
            if entry.name in specific:
                # Also enabled at the point itself: that entry decides (and its position).
                overrides.add(entry.name)
                continue
            if entry.name in expanded:
                _fail(source, entry.path, mpath, f'plugin "{entry.name}" already registered as "{point}"')
            expanded.append(entry.name)
        lists[point] = [n for n in specific if n in overrides] + expanded + [n for n in specific if n not in overrides]


def _score_weights(
    merged: dict[str, PluginSet], known: Mapping[str, frozenset[str]], ppath: str, source: str, point: str
) -> dict[str, int]:
    """getValidScoreWeights for ``point`` (``score`` or ``placementScore``): the point's own entries
    first, then multiPoint's, first one wins."""
    weights: dict[str, int] = {}
    total = 0
    entries: tuple[Entry, ...] = (*merged[point].enabled, *merged[MULTI_POINT].enabled)
    what = "score plugins" if point == "score" else "placement score plugins"
    for entry in entries:
        if not _implements(known, entry.name, point) or entry.name in weights:
            continue
        weight = entry.weight or 1  # a weight of zero means "unset"
        weights[entry.name] = weight
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            _fail(source, entry.path, child(ppath, point), f"{what}: total score of Score plugins could overflow")
        total += weight * MAX_NODE_SCORE
    return weights


def check_common_queue_sort(raw: RawConfig, profiles: list[ProfileConfig], source: str) -> None:
    """The profile map's check: every profile must resolve to the same queue sort plugin, with
    the same args, because all profiles share one scheduling queue."""
    first = profiles[0].plugins["queueSort"][0].name

    def args_of(prof: RawProfile, plugin: str) -> dict[str, Any] | None:
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
            raise ConfigError(source, [(path, msg)])
        if args_of(prof, qs) != first_args:
            msg = f'different queue sort plugin args for profile "{resolved.scheduler_name}"'
            raise ConfigError(source, [(f"{prof.path}.pluginConfig", msg)])
