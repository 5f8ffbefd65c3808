"""In-tree plugins and the registry: plugin name → factory ``(args, handle) -> Plugin``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pluginhost.plugin import Handle, Plugin, points_of

from .balancedallocation import NodeResourcesBalancedAllocation
from .basic import DefaultBinder, NodeName, NodeUnschedulable, PrioritySort, SchedulingGates
from .defaultpreemption import DefaultPreemption
from .dynamicresources import DynamicResources
from .gangscheduling import GangScheduling, PodGroupPodsCount, TopologyPlacementGenerator
from .imagelocality import ImageLocality
from .interpodaffinity import InterPodAffinity
from .nodeaffinity import NodeAffinity
from .nodedeclaredfeatures import NodeDeclaredFeatures
from .nodeports import NodePorts
from .noderesources import NodeResourcesFit, PluginArgsError
from .podtopologyspread import PodTopologySpread
from .reservation import Reservation
from .tainttoleration import TaintToleration
from .volumebinding import VolumeBinding
from .volumelimits import NodeVolumeLimits
from .volumerestrictions import VolumeRestrictions
from .volumezone import VolumeZone

__all__ = ["Factory", "PluginArgsError", "Registry", "in_tree_registry"]

Factory = Callable[[dict[str, Any], Handle | None], Plugin]


class Registry:
    """Known plugins: a factory and the extension points each implements, validated by profiles."""

    def __init__(self) -> None:
        self._factories: dict[str, Factory] = {}
        self._points: dict[str, frozenset[str]] = {}
        #: A canary plugin (framework.canary.CanarySource), not a name profiles may use.
        self.canary: Any = None

    def register(self, name: str, factory: Factory, points: frozenset[str]) -> None:
        if name in self._factories:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self._factories[name] = factory
        self._points[name] = points

    def replace(self, name: str, factory: Factory, points: frozenset[str]) -> None:
        """Register ``name`` anew (a remote plugin whose host now declares other points)."""
        if name not in self._factories:
            raise ValueError(f"no plugin named {name!r} is registered")
        self._factories[name] = factory
        self._points[name] = points

    def register_class(self, cls: type[Plugin]) -> None:
        self.register(cls.name, cls, points_of(cls))

    def factory(self, name: str) -> Factory:
        return self._factories[name]

    def build(self, name: str, args: dict[str, Any], handle: Handle | None, where: str = "") -> Plugin:
        """Plugin ``name`` made from its ``args``. A :class:`PluginArgsError` begins with ``where``, where
        the args were written (``ProfileConfig.args_location``: ``sched.yaml: profiles[0]
        (default-scheduler): pluginConfig[2] (NodeResourcesFit)``), in place of the plugin's own name."""
        try:
            return self._factories[name](args, handle)
        except PluginArgsError as exc:
            if not where:
                raise
            detail = str(exc).removeprefix(f"{name}: ")
            raise PluginArgsError(f"{where}: {detail}") from None

    def points(self) -> Mapping[str, frozenset[str]]:
        """Name → extension points, the shape the configuration loader validates against."""
        return dict(self._points)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def copy(self) -> Registry:
        out = Registry()
        out._factories = dict(self._factories)
        out._points = dict(self._points)
        out.canary = self.canary
        return out


def in_tree_registry() -> Registry:
    reg = Registry()
    for cls in (PrioritySort, SchedulingGates, NodeName, NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
                NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread,
                InterPodAffinity, DynamicResources, DefaultPreemption,
                NodeResourcesBalancedAllocation, ImageLocality, DefaultBinder, NodeDeclaredFeatures, Reservation,
                GangScheduling, PodGroupPodsCount, TopologyPlacementGenerator):
        reg.register_class(cls)
    return reg
