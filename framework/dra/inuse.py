"""What claims hold of the devices (kube-scheduler's AllocatedState), kept as the claims change.

Every pod with a claim to allocate reads it; walking every claim for each pod cost milliseconds a pod
with thousands of claims, so the store tells :class:`InUse` each claim that changes (the version it
reads, or a pending allocation) and :class:`InUse` adds and takes away what that claim holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from .models import DeviceID, ResourceClaim

__all__ = ["InUse", "held_by"]

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
        for device, amounts in shared:
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
