"""A plugin that reads the device objects of its host's snapshot mirror, served by a plugin host in
the remote device tests (tests/test_remote_devices.py).

``DeviceWitness`` (needs_devices) passes every pod except probes (pods labelled ``probe``), which it
rejects on every node with what the mirror holds, so a test reads the mirror's state off the probe's
status: the current slices with their devices and attributes, the device classes with their
selectors, the claims with their requests, allocation and consumers, and the devices in use per node.
"""

from __future__ import annotations

from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch
from pluginhost.snapshot import DeviceStore, ResourceClaim
from pluginhost.status import Code, Status

__all__ = ["DeviceWitness", "describe"]


def _claim(c: ResourceClaim) -> str:
    wants = ",".join(f"{r.name}:{'|'.join(r.classes)}" for r in c.requests)
    out = f"{c.key}[{wants}]"
    if c.allocation is not None:
        devices = ",".join(f"{r.request}={r.driver}/{r.pool}/{r.device}" for r in c.allocation.results)
        out += f" allocated {devices}{' (assumed)' if c.allocation_assumed else ''}"
    if c.reserved_for:
        out += " for " + ",".join(f"{r.resource}/{r.name}" for r in c.reserved_for)
    return out


def describe(store: DeviceStore, batch: NodeBatch) -> str:
    """The store as one line (slices, classes, claims, devices in use by node), sorted by name."""
    slices = []
    for s in sorted(store.current_slices(), key=lambda s: s.name):
        devices = ",".join(
            d.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(d.attributes.items())) + "}" for d in s.devices)
        slices.append(f"{s.name}@{s.node_name or '*'}/{s.pool}#{s.pool_generation}:{devices}")
    classes = [f"{c.name}:{' && '.join(c.selectors)}" for c in sorted(store.classes.values(), key=lambda c: c.name)]
    claims = [_claim(c) for _, c in sorted(store.claims.items())]
    used = []
    for _, node in batch.nodes():
        names = [d.device.name for d in store.in_use_on_node(node)]
        if names:
            used.append(f"{node.name}={','.join(names)}")
    return (f"slices [{'; '.join(slices)}] classes [{'; '.join(classes)}] claims [{'; '.join(claims)}] "
            f"in use [{' '.join(used)}]")


class DeviceWitness(FilterPlugin):
    name = "DeviceWitness"
    needs_devices = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = args or {}

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        if "probe" not in pod.labels:
            return FilterResult.passing(len(batch))
        status = Status(Code.UnschedulableAndUnresolvable, (describe(batch.snapshot.devices, batch),))
        return FilterResult.from_statuses([status] * len(batch))
