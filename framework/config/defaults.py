"""kube-scheduler's defaulting of a profile's plugins: its default ``multiPoint`` set, merged with the
profile's own ``plugins`` as ``mergePlugins``/``mergePluginSet`` do (``pkg/scheduler/apis/config/v1``),
and the in-tree plugin names a registry may lack (:data:`UNMODELLED_PLUGINS`).
"""

from __future__ import annotations

from .decoding import Entry, PluginSet
from .model import EXTENSION_POINTS, MULTI_POINT, PluginRef

__all__ = ["DEFAULT_MULTIPOINT", "INVALID_IN_V1", "UNMODELLED_PLUGINS", "merged_plugins"]

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

#: Names kube-scheduler's v1 validation rejects outright ("was invalid in version ..."): the in-tree
#: cloud volume-limit plugins, removed from the registry.
INVALID_IN_V1: frozenset[str] = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})

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
    | INVALID_IN_V1
)


def _merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
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
    enabled: list[Entry] = []
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
    return PluginSet(enabled, disabled)


def _default_plugins() -> dict[str, PluginSet]:
    sets = {point: PluginSet() for point in EXTENSION_POINTS}
    sets[MULTI_POINT] = PluginSet([Entry(ref.name, ref.weight, None) for ref in DEFAULT_MULTIPOINT])
    return sets


def merged_plugins(custom: dict[str, PluginSet] | None) -> dict[str, PluginSet]:
    """A profile's plugin sets (None: it has no ``plugins``) merged into the defaults, every point and
    ``multiPoint`` present."""
    defaults = _default_plugins()
    if custom is None:
        return defaults
    return {point: _merge_plugin_set(defaults[point], custom[point]) for point in defaults}
