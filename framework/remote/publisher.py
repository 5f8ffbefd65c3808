"""The snapshot publisher: the framework's cache as a stream of versioned deltas for plugin hosts.

It listens to the cache's :class:`~pluginhost.snapshot.ClusterTable` (every node upsert/removal and pod
placement/unplacement, each tagged with the table generation it produced) and turns the changes into
``SnapshotDelta`` messages that ``Handle.FollowSnapshot`` streams to every follower. Hosts apply them
to their own table (:class:`pluginhost.mirror.SnapshotMirror`), so requests carry node ids and a
generation instead of node objects.

Deltas are cut on demand, not per change: a scheduling cycle runs against snapshot generation ``G``,
and before the remote adapter sends a request for ``G`` it calls :meth:`SnapshotPublisher.publish_up_to`
so every change up to ``G`` (and none after) is on its way; a short timer publishes the rest. Each
delta is the *net* effect of its changes in the contract's order (upserts, node removals, pod
removals, pod additions); a node removed and re-added within one delta would not survive that order,
so the delta is cut there. Followers that fall behind (their queue overflows) or reconnect from a
generation the publisher no longer has get a full resync.

Nothing is logged while nobody follows: the first follower starts from a full resync anyway.

Storage objects (the table's :class:`~pluginhost.snapshot.VolumeStore`: claims, volumes, classes,
CSINodes) are published only while some follower asked for them (``FollowRequest.volumes``): each
change then counts as a table mutation (:meth:`ClusterTable.note_storage`), so it gets a generation
and is ordered with the node and pod changes, and a cycle whose generation a host has applied sees
every storage change before it. Followers that did not ask get the deltas without the storage fields
(a storage-only delta still moves their generation). While nobody asks, storage changes cost nothing.

Device objects (the cache's :class:`~framework.dra.store.DraStore`: ResourceSlices, DeviceClasses,
ResourceClaims) go the same way to followers that ask for them (``FollowRequest.devices``). Claims are
sent as the scheduler sees them (:func:`~framework.remote.devices.claim_view`): the store tells its
pending and assumed allocations too, so a claim an earlier pod's Reserve allocated reaches a host as
allocated before the cycle that must count it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pluginhost import pb
from pluginhost.convert import node_to_proto, pod_placement_to_proto, pod_to_proto
from pluginhost.convert_storage import storage_to_proto
from pluginhost.model import Node, Pod
from pluginhost.snapshot import (
    DEVICE_KINDS,
    NODE_REMOVED,
    NODE_UPSERTED,
    POD_PLACED,
    POD_UNPLACED,
    STORAGE_CHANGED,
    ClusterTable,
)

from .devices import claim_view, device_to_proto

__all__ = ["SnapshotPublisher"]

log = logging.getLogger("outrigger.mirror")

HISTORY = 512  # deltas kept for followers that reconnect
QUEUE_LIMIT = 4096  # deltas queued for one follower before it is resynced instead
FLUSH_DELAY = 0.02  # seconds: unrequested changes reach followers this soon
MAX_PENDING = 8192  # changes held before they are published regardless


@dataclass(slots=True, eq=False)
class _Follower:
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    overflow: bool = False
    plugin: str = ""
    nodes_only: bool = False  # reads node objects only: pod placements may be left out
    volumes: bool = False  # reads storage objects: deltas carry them
    devices: bool = False  # reads device objects: deltas carry them


def _without_storage(delta: Any, volumes: bool = False, devices: bool = False) -> Any:
    """``delta`` as a follower gets it: without the storage objects unless ``volumes``, without the
    device objects unless ``devices`` (itself when there is nothing to leave out)."""
    drop = []
    if not volumes and (len(delta.storage_upserts) or len(delta.storage_removed)):
        drop += ["storage_upserts", "storage_removed"]
    if not devices and (len(delta.device_upserts) or len(delta.device_removed)):
        drop += ["device_upserts", "device_removed"]
    if not drop:
        return delta
    bare = pb.handle.SnapshotDelta()
    bare.CopyFrom(delta)
    for name in drop:
        bare.ClearField(name)
    return bare


def _placement(pod: Pod, node_id: int, node_name: str) -> Any:
    msg = pod_placement_to_proto(pod, node_id, node_name)
    msg.pod.CopyFrom(pod_to_proto(pod))
    return msg


class SnapshotPublisher:
    """Publishes one :class:`ClusterTable` as versioned deltas (see the module docstring)."""

    def __init__(self, table: ClusterTable, *, history: int = HISTORY, flush_delay: float = FLUSH_DELAY) -> None:
        self.table = table
        self.flush_delay = flush_delay
        self.published = table.generation  # the generation followers have (or are sent) last
        self._pending: list[tuple[int, str, Any, Any]] = []  # (generation, kind, subject, where)
        self._history: collections.deque[Any] = collections.deque(maxlen=history)
        self._history_base: int | None = None  # deltas since this generation are all in _history
        self._followers: set[_Follower] = set()
        self._podless_until = 0  # deltas up to this generation may lack pods (sent to nodes-only followers)
        self._node_generation = table.snapshot().table.generation  # of the last node change published
        self._timer: asyncio.TimerHandle | None = None
        self.deltas_sent = 0
        self.resyncs_sent = 0
        # Storage changes are in the history from this generation on (None: no follower reads them).
        self._volumes_since: int | None = None
        # Device changes likewise (None: no follower reads them).
        self._devices_since: int | None = None
        table.add_listener(self._on_change)
        table.volumes.add_listener(self._on_storage)
        self._dra = table.dra  # (None: a table without a scheduler's cache has no device objects)
        if self._dra is not None:
            self._dra.add_listener(self._on_device)
            self._dra.add_view_listener(self._on_claim_view)

    def close(self) -> None:
        self.table.remove_listener(self._on_change)
        self.table.volumes.remove_listener(self._on_storage)
        if self._dra is not None:
            self._dra.remove_listener(self._on_device)
            self._dra.remove_view_listener(self._on_claim_view)
        if self._timer is not None:
            self._timer.cancel()
        for f in self._followers:
            f.queue.put_nowait(None)

    @property
    def followers(self) -> int:
        return len(self._followers)

    # ---- collecting ----------------------------------------------------------------------------

    def _on_change(self, kind: str, subject: Any, where: Any) -> None:
        if not self._followers:
            return
        self._pending.append((self.table.generation, kind, subject, where))
        if len(self._pending) >= MAX_PENDING:
            self.publish_all()
        elif self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self.flush_delay, self._flush)
            except RuntimeError:  # no loop (a synchronous caller): the next publish_up_to sends it
                pass

    def _on_storage(self, kind: str, old: Any, new: Any) -> None:
        if self._volumes_since is None:
            return  # nobody reads storage objects
        obj = new if new is not None else old
        self.table.note_storage(kind, obj.key, new)  # -> _on_change(STORAGE_CHANGED, ...)

    def _on_device(self, kind: str, old: Any, new: Any) -> None:
        if self._devices_since is None or kind not in DEVICE_KINDS:
            return  # nobody reads device objects (ResourceClaimTemplates are not sent)
        obj = new if new is not None else old
        if kind == "ResourceClaim":
            self._on_claim_view(obj.key)
            return
        self.table.note_storage(kind, obj.name, None if new is None else device_to_proto(new))

    def _on_claim_view(self, key: str) -> None:
        if self._devices_since is None:
            return
        claim, assumed = claim_view(self._dra, key)
        self.table.note_storage("ResourceClaim", key, None if claim is None else device_to_proto(claim, assumed))

    def _flush(self) -> None:
        self._timer = None
        self.publish_all()

    # ---- publishing ----------------------------------------------------------------------------

    def publish_all(self) -> None:
        self.publish_up_to(self.table.generation)

    def publish_up_to(self, generation: int) -> None:
        """Send every change up to ``generation`` to the followers (a no-op when they have it)."""
        if not self._pending:
            if not self._followers:
                self.published = self.table.generation
            return
        n = 0
        while n < len(self._pending) and self._pending[n][0] <= generation:
            n += 1
        if n == 0:
            return
        events, self._pending = self._pending[:n], self._pending[n:]
        with_pods = not all(f.nodes_only for f in self._followers)
        for delta in self._deltas(events, with_pods):
            self._send(delta)
        if not self._pending and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _deltas(self, events: list[tuple[int, str, Any, Any]], with_pods: bool = True) -> list[Any]:
        """The net effect of ``events`` as deltas, cut where the contract's order would change it."""
        out = []
        nodes: dict[str, tuple[int, Node] | None] = {}
        removed_ids: dict[str, int] = {}
        pods: dict[str, tuple[Pod, str] | None] = {}
        refs: dict[str, Any] = {}
        storage: dict[tuple[str, str], Any] = {}  # (kind, key) -> new state (devices: wire form); None: gone
        gen = self.published

        podless = False

        def cut() -> None:
            nonlocal podless
            if nodes or pods or podless or storage:
                if not with_pods:  # nobody reads pods: the delta moves the generation (and nodes)
                    self._podless_until = gen
                out.append(self._delta(gen, nodes, removed_ids, pods, refs, storage))
                podless = False
            nodes.clear()
            removed_ids.clear()
            pods.clear()
            refs.clear()
            storage.clear()

        for g, kind, subject, where in events:
            if kind == NODE_UPSERTED:
                if subject.name in nodes and nodes[subject.name] is None:
                    cut()  # removed then re-added: the re-add must follow the removal
                nodes[subject.name] = (int(where), subject)
                self._node_generation = g  # (after the cut: the delta before does not have this change)
            elif kind == NODE_REMOVED:
                self._node_generation = g
                nodes[subject] = None
                removed_ids[subject] = int(where)
                for uid, placed in list(pods.items()):  # (empty without pods)
                    if placed is not None and placed[1] == subject:
                        pods[uid] = None  # its pods went with it
            elif kind == STORAGE_CHANGED:
                storage[where] = subject  # (the last state wins: a delta applies removals first)
            elif not with_pods:
                podless = True  # pod changes move the generation only
            elif kind == POD_PLACED:
                pods[subject.uid] = (subject, where)
                refs[subject.uid] = pb.types.PodRef(uid=subject.uid, namespace=subject.namespace, name=subject.name)
            elif kind == POD_UNPLACED:
                pods[subject] = None
                refs.setdefault(subject, pb.types.PodRef(uid=subject))
            gen = g
        cut()
        return out

    def _delta(
        self,
        generation: int,
        nodes: dict[str, tuple[int, Node] | None],
        removed_ids: dict[str, int],
        pods: dict[str, tuple[Pod, str] | None],
        refs: dict[str, Any],
        storage: dict[tuple[str, str], Any],
    ) -> Any:
        delta = pb.handle.SnapshotDelta(generation=generation, node_generation=self._node_generation)
        for (kind, key), obj in storage.items():
            namespace, _, name = key.rpartition("/")
            if kind in DEVICE_KINDS:  # (sent as their wire form already)
                if obj is None:
                    delta.device_removed.add(kind=kind, namespace=namespace, name=name)
                else:
                    delta.device_upserts.append(obj)
            elif obj is None:
                delta.storage_removed.add(kind=kind, namespace=namespace, name=name)
            else:
                delta.storage_upserts.append(storage_to_proto(obj))
        ids: dict[str, int] = {}
        for name, up in nodes.items():
            if up is None:
                delta.removed_node_ids.append(removed_ids[name])
            else:
                ids[name] = up[0]
                delta.nodes.append(pb.handle.NodeUpsert(id=up[0], node=node_to_proto(up[1])))
        delta.pods_removed.extend(refs[uid] for uid in pods)
        for placed in pods.values():
            if placed is not None:
                pod, node_name = placed
                nid = ids.get(node_name) or self.table.node_id(node_name) or 0
                delta.pods_added.append(_placement(pod, nid, node_name))
        return delta

    def _send(self, delta: Any) -> None:
        self.published = int(delta.generation)
        if self._history_base is None:
            self._history_base = self.published
        elif len(self._history) == self._history.maxlen:
            self._history_base = int(self._history[0].generation)
        self._history.append(delta)
        variants: dict[tuple[bool, bool], Any] = {}
        for f in self._followers:
            if f.overflow:
                continue
            if f.queue.qsize() >= QUEUE_LIMIT:
                f.overflow = True  # it gets a full resync instead of an ever longer backlog
                log.warning("snapshot follower %r fell behind; it will be resynced", f.plugin)
                continue
            want = (f.volumes, f.devices)
            if want not in variants:
                variants[want] = _without_storage(delta, *want)
            f.queue.put_nowait(variants[want])
        self.deltas_sent += 1

    def full_resync(self, volumes: bool = False, devices: bool = False) -> Any:
        """The whole table as one ``full_resync`` delta at the current generation (``volumes``: with
        every storage object; ``devices``: with every device object)."""
        snap = self.table.snapshot()
        delta = pb.handle.SnapshotDelta(generation=snap.generation, full_resync=True,
                                        node_generation=snap.table.generation)
        names = snap.table.names
        ids = snap.table.ids.tolist()
        for row, node in enumerate(snap.table.nodes):
            delta.nodes.append(pb.handle.NodeUpsert(id=ids[row], node=node_to_proto(node)))
        for row, placed in enumerate(snap.pods):
            for pod in placed:
                delta.pods_added.append(_placement(pod, ids[row], names[row]))
        if volumes:
            store = self.table.volumes  # (the API's versions: assumed ones are the binder's own)
            for objs in (store.classes, store.csinodes, store.volumes, store.claims):
                delta.storage_upserts.extend(storage_to_proto(o) for o in objs.values())
        if devices and self._dra is not None:
            dra = self._dra
            delta.device_upserts.extend(device_to_proto(o) for o in (*dra.classes.values(), *dra.slices.values()))
            for key in dra.claims:
                claim, assumed = claim_view(dra, key)
                if claim is not None:
                    delta.device_upserts.append(device_to_proto(claim, assumed))
        self.resyncs_sent += 1
        return delta

    # ---- following -----------------------------------------------------------------------------

    def _catch_up(self, from_generation: int, nodes_only: bool = False, volumes: bool = False,
                  devices: bool = False) -> list[Any]:
        """What a follower at ``from_generation`` needs first: deltas from history, or a resync."""
        resync = [self.full_resync(volumes, devices)]
        if not nodes_only and from_generation < self._podless_until:
            return resync  # history after it lacks the pods this follower reads
        if volumes and (self._volumes_since is None or from_generation < self._volumes_since):
            return resync  # history lacks the storage changes it reads
        if devices and (self._devices_since is None or from_generation < self._devices_since):
            return resync  # history lacks the device changes it reads
        if from_generation and self._history_base is not None and self._history_base <= from_generation:
            if from_generation == self.published:
                return []
            if from_generation < self.published:
                return [_without_storage(d, volumes, devices) for d in self._history if d.generation > from_generation]
        return resync

    async def follow(self, from_generation: int = 0, plugin: str = "", *,
                     nodes_only: bool = False, volumes: bool = False, devices: bool = False) -> AsyncIterator[Any]:
        """The deltas for one follower, forever (until the publisher closes or the caller stops);
        ``volumes``: with the storage objects; ``devices``: with the device objects."""
        if not self._followers:
            # Nothing was logged while nobody followed, so history is void.
            self._history.clear()
            self._history_base = None
            self.published = self.table.generation
            self._pending.clear()
        self.publish_all()
        devices = devices and self._dra is not None
        follower = _Follower(plugin=plugin, nodes_only=nodes_only, volumes=volumes, devices=devices)
        first = self._catch_up(from_generation, nodes_only, volumes, devices)
        if volumes and self._volumes_since is None:
            self._volumes_since = self.published  # storage changes are logged from here on
        if devices and self._devices_since is None:
            self._devices_since = self.published
        self._followers.add(follower)
        try:
            for delta in first:
                yield delta
            while True:
                delta = await follower.queue.get()
                if delta is None:
                    return
                if follower.overflow:
                    while not follower.queue.empty():
                        follower.queue.get_nowait()
                    follower.overflow = False
                    self.publish_all()
                    yield self.full_resync(follower.volumes, follower.devices)
                    continue
                yield delta
        finally:
            self._followers.discard(follower)
            if not any(f.volumes for f in self._followers):
                self._volumes_since = None
            if not any(f.devices for f in self._followers):
                self._devices_since = None
