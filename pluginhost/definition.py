"""A plugin class's definition: the manifest a host describes it with, checked when it is declared.

:func:`manifest_of` checks a plugin class (a name, at least one extension point, valid ``state_keys``
/ ``batch_size`` / ``filter_and_score`` / ``needs_snapshot`` / ``lookahead`` declarations, events and
debug endpoints readable from a bare instance) and builds its ``PluginManifest``: which points the
framework calls, what it sends with them. A class that cannot be served raises
:class:`PluginDefinitionError` saying what to fix, when the host is built rather than at its first call.

:func:`defn` moves that check to the class statement itself, as temporalio's ``@workflow.defn`` does::

    @pluginhost.defn(name="GpuPack")
    class GpuPack(FilterPlugin, ScorePlugin): ...

A mistake then fails the import of the plugin's module, in the author's test run, with the same
message; the host reuses the manifest built there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from pluginhost import pb
from pluginhost.errors import OutriggerError
from pluginhost.placement import POD_GROUP_POINT_ROWS, PlacementScoreExtensions, pod_group_points_of
from pluginhost.plugin import (
    CONFIGURED_POINTS,
    POINT_CLASSES,
    POINTS,
    TRANSFORMER_CLASSES,
    ActionType,
    ClusterEventWithHint,
    Controller,
    EnqueueExtensions,
    Plugin,
    PreBindPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ScoreExtensions,
)
from pluginhost.sign import SignPlugin

__all__ = ["Hosted", "PluginDefinitionError", "action_from_text", "action_text", "defn", "manifest_of"]

E = pb.plugin  # the ExtensionPoint enum lives in plugin.proto

# From the points table: configured point -> its enum value; point -> its transformer's enum value.
_POINT_ENUM = {p.name: E.ExtensionPoint.Value(p.enum) for p in CONFIGURED_POINTS}
_TRANSFORMER_ENUM = {p.of: E.ExtensionPoint.Value(p.enum) for p in POINTS if p.kind == "transformer"}
# The PodGroup points a host serves: configured point -> its enum value.
_GROUP_ENUM = {p.name: E.ExtensionPoint.Value(p.enum) for p in POD_GROUP_POINT_ROWS if p.kind == "podGroup"}
# Points whose plugins look at nodes: their hosts follow the snapshot mirror unless told otherwise.
_SNAPSHOT_POINTS = frozenset({"preFilter", "filter", "postFilter", "preScore", "score"})
# The points batching skips for a hinted pod: only their plugins sign.
_SIGNED_POINTS = frozenset({"preFilter", "filter", "preScore", "score"})


class PluginDefinitionError(OutriggerError, TypeError):
    """A class handed to the host is not a valid plugin (the message says what to fix)."""


_MANIFEST = "__outrigger_manifest__"  # where :func:`defn` keeps the manifest it built, on the class itself

P = TypeVar("P", bound=type[Plugin])


@overload
def defn(cls: P, /) -> P: ...


@overload
def defn(*, name: str | None = None) -> Callable[[P], P]: ...


def defn(cls: P | None = None, /, *, name: str | None = None) -> P | Callable[[P], P]:
    """Declare a plugin class: check it now and keep its manifest (``@defn`` or ``@defn(name="X")``,
    which also sets the class's ``name``). :class:`PluginDefinitionError` at the class statement when
    it cannot be served."""

    def declare(c: P) -> P:
        if name is not None:
            c.name = name
        setattr(c, _MANIFEST, manifest_of(c))
        return c

    return declare if cls is None else declare(cls)


def declared_manifest(cls: type) -> Any:
    """The manifest :func:`defn` built for ``cls`` itself (not inherited by a subclass), or a new one."""
    built = vars(cls).get(_MANIFEST) if isinstance(cls, type) else None
    return built if built is not None else manifest_of(cls)


def _overrides(cls: type, base: type, method: str) -> bool:
    return getattr(cls, method) is not getattr(base, method)


def _mirror_flags(cls: type, where: str, lookahead: bool) -> tuple[bool | None, bool, bool]:
    """The class's ``needs_snapshot`` (None: not declared), ``needs_volumes`` and ``needs_devices``,
    checked together."""
    needs_snapshot = getattr(cls, "needs_snapshot", None)
    needs_volumes = bool(getattr(cls, "needs_volumes", False))
    needs_devices = bool(getattr(cls, "needs_devices", False))
    for flag, set_, what in (("needs_volumes", needs_volumes, "storage"), ("needs_devices", needs_devices, "device")):
        if set_ and (lookahead or getattr(cls, "nodes_only", False) or needs_snapshot is False):
            raise PluginDefinitionError(
                f"{where}: {flag} reads {what} objects through the snapshot mirror, so it needs the "
                f"mirror (needs_snapshot) and excludes lookahead and nodes_only (a {what} change alters "
                "answers without a node change)"
            )
    return needs_snapshot, needs_volumes, needs_devices


def _point_enums(cls: type, points: list[str], group_points: list[str]) -> list[Any]:
    """The contract's enum values of the points, parts and transformers a plugin class implements."""
    enums: list[Any] = [_POINT_ENUM[p] for p in points] + [_GROUP_ENUM[p] for p in group_points]
    if "placementScore" in group_points and issubclass(cls, PlacementScoreExtensions):
        enums.append(E.EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE)
    if issubclass(cls, PreFilterPlugin) and _overrides(cls, PreFilterPlugin, "pre_filter_extensions"):
        enums.append(E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS)
    if issubclass(cls, ScoreExtensions):
        enums.append(E.EXTENSION_POINT_NORMALIZE_SCORE)
    if issubclass(cls, PreBindPlugin) and _overrides(cls, PreBindPlugin, "pre_bind_pre_flight"):
        enums.append(E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT)
    for point, (transformer, method) in TRANSFORMER_CLASSES.items():
        if issubclass(cls, transformer):
            enums.append(_TRANSFORMER_ENUM[point])
            if not _overrides(cls, POINT_CLASSES[point], method):
                enums.remove(_POINT_ENUM[point])  # it only transforms
    if issubclass(cls, Controller):
        enums.append(E.EXTENSION_POINT_CONTROLLER)
    if issubclass(cls, SignPlugin):
        if not _SIGNED_POINTS & set(points):
            raise PluginDefinitionError(f"plugin class {cls.__qualname__}: SignPlugin signs for PreFilter, Filter, "
                                        "PreScore or Score, and it implements none of them")
        enums.append(E.EXTENSION_POINT_SIGN)
    return enums


def manifest_of(cls: type) -> Any:
    """The ``PluginManifest`` of a plugin class; :class:`PluginDefinitionError` if it is not valid."""
    where = f"plugin class {cls.__module__}.{cls.__qualname__}"
    if not isinstance(cls, type) or not issubclass(cls, Plugin):
        raise PluginDefinitionError(f"{cls!r} is not a plugin class (derive from pluginhost.plugin base classes)")
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name:
        raise PluginDefinitionError(f"{where} has no name: set the class attribute `name = \"MyPlugin\"`")
    points = sorted(p for p, base in POINT_CLASSES.items() if issubclass(cls, base))
    group_points = sorted(pod_group_points_of(cls) & _GROUP_ENUM.keys())
    if not points and not group_points:
        raise PluginDefinitionError(f"{where} ({name!r}) implements no extension point")
    enums = _point_enums(cls, points, group_points)
    if issubclass(cls, QueueSortPlugin) and not _overrides(cls, QueueSortPlugin, "sort_key"):
        raise PluginDefinitionError(
            f"{where} ({name!r}): a hosted QueueSort plugin must implement sort_key() (the framework "
            "orders pods by key; calling less() over the network per comparison would be absurd)"
        )
    state_keys = getattr(cls, "state_keys", ())
    if isinstance(state_keys, str) or not all(isinstance(k, str) and k for k in state_keys):
        raise PluginDefinitionError(f"{where} ({name!r}): state_keys must be a tuple of non-empty strings")
    batch_size = getattr(cls, "batch_size", 0)
    if not isinstance(batch_size, int) or batch_size < 0:
        raise PluginDefinitionError(f"{where} ({name!r}): batch_size must be an integer >= 0 (0: framework's choice)")
    filter_and_score = bool(getattr(cls, "filter_and_score", False))
    if filter_and_score and not ("filter" in points and "score" in points):
        raise PluginDefinitionError(f"{where} ({name!r}): filter_and_score needs both Filter and Score")
    lookahead = bool(getattr(cls, "lookahead", False))
    if lookahead:
        if E.EXTENSION_POINT_FILTER not in enums and E.EXTENSION_POINT_SCORE not in enums:
            raise PluginDefinitionError(f"{where} ({name!r}): lookahead needs Filter or Score")
        if state_keys or {"preFilter", "preScore"} & set(points):
            raise PluginDefinitionError(
                f"{where} ({name!r}): lookahead answers are computed before the pod's cycle, so its Filter "
                "and Score cannot depend on CycleState (state_keys, PreFilter or PreScore)"
            )
    needs_snapshot, needs_volumes, needs_devices = _mirror_flags(cls, f"{where} ({name!r})", lookahead)
    if needs_snapshot is None:
        needs_snapshot = needs_volumes or needs_devices or bool(_SNAPSHOT_POINTS & set(points))
    elif {"filter", "score", "preScore"} & set(points) and not needs_snapshot:
        raise PluginDefinitionError(
            f"{where} ({name!r}): a Python-hosted plugin that gets node batches needs the snapshot mirror "
            "(needs_snapshot = True)"
        )
    msg = pb.plugin.PluginManifest(
        name=name,
        points=enums,
        state_keys=list(state_keys),
        preferred_batch_size=batch_size,
        filter_and_score=filter_and_score,
        needs_snapshot=bool(needs_snapshot),
        lookahead=lookahead,
        nodes_only=lookahead or bool(getattr(cls, "nodes_only", False)),
        needs_volumes=needs_volumes,
        needs_devices=needs_devices,
    )
    msg.debug_paths.extend(_class_debug_paths(cls, where))
    if issubclass(cls, EnqueueExtensions):
        enums.append(E.EXTENSION_POINT_ENQUEUE_EXTENSIONS)
        msg.points.append(E.EXTENSION_POINT_ENQUEUE_EXTENSIONS)
        for reg in _class_events(cls, where):
            msg.events.append(
                pb.types.ClusterEventWithHint(
                    event=pb.types.ClusterEvent(resource=reg.event.resource, action=action_text(reg.event.action)),
                    has_queueing_hint=reg.hint is not None,
                )
            )
    return msg


def _class_events(cls: type, where: str) -> list[ClusterEventWithHint]:
    # The manifest is built before any instance exists (args come later, per profile), so the events
    # are read from a bare instance: events_to_register() must not depend on constructor state.
    try:
        bare: Any = object.__new__(cls)
        events: list[ClusterEventWithHint] = bare.events_to_register()
    except Exception as exc:
        raise PluginDefinitionError(
            f"{where}: events_to_register() failed on a bare instance ({exc}); it is read once for the "
            "manifest, so it must not depend on constructor state"
        ) from exc
    return list(events)


def _class_debug_paths(cls: type, where: str) -> list[str]:
    # Like the events: read from a bare instance, before any configured instance exists.
    if getattr(cls, "debug_endpoints", Plugin.debug_endpoints) is Plugin.debug_endpoints:
        return []
    try:
        bare: Any = object.__new__(cls)
        paths = list(bare.debug_endpoints())
    except Exception as exc:
        raise PluginDefinitionError(
            f"{where}: debug_endpoints() failed on a bare instance ({exc}); its keys are read once for the "
            "manifest, so they must not depend on constructor state"
        ) from exc
    for path in paths:
        if not isinstance(path, str) or not path or path.startswith("/"):
            raise PluginDefinitionError(f"{where}: debug endpoint path {path!r} must be a non-empty relative path")
    return paths


def action_text(action: ActionType) -> str:
    if action == ActionType.All:
        return "All"
    if action == ActionType.Update:
        return "Update"
    return "|".join(a.name for a in ActionType if a.name and a & action and a.name not in ("All", "Update"))


def action_from_text(text: str) -> ActionType:
    """ActionType from its "|"-joined names (unknown names are ignored, as the contract says)."""
    out = ActionType(0)
    for part in text.split("|"):
        part = part.strip()
        if part in ActionType.__members__:
            out |= ActionType[part]
    return out


@dataclass(slots=True)
class Hosted:
    """A plugin class a host serves: its manifest, and its instance and args per profile."""

    cls: type[Plugin]
    manifest: Any
    instances: dict[str, Plugin] = field(default_factory=dict)  # profile -> instance
    args: dict[str, dict[str, Any]] = field(default_factory=dict)  # profile -> args

    @property
    def name(self) -> str:
        return str(self.manifest.name)
