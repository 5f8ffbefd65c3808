"""The DRA objects the DynamicResources plugin reads, and the allocations it has made but the API does
not show yet: :class:`DraStore`, one per scheduler (``cache.dra``), filled by the cluster source.

Both sources feed it the same way: the embedded store applies the documents a user gives
(``outrigger explain``, ``apply``), a live cluster's informers apply what the API server sends. Each
object is decoded strictly on the way in (:meth:`DraStore.apply`; a failure is a :class:`DraDecodeError`
naming the field, and changes nothing) and every change is told to the listeners as
``listener(kind, old, new)`` (``old`` None for an addition, ``new`` None for a deletion): the scheduler
turns them into the cluster events the plugin registers (``ResourceClaim``, ``ResourceSlice``,
``DeviceClass``, ``ResourceClaimTemplate``), so a source only applies and removes.

On top of the objects, two layers of what this scheduler decided, as kube-scheduler's DRA manager keeps
them: *pending* allocations (Reserve made them, PreBind has not written them yet; other pods' Filter
already counts their devices as taken) and *assumed* claims (PreBind wrote the status; the written claim
reads as current until the source delivers that version or a newer one). PreBind writes through
:attr:`DraStore.writer`, a :class:`ClaimWriter`: :class:`MemoryClaimWriter` (this store, the embedded
cluster's API server) unless a live source sets its own.

This scheduler's writes of one claim go one at a time (:meth:`DraStore.writing`): the pods sharing a claim
reach PreBind together, and each write carries the resourceVersion it read, so writes of one claim sent
at once would all but one be refused (``409``) and sent again after a read. One after the other, each
starts from the version the one before it stored (:meth:`DraStore.latest`) and is not refused unless
someone else changed the claim meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from fractions import Fraction
from typing import Any, Protocol

from framework import features
from pluginhost.decode import FieldError
from pluginhost.errors import OutriggerError
from pluginhost.manifest import pod_to_dict, set_resource_decoder
from pluginhost.model import Pod

from .inuse import InUse
from .models import (
    DeviceClass,
    DeviceID,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    device_class_from_dict,
    resource_claim_from_dict,
    resource_claim_template_from_dict,
    resource_slice_from_dict,
)
from .taintrules import DeviceTaintRule, device_taint_rule_from_dict, patch_slice, selects_slice

__all__ = [
    "DRA_KINDS",
    "FINALIZER",
    "ClaimWriter",
    "DraConflict",
    "DraDecodeError",
    "DraListener",
    "DraObject",
    "DraStore",
    "MemoryClaimWriter",
    "merged_pod_status",
]

#: The finalizer an allocated claim carries (``resourceapi.Finalizer``): the claim controller removes
#: it once no pod uses the claim any more.
FINALIZER = "resource.kubernetes.io/delete-protection"

#: The kinds :meth:`DraStore.apply` takes (``resource.k8s.io/v1``); ResourceClaim and
#: ResourceClaimTemplate are namespaced, the others cluster-scoped.
DRA_KINDS = ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", "DeviceTaintRule")
_NAMESPACED = frozenset({"ResourceClaim", "ResourceClaimTemplate"})

DraObject = ResourceClaim | ResourceClaimTemplate | DeviceClass | ResourceSlice | DeviceTaintRule
#: ``listener(kind, old, new)`` after every change (see the module docstring).
DraListener = Callable[[str, Any, Any], None]

_DECODERS: dict[str, Callable[[object], DraObject]] = {
    "ResourceClaim": resource_claim_from_dict,
    "ResourceClaimTemplate": resource_claim_template_from_dict,
    "DeviceClass": device_class_from_dict,
    "ResourceSlice": resource_slice_from_dict,
    "DeviceTaintRule": device_taint_rule_from_dict,
}


class DraDecodeError(FieldError):
    """A DRA object that does not decode: the kind, the object (when its name could be read) and the field."""

    def __init__(self, kind: str, ident: str, error: FieldError) -> None:
        super().__init__(error.path, error.reason)
        self.kind = kind
        self.ident = ident
        where = f"{kind} {ident}" if ident else kind
        self.args = (f"{where}: {error}",)


class DraConflict(OutriggerError, RuntimeError):
    """A claim status write lost: the claim changed since it was read, or is gone. ``latest`` is the
    claim as the writer read it back after the conflict (None when it did not), what a retry starts
    from: the store's copy may not have caught up yet."""

    def __init__(self, message: str, latest: ResourceClaim | None = None) -> None:
        super().__init__(message)
        self.latest = latest


class ClaimWriter(Protocol):
    """Where PreBind's claim status writes go: the embedded store itself, or a cluster's API server."""

    async def write_claim_status(self, claim: ResourceClaim, status: Mapping[str, Any]) -> ResourceClaim:
        """Replace ``claim``'s ``status`` (``allocation``, ``reservedFor``, ``devices``, API JSON) as a PUT
        of the status subresource with ``claim.resource_version``; a conflict (the claim changed meanwhile,
        or is gone) raises :class:`DraConflict`. Returns the claim as stored (its new resourceVersion).

        A status with an ``allocation`` needs the claim to carry the finalizer :data:`FINALIZER`: when
        ``claim.finalizers`` lacks it, the writer first adds it with a normal update (a PUT of the claim,
        conflicts as above), as kube-scheduler does before it writes an allocation."""
        ...

    async def unreserve(self, claim: ResourceClaim, pod_uid: str) -> ResourceClaim | None:
        """Take the pod ``pod_uid`` out of ``claim``'s ``status.reservedFor`` (Unreserve), by uid and
        without a resourceVersion: another writer's change of the claim meanwhile does not refuse it.
        Returns the claim as stored, None when the claim is gone. A claim of another uid under that name
        is not touched (the API server refuses the uid in the patch: 422; the embedded store answers None)."""
        ...


def _ident(kind: str, obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return ""
    namespace = meta.get("namespace") if kind in _NAMESPACED else None
    return f"{namespace if isinstance(namespace, str) else 'default'}/{meta['name']}" if kind in _NAMESPACED else (
        meta["name"])


def _version(rv: str) -> int:
    # resourceVersions are opaque strings; the API server's are integers, and the assume cache compares
    # them as such (a version that is not one never replaces an assumed claim).
    try:
        return int(rv)
    except ValueError:
        return -1


class DraStore:
    """The ResourceClaims, ResourceClaimTemplates, DeviceClasses and ResourceSlices DynamicResources reads,
    with the allocations assumed in memory (Reserve) until the claim's status says them.

    ``claims`` and ``templates`` are keyed ``namespace/name``, ``classes``, ``slices`` and ``taint_rules``
    by name; they hold the source's versions, except ``slices``: each slice as the DeviceTaintRules
    patch it (:func:`~.taintrules.patch_slice`, with DRADeviceTaintRules on), what every reader of
    slices sees, as kube-scheduler's plugins read its tracker's ``ListWithDeviceTaintRules``; the
    source's versions are in ``raw_slices``. A rule added, changed or removed is a ``ResourceSlice``
    update for each slice whose devices' taints it changes (and nothing for the listeners otherwise).
    Read claims through :meth:`claim`, which answers this scheduler's assumed version first.
    """

    def __init__(self) -> None:
        self.claims: dict[str, ResourceClaim] = {}
        self.templates: dict[str, ResourceClaimTemplate] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.raw_slices: dict[str, ResourceSlice] = {}
        self.taint_rules: dict[str, DeviceTaintRule] = {}
        self._assumed: dict[str, ResourceClaim] = {}
        self._pending: dict[str, list[Any]] = {}  # claim uid -> [claim with its allocation, sharers]
        self._listeners: list[DraListener] = []
        # Told the key of a claim whose pending or assumed version changed (see add_view_listener).
        self._view_listeners: list[Callable[[str], None]] = []
        #: Advances with every change of the objects or of the pending and assumed claims.
        self.generation = 0
        #: What the allocator derives from the slices alone (its index, pools, selector results),
        #: shared by every cycle's allocator; a new dict whenever a slice changes, so an allocator
        #: holding the old one (with the old slices) never mixes the two.
        self.derived: dict[object, object] = {}
        # What the claims read (and the pending allocations) hold, kept as they change (allocated_state).
        self._in_use = InUse()
        # resourceVersions of the objects changed here (embedded store): above any a manifest is
        # likely to carry, increasing with every change.
        self._versions = itertools.count(1_000_000_001)
        #: Takes PreBind's claim status writes (the embedded default writes into this store).
        self.writer: ClaimWriter = MemoryClaimWriter(self)
        # Per claim key being written: its lock and how many writers hold or wait for it.
        self._writing: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def __len__(self) -> int:
        return len(self.claims) + len(self.templates) + len(self.classes) + len(self.slices) + len(self.taint_rules)

    def next_version(self) -> int:
        """A new resourceVersion for an object changed in this store (the embedded cluster's)."""
        return next(self._versions)

    def add_listener(self, listener: DraListener) -> None:
        """Call ``listener(kind, old, new)`` after every change :meth:`apply` and :meth:`remove` make."""
        self._listeners.append(listener)

    def remove_listener(self, listener: DraListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def add_view_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(key)`` (a claim's ``namespace/name``) whenever this scheduler's own view of
        the claim changes without the source changing it: a pending allocation made or given up, an
        assumed version set or dropped. (The snapshot publisher sends claims as the scheduler sees them;
        these are not cluster events, so the ordinary listeners do not hear them.)"""
        self._view_listeners.append(listener)

    def remove_view_listener(self, listener: Callable[[str], None]) -> None:
        if listener in self._view_listeners:
            self._view_listeners.remove(listener)

    def _view_changed(self, key: str) -> None:
        for listener in list(self._view_listeners):
            listener(key)

    # ---- the source's objects ------------------------------------------------------------------

    @staticmethod
    def decode(kind: str, obj: Mapping[str, Any]) -> DraObject:
        """``obj`` (API JSON) decoded as ``kind``, strictly; :class:`DraDecodeError` names what is wrong."""
        decoder = _DECODERS.get(kind)
        if decoder is None:
            raise DraDecodeError(kind, "", FieldError("kind", f"expected one of {', '.join(DRA_KINDS)}"))
        try:
            return decoder(obj)
        except FieldError as exc:
            raise DraDecodeError(kind, _ident(kind, obj), exc) from None

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Add or replace an object from its API JSON (``kind`` one of :data:`DRA_KINDS`). A failed
        decode raises :class:`DraDecodeError` and changes nothing."""
        self.put(self.decode(kind, obj))

    def put(self, new: DraObject) -> None:
        """Add or replace a decoded object."""
        kind = type(new).__name__
        table = self._table(kind)
        key = f"{new.namespace}/{new.name}" if kind in _NAMESPACED else new.name  # type: ignore[union-attr]
        old = table.get(key)
        table[key] = new
        if isinstance(new, DeviceTaintRule):
            self._rules_changed([r for r in (old, new) if r is not None])
            return
        if isinstance(new, ResourceSlice):
            old = self.slices.get(key)
            new = self.slices[key] = self._patched(new)
        if isinstance(new, ResourceClaim):
            assumed = self._assumed.get(key)
            if assumed is not None and (
                assumed.uid != new.uid or _version(new.resource_version) >= _version(assumed.resource_version)
            ):
                del self._assumed[key]
            self._held_changed(key)
        self._changed(kind, old, new)

    def remove(self, kind: str, namespace: str, name: str) -> DraObject | None:
        """Delete an object (``namespace`` "" for the cluster-scoped kinds); the old object, None if absent."""
        key = f"{namespace}/{name}" if kind in _NAMESPACED else name
        old: DraObject | None = self._table(kind).pop(key, None)
        if isinstance(old, DeviceTaintRule):
            self._rules_changed([old])
            return old
        if kind == "ResourceSlice":
            old = self.slices.pop(key, None)
        if kind == "ResourceClaim":
            self._assumed.pop(key, None)
            self._held_changed(key)
        if old is not None:
            self._changed(kind, old, None)
        return old

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "ResourceClaim": self.claims,
            "ResourceClaimTemplate": self.templates,
            "DeviceClass": self.classes,
            "ResourceSlice": self.raw_slices,
            "DeviceTaintRule": self.taint_rules,
        }
        if kind not in tables:
            raise DraDecodeError(kind, "", FieldError("kind", f"expected one of {', '.join(DRA_KINDS)}"))
        return tables[kind]

    def _patched(self, raw: ResourceSlice) -> ResourceSlice:
        if not self.taint_rules or not features.enabled("DRADeviceTaintRules"):
            return raw
        return patch_slice(raw, (self.taint_rules[k] for k in sorted(self.taint_rules)))

    def _rules_changed(self, rules: list[DeviceTaintRule]) -> None:
        """The slices ``rules`` (a rule's old and new versions) select, patched again: an update of each
        whose devices' taints changed (kube-scheduler's tracker sends one only then)."""
        self.generation += 1
        for name, raw in list(self.raw_slices.items()):
            if not any(selects_slice(r, raw) for r in rules):
                continue
            old, new = self.slices[name], self._patched(raw)
            if [d.taints for d in old.devices] != [d.taints for d in new.devices]:
                self.slices[name] = new
                self._changed("ResourceSlice", old, new)

    def _held_changed(self, key: str) -> None:
        # The claim read at ``key`` (as all_claims reads it) counts unless a pending allocation of it
        # counts instead.
        claim = self.claims.get(key)
        claim = self._assumed.get(key, claim) if claim is not None else None
        self._in_use.set(key, None if claim is not None and claim.uid and claim.uid in self._pending else claim)

    def _changed(self, kind: str, old: Any, new: Any) -> None:
        self.generation += 1
        if kind == "ResourceSlice":
            self.derived = {}
            self._in_use.slices_changed([s for s in (old, new) if s is not None])
        for listener in list(self._listeners):
            listener(kind, old, new)

    # ---- reading -------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """The claim as this scheduler knows it: its assumed version (written, not yet delivered), else the
        source's."""
        key = f"{namespace}/{name}"
        return self._assumed.get(key) or self.claims.get(key)

    def is_assumed(self, key: str) -> bool:
        """Whether the claim ``namespace/name`` reads as this scheduler's written version, not yet
        delivered by the source."""
        return key in self._assumed

    def all_claims(self) -> list[ResourceClaim]:
        """Every claim, assumed versions first (as :meth:`claim` reads them)."""
        return [self._assumed.get(k, c) for k, c in self.claims.items()]

    @property
    def in_use(self) -> InUse:
        """The devices in use as the claims change, and the free lists kept per node (:mod:`.inuse`)."""
        return self._in_use

    def allocated_state(self) -> tuple[frozenset[DeviceID], dict[DeviceID, dict[str, Fraction]]]:
        """The devices allocated to claims (pending allocations included): those held exclusively, and
        the capacity consumed of devices shared by several claims (kube-scheduler's GatherAllocatedState;
        devices taken with admin access are not in use)."""
        return self._in_use.state()

    # ---- this scheduler's allocations ----------------------------------------------------------

    def pending(self, uid: str) -> ResourceClaim | None:
        """The allocation Reserve made for the claim with ``uid`` and PreBind has not written yet."""
        entry = self._pending.get(uid)
        return None if entry is None else entry[0]

    def signal_pending(self, claim: ResourceClaim) -> None:
        """Record ``claim`` (with its allocation) as allocated in memory: other pods' Filter sees its
        devices as taken until :meth:`drop_pending`. A claim already pending gains a sharer; one whose
        current version is already allocated is not recorded (kube-scheduler's claim tracker)."""
        entry = self._pending.get(claim.uid)
        if entry is not None:
            entry[1] += 1
            return
        current = self.claim(claim.namespace, claim.name)
        if current is not None and current.uid == claim.uid and current.allocation is not None:
            return
        self._pending[claim.uid] = [claim, 1]
        self._in_use.set(("pending", claim.uid), claim)
        self._held_changed(claim.key)
        self.generation += 1
        self._view_changed(claim.key)

    def drop_pending(self, uid: str, force: bool = False) -> bool:
        """Give up one sharer of a pending allocation (every one with ``force``); True when the
        allocation is gone with it."""
        entry = self._pending.get(uid)
        if entry is None:
            return False
        if not force and entry[1] > 1:
            entry[1] -= 1
            return False
        del self._pending[uid]
        self._in_use.set(("pending", uid), None)
        self._held_changed(entry[0].key)
        self.generation += 1
        self._view_changed(entry[0].key)
        return True

    def assume(self, claim: ResourceClaim) -> None:
        """Read ``claim`` (as a write returned it) until the source delivers its version or a newer one."""
        current = self.claims.get(claim.key)
        if current is not None and current.uid == claim.uid and (
            _version(current.resource_version) >= _version(claim.resource_version)
        ):
            return
        self._assumed[claim.key] = claim
        self._held_changed(claim.key)
        self.generation += 1
        self._view_changed(claim.key)

    def latest(self, claim: ResourceClaim) -> ResourceClaim:
        """``claim``, or the version of it this store reads (:meth:`claim`) when that is newer: the same
        claim (uid) with a higher resourceVersion, such as the one this scheduler's last write stored."""
        current = self.claim(claim.namespace, claim.name)
        if current is None or current.uid != claim.uid or (
            _version(current.resource_version) <= _version(claim.resource_version)
        ):
            return claim
        return current

    @contextlib.asynccontextmanager
    async def writing(self, key: str) -> AsyncIterator[None]:
        """Hold the claim ``namespace/name`` for one write of it (or a write and its retries): this
        scheduler's other writers of that claim wait until it is done (see the module docstring)."""
        entry = self._writing.get(key)
        if entry is None:
            entry = self._writing[key] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._writing[key]

    def restore(self, key: str) -> None:
        """Drop the assumed version of the claim ``namespace/name`` (the source's reads again)."""
        if self._assumed.pop(key, None) is not None:
            self._held_changed(key)
            self.generation += 1
            self._view_changed(key)


class MemoryClaimWriter:
    """The embedded cluster's claim status writes: into the store itself, with a new resourceVersion,
    as the API server would (its listeners hear an update)."""

    def __init__(self, store: DraStore) -> None:
        self.store = store
        #: Merges status fields written to a pod (``extendedResourceClaimStatus``) into the pod the embedded
        #: scheduler holds, as the API server's patch would (the scheduler sets it; without one, the pod
        #: object given is changed).
        self.on_pod_status: Callable[[Pod, Mapping[str, Any]], None] | None = None

    async def write_claim_status(self, claim: ResourceClaim, status: Mapping[str, Any]) -> ResourceClaim:
        current = self.store.claims.get(claim.key)
        if current is None or current.uid != claim.uid:
            raise DraConflict(f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{claim.name}": '
                              "the object has been deleted or replaced")
        if current.resource_version != claim.resource_version:
            raise DraConflict(f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{claim.name}": '
                              "the object has been modified; please apply your changes to the latest version "
                              "and try again")
        raw = copy.deepcopy(current.raw) or _manifest(current)
        meta = raw.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.store.next_version())
        if status.get("allocation") is not None and FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FINALIZER]
        raw["status"] = copy.deepcopy(dict(status))
        if not raw["status"]:
            del raw["status"]
        stored = self.store.decode("ResourceClaim", raw)
        assert isinstance(stored, ResourceClaim)
        self.store.put(stored)
        return stored

    async def unreserve(self, claim: ResourceClaim, pod_uid: str) -> ResourceClaim | None:
        current = self.store.claims.get(claim.key)
        if current is None or current.uid != claim.uid:
            return None
        raw = copy.deepcopy(current.raw) or _manifest(current)
        status = raw.get("status") or {}
        kept = [r for r in status.get("reservedFor") or [] if not (isinstance(r, dict) and r.get("uid") == pod_uid)]
        if len(kept) == len(status.get("reservedFor") or []):
            return current  # not reserved for it: nothing to write (the API server's patch changes nothing)
        if kept:
            status["reservedFor"] = kept
        else:
            status.pop("reservedFor", None)
        raw["metadata"]["resourceVersion"] = str(self.store.next_version())
        stored = self.store.decode("ResourceClaim", raw)
        assert isinstance(stored, ResourceClaim)
        self.store.put(stored)
        return stored

    async def create_claim(self, manifest: Mapping[str, Any]) -> ResourceClaim:
        """Create a claim named from its ``generateName`` (five characters from the store's version, so
        runs repeat), with a new uid and resourceVersion."""
        raw = copy.deepcopy(dict(manifest))
        meta = raw.setdefault("metadata", {})
        version = self.store.next_version()
        suffix = "".join("bcdfghjklmnpqrstvwxz2456789"[version // 27 ** i % 27] for i in range(5))
        meta["name"] = f"{meta.get('generateName', '')}{suffix}"
        meta["uid"], meta["resourceVersion"] = f"claim-{version}", str(version)
        stored = self.store.decode("ResourceClaim", raw)
        assert isinstance(stored, ResourceClaim)
        self.store.put(stored)
        return stored

    async def delete_claim(self, claim: ResourceClaim) -> None:
        """Delete the claim (finalizers and all, as the scheduler removes its own before deleting)."""
        current = self.store.claims.get(claim.key)
        if current is not None and current.uid == claim.uid:
            self.store.remove("ResourceClaim", claim.namespace, claim.name)

    async def patch_pod_status(self, pod: Pod, patch: Mapping[str, Any]) -> None:
        """The embedded cluster's pods are the scheduler's: the status fields written go onto its pod."""
        status = copy.deepcopy(dict(patch.get("status") or {}))
        if self.on_pod_status is not None:
            self.on_pod_status(pod, status)
        else:
            pod.raw = merged_pod_status(pod, status)


def merged_pod_status(pod: Pod, status: Mapping[str, Any]) -> dict[str, Any]:
    """``pod``'s manifest with ``status``'s fields set in its status (a copy)."""
    raw = copy.deepcopy(pod_to_dict(pod))
    raw["status"] = {**(raw.get("status") or {}), **copy.deepcopy(dict(status))}
    return raw


def _manifest(claim: ResourceClaim) -> dict[str, Any]:
    # A claim built in code has no manifest: its identity is enough for a status write to start from.
    meta = {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid,
            "resourceVersion": claim.resource_version}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {}}}


def _check_manifest(kind: str, obj: dict[str, Any]) -> None:
    DraStore.decode(kind, obj)


# Manifests read from now on (the embedded store's, ``outrigger explain``'s) are decoded strictly
# where they are read, so an error names the document.
set_resource_decoder(_check_manifest)
