"""Small in-tree plugins: PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, DefaultBinder.

Since kube-scheduler v1.37, NodeName and NodeUnschedulable implement PreFilter too: NodeName narrows
the nodes to ``spec.nodeName`` when it is set (the others then get the cycle's "node(s) didn't satisfy
plugin(s) [NodeName]" status), and NodeUnschedulable's PreFilter does nothing (it only skips pods
whose resize is deferred, behind a gate that is off by default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pluginhost.model import Node, Pod, Taint
from pluginhost.plugin import (
    TARGET_POD,
    ActionType,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueingHint,
    QueueSortPlugin,
)
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["DefaultBinder", "NodeName", "NodeUnschedulable", "PrioritySort", "SchedulingGates"]

ERR_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_NODE_NAME = "node(s) didn't match the requested node name"
_UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "NoSchedule")


class PrioritySort(QueueSortPlugin):
    """Higher priority first; among equals, the pod queued earlier."""

    name = "PrioritySort"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, info: QueuedPodInfo) -> Any:
        return (-info.pod.priority, info.timestamp)


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    """Keeps a pod out of the active queue while it has ``spec.schedulingGates``."""

    name = "SchedulingGates"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    async def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        gates = " ".join(pod.scheduling_gates)
        return Status(Code.UnschedulableAndUnresolvable, (f"waiting for scheduling gates: [{gates}]",), self.name)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("UnscheduledPod", ActionType.UpdatePodSchedulingGatesEliminated))]


class NodeUnschedulable(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Rejects nodes with ``spec.unschedulable`` unless the pod tolerates the unschedulable taint."""

    name = "NodeUnschedulable"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        cordoned = batch.snapshot.table.unschedulable[batch.rows]
        if not cordoned.any() or any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(cordoned, Code.UnschedulableAndUnresolvable, ERR_UNSCHEDULABLE)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeTaint), _after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent(TARGET_POD, ActionType.UpdatePodToleration), _after_toleration_change
            ),
        ]


def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue for a new node that takes pods, or a node that stopped being unschedulable."""
    if not isinstance(new, Node):
        return QueueingHint.Queue
    was_unschedulable = old.unschedulable if isinstance(old, Node) else True
    return QueueingHint.Queue if was_unschedulable and not new.unschedulable else QueueingHint.QueueSkip


def _after_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the pod's tolerations now tolerate the unschedulable taint."""
    if not isinstance(new, Pod):
        return QueueingHint.Queue
    tolerated = any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in new.tolerations)
    return QueueingHint.Queue if tolerated else QueueingHint.QueueSkip


class NodeName(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Rejects every node but the one named in ``spec.nodeName`` (when set)."""

    name = "NodeName"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_name:
            return None, SUCCESS
        return PreFilterResult(frozenset((pod.node_name,))), SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        if not pod.node_name:
            return FilterResult.passing(len(batch))
        wanted = batch.snapshot.row(pod.node_name)
        reject = batch.rows != (-1 if wanted is None else wanted)
        return FilterResult.from_mask(np.asarray(reject), Code.UnschedulableAndUnresolvable, ERR_NODE_NAME)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.Add))]


class DefaultBinder(BindPlugin):
    """Binds the pod to the node through the framework's API (sets ``spec.nodeName``)."""

    name = "DefaultBinder"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if self._handle is None:
            return Status.failure("DefaultBinder has no framework handle to bind with", plugin=self.name)
        return await self._handle.bind_pod(pod, node_name)
