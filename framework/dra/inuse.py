"""What claims hold of the devices (kube-scheduler's AllocatedState), kept as the claims change, and
each node's free devices, kept until a device of one of its pools changes use or a slice of it changes.

Every pod with a claim to allocate reads it; walking every claim for each pod cost milliseconds a pod
with thousands of claims, so the store tells :class:`InUse` each claim that changes (the version it
reads, or a pending allocation) and :class:`InUse` adds and takes away what that claim holds.

The allocator's fast path (:mod:`.fastpath`) keeps here, per request shape and node, the node's
matching devices that are free (:meth:`InUse.free_lists`). A node's lists are dropped when a device of
one of its pools is taken or freed, or a slice of its pools or with its name changes
(:meth:`InUse.slices_changed`); the other nodes' lists are kept, so a pod that follows another costs a
lookup on every node but the one the other went to. :attr:`InUse.version` advances with each such
change: an allocator made from :meth:`InUse.state` uses and fills the lists only while it is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from .models import DeviceID, ResourceClaim, ResourceSlice

__all__ = ["InUse", "held_by"]

#: A pool: (driver, pool name).
PoolID = tuple[str, str]
#: Request shapes whose free lists are kept at most (selectors written per pod must not grow them
#: without bound); the oldest shape goes first.
_SHAPES = 64

#: What one claim holds: the devices it has exclusively, and per share of a shared device the
#: capacity it consumes.
Held = tuple[tuple[DeviceID, ...], tuple[tuple[DeviceID, tuple[tuple[str, Fraction], ...]], ...]]
_NOTHING: Held = ((), ())


def held_by(claim: ResourceClaim | None) -> Held:
    """What ``claim``'s allocation holds (devices taken with admin access are not in use)."""
    if claim is None or claim.allocation is None:
        return _NOTHING
    exclusive: list[DeviceID] = []
    shared: list[tuple[DeviceID, tuple[tuple[str, Fraction], ...]]] = []
    for r in claim.allocation.results:
        device = (r.driver, r.pool, r.device)
        if r.share_id:
            shared.append((device, tuple((r.consumed_capacity or {}).items())))
        elif not r.admin_access:
            exclusive.append(device)
    return tuple(exclusive), tuple(shared)


class InUse:
    """The sum of what each owner's claim holds; an owner is any hashable name the caller gives (the
    store: a claim's key, or a pending allocation's uid)."""

    def __init__(self) -> None:
        self._held: dict[object, Held] = {}
        self._exclusive: dict[DeviceID, int] = {}  # holders per device
        self._shares: dict[DeviceID, int] = {}  # shares per shared device
        self._consumed: dict[DeviceID, dict[str, tuple[int, Fraction]]] = {}  # per capacity: shares, sum
        #: Advances whenever what is in use or a slice changes (see the module docstring).
        self.version = 0
        self._free: dict[object, dict[str, Any]] = {}  # request shape -> node name -> its free list
        self._nodes_of_pool: dict[PoolID, set[str]] = {}  # the nodes whose free lists a pool's devices are in

    def set(self, owner: object, claim: ResourceClaim | None) -> None:
        """``owner``'s claim is now ``claim`` (None: it has none)."""
        new = held_by(claim)
        old = self._held.pop(owner, _NOTHING)
        if old == new:
            if new != _NOTHING:
                self._held[owner] = new
            return
        self._add(old, -1)
        self._add(new, 1)
        if new != _NOTHING:
            self._held[owner] = new

    def _add(self, held: Held, sign: int) -> None:
        exclusive, shared = held
        for device in exclusive:
            n = self._exclusive.get(device, 0) + sign
            if n:
                self._exclusive[device] = n
            else:
                del self._exclusive[device]
            if n == 0 or (n == 1 and sign == 1):  # the device is now free, or now taken
                self._touch((device[0], device[1]))
        for device, amounts in shared:
            self._touch((device[0], device[1]))
            used = self._consumed.setdefault(device, {})
            for name, amount in amounts:
                count, total = used.get(name, (0, Fraction(0)))
                if count + sign:
                    used[name] = (count + sign, total + sign * amount)
                else:
                    del used[name]
            n = self._shares.get(device, 0) + sign
            if n:
                self._shares[device] = n
            else:
                del self._shares[device]
                self._consumed.pop(device, None)

    def state(self) -> tuple[frozenset[DeviceID], dict[DeviceID, dict[str, Fraction]]]:
        """The devices held exclusively, and the capacity consumed of each shared device (copies)."""
        consumed: Mapping[DeviceID, dict[str, tuple[int, Fraction]]] = self._consumed
        return frozenset(self._exclusive), {
            device: {name: total for name, (_, total) in consumed.get(device, {}).items()} for device in self._shares}

    # ---- the fast path's free lists ------------------------------------------------------------

    def free_lists(self, shape: object) -> dict[str, Any]:
        """The free lists kept for one request shape, by node name (the caller adds to it through
        :meth:`keep`)."""
        lists = self._free.get(shape)
        if lists is None:
            if len(self._free) >= _SHAPES:
                del self._free[next(iter(self._free))]
            lists = self._free[shape] = {}
        return lists

    def keep(self, shape: object, node: str, pools: Iterable[PoolID], entry: object) -> None:
        """Keep ``entry`` as ``node``'s free list for ``shape``, until a device of one of ``pools``
        (the pools of the node's slices) changes use or one of their slices changes."""
        self.free_lists(shape)[node] = entry
        for pool in pools:
            self._nodes_of_pool.setdefault(pool, set()).add(node)

    def kept(self, node: str) -> list[object]:
        """The free lists kept for ``node``, one per request shape that has one, oldest shape first."""
        return [lists[node] for lists in self._free.values() if node in lists]

    def slices_changed(self, slices: Iterable[ResourceSlice]) -> None:
        """The slices (old and new versions) of a change: the free lists of their nodes and pools go (all
        of them for a slice without a node name, which may concern any node)."""
        for s in slices:
            self._touch((s.driver, s.pool))
            if not s.node_name:
                self._free.clear()
                self._nodes_of_pool.clear()
                continue
            for lists in self._free.values():
                lists.pop(s.node_name, None)
        self.version += 1

    def _touch(self, pool: PoolID) -> None:
        self.version += 1
        nodes = self._nodes_of_pool.pop(pool, None)
        if nodes:
            for lists in self._free.values():
                for node in nodes:
                    lists.pop(node, None)
