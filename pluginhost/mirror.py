"""The snapshot mirror: a plugin host's copy of the framework's cluster, fed by versioned deltas.

The framework publishes its cache as ``SnapshotDelta`` messages (``Handle.FollowSnapshot``); a
:class:`SnapshotMirror` applies them to its own :class:`~pluginhost.snapshot.ClusterTable` and keeps
the :class:`~pluginhost.snapshot.Snapshot` of each recent framework generation. Requests then carry
node *ids* and a generation instead of whole nodes, and a hosted plugin reads real ``Snapshot`` and
``NodeBatch`` objects (allocatable, requested, the pods on each node, labels, taints, images): the
same view an in-tree plugin has at that generation, so vectorized in-tree-style code works unchanged.

Generations are the framework's. A request may name a generation the mirror has not applied yet (the
delta and the request travel on different streams): :meth:`SnapshotMirror.wait_for` waits, bounded,
for the mirror to catch up. A follower that reconnects asks for the deltas since its generation; the
framework answers with those or with a full resync.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost import pb
from pluginhost.convert import _affinity_from_proto, _port_from_proto, node_from_proto, pod_from_proto
from pluginhost.convert_devices import device_from_proto, device_key
from pluginhost.convert_storage import storage_from_proto, storage_key
from pluginhost.errors import OutriggerError
from pluginhost.model import Container, Pod
from pluginhost.snapshot import ClusterTable, NodeTable, Snapshot

__all__ = ["MirrorError", "SnapshotMirror", "pod_of_placement", "row_of_id", "rows_of_ids"]

log = logging.getLogger("outrigger.mirror")

# Generations kept after they were superseded: a scheduling cycle runs against one generation while
# binding cycles keep changing the cache, so requests for a slightly old generation are normal. Each
# kept snapshot holds its own copy of the changed columns, so keep few (binding-cycle points, which
# may come much later, fall back to the latest generation).
DEFAULT_RETAIN = 16


class MirrorError(OutriggerError, RuntimeError):
    """The mirror cannot provide the snapshot a request names."""


def pod_of_placement(msg: Any) -> Pod:
    """The pod of a ``PodPlacement``: the whole pod when the framework sent it, else the compact form."""
    if msg.HasField("pod"):
        pod = pod_from_proto(msg.pod)
        if not pod.node_name:
            pod.node_name = msg.node_name
        return pod
    ports = [_port_from_proto(p) for p in msg.host_ports]
    return Pod(
        name=msg.ref.name,
        namespace=msg.ref.namespace,
        uid=msg.ref.uid,
        labels=dict(msg.labels),
        node_name=msg.node_name,
        priority=msg.priority,
        affinity=_affinity_from_proto(msg.affinity) if msg.HasField("affinity") else None,
        containers=[Container(name="placement", ports=ports)] if ports else [],
        requests=dict(msg.requests),
    )


def row_of_id(table: NodeTable) -> npt.NDArray[np.int64]:
    """Node id -> row of ``table`` (-1 for ids it lacks), built once per node table."""
    return table.memo("outrigger.row_of_id", _row_of_id)  # type: ignore[no-any-return]


def _row_of_id(table: NodeTable) -> npt.NDArray[np.int64]:
    ids = table.ids.astype(np.int64)
    out = np.full(int(ids.max()) + 1 if ids.shape[0] else 1, -1, dtype=np.int64)
    out[ids] = np.arange(ids.shape[0], dtype=np.int64)
    return out


def rows_of_ids(snapshot: Snapshot, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The snapshot rows of node ``ids`` (vectorized); :class:`MirrorError` naming an unknown id."""
    lookup = row_of_id(snapshot.table)
    inside = (ids >= 0) & (ids < lookup.shape[0])
    rows = np.full(ids.shape[0], -1, dtype=np.int64)
    rows[inside] = lookup[ids[inside]]
    if ids.shape[0] and int(rows.min()) < 0:
        bad = int(ids[rows < 0][0])
        raise MirrorError(f"node id {bad} is not in the snapshot of generation {snapshot.generation}")
    return rows


class SnapshotMirror:
    """The framework's cluster as of the last applied delta, plus recent generations' snapshots."""

    def __init__(self, retain: int = DEFAULT_RETAIN) -> None:
        self.retain = retain
        self.table = ClusterTable()
        self.generation = 0  # the framework generation applied last; 0: nothing yet
        self.node_generation = 0  # the framework generation of the last delta that changed nodes
        self.resyncs = 0
        self.deltas = 0
        self._names: dict[int, str] = {}  # node id -> name
        self._snapshots: collections.OrderedDict[int, Snapshot] = collections.OrderedDict()
        self._advanced = asyncio.Event()

    # ---- applying ------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (a new framework, or a resync to come)."""
        self.table = ClusterTable()
        self.generation = 0
        self.node_generation = 0
        self._names.clear()
        self._snapshots.clear()

    def apply(self, delta: Any) -> None:
        """Apply one ``SnapshotDelta`` in the contract's order (resync, upserts, node removals, pod
        removals, pod additions, storage removals, storage upserts, device removals, device upserts) and
        remember the snapshot of its generation. Storage objects go to the table's live
        :class:`~pluginhost.snapshot.VolumeStore` (every snapshot's ``volumes``), device objects to its
        :class:`~pluginhost.snapshot.DeviceStore` (``devices``), as a lister is live in kube-scheduler."""
        if delta.full_resync:
            self.reset()
            self.resyncs += 1
        elif delta.generation <= self.generation:
            return  # already applied (a replay after a reconnect)
        table = self.table
        for up in delta.nodes:
            node = node_from_proto(up.node)
            old = self._names.get(up.id)
            if old is not None and old != node.name:
                table.remove_node(old)  # an id now names another node: the old one is gone
            table.upsert_node(node, node_id=up.id)
            self._names[up.id] = node.name
        for nid in delta.removed_node_ids:
            name = self._names.pop(nid, None)
            if name is not None:
                table.remove_node(name)
        for ref in delta.pods_removed:
            table.unplace_pod(ref.uid)
        for placement in delta.pods_added:
            pod = pod_of_placement(placement)
            table.unplace_pod(pod.uid)  # "a pod that moved is sent as removed and added": be lenient
            if not table.place_pod(pod, placement.node_name):
                log.warning("snapshot delta %d places pod %s on unknown node %r",
                            delta.generation, pod.key, placement.node_name)
        self._apply_storage(delta)
        self._apply_devices(delta)
        self.generation = int(delta.generation)
        if delta.full_resync or len(delta.nodes) or len(delta.removed_node_ids):
            # (a framework that does not say when its nodes changed: the delta's own generation)
            self.node_generation = int(delta.node_generation) or self.generation
        self.deltas += 1
        self._snapshots[self.generation] = table.snapshot()
        while len(self._snapshots) > self.retain:
            self._snapshots.popitem(last=False)
        self._advanced.set()
        self._advanced = asyncio.Event()

    def _apply_storage(self, delta: Any) -> None:
        store = self.table.volumes
        for ref in delta.storage_removed:
            try:
                kind, key = storage_key(ref)
            except ValueError as exc:
                log.warning("snapshot delta %d: %s", delta.generation, exc)
                continue
            store.remove(kind, key)
        for obj in delta.storage_upserts:
            try:
                store.upsert(storage_from_proto(obj))
            except ValueError as exc:
                log.warning("snapshot delta %d: %s", delta.generation, exc)

    def _apply_devices(self, delta: Any) -> None:
        store = self.table.devices
        for ref in delta.device_removed:
            try:
                kind, key = device_key(ref)
            except ValueError as exc:
                log.warning("snapshot delta %d: %s", delta.generation, exc)
                continue
            store.remove(kind, key)
        for obj in delta.device_upserts:
            try:
                store.upsert(device_from_proto(obj))
            except ValueError as exc:
                log.warning("snapshot delta %d: %s", delta.generation, exc)

    # ---- reading -------------------------------------------------------------------------------

    def latest(self) -> Snapshot:
        """The snapshot of the last applied generation (an empty one before the first delta)."""
        snap = self._snapshots.get(self.generation)
        return snap if snap is not None else self.table.snapshot()

    def at(self, generation: int) -> Snapshot | None:
        """The snapshot of ``generation`` if the mirror holds it (0: the latest)."""
        if generation == 0:
            return self.latest()
        return self._snapshots.get(generation)

    async def wait_for(self, generation: int, timeout: float) -> Snapshot:
        """The snapshot of ``generation``, waiting up to ``timeout`` seconds for the mirror to reach it."""
        await self._reach(generation, timeout)
        snap = self.at(generation)
        if snap is None:
            raise MirrorError(
                f"snapshot generation {generation} is no longer held by the mirror "
                f"(it is at generation {self.generation} and keeps the last {self.retain})"
            )
        return snap

    async def wait_until(self, generation: int, timeout: float) -> Snapshot:
        """The latest snapshot once the mirror has applied ``generation`` (or a later one), waiting up
        to ``timeout`` seconds."""
        await self._reach(generation, timeout)
        return self.latest()

    async def with_nodes_of(self, node_generation: int, generation: int, timeout: float) -> Snapshot:
        """A snapshot whose node set is the one of framework generation ``node_generation`` (the last
        node change at or before ``generation``): the snapshot of ``generation`` if held, else the
        latest once the mirror has reached ``node_generation`` with no node change since."""
        await self._reach(node_generation, timeout)
        exact = self._snapshots.get(generation)
        if exact is not None:
            return exact
        if self.node_generation <= node_generation:
            return self.latest()
        raise MirrorError(
            f"the nodes changed since snapshot generation {generation} (the mirror is at generation "
            f"{self.generation}, its last node change at {self.node_generation})"
        )

    async def _reach(self, generation: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.generation < generation:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise MirrorError(
                    f"snapshot generation {generation} not reached within {timeout:g}s "
                    f"(the mirror is at generation {self.generation})"
                )
            try:
                await asyncio.wait_for(self._advanced.wait(), remaining)
            except TimeoutError:
                continue

    # ---- following -----------------------------------------------------------------------------

    async def follow_once(self, stub: Any, plugin: str, ready: asyncio.Event | None = None, *,
                          nodes_only: bool = False, volumes: bool = False, devices: bool = False) -> None:
        """Follow ``stub`` (a ``HandleStub``) until the stream ends or fails (the error propagates).
        ``nodes_only``: the host's plugins read node objects only (pods may be left out); ``volumes``:
        some read storage objects (deltas then carry them); ``devices``: some read device objects."""
        request = pb.handle.FollowRequest(from_generation=self.generation, plugin=plugin, nodes_only=nodes_only,
                                          volumes=volumes, devices=devices)
        call = stub.FollowSnapshot(request)
        try:
            async for delta in call:
                self.apply(delta)
                if ready is not None:
                    ready.set()
        finally:
            call.cancel()
