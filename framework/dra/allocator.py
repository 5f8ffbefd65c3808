"""The structured-parameters allocator: for one node, devices for every request of a pod's unallocated
claims, or the reason there are none.

The search is kube-scheduler 1.37's (``structured/internal/incubating``), so that the same devices are
chosen for the same input: claims in order, requests in order, ``firstAvailable`` subrequests in order;
for each device to pick, pools in :func:`~.pools.gather_pools` order, their slices by name, devices in
slice order, starting after the device picked last for the same request; the first complete solution
wins, and a dead end undoes the last pick and tries the next device (backtracking). ``All`` requests
take every matching device of every pool, and fail when a pool is incomplete or invalid.

:meth:`Allocator.allocate` answers with an :class:`Allocation`: one :class:`~.models.AllocationResult`
per claim; or none, because the node has not the devices, or with an error (kube-scheduler's texts) for
claims that cannot be allocated anywhere (a missing class, a broken selector) or, with ``on_node`` set,
for a node whose pools are invalid.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pluginhost.model import Node, NodeSelectorRequirement, NodeSelectorTerm

from . import fastpath
from .capacity import consumed_by, fits
from .constraints import Constraint, tolerated
from .inuse import InUse
from .models import (
    AllocationResult,
    Device,
    DeviceClass,
    DeviceID,
    DeviceResult,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from .pools import Pool, gather_pools, node_matches
from .selectors import SelectorFailure, compile_selector

__all__ = ["MAX_RESULTS", "Allocation", "Allocator", "DeviceID"]

#: ``resourceapi.AllocationResultsMaxSize``: devices per claim.
MAX_RESULTS = 32
#: The key of the slices-by-node index in :attr:`Allocator.derived` (and, with a node name, of its pools).
_INDEX = "slices by node"
_NO_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue())"
    " or guarding the check with has() for optional fields"
)


@dataclass(frozen=True, slots=True)
class Allocation:
    """The allocator's answer for one node: ``results``, one per claim, when the claims fit; otherwise
    None, with ``error`` empty (the node lacks the devices) or kube-scheduler's text; ``on_node``: the
    error concerns this node only (invalid pools), other nodes may still serve the claims."""

    results: tuple[AllocationResult, ...] | None
    error: str = ""
    on_node: bool = False
    #: The search ran past its deadline (the caller's filter timeout) and was given up.
    timed_out: bool = False
    #: When asked to defer and the claims fit: builds ``results`` (``results`` itself is None then).
    deferred: Callable[[], tuple[AllocationResult, ...]] | None = None

    @property
    def fits(self) -> bool:
        """Whether the claims fit the node (their results built or deferred)."""
        return self.results is not None or self.deferred is not None


_NONE = Allocation(None)
_INVALID = Allocation(None, "invalid resource pools were encountered", on_node=True)


class _Failed(Exception):
    """Ends the search with an error (becomes :attr:`Allocation.error`)."""

    def __init__(self, message: str, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


class _TimedOut(Exception):
    """The search ran past its deadline."""


class _MaxSize(Exception):
    """A claim would get more than :data:`MAX_RESULTS` devices down this path."""


@dataclass(slots=True)
class _Request:
    request: ExactRequest
    parent: str  # the request's name when this is one of its subrequests
    device_class: DeviceClass
    count: int = 0
    all_devices: list[tuple[Pool, ResourceSlice, Device]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass(slots=True)
class _Pick:
    """One device added to a claim's result."""

    request: str  # request or request/subrequest
    device_id: DeviceID
    slice: ResourceSlice
    device: Device
    share_id: str = ""
    consumed: dict[str, Fraction] | None = None


class Allocator:
    """Allocation over one set of slices, classes (by name) and what other claims hold: ``allocated``,
    devices allocated to them exclusively; ``shared``, the capacity they consume of devices that allow
    multiple allocations (kube-scheduler's AllocatedState). Reusable for many nodes.

    ``derived`` holds what depends on the slices alone, so that allocators over the same slices share
    it (the store's :attr:`~.store.DraStore.derived`, replaced whenever a slice changes): the slices by
    node name, each node's pools (when no slice lacks a node name, so node labels cannot matter) and
    each selector's result per device. Without it, an allocator keeps its own.

    ``tally``: the store's :class:`~.inuse.InUse` that ``allocated`` and ``shared`` were just read from;
    the fast path keeps each node's free devices in it, and reuses those earlier allocators kept."""

    def __init__(
        self,
        slices: Sequence[ResourceSlice],
        classes: Mapping[str, DeviceClass],
        allocated: Collection[DeviceID] = (),
        shared: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
        derived: dict[object, object] | None = None,
        fast: bool = True,
        tally: InUse | None = None,
    ) -> None:
        self.slices = list(slices)
        self._tally = tally  # its free lists are used and filled only while it is unchanged since now
        self._stamp = tally.version if tally is not None else -1
        #: Whether claims of the common shape go by :mod:`.fastpath` (same answers; off to compare).
        self.fast = fast
        self._plan: tuple[tuple[ResourceClaim, ...], fastpath.Plan | None] | None = None
        self.classes = classes
        self.allocated = frozenset(allocated)
        self.shared = dict(shared or {})
        self.derived: dict[object, object] = {} if derived is None else derived
        index = self.derived.get(_INDEX)
        if index is None:
            by_node: dict[str, list[ResourceSlice]] = {}
            unnamed: list[ResourceSlice] = []
            for s in self.slices:
                (by_node.setdefault(s.node_name, []) if s.node_name else unnamed).append(s)
            index = self.derived[_INDEX] = (by_node, unnamed)
        self._by_node: dict[str, list[ResourceSlice]] = index[0]  # type: ignore[index]
        self._unnamed: list[ResourceSlice] = index[1]  # type: ignore[index]

    @property
    def unnamed(self) -> bool:
        """Whether some slice has no node name (then node labels may decide which pools a node has)."""
        return bool(self._unnamed)

    def pools(self, node: Node) -> list[Pool]:
        """The pools ``node`` can allocate from (:func:`~.pools.gather_pools`), without walking every slice."""
        own: list[ResourceSlice] = self._by_node.get(node.name, [])
        if self._unnamed:
            return gather_pools(node, self.slices, own + self._unnamed)
        key = (_INDEX, node.name)
        pools = self.derived.get(key)
        if pools is None:
            pools = self.derived[key] = gather_pools(node, self.slices, own)
        return pools  # type: ignore[return-value]

    def free_lists(self, shape: object) -> dict[str, Any] | None:
        """The fast path's free lists for ``shape`` by node name (:meth:`.inuse.InUse.free_lists`), when
        this allocator has a tally that has not changed since it was made; else None."""
        tally = self._tally
        return tally.free_lists(shape) if tally is not None and tally.version == self._stamp else None

    def keep_free(self, node: str, shape: object, entry: object) -> None:
        """Keep ``entry`` as ``node``'s free list for ``shape``, until a device of one of its pools changes."""
        if self._tally is not None:
            self._tally.keep(shape, node, {(s.driver, s.pool) for s in self._by_node.get(node, ())}, entry)

    @staticmethod
    def answer(fast: fastpath.Picked | str | None) -> Allocation | None:
        """The answer for a node given the fast path's (results deferred; None: the search answers)."""
        if isinstance(fast, fastpath.Picked):
            return Allocation(None, deferred=fast.results)
        if fast == "invalid":
            return _INVALID
        return _NONE if fast == "" else None

    def allocate(
        self, node: Node, claims: Sequence[ResourceClaim], deadline: float | None = None, defer: bool = False
    ) -> Allocation:
        """Devices for ``claims`` on ``node`` (see the module docstring); a search still going at
        ``deadline`` (a ``time.monotonic()`` value) is given up (:attr:`Allocation.timed_out`). With
        ``defer``, the results may come as :attr:`Allocation.deferred`, built only if asked for."""
        the_plan = self._fast_plan(claims) if self.fast else None
        if the_plan is not None:
            if deadline is not None and time.monotonic() > deadline:
                return Allocation(None, "context deadline exceeded", timed_out=True)
            fast = fastpath.allocate(self, node, claims, the_plan)
            if isinstance(fast, fastpath.Picked) and not defer:
                return Allocation(fast.results())
            answer = self.answer(fast)
            if answer is not None:
                return answer
        try:
            results = _Search(self, node, list(claims), deadline).run()
        except _Failed as failed:
            return Allocation(None, str(failed), failed.on_node)
        except _TimedOut:
            return Allocation(None, "context deadline exceeded", timed_out=True)
        return Allocation(None if results is None else tuple(results))

    def allocate_each(
        self, nodes: Sequence[Node], claims: Sequence[ResourceClaim], timeout: float = 0.0, defer: bool = False
    ) -> list[Allocation]:
        """:meth:`allocate` on each of ``nodes``, each with ``timeout`` seconds from its start (0: none)."""
        the_plan = self._fast_plan(claims) if self.fast else None
        if the_plan is None:
            return [self.allocate(n, claims, time.monotonic() + timeout if timeout > 0 else None, defer) for n in nodes]
        start = time.monotonic() if timeout > 0 else 0.0
        answers, handover = fastpath.allocate_each(self, nodes, claims, the_plan)
        # The fast path answered every node at once; each node's share of that time is below its
        # timeout when the whole was, and only otherwise are the nodes' clocks read one by one.
        clocked = timeout > 0 and time.monotonic() - start > timeout
        if defer and not handover and not clocked:
            return answers  # type: ignore[return-value]
        out: list[Allocation] = []
        for node, answer in zip(nodes, answers, strict=True):
            # As in allocate: a node is given up when its clock is past its deadline at the start.
            if clocked and time.monotonic() + timeout < time.monotonic():
                out.append(Allocation(None, "context deadline exceeded", timed_out=True))
            elif answer is None:
                out.append(self.allocate(node, claims, time.monotonic() + timeout if timeout > 0 else None, defer))
            else:
                assert isinstance(answer, Allocation)
                out.append(Allocation(answer.deferred()) if answer.deferred is not None and not defer else answer)
        return out

    def _fast_plan(self, claims: Sequence[ResourceClaim]) -> fastpath.Plan | None:
        # A cycle asks for the same claims on every node: the plan is made once for them (and holds
        # them, so that the identities it compares stay theirs).
        kept = self._plan
        if kept is None or len(kept[0]) != len(claims) or not all(map(operator.is_, kept[0], claims)):
            kept = self._plan = (tuple(claims), fastpath.plan(self, claims, MAX_RESULTS))
        return kept[1]


class _Search:
    def __init__(self, owner: Allocator, node: Node, claims: list[ResourceClaim], deadline: float | None) -> None:
        self.deadline = deadline
        self.node = node
        self.claims = claims
        self.classes = owner.classes
        self.allocated = owner.allocated
        self.shared = owner.shared
        #: Capacity being consumed by this search, per shared device: one entry per allocation.
        self.sharing: dict[DeviceID, list[dict[str, Fraction]]] = {}
        self.pools = owner.pools(node)
        self.selector_results = owner.derived
        self.requests: dict[tuple[int, int, int], _Request] = {}
        self.chosen_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.in_use: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Pick]] = [[] for _ in claims]
        self.available: dict[str, dict[str, dict[str, Fraction]]] = {}
        self.consumed: dict[str, dict[str, dict[str, Fraction]]] = {}

    def run(self) -> list[AllocationResult] | None:
        for ci, claim in enumerate(self.claims):
            self._prepare(ci, claim)
        try:
            done = self._one(ci=0, ri=0, si=0, di=0, in_sub=False, start=(0, 0, 0))
        except _MaxSize:
            raise _Failed("allocation max size exceeded") from None
        if not done:
            if any(p.invalid for p in self.pools):
                raise _Failed("invalid resource pools were encountered", on_node=True)
            return None
        return [self._result(ci, claim) for ci, claim in enumerate(self.claims)]

    # -- preparation -----------------------------------------------------------------------------

    def _prepare(self, ci: int, claim: ResourceClaim) -> None:
        total = 0
        for ri, request in enumerate(claim.requests):
            if request.exactly is not None:
                rd = self._request_data(ci, ri, 0, claim, request.exactly, "")
                least = rd.count
            else:
                least = MAX_RESULTS + 1
                for si, sub in enumerate(request.first_available):
                    rd = self._request_data(ci, ri, si, claim, sub, request.name)
                    least = min(least, rd.count)
            if least > MAX_RESULTS - total:
                raise _Failed(
                    f"claim {claim.key}, request {request.name}: adding {least} devices exceeds the claim limit"
                    f" of {MAX_RESULTS}, with {total} already accounted for"
                )
            total += least
        constraints = []
        for i, c in enumerate(claim.constraints):
            if not c.match_attribute and not c.distinct_attribute:
                raise _Failed(f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)")
            constraints.append(Constraint(c))
        self.constraints.append(constraints)

    def _request_data(
        self, ci: int, ri: int, si: int, claim: ResourceClaim, req: ExactRequest, parent: str
    ) -> _Request:
        where = f"claim {claim.key}, request {req.name}"
        cls = self.classes.get(req.device_class)
        if cls is None:
            raise _Failed(
                f"{where}: could not retrieve device class {req.device_class}:"
                f' deviceclass.resource.k8s.io "{req.device_class}" not found'
            )
        rd = _Request(req, parent, cls, count=req.count)
        self.requests[(ci, ri, si)] = rd
        if req.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise _Failed(
                        f"{where}: asks for all devices, but resource pool {pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise _Failed(f"{where}: asks for all devices, but resource pool {pool.id} is currently invalid")
                for s in pool.slices:
                    for d in s.devices:
                        # All means all that could serve the request, were they free (hence used = {}).
                        if self._selectable(ci, ri, si, rd, s, d) and self._fits(ci, rd, s, d, {}, d.name):
                            rd.all_devices.append((pool, s, d))
            rd.count = len(rd.all_devices)
        return rd

    # -- matching --------------------------------------------------------------------------------

    def _selectable(self, ci: int, ri: int, si: int, rd: _Request, s: ResourceSlice, d: Device) -> bool:
        key = ((s.driver, s.pool, d.name), ci, ri, si)
        hit = self.matches.get(key)
        if hit is not None:
            return hit
        ok = self._selectors(ci, rd.device_class.selectors, s, d, rd.device_class.name) and self._selectors(
            ci, rd.request.selectors, s, d, ""
        )
        if ok and s.per_device_node_selection:
            ok = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
        self.matches[key] = ok
        return ok

    def _selectors(self, ci: int, selectors: Sequence[str], s: ResourceSlice, d: Device, class_name: str) -> bool:
        owner = f"class {class_name}" if class_name else f"claim {self.claims[ci].key}"
        for i, expression in enumerate(selectors):
            # A selector's result depends on the expression and the device alone; the device objects
            # live as long as the slices this cache belongs to.
            key = (expression, s.driver, id(d))
            matched = self.selector_results.get(key)
            if matched is None:
                selector = compile_selector(expression)
                matched = self.selector_results[key] = (
                    selector
                    if isinstance(selector, SelectorFailure)
                    else selector.matches(s.driver, d.attributes, d.capacity, d.allow_multiple_allocations)
                )
            if matched is False:
                return False
            if isinstance(matched, SelectorFailure):
                if matched.compile:
                    raise _Failed(f"{owner}: selector #{i}: CEL compile error: {matched.message}")
                text = matched.message + (_NO_KEY_HINT if "no such key:" in matched.message else "")
                device = f"{s.driver}/{s.pool}/{d.name}"
                raise _Failed(f"{owner}: selector #{i} on device {device}: CEL runtime error: {text}")
        return True

    # -- the search ------------------------------------------------------------------------------

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        if ci >= len(self.claims):
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _TimedOut
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _MaxSize:
                return False
        rd = self.requests[(ci, ri, si)]
        if not in_sub and rd.parent:
            return self._subrequests(ci, ri)
        if rd.request.mode == "All" and not rd.all_devices:
            return False
        if di >= rd.count:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if rd.count - di > MAX_RESULTS - len(self.results[ci]):
            raise _MaxSize
        if rd.request.mode == "All":
            pool, s, d = rd.all_devices[di]
            undo = self._take(ci, ri, si, rd, pool, s, d, must=True)
            if undo is None:
                return False
            try:
                if self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0)):
                    return True
            except _MaxSize:
                undo()
                raise
            undo()
            return False
        return self._pick(ci, ri, si, di, in_sub, start, rd)

    def _subrequests(self, ci: int, ri: int) -> bool:
        all_too_big = True
        si = 0
        while (ci, ri, si) in self.requests:
            try:
                done = self._one(ci, ri, si, 0, True, (0, 0, 0))
            except _MaxSize:
                si += 1
                continue
            all_too_big = False
            if done:
                self.chosen_sub[(ci, ri)] = si
                return True
            si += 1
        if all_too_big:
            raise _MaxSize
        return False

    def _pick(
        self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int], rd: _Request
    ) -> bool:
        admin = bool(rd.request.admin_access)
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            first_slice = start[1] if pi == start[0] else 0
            for sli in range(first_slice, len(pool.slices)):
                s = pool.slices[sli]
                first_device = start[2] if (pi, sli) == start[:2] else 0
                for dvi in range(first_device, len(s.devices)):
                    d = s.devices[dvi]
                    device_id = (pool.driver, pool.name, d.name)
                    if admin and ci in self.in_use.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable(ci, ri, si, rd, s, d):
                        continue
                    if not self._fits(ci, rd, s, d, self._used(device_id), "/".join(device_id)):
                        continue
                    undo = self._take(ci, ri, si, rd, pool, s, d, must=False)
                    if undo is None:
                        continue
                    try:
                        if self._one(ci, ri, si, di + 1, in_sub, (pi, sli, dvi + 1)):
                            return True
                    except _MaxSize:
                        undo()
                        raise
                    undo()
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.allocated or bool(self.in_use.get(device_id))

    def _take(
        self, ci: int, ri: int, si: int, rd: _Request, pool: Pool, s: ResourceSlice, d: Device, must: bool
    ) -> Callable[[], None] | None:
        """Add one device to the claim's result; the undo, or None when it cannot be added."""
        device_id = (pool.driver, pool.name, d.name)
        admin = bool(rd.request.admin_access)
        multiple = d.allow_multiple_allocations
        if not multiple and admin and ci in self.in_use.get(device_id, ()):
            return None
        if not admin and self._in_use(device_id):
            return None
        # Another share of a device already shared consumes no more counters.
        counting = bool(d.consumes_counters) and not (multiple and self._shared(device_id))
        if counting and not self._reserve_counters(pool, d):
            return None
        base, sub = (rd.parent, rd.request.name) if rd.parent else (rd.request.name, "")

        def release_counters() -> None:
            if counting:
                self._counters_add(pool, d, -1)

        if not tolerated(d, rd.request):
            release_counters()
            return None
        added: list[Constraint] = []
        for c in self.constraints[ci]:
            if not c.add(base, sub, d, pool.driver):
                for a in reversed(added):
                    a.remove(base, sub)
                release_counters()
                if must:
                    raise _Failed(
                        f"claim {self.claims[ci].key}, request {rd.request.name}: cannot add device"
                        f" {'/'.join(device_id)} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(c)
        if not self._fits(ci, rd, s, d, self._used(device_id), "/".join(device_id), "rechecking"):
            for a in reversed(added):
                a.remove(base, sub)
            release_counters()
            return None
        pick = _Pick(rd.name, device_id, s, d)
        if multiple:
            pick.share_id, pick.consumed = self._share(ci, rd, device_id, d)
        else:
            self.in_use.setdefault(device_id, set()).add(ci)
        self.results[ci].append(pick)

        def undo() -> None:
            self.results[ci].pop()
            if multiple:
                self._unshare(device_id)
            else:
                self.in_use[device_id].discard(ci)
            for a in reversed(added):
                a.remove(base, sub)
            release_counters()

        return undo

    # -- consumable capacity ---------------------------------------------------------------------

    def _used(self, device_id: DeviceID) -> dict[str, Fraction]:
        used = dict(self.shared.get(device_id, {}))
        for share in self.sharing.get(device_id, ()):
            for name, amount in share.items():
                used[name] = used.get(name, Fraction(0)) + amount
        return used

    def _shared(self, device_id: DeviceID) -> bool:
        return device_id in self.shared or device_id in self.sharing

    def _fits(
        self,
        ci: int,
        rd: _Request,
        s: ResourceSlice,
        d: Device,
        used: Mapping[str, Fraction],
        name: str,
        verb: str = "checking",
    ) -> bool:
        try:
            return fits(rd.request.capacity, d.capacity, d.capacity_policies, used)
        except ValueError as exc:
            where = f"claim {self.claims[ci].key}, request {rd.request.name}"
            raise _Failed(f"{where}: {verb} capacity for device {name}: {exc}") from None

    def _share(self, ci: int, rd: _Request, device_id: DeviceID, d: Device) -> tuple[str, dict[str, Fraction]]:
        consumed = consumed_by(rd.request.capacity, d.capacity, d.capacity_policies)
        self.sharing.setdefault(device_id, []).append(consumed)
        return str(uuid.uuid4()), consumed

    def _unshare(self, device_id: DeviceID) -> None:
        shares = self.sharing[device_id]
        shares.pop()
        if not shares:
            del self.sharing[device_id]

    # -- partitionable devices -------------------------------------------------------------------

    def _reserve_counters(self, pool: Pool, d: Device) -> bool:
        if pool.id not in self.available:
            available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for s in [*pool.slices, *pool.other_slices]:
                for other in s.devices:
                    other_id = (pool.driver, pool.name, other.name)
                    if other_id not in self.allocated and other_id not in self.shared:
                        continue
                    for use in other.consumes_counters:
                        have = available.get(use.name, {})
                        for counter, amount in use.counters.items():
                            if counter in have:
                                have[counter] -= amount
            self.available[pool.id] = available
        self._counters_add(pool, d, 1)
        consumed = self.consumed[pool.id]
        for set_name, counters in self.available[pool.id].items():
            for counter, left in counters.items():
                if left < consumed.get(set_name, {}).get(counter, Fraction(0)):
                    self._counters_add(pool, d, -1)
                    return False
        return True

    def _counters_add(self, pool: Pool, d: Device, sign: int) -> None:
        consumed = self.consumed.setdefault(pool.id, {})
        for use in d.consumes_counters:
            have = consumed.setdefault(use.name, {})
            for counter, amount in use.counters.items():
                have[counter] = have.get(counter, Fraction(0)) + sign * amount

    # -- the result ------------------------------------------------------------------------------

    def _result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        out = []
        for pick in self.results[ci]:
            request = self._request_by_name(ci, claim, pick.request)
            d = pick.device
            out.append(
                DeviceResult(
                    pick.request,
                    *pick.device_id,
                    admin_access=True if request.admin_access else None,
                    tolerations=request.tolerations,
                    binding_conditions=d.binding_conditions,
                    binding_failure_conditions=d.binding_failure_conditions,
                    share_id=pick.share_id,
                    consumed_capacity=pick.consumed or None,
                )
            )
        return AllocationResult(tuple(out), self._node_selector(ci), self._config(ci, claim))

    def _selected(self, ci: int, ri: int) -> _Request:
        return self.requests[(ci, ri, self.chosen_sub.get((ci, ri), 0))]

    def _request_by_name(self, ci: int, claim: ResourceClaim, name: str) -> ExactRequest:
        for ri in range(len(claim.requests)):
            rd = self._selected(ci, ri)
            if rd.name == name:
                return rd.request
        raise AssertionError(name)

    def _config(self, ci: int, claim: ResourceClaim) -> tuple[tuple[str, tuple[str, ...], str, object], ...]:
        indices = range(len(claim.requests))
        if not claim.config and not any(self._selected(ci, ri).device_class.config for ri in indices):
            return ()  # nothing to pass on, as for most claims (this runs for every node Filter tries)
        config: list[list[object]] = []
        by_class: dict[str, tuple[int, int]] = {}
        for ri in range(len(claim.requests)):
            rd = self._selected(ci, ri)
            span = by_class.get(rd.device_class.name)
            if span is not None:
                for i in range(*span):
                    config[i][1] = (*config[i][1], rd.name)  # type: ignore[misc]
                continue
            first = len(config)
            config.extend(["FromClass", (rd.name,), drv, params] for drv, params in rd.device_class.config)
            by_class[rd.device_class.name] = (first, len(config))
        names = [self._selected(ci, ri).name for ri in range(len(claim.requests))]
        for requests, drv, params in claim.config:
            wanted = set(requests)
            if not requests or any(r.name in wanted or n in wanted for r, n in zip(claim.requests, names, strict=True)):
                config.append(["FromClaim", requests, drv, params])
        out = []
        for source, held, driver, params in config:
            reqs: tuple[str, ...] = held  # type: ignore[assignment]
            covers_all = all(r.name in reqs or n in reqs for r, n in zip(claim.requests, names, strict=True))
            out.append((str(source), () if reqs and covers_all else reqs, str(driver), params))
        return tuple(out)

    def _node_selector(self, ci: int) -> tuple[NodeSelectorTerm, ...] | None:
        fields: list[NodeSelectorRequirement] = []
        labels: list[NodeSelectorRequirement] = []
        for pick in self.results[ci]:
            s, d = pick.slice, pick.device
            node_name, selector = (
                (d.node_name, d.node_selector) if s.per_device_node_selection else (s.node_name, s.node_selector)
            )
            if node_name or d.binds_to_node:
                pin = NodeSelectorRequirement("metadata.name", "In", (self.node.name,))
                return (NodeSelectorTerm(match_fields=[pin]),)
            if selector:
                if len(selector) > 1:
                    raise _Failed(
                        f"create NodeSelector for claim {self.claims[ci].name}:"
                        f" unsupported ResourceSlice.NodeSelector with {len(selector)} terms"
                    )
                for have, new in ((fields, selector[0].match_fields), (labels, selector[0].match_expressions)):
                    for req in new:
                        if not any(_same_requirement(req, h) for h in have):
                            have.append(req)
        if fields or labels:
            return (NodeSelectorTerm(match_expressions=labels, match_fields=fields),)
        return None


def _same_requirement(a: NodeSelectorRequirement, b: NodeSelectorRequirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)
