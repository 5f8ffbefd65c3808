"""kube-scheduler 1.37's workload-aware plugins (behind the GenericWorkload and
TopologyAwareWorkloadScheduling gates): GangScheduling, PodGroupPodsCount and
TopologyPlacementGenerator, keyed on a pod's ``spec.schedulingGroup.podGroupName`` and the
``scheduling.k8s.io/v1beta1`` PodGroup it names (:mod:`pluginhost.workload`).

- **GangScheduling** (``gangscheduling.go``): PreEnqueue keeps a pod out of the queue until its PodGroup
  exists and, for a gang, until at least ``minCount`` of its pods are known; Permit holds a gang's pod
  (Wait, a fixed 5 minutes) until ``minCount`` of its pods are scheduled (assumed or bound), activating
  the group's unscheduled pods, and then allows every waiting one; PlacementFeasible tells the PodGroup
  cycle whether a placement attempt can still reach ``minCount``.
- **PodGroupPodsCount** (``podgrouppodscount``): scores a placement by the group's pods it would have
  scheduled (already scheduled plus proposed), normalized to ``score * 100 / max``.
- **TopologyPlacementGenerator** (``topologyaware``): one placement per value of the group's first
  topology key among the parent placement's nodes (only the domain of the group's scheduled pods, once
  some are). kube-scheduler's order is a Go map's (random); here it is the order of the nodes, and
  ties between placements are broken at random by the cycle.

Not modelled: CompositePodGroup hierarchies (the CompositePodGroup gate, off by default).
"""

from __future__ import annotations

from typing import Any

from pluginhost.model import Node, Pod
from pluginhost.placement import (
    Placement,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementProgress,
    PlacementScore,
    PlacementScoreExtensions,
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
)
from pluginhost.plugin import (
    ASSIGNED_POD,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    Handle,
    PermitPlugin,
    PreEnqueuePlugin,
    QueueingHint,
    check_args,
)
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.workload import PodGroup

from ..podgroups.store import POD_GROUP_RESOURCE, PodGroupStore

__all__ = [
    "ERR_NO_PLACEMENT_PODS",
    "ERR_WAIT_FOR_MIN_COUNT",
    "ERR_WAIT_FOR_MIN_COUNT_SCHEDULED",
    "PERMIT_TIMEOUT_SECONDS",
    "GangScheduling",
    "PodGroupPodsCount",
    "TopologyPlacementGenerator",
]

#: GangScheduling's Permit timeout: fixed, 5 minutes (``permitTimeoutDuration``).
PERMIT_TIMEOUT_SECONDS = 300.0
ERR_WAIT_FOR_MIN_COUNT = "waiting for minCount pods from a gang to appear in scheduling queue"
ERR_WAIT_FOR_MIN_COUNT_SCHEDULED = "waiting for minCount pods from a gang to be scheduled"
ERR_NO_PLACEMENT_PODS = "no pods from pod group are assigned to any of the candidate placements"
# framework.scheduler.base.PODS_TO_ACTIVATE_KEY: pods (namespace/name) moved to activeQ at the end of the cycle.
_PODS_TO_ACTIVATE = "kubernetes.io/pods-to-activate"


def _manager(handle: Handle | None) -> PodGroupStore:
    manager = getattr(handle, "pod_group_manager", None)
    if manager is None:
        # A handle without PodGroups (a test's, a plugin host's): an empty store, no group ever exists.
        return PodGroupStore()
    store: PodGroupStore = manager()
    return store


def _group_key(pod: Pod) -> str | None:
    return None if pod.scheduling_group is None else f"{pod.namespace}/{pod.scheduling_group}"


def _after_pod_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    # A pod of the same group (pending or bound) may be the one that completes the gang. The group
    # of a pod cannot change, so pod updates are not registered.
    key = _group_key(pod)
    return QueueingHint.Queue if key is not None and isinstance(new, Pod) and _group_key(new) == key \
        else QueueingHint.QueueSkip


def _after_group_added(pod: Pod, old: Any, new: Any) -> QueueingHint:
    key = _group_key(pod)
    return QueueingHint.Queue if key is not None and isinstance(new, PodGroup) and new.key == key \
        else QueueingHint.QueueSkip


def _after_group_updated(pod: Pod, old: Any, new: Any) -> QueueingHint:
    # Only a gang whose minCount decreased may let its waiting pods in.
    key = _group_key(pod)
    if key is None or not isinstance(new, PodGroup) or not isinstance(old, PodGroup) or new.key != key:
        return QueueingHint.QueueSkip
    if not (old.is_gang and new.is_gang) or new.min_count >= old.min_count:
        return QueueingHint.QueueSkip
    return QueueingHint.Queue


class GangScheduling(PreEnqueuePlugin, PermitPlugin, PlacementFeasiblePlugin, EnqueueExtensions):
    """All of a gang's ``minCount`` pods, or none (see the module docstring)."""

    name = "GangScheduling"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        check_args(args, self.name)
        self.handle = handle
        self.groups = _manager(handle)

    async def pre_enqueue(self, pod: Pod) -> Status:
        if pod.scheduling_group is None:
            return SUCCESS
        group = self.groups.get(pod.namespace, pod.scheduling_group)
        if group is None:
            # kube-scheduler's wording, "pods's" included.
            return Status(Code.UnschedulableAndUnresolvable,
                          (f'waiting for pods\'s pod group "{pod.scheduling_group}" to appear in scheduling queue',),
                          self.name)
        if not group.is_gang:
            return SUCCESS
        if self.groups.state(group.namespace, group.name).all_pods_count() < group.min_count:
            return Status(Code.UnschedulableAndUnresolvable, (ERR_WAIT_FOR_MIN_COUNT,), self.name)
        return SUCCESS

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        if pod.scheduling_group is None:
            return SUCCESS, 0.0
        group = self.groups.get(pod.namespace, pod.scheduling_group)
        if group is None:
            return Status.failure(f"failed to get podGroup {pod.namespace}/{pod.scheduling_group}: "
                                  f'podgroup.scheduling.k8s.io "{pod.scheduling_group}" not found',
                                  plugin=self.name), 0.0
        if not group.is_gang:
            return SUCCESS, 0.0
        group_state = self.groups.state(group.namespace, group.name)
        if group_state.scheduled_pods_count() < group.min_count:
            # The group's other pods may have been waiting for this one: they are tried again now.
            waiting = [f"{p.namespace}/{p.name}" for p in group_state.unscheduled_pods().values() if p.uid != pod.uid]
            if waiting:
                earlier = state.get(_PODS_TO_ACTIVATE)
                state.write(_PODS_TO_ACTIVATE, [*(earlier if isinstance(earlier, list) else []), *waiting])
            return Status(Code.Wait, (ERR_WAIT_FOR_MIN_COUNT_SCHEDULED,), self.name), PERMIT_TIMEOUT_SECONDS
        if self.handle is not None:
            for uid in group_state.assumed_pods():
                waiting_pod = self.handle.waiting_pod(uid)
                if waiting_pod is not None:
                    waiting_pod.allow(self.name)
        return SUCCESS, 0.0

    async def placement_feasible(self, state: CycleState, group: PodGroupInfo,
                                 progress: PlacementProgress) -> Status:
        min_count = group.pod_group.min_count
        remaining, scheduled = progress.remaining, progress.scheduled
        if remaining + scheduled < min_count:
            return Status(Code.Unschedulable, (f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, "
                                               f"{remaining} remaining",), self.name)
        if scheduled < min_count:
            return Status(Code.Wait, (f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, "
                                      f"{remaining} remaining",), self.name)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(UNSCHEDULED_POD, ActionType.Add), _after_pod_added),
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.Add), _after_pod_added),
            ClusterEventWithHint(ClusterEvent(POD_GROUP_RESOURCE, ActionType.Add), _after_group_added),
            ClusterEventWithHint(ClusterEvent(POD_GROUP_RESOURCE, ActionType.Update), _after_group_updated),
        ]


class PodGroupPodsCount(PlacementScorePlugin, PlacementScoreExtensions):
    """Prefers the placement that schedules the most of the group's pods (see the module docstring)."""

    name = "PodGroupPodsCount"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        check_args(args, self.name)
        self.groups = _manager(handle)

    async def score_placement(self, state: CycleState, group: PodGroupInfo,
                              assignments: PodGroupAssignments) -> tuple[int, Status]:
        scheduled = self.groups.state(group.namespace, group.name).scheduled_pods_count()
        return scheduled + len(assignments.proposed), SUCCESS

    async def normalize_placement_score(self, state: CycleState, group: PodGroupInfo,
                                        scores: list[PlacementScore]) -> Status:
        highest = max((s.score for s in scores), default=0)
        if highest == 0:
            return Status.failure(ERR_NO_PLACEMENT_PODS, plugin=self.name)
        for s in scores:
            s.score = MIN_NODE_SCORE + s.score * (MAX_NODE_SCORE - MIN_NODE_SCORE) // highest
        return SUCCESS


class TopologyPlacementGenerator(PlacementGeneratePlugin):
    """One placement per topology domain of the group's first topology key (see the module docstring)."""

    name = "TopologyPlacementGenerator"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        check_args(args, self.name)
        self.handle = handle
        self.groups = _manager(handle)

    def _labels(self, node_name: str) -> dict[str, str] | None:
        if self.handle is None:
            return None
        snapshot = self.handle.snapshot()
        row = snapshot.row(node_name)
        return None if row is None else snapshot.nodes[row].labels

    def _scheduled_domain(self, group: PodGroupInfo, key: str) -> tuple[str | None, Status]:
        """The one domain of the group's scheduled pods (None when none is scheduled)."""
        domain: str | None = None
        for pod in self.groups.state(group.namespace, group.name).scheduled_pods():
            labels = self._labels(pod.node_name)
            if labels is None:
                return None, Status.failure("cannot determine domain for already scheduled pods: getting node for "
                                            f'pod {pod.key}: node "{pod.node_name}" not found', plugin=self.name)
            value = labels.get(key)
            if value is None:
                return None, Status.failure("cannot determine domain for already scheduled pods: no topology domain "
                                            f"found for pod {pod.key}", plugin=self.name)
            if domain is not None and domain != value:
                return None, Status.failure("cannot determine domain for already scheduled pods: more than 1 domain "
                                            f"found for pod group: {domain}, {value}", plugin=self.name)
            domain = value
        return domain, SUCCESS

    async def generate_placements(self, state: CycleState, group: PodGroupInfo,
                                  parent: Placement) -> tuple[list[Placement], Status]:
        if not group.pod_group.topology_keys:
            return [parent], SUCCESS
        key = group.pod_group.topology_keys[0]
        required, status = self._scheduled_domain(group, key)
        if not status.ok:
            return [], status
        snapshot = self.handle.snapshot() if self.handle is not None else None
        if snapshot is not None and parent.nodes == snapshot.names:
            # Every node of the snapshot (the usual parent): its domains are the same in every cycle
            # until the nodes change, so they are worked out once per node table.
            every: dict[str, tuple[str, ...]] = snapshot.table.memo(f"placements/domains/{key}",
                                                                    lambda t: _domains(t.nodes, key))
            found = every if required is None else {v: n for v, n in every.items() if v == required}
            return [Placement(value, nodes) for value, nodes in found.items()], SUCCESS
        domains: dict[str, list[str]] = {}
        for name in parent.nodes:
            labels = self._labels(name)
            value = None if labels is None else labels.get(key)
            if value is not None and (required is None or value == required):
                domains.setdefault(value, []).append(name)
        return [Placement(value, tuple(nodes)) for value, nodes in domains.items()], SUCCESS


def _domains(nodes: tuple[Node, ...], key: str) -> dict[str, tuple[str, ...]]:
    """Each value of label ``key`` with its nodes' names, in the nodes' order (first seen first)."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        value = node.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(node.name)
    return {value: tuple(names) for value, names in out.items()}
