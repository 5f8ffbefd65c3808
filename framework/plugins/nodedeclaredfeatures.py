"""NodeDeclaredFeatures: keep pods off nodes that do not declare the features the pod needs.

A node lists what it supports in ``status.declaredFeatures`` (the kubelet publishes it, sorted). The
pod's needs are inferred from its spec as kube-scheduler v1.37 infers them for scheduling
(``component-helpers/nodedeclaredfeatures``, ``InferForPodScheduling`` over its feature registry):

- ``RestartAllContainersOnContainerExits``: a container or init container has a
  ``restartPolicyRules`` entry whose action is ``RestartAllContainers``;
- ``UserNamespacesHostNetworkSupport``: ``hostNetwork: true`` with ``hostUsers: false``;
- ``VolumeBindMountOptions``: a container, init container or ephemeral container mounts a volume
  with ``bindMountOptions``.

The registry's other features (in-place resize variants, websockets to the kubelet, the DRA node
operations) only matter for pod updates or are checked by other plugins, so they are never needed
here; none of them has a maximum version in v1.37. PreFilter answers Skip for a pod that needs
nothing (so Filter does not run); Filter rejects a node missing one of the needed features with
``node(s) didn't match Pod's required features`` (UnschedulableAndUnresolvable: preemption cannot add
a feature). The plugin is GA and on by default in kube-scheduler v1.37, last in its default profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    TARGET_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
)
from pluginhost.snapshot import NodeTable
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["ERR_REASON_UNSATISFIED", "NodeDeclaredFeatures", "required_features"]

ERR_REASON_UNSATISFIED = "node(s) didn't match Pod's required features"

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"

_STATE_KEY = "PreFilterNodeDeclaredFeatures"


def _entries(spec: Mapping[str, Any], key: str) -> Iterable[Mapping[str, Any]]:
    items = spec.get(key)
    if not isinstance(items, list):
        return ()
    return (item for item in items if isinstance(item, dict))


def _restarts_all_containers(spec: Mapping[str, Any]) -> bool:
    containers = (*_entries(spec, "containers"), *_entries(spec, "initContainers"))
    return any(
        rule.get("action") == "RestartAllContainers"
        for c in containers
        for rule in _entries(c, "restartPolicyRules")
    )


def _user_namespace_with_host_network(spec: Mapping[str, Any]) -> bool:
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def _bind_mount_options(spec: Mapping[str, Any]) -> bool:
    containers = (*_entries(spec, "containers"), *_entries(spec, "initContainers"),
                  *_entries(spec, "ephemeralContainers"))
    return any(bool(m.get("bindMountOptions")) for c in containers for m in _entries(c, "volumeMounts"))


def required_features(pod: Pod) -> frozenset[str]:
    """The declared features ``pod`` needs on its node, as kube-scheduler v1.37 infers them."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    if not isinstance(spec, dict):
        return frozenset()
    needed = set()
    if _restarts_all_containers(spec):
        needed.add(RESTART_ALL_CONTAINERS)
    if _user_namespace_with_host_network(spec):
        needed.add(USER_NAMESPACES_HOST_NETWORK)
    if _bind_mount_options(spec):
        needed.add(VOLUME_BIND_MOUNT_OPTIONS)
    return frozenset(needed)


@dataclass(frozen=True, slots=True)
class _State:
    required: frozenset[str]

    def clone(self) -> _State:
        return self


@dataclass(frozen=True, slots=True, eq=False)
class _FeatureSetIndex:
    """The distinct declared-feature lists of a node table: ``ids[row]`` indexes ``sets``."""

    ids: npt.NDArray[np.int32]
    sets: tuple[frozenset[str], ...]


def _feature_set_index(table: NodeTable) -> _FeatureSetIndex:
    def build(t: NodeTable) -> _FeatureSetIndex:
        seen: dict[frozenset[str], int] = {}
        ids = np.empty(len(t.nodes), dtype=np.int32)
        for i, node in enumerate(t.nodes):
            ids[i] = seen.setdefault(frozenset(node.declared_features), len(seen))
        return _FeatureSetIndex(ids, tuple(seen))

    index: _FeatureSetIndex = table.memo("nodedeclaredfeatures/feature-sets", build)
    return index


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Filters out nodes that do not declare every feature the pod needs."""

    name = "NodeDeclaredFeatures"

    #: Pods whose features were worked out last: ``id(pod.raw)`` -> (that object, its features).
    _KEPT = 1024

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._required: dict[int, tuple[Any, frozenset[str]]] = {}

    def _required_of(self, pod: Pod) -> frozenset[str]:
        """required_features(pod), read from the pod's spec once per pod object: a PodGroup cycle
        runs PreFilter for the same pod in each placement, a pod back from the queue again."""
        raw = pod.raw
        hit = self._required.get(id(raw))
        if hit is not None and hit[0] is raw:  # the object itself is kept, so its id is not reused
            return hit[1]
        required = required_features(pod)
        if len(self._required) >= self._KEPT:
            self._required.clear()
        self._required[id(raw)] = (raw, required)
        return required

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        required = self._required_of(pod)
        if not required:
            return None, Status.skip()
        state.write(_STATE_KEY, _State(required))
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        pre: _State | None = state.get(_STATE_KEY)
        if pre is None:
            # Filter enabled without its PreFilter, or PreFilter skipped it and Filter ran anyway.
            return FilterResult.from_mask(
                np.ones(len(batch), dtype=np.bool_),
                Code.Error,
                f'error reading "{_STATE_KEY}" from cycle-state: not found',
            )
        index = _feature_set_index(batch.snapshot.table)
        missing = np.fromiter((not pre.required <= s for s in index.sets), dtype=np.bool_, count=len(index.sets))
        if not missing.any():
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(
            missing[index.ids[batch.rows]], Code.UnschedulableAndUnresolvable, ERR_REASON_UNSATISFIED
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeDeclaredFeature), _after_node_change
            ),
            ClusterEventWithHint(ClusterEvent(TARGET_POD, ActionType.Update), _after_target_pod_update),
        ]


def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue for a new node, or a node whose declared features changed."""
    if isinstance(old, Node) and isinstance(new, Node) and old.declared_features == new.declared_features:
        return QueueingHint.QueueSkip
    return QueueingHint.Queue


def _after_target_pod_update(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue when the pod's update changed what it needs."""
    if not isinstance(old, Pod) or not isinstance(new, Pod):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip if required_features(old) == required_features(new) else QueueingHint.Queue
