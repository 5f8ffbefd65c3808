"""Where the scheduler's decisions go: the :class:`ClusterSource` protocol. The embedded store
(:class:`~framework.scheduler.store.EmbeddedSource`) and a live cluster (``framework.kube``) implement it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pluginhost.model import Pod, PodDisruptionBudget
from pluginhost.status import Status
from pluginhost.workload import PodGroup

__all__ = ["ClusterSource"]


class ClusterSource(Protocol):
    """Where the scheduler's decisions go: binding a pod, deleting a victim, and telling the cluster
    why a pod failed, where it is nominated, that it was scheduled or preempted. The embedded store
    and a live Kubernetes API server implement it; the scheduler, the runtime and plugins call only this."""

    #: Whether the Scheduler API may create and change objects (False when a real API server owns them).
    accepts_apply: bool

    async def bind(self, pod: Pod, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name`` (what DefaultBinder asks for)."""
        ...

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        """Delete ``pod`` (a preemption victim, or a plugin's request)."""
        ...

    def already_bound(self, pod: Pod) -> bool:
        """True if ``pod`` is known to be bound already (by anyone): its failed attempt is not requeued."""
        ...

    def scheduled(self, pod: Pod, node_name: str) -> None:
        """``pod``'s binding cycle bound it to ``node_name``."""
        ...

    def failed(self, pod: Pod, status: Status) -> None:
        """An attempt for ``pod`` failed with ``status`` (its nomination, if any, is ``pod.nominated_node_name``)."""
        ...

    def nominated(self, pod: Pod, node_name: str) -> None:
        """``pod`` is nominated to ``node_name`` (``""``: its nomination is cleared)."""
        ...

    def preempted(self, victim: Pod, preemptor: Pod | PodGroup, node_name: str, in_memory: bool = False) -> None:
        """``victim`` was preempted to make room for ``preemptor`` on ``node_name`` (a PodGroup's
        preemption names the node ``cluster``): deleted, or (``in_memory``) stopped before it was
        bound, at Permit or in PreBind."""
        ...

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        """The cluster's PodDisruptionBudgets, with the status preemption reads (``disruptionsAllowed``)."""
        ...

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """The labels of a Namespace as the cluster has them ({} for one it does not have); None when
        the source has no Namespace objects (the embedded store)."""
        ...
