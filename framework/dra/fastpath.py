"""The allocator's fast path for the common claim: requests of ``exactly`` N devices of one class, no
``firstAvailable``, constraints, admin access, capacity requests or config; on a node whose devices are
plain (own-node slices without per-device node selection; no NoSchedule/NoExecute taints, shared
counters, capacity policies or multiple allocations; selectors that evaluate without error).

For such claims the general search (:class:`~.allocator._Search`) takes, request after request, the
first free matching devices in pool order, and only backtracks when a request runs out; so when that
greedy pass completes, its picks are the search's first solution, and with one request in all its
failure is the search's failure too. Anything else (another shape, a node with a device that is not
plain, a greedy failure with several requests) answers None and the general search runs.

What makes it fast: per node, each request's candidate devices (those of complete, valid pools that
match the class's and the request's selectors, in search order) are kept in the allocator's ``derived``
cache, which lives as long as the slices do; and of them the free ones (not held by any claim) are kept
in the store's in-use tally (:mod:`.inuse`) until a device of one of the node's pools is taken or
freed, or one of its slices changes. A pod then costs, on most nodes, a lookup of that free list.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pluginhost.model import Node, NodeSelectorRequirement, NodeSelectorTerm

from .models import (
    AllocationResult,
    Device,
    DeviceClass,
    DeviceID,
    DeviceResult,
    DeviceToleration,
    ExactRequest,
    ResourceClaim,
)
from .selectors import SelectorFailure, compile_selector

if TYPE_CHECKING:  # framework.dra.pools may be importing when this module is (through framework.plugins)
    from .pools import Pool

__all__ = ["Owner", "Picked", "Plan", "allocate", "allocate_each", "plan"]

#: A claim's requests the fast path serves: (request, class selectors), in order.
Plan = tuple[tuple[tuple[ExactRequest, tuple[str, ...]], ...], ...]
#: One candidate device: its id and the device.
_Candidate = tuple[DeviceID, Device]
#: A request as the fast path sees it: the class's selectors, the request's, its name, count and
#: tolerations.
_Shape = tuple[tuple[str, ...], tuple[str, ...], str, int, tuple[DeviceToleration, ...]]
#: A node's free list for one request shape: its matching devices that no claim holds, in search
#: order, up to the first that others consume capacity of; whether one of its pools is invalid;
#: whether the list stops at such a device; the owner's answer (:meth:`Owner.answer`) for a pod whose
#: only request is this one; and whether the node's devices are plain (when not, the rest is empty
#: and the answer None: the general search answers).
_Free = tuple[list[_Candidate], bool, bool, object, bool]
_NOT_PLAIN: _Free = ([], False, False, None, False)
_NOTHING_KEPT: dict[str, _Free] = {}
_KEY = "fast candidates"
_HARD_TAINTS = ("NoSchedule", "NoExecute")


class Owner(Protocol):
    """What the fast path reads of the allocator (:class:`~.allocator.Allocator`)."""

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        """Device classes by name."""

    @property
    def allocated(self) -> Collection[DeviceID]:
        """Devices other claims hold."""

    @property
    def shared(self) -> Mapping[DeviceID, object]:
        """Capacity other claims consume of shared devices."""

    @property
    def derived(self) -> dict[object, object]:
        """The cache that lives as long as the slices."""

    @property
    def unnamed(self) -> bool:
        """Whether some slice has no node name (node labels may matter)."""

    def pools(self, node: Node) -> list[Pool]:
        """The pools the node can allocate from."""

    def free_lists(self, shape: object) -> dict[str, Any] | None:
        """The free lists kept for a request shape, by node name; None when none can be kept now."""

    def keep_free(self, node: str, shape: object, entry: object) -> None:
        """Keep ``entry`` as ``node``'s free list for ``shape`` (right after :meth:`free_lists` gave a dict)."""

    def answer(self, fast: Picked | str | None) -> object:
        """What the owner answers for a node given the fast path's answer (None for None); kept with the
        node's free list, so it must depend on ``fast`` alone."""


def plan(owner: Owner, claims: Sequence[ResourceClaim], max_results: int) -> Plan | None:
    """The claims' requests when every claim has the fast path's shape (see the module), else None."""
    out = []
    for claim in claims:
        if claim.constraints or claim.config:
            return None
        requests = []
        total = 0
        for request in claim.requests:
            req = request.exactly
            if req is None or request.first_available or req.mode != "ExactCount" or req.count < 1:
                return None
            if req.admin_access or req.capacity is not None:
                return None
            cls = owner.classes.get(req.device_class)
            if cls is None or cls.config:
                return None
            total += req.count
            requests.append((req, cls.selectors))
        if total > max_results or not requests:
            return None
        out.append(tuple(requests))
    return tuple(out)


class Picked:
    """The devices the fast path picked for each claim on a node; :meth:`results` builds the claims'
    AllocationResults (only for the node a pod gets, or the nodes a caller looks at)."""

    __slots__ = ("node_name", "picks")

    def __init__(self, node_name: str, picks: list[list[tuple[ExactRequest, _Candidate]]]) -> None:
        self.node_name = node_name
        self.picks = picks

    def results(self) -> tuple[AllocationResult, ...]:
        """One AllocationResult per claim, as the general search builds them."""
        return tuple(_result(self.node_name, picks) for picks in self.picks)


def allocate(owner: Owner, node: Node, claims: Sequence[ResourceClaim], the_plan: Plan) -> Picked | str | None:
    """The claims' allocation on ``node`` by the fast path: the devices picked; "" when the node has
    not the devices; "invalid" when it has not and one of its pools is invalid; None when the general
    search must answer (see the module)."""
    if owner.unnamed:
        return None
    taken: set[DeviceID] = set()
    picks_per_claim: list[list[tuple[ExactRequest, _Candidate]]] = []
    requests = 0
    for requests_of_claim in the_plan:
        picks: list[tuple[ExactRequest, _Candidate]] = []
        for req, class_selectors in requests_of_claim:
            requests += 1
            shape = _shape(req, class_selectors)
            entry = _free(owner, node, shape, req, owner.free_lists(shape))
            if not entry[4]:
                return None
            need = req.count
            for candidate in entry[0]:
                if candidate[0] in taken:
                    continue
                taken.add(candidate[0])
                picks.append((req, candidate))
                need -= 1
                if not need:
                    break
            if need:
                if entry[2]:
                    return None  # the next device is one others consume capacity of: the search weighs it
                # One request in all: no other choice could have served it. Otherwise earlier
                # requests might have left it devices by choosing others: the search decides.
                if requests == 1 and len(the_plan) == 1 and len(requests_of_claim) == 1:
                    return "invalid" if entry[1] else ""
                return None
        picks_per_claim.append(picks)
    return Picked(node.name, picks_per_claim)


def allocate_each(owner: Owner, nodes: Sequence[Node], claims: Sequence[ResourceClaim], the_plan: Plan,
                  ) -> tuple[list[object], bool]:
    """The owner's answer (:meth:`Owner.answer`) of :func:`allocate` on each of ``nodes``, and whether
    one is None (the general search must answer there). One request in all (the common pod) goes in
    one loop, which for most nodes is a lookup of the answer kept with the node's free list."""
    if owner.unnamed or len(the_plan) != 1 or len(the_plan[0]) != 1:
        answers = [owner.answer(allocate(owner, node, claims, the_plan)) for node in nodes]
        return answers, any(a is None for a in answers)
    ((req, class_selectors),) = the_plan[0]
    shape = _shape(req, class_selectors)
    lists = owner.free_lists(shape)
    get = (lists if lists is not None else _NOTHING_KEPT).get
    out: list[object] = []
    append = out.append
    handover = False
    for node in nodes:
        entry = get(node.name)
        if entry is None:
            entry = _free(owner, node, shape, req, lists)
        answer = entry[3]
        if answer is None:
            handover = True
        append(answer)
    return out, handover


def _shape(req: ExactRequest, class_selectors: tuple[str, ...]) -> _Shape:
    # What a free list and the answer kept with it depend on: the selectors, and what the results
    # take of the request (so that pods whose claims come from one template share them).
    return class_selectors, req.selectors, req.name, req.count, req.tolerations


def _free(owner: Owner, node: Node, shape: _Shape, req: ExactRequest, lists: dict[str, _Free] | None) -> _Free:
    """The node's free list for ``shape`` (see :data:`_Free`): kept in ``lists`` (the owner's, None when
    it cannot keep them), else made from its candidates and what others hold, and kept."""
    entry = lists.get(node.name) if lists is not None else None
    if entry is not None:
        return entry
    found = _candidates(owner, node, shape[0], shape[1])
    made = _NOT_PLAIN
    if found is not None:
        candidates, invalid = found
        allocated, shared = owner.allocated, owner.shared
        free: list[_Candidate] = []
        blocked = False
        for candidate in candidates:
            if candidate[0] in allocated:
                continue
            if shared and candidate[0] in shared:
                blocked = True
                break
            free.append(candidate)
        one: Picked | str | None
        if len(free) >= req.count:
            one = Picked(node.name, [[(req, c) for c in free[: req.count]]])
        elif blocked:
            one = None  # the next device is one others consume capacity of: the search weighs it
        else:
            one = "invalid" if invalid else ""
        made = (free, invalid, blocked, owner.answer(one), True)
    if lists is not None:
        owner.keep_free(node.name, shape, made)
    return made


def _result(node_name: str, picks: list[tuple[ExactRequest, _Candidate]]) -> AllocationResult:
    results = tuple(
        DeviceResult(req.name, *device_id, None, req.tolerations, d.binding_conditions, d.binding_failure_conditions)
        for req, (device_id, d) in picks
    )
    # Own-node slices only (the fast path's condition): the claim is pinned to the node, as the
    # general search's node selector for a slice with a node name.
    pin = NodeSelectorRequirement("metadata.name", "In", (node_name,))
    return AllocationResult(results, (NodeSelectorTerm(match_fields=[pin]),))


def _candidates(owner: Owner, node: Node, class_selectors: tuple[str, ...], selectors: tuple[str, ...],
                ) -> tuple[list[_Candidate], bool] | None:
    """The node's devices that match, in search order, and whether a pool is invalid; None when a
    device of the node is not plain (kept too, so that the node is not looked at again)."""
    key = (_KEY, node.name, class_selectors, selectors)
    hit = owner.derived.get(key, False)
    if hit is False:
        hit = owner.derived[key] = _gather(owner, owner.pools(node), class_selectors, selectors)
    return hit  # type: ignore[return-value]


def _gather(owner: Owner, pools: list[Pool], class_selectors: tuple[str, ...], selectors: tuple[str, ...],
            ) -> tuple[list[_Candidate], bool] | None:
    out: list[_Candidate] = []
    invalid = False
    for pool in pools:
        invalid = invalid or pool.invalid
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            if s.per_device_node_selection or not s.node_name:
                return None
            for d in s.devices:
                if (d.allow_multiple_allocations or d.consumes_counters or d.capacity_policies
                        or any(t.effect in _HARD_TAINTS for t in d.taints)):
                    return None
                matched = True
                for expression in (*class_selectors, *selectors):
                    result = _matches(owner.derived, expression, s.driver, d)
                    if isinstance(result, SelectorFailure):
                        return None
                    if not result:
                        matched = False
                        break
                if matched:
                    out.append(((pool.driver, pool.name, d.name), d))
    return out, invalid


def _matches(cache: dict[object, object], expression: str, driver: str, d: Device) -> bool | SelectorFailure:
    # The same cache entries as the general search's (its _selectors), so neither evaluates twice.
    key = (expression, driver, id(d))
    matched = cache.get(key)
    if matched is None:
        selector = compile_selector(expression)
        matched = cache[key] = (
            selector
            if isinstance(selector, SelectorFailure)
            else selector.matches(driver, d.attributes, d.capacity, d.allow_multiple_allocations)
        )
    return matched  # type: ignore[return-value]
