"""The framework handle plugins get (kube-scheduler's ``framework.Handle``): the cycle's snapshot,
waiting pods, binding and deleting pods through the cluster source, reservations, PDBs."""

from __future__ import annotations

from collections.abc import Mapping

from pluginhost.model import Pod, PodDisruptionBudget
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status
from pluginhost.workload import PodGroup

from ..podgroups.store import PodGroupStore
from ..reservations import Reservations
from ..runtime import Framework
from ..waiting import PodInPreBind, WaitingPodHandle
from .base import SchedulerBase
from .records import EV_PREEMPTED

__all__ = ["SchedulerHandle"]


class SchedulerHandle:
    """The framework handle given to plugins (kube-scheduler's ``framework.Handle``)."""

    def __init__(self, scheduler: SchedulerBase) -> None:
        self._s = scheduler

    def snapshot(self) -> Snapshot:
        return self._s.current_snapshot or self._s.cache.snapshot()

    def waiting_pods(self) -> list[WaitingPodHandle]:
        return list(self._s.waiting_pods)

    def waiting_pod(self, uid: str) -> WaitingPodHandle | None:
        return self._s.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        wp = self._s.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    def pod_in_pre_bind(self, uid: str) -> PodInPreBind | None:
        """The pod's entry among those running PreBind (kube-scheduler's GetPodInPreBind), if it is."""
        return self._s.waiting_pods.in_pre_bind.get(uid)

    async def bind_pod(self, pod: Pod, node_name: str) -> Status:
        return await self._s.source.bind(pod, node_name)

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        return await self._s.source.delete_pod(pod, reason)

    def reservations(self) -> Reservations:
        return self._s.reservations

    def framework_for(self, pod: Pod) -> Framework | None:
        return self._s.profiles.get(pod.scheduler_name)

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        return self._s.source.pod_disruption_budgets()

    def pod_group_manager(self) -> PodGroupStore:
        """The PodGroups and their pods' state (kube-scheduler's ``Handle.PodGroupManager``)."""
        return self._s.cache.podgroups

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """A Namespace's labels from the cluster source (None: it has no Namespace objects)."""
        return self._s.source.namespace_labels_of(namespace)

    def preempted(self, victim: Pod, preemptor: Pod | PodGroup, node_name: str, in_memory: bool = False) -> None:
        """Tell that ``victim`` was preempted for ``preemptor`` (a pod, or a PodGroup on node ``cluster``):
        deleted, or, ``in_memory``, stopped at Permit or in PreBind before it was bound."""
        who = preemptor.key if isinstance(preemptor, Pod) else f"podgroup {preemptor.key}"
        reason = Status(Code.Unschedulable, (f"preempted by {who} on node {node_name}",))
        self._s._emit(EV_PREEMPTED, "Pod", victim, node=node_name, status=reason)
        self._s.source.preempted(victim, preemptor, node_name, in_memory)
