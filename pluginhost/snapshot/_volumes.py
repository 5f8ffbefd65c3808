"""The storage objects the volume plugins read: claims, volumes, classes and CSINodes.

They are not columns of the node table: a table's :class:`VolumeStore` is live, like kube-scheduler's
listers, and every snapshot refers to it (:attr:`~pluginhost.snapshot.Snapshot.volumes`). A cluster
without them has an empty store, and pods without volumes never look at it. PreBind's writes go
through a :class:`VolumeWriter`: :class:`MemoryVolumeWriter` for the embedded cluster, a live
cluster's source otherwise.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from pluginhost.errors import OutriggerError
from pluginhost.model import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    ClaimRef,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

__all__ = [
    "MemoryVolumeWriter",
    "StorageListener",
    "StorageObject",
    "VolumeStore",
    "VolumeStoreError",
    "VolumeWriter",
    "storage_kind",
]

StorageObject = PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode
#: A change to the storage objects, as ``listener(kind, old, new)``: ``kind`` is the object's kind
#: (``PersistentVolumeClaim``, ...), ``old`` None for an addition, ``new`` None for a deletion.
StorageListener = Callable[[str, Any, Any], None]


class VolumeStoreError(OutriggerError, RuntimeError):
    """An assume or write that contradicts the store (an object changed or went away meanwhile)."""


class VolumeWriter(Protocol):
    """Where the volume binder's writes go (PreBind): the embedded store itself, or a cluster's API
    server. Each write needs the object's current ``resource_version`` and returns the object as
    stored (with its new one); a conflict (the object changed meanwhile, or is gone) raises
    :class:`VolumeStoreError`, anything else a source's own error."""

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Store ``pv``'s ``claim_ref`` and annotations (a PUT of the volume)."""
        ...

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Store ``pvc``'s ``volume_name`` and annotations (a PUT of the claim)."""
        ...

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        """Set the volume's ``status.phase``."""
        ...

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        """Set the claim's status as bound to ``pv``: phase ``Bound``, the volume's access modes and capacity."""
        ...


# Annotations of a binding, kept when a claim or volume is applied again without them.
_BINDING_ANNOTATIONS = frozenset({ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, ANN_PROVISIONED_BY})


def storage_kind(obj: StorageObject) -> str:
    return type(obj).__name__


class VolumeStore:
    """The PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes of the cluster, as
    kube-scheduler's volume plugins read them through their listers, with the volume binder's assume
    cache on top: a PV or PVC changed by a scheduling cycle's Reserve (:meth:`assume_volume`,
    :meth:`assume_claim`) reads as changed until the API's own newer version arrives (:meth:`upsert`)
    or the change is rolled back (:meth:`restore_volume`, :meth:`restore_claim`).

    Unlike the node columns, the store is live (as listers are): every snapshot of a table shares its
    table's store. ``writer`` takes PreBind's writes; the embedded default applies them here (it
    is the API server, and it plays the PV controller's part of a binding, see
    :class:`MemoryVolumeWriter`); a live cluster's source replaces it.
    """

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        self._by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._assumed_volumes: dict[str, PersistentVolume] = {}
        self._assumed_claims: dict[str, PersistentVolumeClaim] = {}
        self._listeners: list[StorageListener] = []
        # Versions above any a manifest is likely to carry, increasing with every change made here.
        self._versions = itertools.count(1_000_000_001)
        self.writer: VolumeWriter = MemoryVolumeWriter(self)

    def __len__(self) -> int:
        return len(self.claims) + len(self.volumes) + len(self.classes) + len(self.csinodes)

    def add_listener(self, listener: StorageListener) -> None:
        """Call ``listener(kind, old, new)`` after every change :meth:`upsert` and :meth:`remove` make."""
        self._listeners.append(listener)

    def remove_listener(self, listener: StorageListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ---- reading (assumed objects first, as the binder's assume cache) --------------------------

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        key = f"{namespace}/{name}"
        api = self.claims.get(key)
        if api is None:
            return None
        assumed = self._assumed_claims.get(key)
        return assumed if assumed is not None and assumed.resource_version == api.resource_version else api

    def volume(self, name: str) -> PersistentVolume | None:
        api = self.volumes.get(name)
        if api is None:
            return None
        assumed = self._assumed_volumes.get(name)
        return assumed if assumed is not None and assumed.resource_version == api.resource_version else api

    def volumes_of_class(self, class_name: str) -> list[PersistentVolume]:
        """The PVs of a storage class (by the API's class; assumed versions in place), by name."""
        out = []
        for name in sorted(self._by_class.get(class_name, ())):
            pv = self.volume(name)
            if pv is not None:
                out.append(pv)
        return out

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def csinode(self, name: str) -> CSINode | None:
        return self.csinodes.get(name)

    # ---- changes from the cluster (a source's informers, or the embedded store) ---------------

    def upsert(self, obj: StorageObject) -> StorageObject | None:
        """Add or replace an object as the cluster now has it; returns the one it replaced. An assumed
        version of it that the new one supersedes (another resourceVersion) is dropped."""
        old: StorageObject | None
        if isinstance(obj, PersistentVolumeClaim):
            old = self.claims.get(obj.key)
            self.claims[obj.key] = obj
            self._expire(self._assumed_claims, obj.key, obj.resource_version)
        elif isinstance(obj, PersistentVolume):
            old = self.volumes.get(obj.name)
            if old is not None:
                self._by_class.get(old.storage_class, {}).pop(old.name, None)
            self.volumes[obj.name] = obj
            self._by_class.setdefault(obj.storage_class, {})[obj.name] = obj
            self._expire(self._assumed_volumes, obj.name, obj.resource_version)
        elif isinstance(obj, StorageClass):
            old = self.classes.get(obj.name)
            self.classes[obj.name] = obj
        else:
            old = self.csinodes.get(obj.name)
            self.csinodes[obj.name] = obj
        self._notify(storage_kind(obj), old, obj)
        return old

    def apply(self, obj: StorageObject, *, dry_run: bool = False) -> str:
        """An object applied to the embedded store (where this store is the API server): ``created``,
        ``configured`` or ``unchanged`` (the same manifest again). As ``kubectl apply`` leaves what the
        server set: a re-applied claim keeps the volume it was bound to (with its annotations and phase),
        a volume its ``claimRef``; the uid stays the first one; every change gets a new resourceVersion."""
        kind = storage_kind(obj)
        key = obj.key
        stores: dict[str, dict[str, Any]] = {"PersistentVolumeClaim": self.claims, "PersistentVolume": self.volumes,
                                             "StorageClass": self.classes, "CSINode": self.csinodes}
        old = stores[kind].get(key)
        if old is not None:
            if obj.raw and obj.raw == old.raw:
                return "unchanged"
            obj.uid = old.uid
            if isinstance(obj, PersistentVolumeClaim) and not obj.volume_name and old.volume_name:
                keep = {k: v for k, v in old.annotations.items() if k in _BINDING_ANNOTATIONS}
                obj.volume_name, obj.phase = old.volume_name, old.phase
                obj.annotations = {**keep, **obj.annotations}
            elif isinstance(obj, PersistentVolume) and obj.claim_ref is None and old.claim_ref is not None:
                keep = {k: v for k, v in old.annotations.items() if k in _BINDING_ANNOTATIONS}
                obj.claim_ref, obj.phase = old.claim_ref, old.phase
                obj.annotations = {**keep, **obj.annotations}
        if not dry_run:
            obj.resource_version = self.next_version()
            self.upsert(obj)
        return "created" if old is None else "configured"

    def next_version(self) -> str:
        """A resourceVersion for a change made here (the embedded store's own, always increasing)."""
        return str(next(self._versions))

    def remove(self, kind: str, key: str) -> StorageObject | None:
        """Forget the object of ``kind`` (``PersistentVolume``, ...) named ``key`` (``namespace/name``
        for a claim); returns it (None if it was not there)."""
        old: StorageObject | None
        if kind == "PersistentVolumeClaim":
            old = self.claims.pop(key, None)
            self._assumed_claims.pop(key, None)
        elif kind == "PersistentVolume":
            old = self.volumes.pop(key, None)
            if old is not None:
                self._by_class.get(old.storage_class, {}).pop(key, None)
            self._assumed_volumes.pop(key, None)
        elif kind == "StorageClass":
            old = self.classes.pop(key, None)
        elif kind == "CSINode":
            old = self.csinodes.pop(key, None)
        else:
            raise ValueError(f"not a storage kind: {kind!r}")
        if old is not None:
            self._notify(kind, old, None)
        return old

    def _notify(self, kind: str, old: Any, new: Any) -> None:
        for listener in self._listeners:
            listener(kind, old, new)

    @staticmethod
    def _expire(assumed: dict[str, Any], key: str, version: str) -> None:
        held = assumed.get(key)
        if held is not None and held.resource_version != version:
            del assumed[key]

    # ---- the assume cache ----------------------------------------------------------------------

    def assume_volume(self, pv: PersistentVolume) -> None:
        """Read ``pv`` in place of the API's version until that changes (it must be the API's current
        version, changed in memory only)."""
        self._assume(self.volumes, self._assumed_volumes, pv.name, pv, "persistentvolumes")

    def assume_claim(self, pvc: PersistentVolumeClaim) -> None:
        self._assume(self.claims, self._assumed_claims, pvc.key, pvc, "persistentvolumeclaims")

    @staticmethod
    def _assume(api: dict[str, Any], assumed: dict[str, Any], key: str, obj: Any, resource: str) -> None:
        stored = api.get(key)
        if stored is None:
            raise VolumeStoreError(f'{resource} "{key}" not found')
        if stored.resource_version != obj.resource_version:
            raise VolumeStoreError(
                f'"{key}" is out of sync (stored: {stored.resource_version}, assume: {obj.resource_version})'
            )
        assumed[key] = obj

    def restore_volume(self, pv: PersistentVolume) -> None:
        """Drop the assumed version of ``pv`` (if it is still the one assumed)."""
        held = self._assumed_volumes.get(pv.name)
        if held is not None and held.resource_version == pv.resource_version:
            del self._assumed_volumes[pv.name]

    def restore_claim(self, pvc: PersistentVolumeClaim) -> None:
        held = self._assumed_claims.get(pvc.key)
        if held is not None and held.resource_version == pvc.resource_version:
            del self._assumed_claims[pvc.key]

    def assumed(self) -> list[str]:
        """What is assumed now (``PersistentVolume/<name>``, ``PersistentVolumeClaim/<ns>/<name>``):
        empty once every binding finished or was rolled back."""
        return [*(f"PersistentVolume/{k}" for k in self._assumed_volumes),
                *(f"PersistentVolumeClaim/{k}" for k in self._assumed_claims)]


class MemoryVolumeWriter:
    """PreBind's writes applied to the store itself (the embedded cluster, where the scheduler's store
    is the API server): each write needs the stored ``resource_version`` (else a conflict, as the API
    server's optimistic concurrency) and stores the object with the next one.

    With ``provision`` (the default) it also plays a dynamic provisioner and the PV controller: a
    claim given a node (``volume.kubernetes.io/selected-node``) whose class names a provisioner gets a
    new volume of its size, class and access modes (``pvc-<claim uid>``, without node affinity), and
    both are bound at once."""

    def __init__(self, store: VolumeStore, *, provision: bool = True) -> None:
        self.store = store
        self.provision = provision

    def _next(self) -> str:
        return self.store.next_version()

    def _check(self, kind: str, key: str, stored: Any, obj: Any) -> None:
        resource = "persistentvolumeclaims" if kind == "PersistentVolumeClaim" else "persistentvolumes"
        if stored is None:
            raise VolumeStoreError(f'{resource} "{key}" not found')
        if stored.resource_version != obj.resource_version:
            raise VolumeStoreError(
                f'Operation cannot be fulfilled on {resource} "{key}": the object has been modified; please apply '
                "your changes to the latest version and try again"
            )

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        self._check("PersistentVolume", pv.name, self.store.volumes.get(pv.name), pv)
        new = replace(pv, resource_version=self._next())
        self.store.upsert(new)
        return new

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        self._check("PersistentVolumeClaim", pvc.key, self.store.claims.get(pvc.key), pvc)
        new = replace(pvc, resource_version=self._next())
        self.store.upsert(new)
        if self.provision and ANN_SELECTED_NODE in new.annotations and not new.volume_name:
            self._provision(new)
        return new

    def _provision(self, pvc: PersistentVolumeClaim) -> None:
        cls = self.store.storage_class(pvc.storage_class) if pvc.storage_class else None
        if cls is None or not cls.provisioner or cls.provisioner == NO_PROVISIONER:
            return
        pv = PersistentVolume(
            name=f"pvc-{pvc.uid}",
            uid=str(uuid.uuid4()),
            resource_version=self._next(),
            annotations={ANN_PROVISIONED_BY: cls.provisioner, ANN_BOUND_BY_CONTROLLER: "yes"},
            storage=pvc.storage or 0,
            access_modes=pvc.access_modes,
            storage_class_name=cls.name,
            claim_ref=ClaimRef(pvc.namespace, pvc.name, pvc.uid),
            volume_mode=pvc.volume_mode,
            phase="Bound",
        )
        self.store.upsert(pv)
        annotations = {**pvc.annotations, ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
        self.store.upsert(replace(pvc, volume_name=pv.name, annotations=annotations, phase="Bound",
                                  resource_version=self._next()))

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        return await self.update_volume(replace(pv, phase=phase))

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        return await self.update_claim(replace(pvc, phase="Bound"))

