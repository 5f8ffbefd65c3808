"""Reservations: resources held on a node for the pods a Reservation's owners select.

A Reservation (Koordinator's ``scheduling.koordinator.sh/v1alpha1``) is scheduled through the normal
cycle as its *reserve pod* (its template, in no namespace, annotated ``outrigger.io/reservation``).
Once bound, the reserve pod sits in the cache like any pod, so every other pod sees its resources as
used. The ``Reservation`` plugin (:mod:`framework.plugins.reservation`) lets an owner pod see them as
free on that node (a Filter/Score transformer) and prefer it (Score); at Reserve the owner takes what
it needs from the reservation and the reserve pod shrinks by that much (an allocate-once reservation
leaves the cache entirely), at Unreserve it gives it back, at PostBind an allocate-once reservation is
Succeeded. Expiry (TTL or ``expires``) removes the reserve pod; pending pods get the cluster event.

Phases: ``Pending`` (not placed yet), ``Available`` (holding resources on its node), ``Succeeded``
(used up by its owner), ``Expired``, ``Failed`` (its reserve pod was deleted, e.g. preempted).

Span attributes (``outrigger.reservation.*``) go on the current span, so a traced cycle shows which
reservation a pod matched and consumed, and a reserve pod's binding shows the reservation's node.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pluginhost.model import PODS, RESERVATION_ANNOTATION, RESERVATION_NAMESPACE, Pod, Reservation, ResourceList
from pluginhost.status import Code, Status

from .observe import tracing
from .plugins.labels import label_selector_matches

__all__ = [
    "AVAILABLE",
    "EXPIRED",
    "FAILED",
    "PENDING",
    "SUCCEEDED",
    "ReservationRecord",
    "Reservations",
    "is_reserve_pod",
    "owner_matches",
]

PENDING = "Pending"
AVAILABLE = "Available"
SUCCEEDED = "Succeeded"
EXPIRED = "Expired"
FAILED = "Failed"


def is_reserve_pod(pod: Pod) -> bool:
    """Whether ``pod`` is a Reservation's reserve pod."""
    return pod.namespace == RESERVATION_NAMESPACE and RESERVATION_ANNOTATION in pod.annotations


def owner_matches(reservation: Reservation, pod: Pod) -> bool:
    """Whether ``pod`` is one of the reservation's owners (an object reference or a label selector)."""
    if is_reserve_pod(pod):
        return False
    for owner in reservation.owners:
        if owner.name:
            if owner.namespace == pod.namespace and owner.name == pod.name and (not owner.uid or owner.uid == pod.uid):
                return True
        elif owner.label_selector is not None and label_selector_matches(owner.label_selector, pod.labels):
            return True
    return False


@dataclass(slots=True)
class ReservationRecord:
    """A reservation and what happened to it."""

    reservation: Reservation
    phase: str = PENDING
    node_name: str = ""
    # What the reserve pod still holds on the node (it shrinks as owners take from it).
    held: ResourceList = field(default_factory=dict)
    allocated: ResourceList = field(default_factory=dict)
    owners: dict[str, tuple[str, ResourceList]] = field(default_factory=dict)  # pod uid -> (key, taken)
    last_status: Status | None = None

    @property
    def name(self) -> str:
        return self.reservation.name

    @property
    def uid(self) -> str:
        return self.reservation.uid


class Reservations:
    """The scheduler's reservations, by name. ``cache`` is the scheduler's :class:`~framework.cache.Cache`;
    ``clock`` gives the time (seconds since the epoch)."""

    def __init__(self, cache: Any, clock: Callable[[], float] = time.time) -> None:
        self.cache = cache
        self.clock = clock
        self.records: dict[str, ReservationRecord] = {}
        self._by_uid: dict[str, str] = {}  # reserve pod uid -> reservation name
        # Called with the reserve pod when a reservation gives resources back to everyone (its owner
        # used less than it held, or it left the cache): the scheduler turns it into a cluster event.
        self.on_release: Callable[[Pod], None] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def get(self, name: str) -> ReservationRecord | None:
        return self.records.get(name)

    def of_pod(self, pod: Pod) -> ReservationRecord | None:
        """The record of a reserve pod."""
        name = self._by_uid.get(pod.uid)
        return None if name is None else self.records.get(name)

    def add(self, reservation: Reservation) -> ReservationRecord:
        rec = self.records[reservation.name] = ReservationRecord(reservation, held=dict(reservation.requests))
        self._by_uid[reservation.uid] = reservation.name
        return rec

    def update(self, reservation: Reservation) -> ReservationRecord:
        """New owners, TTL or allocateOnce for an existing reservation (the template is fixed)."""
        rec = self.records[reservation.name]
        reservation.uid = rec.reservation.uid
        reservation.template = rec.reservation.template
        reservation.creation_timestamp = rec.reservation.creation_timestamp
        rec.reservation = reservation
        return rec

    def remove(self, name: str) -> ReservationRecord | None:
        rec = self.records.pop(name, None)
        if rec is not None:
            self._by_uid.pop(rec.uid, None)
        return rec

    def reserve_pod(self, rec: ReservationRecord) -> Pod:
        """The reserve pod as the cache should hold it now (its held resources)."""
        return dataclasses.replace(rec.reservation.template, node_name=rec.node_name, requests=dict(rec.held))

    # ---- lifecycle ---------------------------------------------------------------------------

    def bound(self, pod: Pod, node_name: str) -> None:
        """The reserve pod was bound: the reservation holds its resources on ``node_name``."""
        rec = self.of_pod(pod)
        if rec is not None:
            rec.phase = AVAILABLE
            rec.node_name = node_name
            rec.last_status = None
            span_attributes(rec, phase=AVAILABLE)

    def reserve_pod_deleted(self, pod: Pod, reason: str) -> None:
        """The reserve pod went away while the reservation was in use (preempted, ...): it holds
        nothing any more."""
        rec = self.of_pod(pod)
        if rec is not None and rec.phase in (PENDING, AVAILABLE):
            rec.phase = FAILED
            rec.held = {}
            rec.last_status = Status(Code.Unschedulable, (f"reservation {rec.name}'s reserve pod was {reason}",))

    def matching(self, pod: Pod) -> list[ReservationRecord]:
        """Available reservations ``pod`` may consume, by name."""
        if is_reserve_pod(pod):
            return []
        out = [
            rec for rec in self.records.values()
            if rec.phase == AVAILABLE and rec.node_name and owner_matches(rec.reservation, pod) and _has(rec.held)
        ]
        return sorted(out, key=lambda r: r.name)

    def allocate(self, name: str, pod: Pod) -> ResourceList:
        """``pod`` takes what it needs (up to what is held) from reservation ``name``; the reserve pod
        in the cache shrinks by as much (or leaves it, for allocate-once)."""
        rec = self.records[name]
        taken: ResourceList = {}
        for resource, held in rec.held.items():
            want = 1 if resource == PODS else pod.requests.get(resource, 0)
            take = min(held, want)
            if take > 0:
                taken[resource] = take
        if rec.reservation.allocate_once:
            taken = dict(rec.held)  # the owner uses it up: whatever it did not need is released
        for resource, amount in taken.items():
            rec.held[resource] = rec.held.get(resource, 0) - amount
            rec.allocated[resource] = rec.allocated.get(resource, 0) + amount
        rec.owners[pod.uid] = (pod.key, taken)
        self._replace_in_cache(rec)
        span_attributes(rec, owner=pod.key, taken=taken)
        return taken

    def release(self, name: str, pod: Pod) -> None:
        """Undo :meth:`allocate` (the owner was unreserved, or deleted from a reusable reservation)."""
        rec = self.records.get(name)
        if rec is None or pod.uid not in rec.owners:
            return
        _, taken = rec.owners.pop(pod.uid)
        for resource, amount in taken.items():
            rec.held[resource] = rec.held.get(resource, 0) + amount
            rec.allocated[resource] = rec.allocated.get(resource, 0) - amount
        rec.allocated = {r: a for r, a in rec.allocated.items() if a}
        if rec.phase in (AVAILABLE, SUCCEEDED):
            rec.phase = AVAILABLE
            self._replace_in_cache(rec)

    def confirm(self, name: str, pod: Pod) -> None:
        """The owner is bound: an allocate-once reservation has done its job."""
        rec = self.records.get(name)
        if rec is not None and pod.uid in rec.owners and rec.reservation.allocate_once:
            rec.phase = SUCCEEDED

    def owner_deleted(self, pod: Pod) -> None:
        """A deleted owner gives back what it took from a reusable reservation."""
        for rec in list(self.records.values()):
            if pod.uid in rec.owners and not rec.reservation.allocate_once:
                self.release(rec.name, pod)

    def due(self) -> list[ReservationRecord]:
        """Pending or Available reservations whose expiry has passed."""
        now = self.clock()
        out = []
        for rec in self.records.values():
            at = rec.reservation.expires_at()
            if rec.phase in (PENDING, AVAILABLE) and at is not None and at <= now:
                out.append(rec)
        return out

    def _replace_in_cache(self, rec: ReservationRecord) -> None:
        uid = rec.uid
        old = self.cache.remove_pod(uid) if self.cache.node_of(uid) is not None else None
        if rec.node_name and _has(rec.held):
            self.cache.add_pod(self.reserve_pod(rec))
        if old is not None and self.on_release is not None and rec.reservation.allocate_once:
            self.on_release(old)


def span_attributes(rec: ReservationRecord, *, phase: str = "", owner: str = "",
                    taken: ResourceList | None = None) -> None:
    """Describe ``rec`` on the current span (a no-op without tracing)."""
    span = tracing.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("outrigger.reservation.name", rec.name)
    span.set_attribute("outrigger.reservation.node", rec.node_name)
    span.set_attribute("outrigger.reservation.phase", phase or rec.phase)
    if owner:
        span.set_attribute("outrigger.reservation.owner", owner)
    if taken is not None:
        span.set_attribute("outrigger.reservation.allocated", ",".join(f"{r}={a}" for r, a in sorted(taken.items())))


def _has(amounts: ResourceList) -> bool:
    return any(v > 0 for r, v in amounts.items() if r != PODS)
