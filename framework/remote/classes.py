"""One adapter class per set of declared points: a :class:`~framework.remote.adapter.RemotePlugin`
subclass that is an instance of the base class of every point a plugin's manifest declares (the runtime
checks ``isinstance`` per point), and of no other; and of the hooks (:mod:`framework.hooks`) its
manifest allows: :class:`~framework.hooks.FilterAhead` for a Filter plugin,
:class:`~framework.hooks.BeforeCycle` for a plugin that declared lookahead.
"""

from __future__ import annotations

from typing import Any

from pluginhost import pb
from pluginhost.plugin import (
    CONFIGURED_POINTS,
    POINT_CLASSES,
    POINTS,
    EnqueueExtensions,
    Point,
    ScoreExtensions,
    point_named,
)

from ..hooks import BeforeCycle, FilterAhead
from .adapter import RemotePlugin
from .groupfilter import RemotePodGroupPostFilter
from .placement import RemotePlacementGenerate, RemotePlacementScore, RemotePlacementScoreExtensions
from .sign import RemoteSign

__all__ = ["adapter_class"]

E = pb.plugin



def _enum(p: Point) -> int:
    return int(E.ExtensionPoint.Value(p.enum))


# From the points table: enum value -> the configured point it is enabled at (a transformer is
# enabled with its plugin at the point it transforms for); a transformer's enum value -> (its point,
# the point's enum value, its base class).
_ENUM_POINT: dict[int, str] = {_enum(p): p.name for p in CONFIGURED_POINTS} | {
    _enum(p): p.of for p in POINTS if p.kind == "transformer"
}
_TRANSFORMER_ENUMS: dict[int, tuple[str, int, type]] = {
    _enum(p): (p.of, _enum(point_named(p.of)), p.base) for p in POINTS if p.kind == "transformer"
}


# The PodGroup points a host serves: enum value -> (the configured point, the adapter's mixin).
_GROUP_ENUMS: dict[int, tuple[str, type]] = {
    E.EXTENSION_POINT_PLACEMENT_GENERATE: ("placementGenerate", RemotePlacementGenerate),
    E.EXTENSION_POINT_PLACEMENT_SCORE: ("placementScore", RemotePlacementScore),
    E.EXTENSION_POINT_POD_GROUP_POST_FILTER: ("podGroupPostFilter", RemotePodGroupPostFilter),
}

_ADAPTER_CLASSES: dict[tuple[str, frozenset[int]], type[RemotePlugin]] = {}


def adapter_class(manifest: Any) -> type[RemotePlugin]:
    """A RemotePlugin subclass that is an instance of every point's base class in ``manifest`` (the
    runtime checks ``isinstance`` per point and for NormalizeScore and events), and of no other."""
    enums = frozenset(int(p) for p in manifest.points)
    points = frozenset(_ENUM_POINT[p] for p in enums if p in _ENUM_POINT)
    points |= frozenset(_GROUP_ENUMS[p][0] for p in enums if p in _GROUP_ENUMS)
    cache_key = (manifest.SerializeToString().hex(), enums)
    cls = _ADAPTER_CLASSES.get(cache_key)
    if cls is not None:
        return cls
    transformers = {_TRANSFORMER_ENUMS[e][0]: _TRANSFORMER_ENUMS[e] for e in enums if e in _TRANSFORMER_ENUMS}
    # A transformer's class derives from its point's class: it takes that class's place in the bases.
    bases: list[type] = [RemotePlugin]
    pod_points = sorted(points & POINT_CLASSES.keys())
    bases += [transformers[p][2] if p in transformers else POINT_CLASSES[p] for p in pod_points]
    bases += [mixin for e, (_, mixin) in sorted(_GROUP_ENUMS.items()) if e in enums]
    if E.EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE in enums and E.EXTENSION_POINT_PLACEMENT_SCORE in enums:
        bases.append(RemotePlacementScoreExtensions)
    transform_only = frozenset(p for p, (_, plain, _) in transformers.items() if plain not in enums)
    if E.EXTENSION_POINT_SIGN in enums and {"preFilter", "filter", "preScore", "score"} & points:
        bases.append(RemoteSign)  # its profiles may batch (framework.batching.pod_signer)
    if E.EXTENSION_POINT_NORMALIZE_SCORE in enums and "score" in points:
        bases.append(ScoreExtensions)
    if E.EXTENSION_POINT_ENQUEUE_EXTENSIONS in enums or len(manifest.events):
        bases.append(EnqueueExtensions)
    if E.EXTENSION_POINT_FILTER in enums:  # a window can be sent to its host ahead of its turn
        plain = POINT_CLASSES["filter"]
        bases = [FilterAhead if b is plain else b for b in bases] if plain in bases else [*bases, FilterAhead]
    # Answers asked for ahead of the pods' cycles, for plugins that declared lookahead and whose
    # Filter/Score read nothing of the cycle (the host checked that they read no CycleState).
    pure = not manifest.state_keys and not {"preFilter", "preScore"} & points
    if manifest.lookahead and pure and {"filter", "score"} & points:
        bases.append(BeforeCycle)
    cls = type(
        f"Remote{manifest.name}", tuple(bases),
        {"manifest": manifest, "points": points, "transform_only": transform_only},
    )
    _ADAPTER_CLASSES[cache_key] = cls
    return cls

