"""Plugins that read a pod's volumes and the storage objects behind them, served by a plugin host in
the remote volume tests (tests/test_remote_volumes.py).

``VolumeWitness`` (needs_volumes): for each claim of the pod it looks up the PersistentVolumeClaim,
its PersistentVolume and StorageClass in the host's snapshot mirror, and keeps only nodes whose
``topology.kubernetes.io/zone`` label is the volume's. Its rejections say what it saw, so a test
reads the mirror's state off the pod's status: the claim missing, not bound yet, its volume missing,
or the volume's zone and class. ``RemoteVolumeZone`` is Outrigger's own VolumeZone Filter, hosted (it reads
``batch.snapshot.volumes``, which a host fills from its mirror).
"""

from __future__ import annotations

from typing import Any

from framework.plugins.volumezone import VolumeZone
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch
from pluginhost.status import Code, Status

ZONE = "topology.kubernetes.io/zone"

__all__ = ["RemoteVolumeZone", "VolumeWitness"]


class VolumeWitness(FilterPlugin):
    name = "VolumeWitness"
    needs_volumes = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = args or {}

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        if not pod.volumes:
            return FilterResult.passing(len(batch))
        store = batch.snapshot.volumes
        seen = [f"{v.name}:{v.source}" for v in pod.volumes]
        zones: list[tuple[str, str]] = []
        for claim, _ in pod.claim_names():
            pvc = store.claim(pod.namespace, claim)
            if pvc is None:
                return _all(batch, Code.UnschedulableAndUnresolvable, f"volumes {seen}: claim {claim} not found")
            if not pvc.volume_name:
                return _all(batch, Code.Unschedulable, f"volumes {seen}: claim {claim} not bound")
            pv = store.volume(pvc.volume_name)
            if pv is None:
                return _all(batch, Code.UnschedulableAndUnresolvable,
                            f"volumes {seen}: volume {pvc.volume_name} not found")
            sc = store.storage_class(pvc.storage_class)
            provisioner = sc.provisioner if sc is not None else "none"
            zones.append((pv.labels.get(ZONE, ""), f"{pv.name} in {pv.labels.get(ZONE, '-')} class {provisioner}"))
        statuses = []
        for _, node in batch.nodes():
            zone = node.labels.get(ZONE, "")
            wrong = [what for want, what in zones if want and want != zone]
            statuses.append(Status(Code.UnschedulableAndUnresolvable, (f"volume {wrong[0]}",)) if wrong
                            else Status(Code.Success))
        return FilterResult.from_statuses(statuses)


def _all(batch: NodeBatch, code: Code, reason: str) -> FilterResult:
    return FilterResult.from_statuses([Status(code, (reason,))] * len(batch))


class RemoteVolumeZone(FilterPlugin):
    """VolumeZone's Filter (which works the volumes' zones out itself when PreFilter did not run: its
    PreFilter keeps a Python object in CycleState, which a host cannot share with the framework)."""

    name = "RemoteVolumeZone"
    needs_volumes = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.zone = VolumeZone(args, handle)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        return await self.zone.filter(CycleState(state.cycle_id, batch.snapshot), pod, batch)
