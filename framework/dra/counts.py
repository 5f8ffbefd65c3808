"""How many devices of a DeviceClass a node has, and how many of them are allocated: what kube-scheduler
1.37's NodeResourcesFit and NodeResourcesBalancedAllocation score an extended resource backed by devices
with on a node that does not advertise it (``resource_allocation.go``'s ``calculateDRAResourceTotals``).

For a resource named in the plugin's scoring resources that a DeviceClass maps (``extendedResourceName``
or ``deviceclass.resource.kubernetes.io/<class>``), on a node whose allocatable lacks it (or lists it at 0),
the node's allocatable is the number of devices of the class that serve the node and what it holds is how
many of those are allocated (to any claim, pending allocations included); the pod's request is added as
usual. A node with none of the class's devices is left out of that resource's score, as before. As
upstream counts them: every slice serving the node (whatever its pool's generation), the class's
selectors only (no taints, no admin access), and a selector that fails on a device leaves the node out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pluginhost.model import Node

from .extended import class_for, is_dra_extended_resource_name
from .models import DeviceClass, DeviceID, ResourceSlice
from .selectors import SelectorFailure, compile_selector

if TYPE_CHECKING:
    from .store import DraStore

__all__ = ["DeviceCounts"]

IntArray = npt.NDArray[np.int64]
#: Keys of what this module keeps in the store's ``derived`` (dropped whenever a slice changes).
_INDEX = "device-counts-index"
_MATCH = "device-counts-match"
_NODE = "device-counts-node"


def _serving(s: ResourceSlice, node: Node) -> Iterable[tuple[str, object]]:
    """The devices of ``s`` that serve ``node`` (by name, with the device), as upstream picks them: per
    device with per-device node selection, else the whole slice when it is for every node, for this node
    by name, or selects it."""
    # Imported here: framework.dra.pools reads node selectors through framework.plugins, whose scoring
    # plugins import this module.
    from . import pools as dra_pools

    if s.per_device_node_selection:
        for d in s.devices:
            if d.all_nodes or (d.node_name and d.node_name == node.name) or (d.node_selector is not None and (
                    dra_pools.node_matches(node, d.node_name, d.all_nodes, d.node_selector))):
                yield d.name, d
        return
    if not s.all_nodes and s.node_name != node.name and s.node_selector is not None:
        if not dra_pools.node_matches(node, s.node_name, s.all_nodes, s.node_selector):
            return
    elif not s.all_nodes and s.node_name and s.node_name != node.name:
        return
    for d in s.devices:
        yield d.name, d


class DeviceCounts:
    """The devices and their use as one cycle's PreScore found them (upstream's ``draPreScoreState``)."""

    def __init__(self, store: DraStore) -> None:
        self._store = store
        exclusive, shared = store.allocated_state()
        self._allocated = exclusive | frozenset(shared)
        derived = store.derived
        index = derived.get(_INDEX)
        if index is None:
            by_node: dict[str, list[ResourceSlice]] = {}
            unnamed: list[ResourceSlice] = []
            for s in store.slices.values():
                (by_node.setdefault(s.node_name, []) if s.node_name else unnamed).append(s)
            index = derived[_INDEX] = (by_node, unnamed)
        self._by_node: dict[str, list[ResourceSlice]] = index[0]  # type: ignore[index]
        self._unnamed: list[ResourceSlice] = index[1]  # type: ignore[index]
        self._matches: dict[object, bool | None] = derived.setdefault(_MATCH, {})  # type: ignore[assignment]

    @classmethod
    def for_resources(cls, store: object, resources: Sequence[str]) -> DeviceCounts | None:
        """The counts when one of ``resources`` (a plugin's scoring resources) is backed by a DeviceClass,
        else None (upstream's ``getDRAPreScoredParams``)."""
        from .store import DraStore

        if not isinstance(store, DraStore) or not store.classes:
            return None
        if not any(is_dra_extended_resource_name(r) and class_for(store.classes, r) is not None for r in resources):
            return None
        return cls(store)

    def totals(self, resource: str, node: Node) -> tuple[int, int]:
        """The devices of the class ``resource`` maps that serve ``node``, and how many are allocated;
        (0, 0) when no class maps it or a selector fails on one of the node's devices."""
        found = class_for(self._store.classes, resource)
        return (0, 0) if found is None else self._totals(found, node)

    def _totals(self, cls: DeviceClass, node: Node) -> tuple[int, int]:
        devices = self._devices(cls, node)
        if devices is None:
            return 0, 0
        return len(devices), sum(1 for d in devices if d in self._allocated)

    def _devices(self, cls: DeviceClass, node: Node) -> tuple[DeviceID, ...] | None:
        # Node labels decide only for slices without a node name: without any, a node's list is kept.
        key = (_NODE, cls.name, cls.selectors, node.name)
        if not self._unnamed and key in self._store.derived:
            return self._store.derived[key]  # type: ignore[return-value]
        out: list[DeviceID] = []
        for s in [*self._by_node.get(node.name, ()), *self._unnamed]:
            for name, d in _serving(s, node):
                matched = self._class_matches(cls, s, d)
                if matched is None:
                    return None
                if matched:
                    out.append((s.driver, s.pool, name))
        if not self._unnamed:
            self._store.derived[key] = tuple(out)
        return tuple(out)

    def _class_matches(self, cls: DeviceClass, s: ResourceSlice, d: object) -> bool | None:
        """Whether every selector of the class matches the device; None when one fails (upstream's
        ``deviceMatchesClass``: the device as CEL sees it has no ``allowMultipleAllocations``)."""
        for expression in cls.selectors:
            key = (expression, s.driver, id(d))
            matched = self._matches.get(key)
            if matched is None and key not in self._matches:
                selector = compile_selector(expression)
                result = selector if isinstance(selector, SelectorFailure) else selector.matches(
                    s.driver, d.attributes, d.capacity)  # type: ignore[attr-defined]
                matched = self._matches[key] = None if isinstance(result, SelectorFailure) else result
            if not matched:
                return matched
        return True

    def columns(self, resource: str, nodes: Sequence[Node], alloc: IntArray | None,
                used: IntArray | None) -> tuple[IntArray, IntArray] | None:
        """``alloc`` and ``used`` (None: the resource has no column, all 0) with each node whose allocatable
        is 0 and that has devices of the class counted by them: its devices, and those allocated. None
        when no class maps ``resource`` (the columns stand as they are)."""
        found = class_for(self._store.classes, resource) if is_dra_extended_resource_name(resource) else None
        if found is None:
            return None
        n = len(nodes)
        alloc = np.zeros(n, dtype=np.int64) if alloc is None else alloc.copy()
        used = np.zeros(n, dtype=np.int64) if used is None else used.copy()
        for k in np.flatnonzero(alloc == 0).tolist():
            capacity, allocated = self._totals(found, nodes[k])
            if capacity > 0:
                alloc[k], used[k] = capacity, allocated
        return alloc, used
