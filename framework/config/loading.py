"""Loading a KubeSchedulerConfiguration: the steps kube-scheduler takes, in its order, from text to the
resolved profiles (:func:`load_config`, :func:`load_config_file`, :func:`default_config`).

1. decoding (:mod:`framework.config.decoding`): one document, strictly decoded into the v1 types;
2. defaulting (:mod:`framework.config.defaults`): each profile's ``plugins`` merged into the default
   ``multiPoint`` set;
3. validation (:mod:`framework.config.validation`): every problem of the file, reported together;
4. resolution (:mod:`framework.config.resolution`): each profile's plugin list per extension point.

In-tree plugins the caller cannot instantiate (:data:`~framework.config.defaults.UNMODELLED_PLUGINS`,
and those it names ``unavailable``) are dropped along the way with one warning each.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pluginhost.decode import Document

from .decoding import PluginSet, RawConfig, RawProfile, decode_config, read_document
from .defaults import INVALID_IN_V1, UNMODELLED_PLUGINS, merged_plugins
from .model import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    KIND,
    PLUGIN_SETS,
    POD_GROUP_POINTS,
    ConfigError,
    SchedulerConfig,
    located,
)
from .resolution import check_common_queue_sort, resolve
from .validation import negative_weight_warnings, validate

__all__ = ["default_config", "load_config", "load_config_file"]


def _normalize_known(known: Mapping[str, frozenset[str]] | Mapping[str, Any]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for name, points in known.items():
        pts = frozenset(points)
        bad = pts - set(EXTENSION_POINTS) - set(POD_GROUP_POINTS)
        if bad:
            # A caller bug, not a configuration problem.
            raise ValueError(f"known[{name!r}] lists unknown extension points {sorted(bad)}")
        out[name] = pts
    return out


class _Loader:
    """One load: the plugins the caller knows, and the warnings gathered on the way."""

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
        self.warnings.append(located(self.source, path, msg) if path else msg)

    def load(self, document: Document | None) -> SchedulerConfig:
        raw = RawConfig() if document is None else decode_config(document, self.source, self.warnings)

        # Defaulting (SetDefaults_KubeSchedulerConfiguration).
        if not raw.profiles:
            raw.profiles = [RawProfile("profiles[0]", None, None, None, [])]
        if len(raw.profiles) == 1 and raw.profiles[0].scheduler_name is None:
            raw.profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
        merged = [merged_plugins(prof.plugins) for prof in raw.profiles]

        self.warn_user_unmodelled(raw)
        problems = validate(raw, merged, self.known, self.unmodelled)
        if problems:
            raise ConfigError(self.source, problems)

        profiles = []
        for prof, plugins in zip(raw.profiles, merged, strict=True):
            self.drop_unmodelled(plugins)
            profiles.append(resolve(prof, plugins, self.known, self.source))
        check_common_queue_sort(raw, profiles, self.source)
        for prof in raw.profiles:
            self.warnings.extend(negative_weight_warnings(prof, self.unmodelled, self.source))
        return SchedulerConfig(
            profiles=profiles,
            percentage_of_nodes_to_score=raw.percentage,
            pod_initial_backoff_seconds=float(1 if raw.initial_backoff is None else raw.initial_backoff),
            pod_max_backoff_seconds=float(10 if raw.max_backoff is None else raw.max_backoff),
            warnings=self.warnings,
            extra=raw.extra,
        )

    def warn_user_unmodelled(self, raw: RawConfig) -> None:
        # Warn at the user's own mention first (document order), so the message points at the file;
        # names only the defaults bring in are warned about while resolving.
        for prof in raw.profiles:
            if prof.plugins is not None:
                for point in PLUGIN_SETS:
                    for entry in prof.plugins[point].enabled:
                        if entry.name in self.unmodelled and entry.name not in INVALID_IN_V1:
                            self.warn_unmodelled(entry.name, entry.path)
            for pc in prof.plugin_config:
                if pc.name in self.unmodelled and pc.name not in INVALID_IN_V1:
                    self.warn_unmodelled(pc.name, pc.path)

    def drop_unmodelled(self, merged: dict[str, PluginSet]) -> None:
        """Drop the unmodelled plugins from a profile's merged sets (warning of each), before anything
        looks at the lists."""
        for point, ps in merged.items():
            kept = []
            for entry in ps.enabled:
                if entry.name in self.unmodelled:
                    self.warn_unmodelled(entry.name, entry.path)
                else:
                    kept.append(entry)
            merged[point] = PluginSet(kept, ps.disabled)


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
    document = None if text is None else read_document(text, source)
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
