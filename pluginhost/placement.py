"""The plugin interfaces of the PodGroup scheduling cycle (kube-scheduler 1.37's
``k8s.io/kube-scheduler/framework`` v0.37 and its internal ``PlacementFeasible``), one base class per
point, as :mod:`pluginhost.plugin` has for a pod's points.

A PodGroup cycle (the GenericWorkload gate) schedules the unscheduled pods of one group in one
snapshot. With TopologyAwareWorkloadScheduling it first asks the **PlacementGenerate** plugin (at most
one) for candidate :class:`Placement` s (sets of nodes), tries the group in each, and, when several
work, ranks them with the **PlacementScore** plugins (:meth:`PlacementScorePlugin.score_placement`,
then :meth:`PlacementScoreExtensions.normalize_placement_score`, then each plugin's weight). Inside a
placement, after each pod, **PlacementFeasible** (GangScheduling only) says whether the group can still
be placed (:class:`PlacementProgress`). If the group cannot be placed, the **PodGroupPostFilter**
plugins (preemption for a group) run with a function that re-runs the group's scheduling.

Cycle state: every method gets a :class:`~pluginhost.plugin.CycleState`. For a group cycle it is the
group cycle's state (``PodGroupCycleState``); for ``score_placement`` and ``placement_feasible`` the
state of the placement being tried (``PlacementCycleState``), whose parent group state the runtime
keeps; a proposed pod's own state is :attr:`ProposedAssignment.state`.

What the plugins read of a group: :class:`PodGroupInfo` (the PodGroup and its unscheduled pods in the
queue's order) and, through the framework handle's :meth:`PodGroupManager.state`, the
:class:`PodGroupState` of the group's pods in the cache (all, assumed, assigned).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Plugin, Point
from pluginhost.status import Status
from pluginhost.view import NodeView
from pluginhost.workload import PodGroup

__all__ = [
    "POD_GROUP_POINT_CLASSES",
    "POD_GROUP_POINT_ROWS",
    "Placement",
    "PlacementFeasiblePlugin",
    "PlacementGeneratePlugin",
    "PlacementProgress",
    "PlacementScore",
    "PlacementScoreExtensions",
    "PlacementScorePlugin",
    "PodGroupAssignments",
    "PodGroupInfo",
    "PodGroupManager",
    "PodGroupPostFilterPlugin",
    "PodGroupPostFilterResult",
    "PodGroupSchedulingFunc",
    "PodGroupState",
    "ProposedAssignment",
    "pod_group_points_of",
]


@dataclass(frozen=True, slots=True)
class PlacementProgress:
    """How far a placement attempt has come: pods of the group not tried yet (``remaining``) and pods
    of the group scheduled, already bound or assumed before the cycle plus those placed so far in this
    placement (``scheduled``)."""

    remaining: int
    scheduled: int


@dataclass(frozen=True, slots=True)
class Placement:
    """A candidate set of nodes for a group (``framework.Placement``): ``name`` (TopologyPlacementGenerator
    names it after the topology value; "" for the implicit placement of all nodes) and the names of its
    ``nodes``."""

    name: str
    nodes: tuple[str, ...]


@dataclass(slots=True)
class ProposedAssignment:
    """A pod of the group placed on ``node_name`` in a placement attempt, with the cycle state its
    Filter and Score ran with."""

    pod: Pod
    node_name: str
    state: CycleState | None = None


@dataclass(slots=True)
class PodGroupAssignments:
    """A placement and the pods proposed on its nodes (``framework.PodGroupAssignments``)."""

    placement: Placement
    proposed: list[ProposedAssignment] = field(default_factory=list)


@dataclass(slots=True)
class PlacementScore:
    """One placement's score from one plugin (``framework.PlacementScore``); normalization rewrites ``score``."""

    placement: Placement
    score: int


@dataclass(slots=True)
class PodGroupInfo:
    """A group being scheduled (``framework.PodGroupInfo``): the PodGroup and its unscheduled pods in
    the queue's order (priority, attempts, timestamp, name)."""

    pod_group: PodGroup
    unscheduled_pods: list[Pod] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.pod_group.name

    @property
    def namespace(self) -> str:
        return self.pod_group.namespace

    @property
    def key(self) -> str:
        """``podgroup/<namespace>/<name>``, the entity key of the queue (``framework.PodGroupKey``)."""
        return f"podgroup/{self.pod_group.namespace}/{self.pod_group.name}"


class PodGroupState(Protocol):
    """The pods of one group as the scheduler's cache knows them (``framework.PodGroupState``): every
    pod naming the group, by uid; the unscheduled ones; the assumed (reserved, not yet bound) and the
    assigned (bound) ones."""

    def all_pods(self) -> frozenset[str]: ...

    def all_pods_count(self) -> int: ...

    def unscheduled_pods(self) -> Mapping[str, Pod]: ...  # by uid

    def assumed_pods(self) -> frozenset[str]: ...

    def assigned_pods(self) -> frozenset[str]: ...

    def scheduled_pods(self) -> list[Pod]: ...  # assumed and assigned

    def scheduled_pods_count(self) -> int: ...


class PodGroupManager(Protocol):
    """The PodGroups and their pods' state (``framework.PodGroupManager``), which the framework handle
    gives plugins as ``handle.pod_group_manager()``."""

    def get(self, namespace: str, name: str) -> PodGroup | None: ...

    def state(self, namespace: str, name: str) -> PodGroupState: ...


class PlacementFeasiblePlugin(Plugin):
    """Whether a placement attempt can still end with the group placed (kube-scheduler's internal
    ``PlacementFeasiblePlugin``; GangScheduling). Success: placed enough; Wait: not yet, keep going;
    Unschedulable: cannot be any more."""

    async def placement_feasible(self, state: CycleState, group: PodGroupInfo,
                                 progress: PlacementProgress) -> Status:
        raise NotImplementedError


class PlacementGeneratePlugin(Plugin):
    """Splits ``parent`` (the placement of all nodes) into candidate placements (``GeneratePlacements``)."""

    async def generate_placements(self, state: CycleState, group: PodGroupInfo,
                                  parent: Placement) -> tuple[list[Placement], Status]:
        raise NotImplementedError


class PlacementScoreExtensions:
    """Mixin for PlacementScore plugins that normalize their scores to [0, 100]."""

    async def normalize_placement_score(self, state: CycleState, group: PodGroupInfo,
                                        scores: list[PlacementScore]) -> Status:
        """Rewrite each ``scores[i].score`` in place."""
        raise NotImplementedError


class PlacementScorePlugin(Plugin):
    """Scores a placement that can hold the group (``ScorePlacement``); the higher the better."""

    async def score_placement(self, state: CycleState, group: PodGroupInfo,
                              assignments: PodGroupAssignments) -> tuple[int, Status]:
        raise NotImplementedError

    def placement_score_extensions(self) -> PlacementScoreExtensions | None:
        """The normalization, or None when the raw scores are already in [0, 100]."""
        return self if isinstance(self, PlacementScoreExtensions) else None


@dataclass(slots=True)
class PodGroupPostFilterResult:
    """What a PodGroupPostFilter plugin made possible: the node each pod (``namespace/name``) is
    nominated to, and, from a plugin served remotely, the pods the framework is to evict for it (an
    in-process plugin evicts its own through the handle)."""

    nominated: dict[str, str] = field(default_factory=dict)
    victims: list[Pod] = field(default_factory=list)


class PodGroupSchedulingFunc(Protocol):
    """Re-runs the group's scheduling (placements too) in the cycle's snapshot as ``view`` shows it
    (a preemption's victims in ``removed_pods``; None: the snapshot as it is), with nothing kept: the
    assignments found, each pod with the node proposed ("" for none) and its cycle state, and the
    group's status (kube-scheduler's ``PodGroupSchedulingFunc`` over the mutated snapshot)."""

    def __call__(self, view: NodeView | None = None) -> Awaitable[tuple[PodGroupAssignments | None, Status]]: ...


class PodGroupPostFilterPlugin(Plugin):
    """Runs when a group could not be placed (preemption for groups): Success with the pods'
    nominations, or a rejection saying why not."""

    async def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo,
                                    schedule: PodGroupSchedulingFunc) -> tuple[PodGroupPostFilterResult | None, Status]:
        raise NotImplementedError


#: Configured pod-group point name -> the base class of its plugins.
POD_GROUP_POINT_CLASSES: Mapping[str, type] = {
    "placementGenerate": PlacementGeneratePlugin,
    "placementScore": PlacementScorePlugin,
    "podGroupPostFilter": PodGroupPostFilterPlugin,
}


#: The PodGroup points a plugin host can serve, as rows of the points table
#: (:data:`pluginhost.plugin.POINTS`): each with its value of the contract's ExtensionPoint enum.
#: PodGroupPostFilter's re-scheduling callback is a bidirectional stream (Plugin.PodGroupPostFilter).
POD_GROUP_POINT_ROWS: tuple[Point, ...] = (
    Point("placementGenerate", PlacementGeneratePlugin, "generate_placements",
          "EXTENSION_POINT_PLACEMENT_GENERATE", None, "podGroup"),
    Point("placementScore", PlacementScorePlugin, "score_placement", "EXTENSION_POINT_PLACEMENT_SCORE", None,
          "podGroup"),
    Point("normalizePlacementScore", PlacementScoreExtensions, "normalize_placement_score",
          "EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE", None, "part", "placementScore"),
    Point("podGroupPostFilter", PodGroupPostFilterPlugin, "pod_group_post_filter",
          "EXTENSION_POINT_POD_GROUP_POST_FILTER", None, "podGroup"),
)


def pod_group_points_of(plugin: object | type) -> frozenset[str]:
    """The configured pod-group points (``placementGenerate``, ``placementScore``, ``podGroupPostFilter``)
    a plugin (or plugin class) implements."""
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return frozenset(point for point, base in POD_GROUP_POINT_CLASSES.items() if issubclass(cls, base))

