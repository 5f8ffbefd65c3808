"""kube-scheduler's defaulting of a profile's plugins: its default ``multiPoint`` set (with what the
installed feature gates add, :func:`default_multipoint`), merged with the profile's own ``plugins`` as
``mergePlugins``/``mergePluginSet`` do (``pkg/scheduler/apis/config/v1``), and the in-tree plugin names
a registry may lack (:data:`UNMODELLED_PLUGINS`).
"""

from __future__ import annotations

from framework import features

from .decoding import Entry, PluginSet
from .model import MULTI_POINT, PLUGIN_SETS, PluginRef

__all__ = [
    "DEFAULT_MULTIPOINT",
    "INVALID_IN_V1",
    "POD_GROUP_IMPLEMENTERS",
    "UNMODELLED_PLUGINS",
    "default_multipoint",
    "merged_plugins",
]

#: kube-scheduler v1.37's default ``multiPoint`` set (``getDefaultPlugins``) under its default feature
#: gates, in order, with weights (0 = unset). NodeName comes before NodeUnschedulable since v1.37.
#: ``applyFeatureGates`` adds, for the gates on by default: NodeDeclaredFeatures at the end (GA and
#: locked on in v1.37), and DynamicResources with weight 2 right before DefaultPreemption (locked on
#: since v1.35). A registry without one of those drops it with a warning.
DEFAULT_MULTIPOINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeName"),
    PluginRef("NodeUnschedulable"),
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
    PluginRef("NodeDeclaredFeatures"),
)

#: The in-tree plugins of kube-scheduler v1.37 that implement each pod-group point
#: (:data:`~framework.config.model.POD_GROUP_POINTS`): Fit's ``ScorePlacement``, the pod-group
#: PostFilter of DefaultPreemption and DynamicResources, and the topology-aware placement plugins.
#: A plugin set may name these there (kube-scheduler loads such a file); any other name is refused as
#: kube-scheduler refuses a plugin that does not implement the point. A remote plugin whose manifest
#: declares placementGenerate or placementScore implements that point too (its registry points say so).
POD_GROUP_IMPLEMENTERS: dict[str, frozenset[str]] = {
    "placementGenerate": frozenset({"TopologyPlacementGenerator"}),
    "placementScore": frozenset({"NodeResourcesFit", "PodGroupPodsCount"}),
    "podGroupPostFilter": frozenset({"DefaultPreemption", "DynamicResources"}),
}

#: Names kube-scheduler's v1 validation rejects outright ("was invalid in version ..."): the in-tree
#: cloud volume-limit plugins, removed from the registry.
INVALID_IN_V1: frozenset[str] = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})

#: In-tree kube-scheduler plugin names that a registry may lack. Where one is enabled (by the
#: defaults or by the user) or configured and the registry does not have it, it is dropped with one
#: warning instead of failing the load. A name the caller lists in ``known`` is never treated as
#: unmodelled: the in-tree registry models the volume plugins (framework/plugins/volume*.py),
#: DynamicResources, NodeDeclaredFeatures and the workload-aware plugins (GangScheduling,
#: TopologyPlacementGenerator, PodGroupPodsCount: framework/plugins/gangscheduling.py), so only
#: registries built without them (a test's, say) drop them. DeferredPodScheduling (a gated feature off
#: by default) is not modelled at all. The four
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
        "DeferredPodScheduling",
        "TopologyPlacementGenerator",
        "PodGroupPodsCount",
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


def default_multipoint() -> tuple[PluginRef, ...]:
    """The default ``multiPoint`` set under the installed feature gates (:func:`framework.features.enabled`):
    :data:`DEFAULT_MULTIPOINT` changed as ``applyFeatureGates`` changes it, in its order. The gates
    that add plugins off by default (InPlacePodVerticalScalingSchedulerPreemption: DeferredPodScheduling
    before NodeResourcesFit; GenericWorkload: GangScheduling; TopologyAwareWorkloadScheduling: its two
    placement plugins) add plugins a registry may lack, which are then dropped with a warning (the
    in-tree registry has all but DeferredPodScheduling)."""
    base = [ref for ref in DEFAULT_MULTIPOINT if ref.name != "NodeDeclaredFeatures"]
    out: list[PluginRef] = []
    for ref in base:
        if ref.name == "NodeResourcesFit" and features.enabled("InPlacePodVerticalScalingSchedulerPreemption"):
            out.append(PluginRef("DeferredPodScheduling"))
        out.append(ref)
    if features.enabled("NodeDeclaredFeatures"):
        out.append(PluginRef("NodeDeclaredFeatures"))
    if features.enabled("GenericWorkload"):
        out.append(PluginRef("GangScheduling"))
    if features.enabled("TopologyAwareWorkloadScheduling"):
        out += [PluginRef("TopologyPlacementGenerator"), PluginRef("PodGroupPodsCount", 1)]
    return tuple(out)


def _default_plugins() -> dict[str, PluginSet]:
    sets = {point: PluginSet() for point in PLUGIN_SETS}
    sets[MULTI_POINT] = PluginSet([Entry(ref.name, ref.weight, None) for ref in default_multipoint()])
    return sets


def merged_plugins(custom: dict[str, PluginSet] | None) -> dict[str, PluginSet]:
    """A profile's plugin sets (None: it has no ``plugins``) merged into the defaults, every point and
    ``multiPoint`` present."""
    defaults = _default_plugins()
    if custom is None:
        return defaults
    return {point: _merge_plugin_set(defaults[point], custom[point]) for point in defaults}
