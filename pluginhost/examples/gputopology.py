"""GpuTopology: score nodes by how many free devices of a pod's device classes share one topology
attribute value, so a pod's GPUs tend to land under one NUMA node or PCIe root.

    pluginConfig:
    - name: GpuTopology
      args: {attribute: gpu.example.com/numaNode}   # the default

- It declares ``needs_devices``: its host's snapshot mirror follows the framework's ResourceSlices,
  DeviceClasses and ResourceClaims (``snapshot.devices``), claims allocated by earlier pods' Reserve
  included, so a device another pod just got is not counted as free.
- **Score**: for the pod's claims that are not allocated yet, the device classes they request; on
  each node, the free devices of those classes (of the node's current slices; held by no claim) grouped
  by the attribute's value; the raw score is the size of the largest group (a device without the
  attribute is a group of its own). **NormalizeScore** scales the raw scores so the best node gets 100
  (``raw * 100 // best``; all 0 when no node has a device). A pod without claims to allocate scores 0
  everywhere.
- A class's devices are those of the drivers its CEL selectors name as ``device.driver == "<driver>"``
  (every driver when none does): the example does not evaluate CEL. DynamicResources still decides
  which devices the pod gets; this plugin only steers the node choice.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from pluginhost.model import Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    CycleState,
    Handle,
    IntArray,
    NodeBatch,
    ScoreExtensions,
    ScorePlugin,
    check_args,
)
from pluginhost.snapshot import DeviceStore
from pluginhost.status import SUCCESS, Status

__all__ = ["DEFAULT_ATTRIBUTE", "GpuTopology", "class_drivers", "requested_classes"]

DEFAULT_ATTRIBUTE = "gpu.example.com/numaNode"
_DRIVER = re.compile(r'device\.driver\s*==\s*"([^"]+)"')


def requested_classes(store: DeviceStore, pod: Pod) -> set[str]:
    """The device classes the pod's not yet allocated claims request (a ``firstAvailable`` request:
    every alternative)."""
    out: set[str] = set()
    for _, claim in store.pod_claims(pod):
        if claim is None or claim.allocation is not None:
            continue
        for r in claim.requests:
            out.update(r.classes)
    return out


def class_drivers(store: DeviceStore, classes: set[str]) -> set[str] | None:
    """The drivers the classes' selectors name (None: some class names none, so every driver counts)."""
    drivers: set[str] = set()
    for name in classes:
        cls = store.device_class(name)
        named = {m for s in (cls.selectors if cls else ()) for m in _DRIVER.findall(s)}
        if not named:
            return None
        drivers |= named
    return drivers


class GpuTopology(ScorePlugin, ScoreExtensions):
    """Prefers nodes with the most free devices under one topology attribute value (see the module docstring)."""

    name = "GpuTopology"
    needs_devices = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = check_args(args, self.name, "attribute")
        attribute = args.get("attribute", DEFAULT_ATTRIBUTE)
        if not isinstance(attribute, str) or not attribute:
            raise ValueError(f"plugin {self.name}: args.attribute must be a device attribute name, got {attribute!r}")
        self.attribute = attribute

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        store = batch.snapshot.devices
        out = np.zeros(len(batch), dtype=np.int64)
        classes = requested_classes(store, pod)
        if not classes:
            return out
        drivers = class_drivers(store, classes)
        taken = store.allocated()
        for i, (_, node) in enumerate(batch.nodes()):
            groups: Counter[Any] = Counter()
            for d in store.node_devices(node):
                if (drivers is not None and d.slice.driver not in drivers) or (
                    d.id in taken and not d.device.allow_multiple_allocations
                ):
                    continue
                value = d.attribute(self.attribute)
                groups[("value", value) if value is not None else ("device", d.id)] += 1
            out[i] = max(groups.values(), default=0)
        return out

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        best = int(scores.max()) if scores.shape[0] else 0
        if best > 0:
            scores[:] = scores * MAX_NODE_SCORE // best
        return SUCCESS
