"""DynamicResources: kube-scheduler's dynamic resource allocation plugin (v1.37.2, its default feature
gates): pods with ResourceClaims get devices allocated from ResourceSlices.

The objects come from the scheduler's :class:`~framework.dra.store.DraStore` (``cache.dra``, reached
through the cycle's snapshot), which either source fills; the allocation is :mod:`framework.dra`'s
(kube-scheduler's "incubating" structured allocator). Point by point:

- **PreEnqueue** keeps a pod out of the active queue until each of its claims exists (a template's
  claim is found through ``status.resourceClaimStatuses``), is not being deleted and, when made from a
  template, is owned by the pod: ``could not find ResourceClaim "ns/c"``, ``pod "ns/p": ResourceClaim
  not created yet``, ``ResourceClaim ns/c was not created for Pod ns/p (Pod is not owner)``.
- **PreFilter** answers Skip for a pod without claims; otherwise it splits the claims into allocated
  ones (their ``nodeSelector`` limits the nodes) and ones to allocate, whose classes must exist
  (``request r: device class gpu does not exist``); a claim reserved by 256 pods is ``resourceclaim in
  use``, one another pod's Reserve is allocating is ``resource claim ns/c is in the process of being
  allocated``. It takes the devices in use (claims' allocations, assumed and pending ones included).
- **Filter** checks allocated claims' node selectors and binding conditions, then allocates the other
  claims on the node: ``cannot allocate all claims``, ``resourceclaim not available on the node``, an
  invalid pool's error, or an Error for a broken claim or class (``running "DynamicResources" filter
  plugin: ...``) and for a search past ``filterTimeout`` (``node n: timed out trying to allocate
  devices``).
- **PostFilter** deallocates one claim of the pod that is allocated but unusable and reserved by no
  other pod (``deallocation of ResourceClaim completed``); otherwise it answers Unschedulable with no
  reason, so the fit error reads ``... preemption: ...`` (the cycle state's ``not found`` when PreFilter
  did not run).
- **Score** counts, per node, how early in each ``firstAvailable`` list the allocated subrequest is
  (8 for the first, 7 for the second, ...), normalized to 0-100 with weight 2 in the default profile.
- **Reserve** records the node's allocations as pending in the store (other pods' Filter sees the
  devices taken); **Unreserve** drops them and removes the pod from claims reserved for it
  (``store.writer.unreserve``: by its uid, with no resourceVersion, so no one's write refuses it).
- **PreBind** writes each claim's ``status.allocation`` (with its finalizer) and adds the pod to
  ``status.reservedFor`` through ``store.writer``, retrying a conflict; then, when a device has binding
  conditions, waits (every 5 s, up to ``bindingTimeout``, 10 minutes by default) until they are met.

Extended resources backed by DeviceClasses (DRAExtendedResource) go through the same points with a claim
of the plugin's own making (:mod:`.draextended`). Not modelled: the features off by default in 1.37
(PodGroup claims, node-allocatable devices, optional node operations).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pluginhost.model import Node, NodeSelectorTerm, Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    TARGET_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.status import SUCCESS, Code, Status

from ..config.leaderelection import parse_duration

# framework.dra.pools reads node selectors through framework.plugins.nodeselectors, so importing the
# allocator can start in framework.plugins' __init__, which imports this module: the allocator and
# the pools are taken as modules, which a partial import allows.
from ..dra import allocator as dra_allocator
from ..dra import pools as dra_pools
from ..dra.claims import (
    FIRST_AVAILABLE_MAX,
    binding_problem,
    can_be_reserved,
    deallocated_status,
    has_binding_conditions,
    pod_claims,
    reserved_status,
    timed_out,
)
from ..dra.models import AllocationResult, ResourceClaim
from ..dra.store import FINALIZER, DraConflict, DraStore
from ..hooks import CostlyFilter
from . import draextended as dra_ext
from .helpers import IntArray, default_normalize_score
from .noderesources import PluginArgsError

__all__ = ["MSG_NO_STATE", "DynamicResources", "allocated_devices", "claim_problem"]

log = logging.getLogger("outrigger.dynamicresources")

#: PostFilter's answer when PreFilter did not run (the cycle-state lister's error, as upstream words it).
MSG_NO_STATE = "not found"
_STATE_KEY = "DynamicResources"
#: DynamicResourcesArgs defaults (kubescheduler.config.k8s.io/v1).
DEFAULT_FILTER_TIMEOUT = 10.0
DEFAULT_BINDING_TIMEOUT = 600.0
#: How often PreBind looks at binding conditions again (kube-scheduler's poll interval).
BINDING_POLL = 5.0
#: Tries of one claim status write that conflicts (client-go's retry.DefaultRetry steps).
_WRITE_TRIES = 5
_UNRESOLVABLE = Code.UnschedulableAndUnresolvable
_Allocations = tuple[AllocationResult, ...] | Callable[[], tuple[AllocationResult, ...]]


@dataclass(slots=True)
class _State:
    """What PreFilter learnt, shared by the cycle's later points (and its clones, as upstream)."""

    claims: list[ResourceClaim] = field(default_factory=list)
    #: Per claim: the nodes an allocated claim can be used on (None: any node, or not allocated).
    available_on: list[tuple[NodeSelectorTerm, ...] | None] = field(default_factory=list)
    #: Per claim: the allocation Reserve made for it (None when it was allocated already).
    allocations: list[AllocationResult | None] = field(default_factory=list)
    allocator: dra_allocator.Allocator | None = None
    #: Indices of allocated claims that were unusable on some node (PostFilter may deallocate one).
    unavailable: set[int] = field(default_factory=set)
    #: Per node Filter passed: the allocations of the claims to allocate, in their order (or what
    #: builds them: most nodes Filter passes are never looked at again).
    node_allocations: dict[str, _Allocations] = field(default_factory=dict)
    #: The claims to allocate (when there is an allocator), asked for on every node.
    allocating: list[ResourceClaim] = field(default_factory=list)
    #: Whether a claim has a firstAvailable list (Score counts only those).
    ranked: bool = False
    #: Whether Filter checks allocated claims on each node (their nodes, their binding conditions).
    checked: bool = False
    #: The pod's extended resources backed by devices, when it requests some.
    extended: dra_ext.Extended | None = None

    def clone(self) -> _State:
        return self

    def allocations_on(self, node_name: str) -> tuple[AllocationResult, ...] | None:
        """The allocations Filter found on ``node_name`` (None: it did not pass), built when deferred."""
        made = self.node_allocations.get(node_name)
        if made is None or isinstance(made, tuple):
            return made
        built = self.node_allocations[node_name] = made()
        return built

    def to_allocate(self) -> list[int]:
        return [i for i, c in enumerate(self.claims) if c.allocation is None]


def claim_problem(store: DraStore, pod: Pod) -> str:
    """Why a pod's ResourceClaims cannot be used yet, in kube-scheduler's words ("" when they can)."""
    found = pod_claims(store, pod)
    return found if isinstance(found, str) else ""


def _store(state: CycleState | None, handle: Handle | None) -> DraStore:
    snapshot = state.snapshot if state is not None and state.snapshot is not None else (
        handle.snapshot() if handle is not None else None)
    store = snapshot.dra if snapshot is not None else None
    return store if isinstance(store, DraStore) else DraStore()


def _read_state(state: CycleState) -> _State | None:
    s = state.get(_STATE_KEY)
    return s if isinstance(s, _State) else None


def _duration(args: dict[str, Any], name: str, default: float, least: float, rule: str) -> float:
    value = args.get(name)
    if value is None:
        return default
    try:
        seconds = parse_duration(value) if isinstance(value, str) else float("nan")
    except ValueError:
        seconds = float("nan")
    if seconds != seconds:
        raise PluginArgsError(f"DynamicResources: {name}: expected a duration such as \"10s\", got {value!r}")
    if seconds < least:
        raise PluginArgsError(f"DynamicResources: {name}: Invalid value: \"{value}\": {rule}")
    return seconds


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    CostlyFilter,
    FilterPlugin,
    PostFilterPlugin,
    ScorePlugin,
    ScoreExtensions,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    """kube-scheduler's DynamicResources (see the module docstring)."""

    name = "DynamicResources"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = dict(args or {})
        unknown = set(args) - {"apiVersion", "kind", "filterTimeout", "bindingTimeout"}
        if unknown:
            raise PluginArgsError(f"{self.name}: unknown args field(s) {sorted(unknown)}")
        self.filter_timeout = _duration(args, "filterTimeout", DEFAULT_FILTER_TIMEOUT, 0, "must be zero or positive")
        self.binding_timeout = _duration(args, "bindingTimeout", DEFAULT_BINDING_TIMEOUT, 1,
                                         "must be at least 1 second")
        self.handle = handle
        # PostFilter picks one of the unusable claims at random, as upstream's map iteration does.
        self._rng = random.Random(0)

    # ---- PreEnqueue ----------------------------------------------------------------------------

    async def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.resource_claims:
            return SUCCESS
        problem = claim_problem(_store(None, self.handle), pod)
        return Status(_UNRESOLVABLE, (problem,), self.name) if problem else SUCCESS

    # ---- PreFilter -----------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        s = _State()
        state.write(_STATE_KEY, s)
        store = _store(state, self.handle)
        s.extended = dra_ext.pre_filter(store, pod)
        if not pod.resource_claims and s.extended is None:
            return None, Status(Code.Skip)
        found = pod_claims(store, pod) if pod.resource_claims else []
        if isinstance(found, str):
            return None, Status(_UNRESOLVABLE, (found,), self.name)
        if not found and s.extended is None:
            return None, Status(Code.Skip)
        for claim in found:
            status = self._check_claim(store, pod, claim)
            if status is not None:
                return None, status
            s.available_on.append(claim.allocation.node_selector if claim.allocation is not None else None)
        s.allocations = [None] * len(found)
        if any(c.allocation is None for c in found) or s.extended is not None:
            exclusive, shared = store.allocated_state()
            s.allocator = dra_allocator.Allocator(list(store.slices.values()), store.classes, exclusive, shared,
                                                  store.derived, tally=store.in_use)
            s.allocating = [c for c in found if c.allocation is None]
        s.claims = found
        s.ranked = any(r.first_available for c in found for r in c.requests)
        s.checked = any(c.allocation is not None for c in found)
        return None, SUCCESS

    def _check_claim(self, store: DraStore, pod: Pod, claim: ResourceClaim) -> Status | None:
        if claim.allocation is not None:
            if not can_be_reserved(claim) and not claim.reserved_for_pod(pod.uid):
                return Status(_UNRESOLVABLE, ("resourceclaim in use",), self.name)
            return None
        if store.pending(claim.uid) is not None:
            message = f"resource claim {claim.key} is in the process of being allocated"
            return Status(_UNRESOLVABLE, (message,), self.name)
        for request in claim.requests:
            subs = [request.exactly] if request.exactly is not None else list(request.first_available)
            for sub in subs:
                name = request.name if request.exactly is not None else f"{request.name}/{sub.name}"
                if not sub.device_class:
                    return Status(Code.Error, (f"request {name}: unsupported request type",), self.name)
                if sub.device_class not in store.classes:
                    message = f"request {name}: device class {sub.device_class} does not exist"
                    return Status(_UNRESOLVABLE, (message,), self.name)
        return None

    # ---- Filter --------------------------------------------------------------------------------

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        s = _read_state(state)
        if s is None:
            return FilterResult.from_statuses([Status(Code.Error, (MSG_NO_STATE,), self.name)] * len(batch))
        if not s.claims and s.extended is None:
            return FilterResult.passing(len(batch))
        table = batch.snapshot.table.nodes
        nodes = [table[r] for r in batch.rows.tolist()]
        if s.extended is not None:
            return FilterResult.from_statuses(dra_ext.filter_nodes(self, s, _store(state, self.handle), pod, nodes))
        if s.allocator is None:
            return FilterResult.from_statuses([self._filter_node(s, node, None) for node in nodes])
        answers = s.allocator.allocate_each(nodes, s.allocating, self.filter_timeout, defer=True)
        if s.checked:
            return FilterResult.from_statuses([self._filter_node(s, n, a) for n, a in zip(nodes, answers, strict=True)])
        # The common case: every claim to allocate, so a node with the devices passes as it is.
        deferred = [a.deferred for a in answers]
        if None not in deferred:
            s.node_allocations.update(zip(batch.names, deferred))  # type: ignore[arg-type]
            return FilterResult.passing(len(nodes))
        kept = s.node_allocations
        statuses: list[Status] = []
        for name, node, answer, made in zip(batch.names, nodes, answers, deferred, strict=True):
            if made is not None:
                kept[name] = made
                statuses.append(SUCCESS)
            else:
                statuses.append(self._filter_node(s, node, answer))
        return FilterResult.from_statuses(statuses)

    def filter_is_costly(self, state: CycleState) -> bool:
        # Allocating searches each node's devices; allocated claims only check a node selector.
        s = _read_state(state)
        return s is not None and s.allocator is not None

    def _filter_node(self, s: _State, node: Node, answer: dra_allocator.Allocation | None,
                     asked: int | None = None) -> Status:
        """One node's status, given the allocator's ``answer`` for it (None: nothing to allocate) for
        ``asked`` claims (the claims to allocate when None)."""
        if answer is not None and answer.deferred is not None and not s.checked:
            s.node_allocations[node.name] = answer.deferred  # the common case, first
            return SUCCESS
        unavailable = []
        now = 0.0
        for i, claim in enumerate(s.claims):
            selector = s.available_on[i]
            if selector is not None and not dra_pools.node_matches(node, "", False, selector):
                unavailable.append(i)
                continue
            if claim.allocation is not None:
                ready, failure = binding_problem(claim)
                now = now or time.time()
                if failure or (not ready and timed_out(claim, self.binding_timeout, now)):
                    unavailable.append(i)
        results: _Allocations = ()
        if answer is not None:
            if answer.timed_out:
                return Status(Code.Error, (f"node {node.name}: timed out trying to allocate devices",), self.name)
            if answer.error:
                return Status(_UNRESOLVABLE if answer.on_node else Code.Error, (answer.error,), self.name)
            if answer.deferred is not None:
                results = answer.deferred
            elif answer.results is None or len(answer.results) != (len(s.allocating) if asked is None else asked):
                return Status(_UNRESOLVABLE, ("cannot allocate all claims",), self.name)
            else:
                results = answer.results
        if unavailable:
            s.unavailable.update(unavailable)
            return Status(_UNRESOLVABLE, ("resourceclaim not available on the node",), self.name)
        if answer is not None:
            s.node_allocations[node.name] = results
        return SUCCESS

    # ---- PostFilter ----------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        s = _read_state(state)
        if s is None:
            return None, Status(Code.Error, (MSG_NO_STATE,), self.name)
        if not s.claims and s.extended is None:
            return None, Status(Code.Unschedulable)
        store = _store(state, self.handle)
        candidates = sorted(s.unavailable)
        self._rng.shuffle(candidates)
        for i in candidates:
            claim = s.claims[i]
            mine = len(claim.reserved_for) == 1 and claim.reserved_for[0][2] == pod.uid
            if claim.reserved_for and not mine:
                continue
            try:
                await store.writer.write_claim_status(claim, deallocated_status(claim))
            except Exception as exc:  # the writer's own error ends the cycle as kube-scheduler's client error
                return None, Status(Code.Error, (str(exc),), self.name)
            return None, Status(Code.Unschedulable, ("deallocation of ResourceClaim completed",), self.name)
        if s.extended is not None and s.extended.stale:
            return None, await dra_ext.delete_stale(store, s.extended)
        return None, Status(Code.Unschedulable)

    # ---- Score ---------------------------------------------------------------------------------

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        s = _read_state(state)
        if s is None:
            raise RuntimeError(MSG_NO_STATE)
        out = np.zeros(len(batch), dtype=np.int64)
        if not s.claims or not s.ranked:
            return out  # only firstAvailable choices score
        for k, name in enumerate(batch.names):
            allocations = s.allocations_on(name)
            if allocations is not None:
                out[k] = _score(s.claims, allocations)
        return out

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return SUCCESS

    # ---- Reserve / Unreserve -------------------------------------------------------------------

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = _read_state(state)
        if s is None:
            return Status(Code.Error, (MSG_NO_STATE,), self.name)
        indices = s.to_allocate()
        extended = s.extended is not None and node_name in s.extended.on_node
        if not (indices or extended) or s.allocator is None:
            return SUCCESS
        allocations = s.allocations_on(node_name)
        if not allocations:
            return Status(Code.Error, ("claim allocation not found for node",), self.name)
        if len(allocations) != len(indices) + extended:
            want = len(indices) + extended
            return Status(Code.Error, (f"internal error, have {len(allocations)} allocations, {want} claims "
                                       f"to allocate, want {want} claims",), self.name)
        store = _store(state, self.handle)
        if extended:
            assert s.extended is not None
            dra_ext.reserve(store, s.extended, node_name, allocations[-1])
        for k, i in enumerate(indices):
            claim = s.claims[i]
            s.allocations[i] = allocations[k]
            finalizers = claim.finalizers if FINALIZER in claim.finalizers else (*claim.finalizers, FINALIZER)
            store.signal_pending(replace(claim, allocation=allocations[k], finalizers=finalizers))
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = _read_state(state)
        if s is None or not (s.claims or s.extended):
            return
        store = _store(state, self.handle)
        if s.extended is not None:
            await dra_ext.unreserve(store, s.extended)
        for claim in s.claims:
            if store.drop_pending(claim.uid):
                store.restore(claim.key)
            if claim.allocation is not None and claim.reserved_for_pod(pod.uid):
                async with store.writing(claim.key):  # after this scheduler's writes of it in flight
                    try:
                        # By the pod's uid, without a resourceVersion: no conflict with anyone's write.
                        stored = await store.writer.unreserve(claim, pod.uid)
                    except Exception as exc:  # retried when the pod is scheduled again
                        log.warning("unreserve: claim %s: %s", claim.key, exc)
                        continue
                    if stored is not None:
                        store.assume(stored)

    # ---- PreBind -------------------------------------------------------------------------------

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = _read_state(state)
        if s is None:
            return Status(Code.Error, (MSG_NO_STATE,), self.name)
        return SUCCESS if s.claims or s.extended is not None else Status(Code.Skip)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = _read_state(state)
        if s is None:
            return Status(Code.Error, (MSG_NO_STATE,), self.name)
        if not s.claims and not dra_ext.bind(s.extended):
            return SUCCESS
        store = _store(state, self.handle)
        written: list[str] = []
        for i, claim in enumerate(s.claims):
            if claim.reserved_for_pod(pod.uid):
                continue
            try:
                s.claims[i] = await self._bind_claim(store, pod, claim, s.allocations[i])
            except _BindError as exc:
                return Status(Code.Error, (str(exc),), self.name)
            if s.allocations[i] is not None:
                written.append(claim.uid)
        if s.extended is not None and dra_ext.bind(s.extended):
            try:
                written.append(await self._bind_extended(store, pod, s.extended))
            except (_BindError, RuntimeError) as exc:
                return Status(Code.Error, (str(exc),), self.name)
        status = await self._wait_for_binding_conditions(store, s)
        if status.ok:
            for uid in written:
                store.drop_pending(uid, force=True)
        return status

    async def _bind_extended(self, store: DraStore, pod: Pod, x: dra_ext.Extended) -> str:
        """Create the pod's extended resource claim, write its allocation and reservation, and name it in the
        pod's status; the uid of its pending allocation, dropped once the claim reads from the source."""
        assert x.reserved is not None
        created = await dra_ext.create(store, pod, x)
        try:
            x.created = await self._bind_claim(store, pod, created, x.reserved.allocation)
            await dra_ext.record(store, pod, x, x.created)
        finally:  # once created, upstream waits for the claim's informer event whatever follows
            await dra_ext.wait_delivered(store, x.created or created)
        return x.reserved.uid

    async def _bind_claim(self, store: DraStore, pod: Pod, claim: ResourceClaim,
                          allocation: AllocationResult | None) -> ResourceClaim:
        # One write of a claim at a time: the pods sharing it reach PreBind together, and each starts
        # from the version the one before stored instead of racing it to a conflict (DraStore.writing).
        async with store.writing(claim.key):
            return await self._write_claim(store, pod, claim, allocation)

    async def _write_claim(self, store: DraStore, pod: Pod, claim: ResourceClaim,
                           allocation: AllocationResult | None) -> ResourceClaim:
        what = "add allocation and reservation to" if allocation is not None else "add reservation to"
        current = claim
        latest: ResourceClaim | None = None  # the claim the writer read back after a conflict
        for attempt in range(_WRITE_TRIES):
            # The first try starts from the newest version known here (the cycle's copy may predate
            # another pod's write); a retry from the claim read back after the conflict.
            if not attempt:
                current = store.latest(claim)
            else:
                current = latest or store.claim(claim.namespace, claim.name) or current
            if current.deleting:
                raise _BindError(f"claim {claim.key} got deleted in the meantime")
            if allocation is not None and current.allocation is not None:
                raise _BindError(f"claim {claim.key} got allocated elsewhere in the meantime")
            if allocation is None and current.allocation is None:
                raise _BindError(f"claim {claim.key} got deallocated elsewhere in the meantime")
            try:
                stored = await store.writer.write_claim_status(current, reserved_status(current, pod, allocation))
            except DraConflict as exc:
                if attempt == _WRITE_TRIES - 1:
                    raise _BindError(f"{what} claim {claim.key}: {exc}") from None
                latest = exc.latest
                continue
            except Exception as exc:  # the source's own error: the binding cycle fails with it
                raise _BindError(f"{what} claim {claim.key}: {exc}") from None
            store.assume(stored)
            return stored
        raise _BindError(f"{what} claim {claim.key}: no attempt left")  # not reached: the loop returns or raises

    async def _wait_for_binding_conditions(self, store: DraStore, s: _State) -> Status:
        if not has_binding_conditions(s.claims):
            return SUCCESS
        deadline = time.monotonic() + self.binding_timeout
        while True:
            error = ""
            ready = True
            for i, claim in enumerate(s.claims):
                claim = s.claims[i] = store.claim(claim.namespace, claim.name) or claim
                ok, failure = binding_problem(claim)
                if failure:
                    error = failure
                elif not ok and timed_out(claim, self.binding_timeout):
                    error = f"device binding timeout: claim={claim.name}"
                if error or not ok:
                    ready = False
                    break
            if error:
                return Status(Code.Error, (error,), self.name)
            if ready:
                return SUCCESS
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(BINDING_POLL, remaining))
            if time.monotonic() >= deadline:
                break
        return Status(Code.Error, ("device binding timeout: context deadline exceeded",), self.name)

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # The resources are the kinds of framework.dra.store.DRA_KINDS: the store's listener (the
        # scheduler's) reports their changes under these names.
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel | ActionType.UpdateNodeAllocatable)
            ),
            ClusterEventWithHint(ClusterEvent("ResourceClaim", ActionType.Add | ActionType.Update | ActionType.Delete),
                                 self._after_claim_change),
            ClusterEventWithHint(ClusterEvent(TARGET_POD, ActionType.UpdatePodGeneratedResourceClaim),
                                 self._after_pod_update),
            ClusterEventWithHint(ClusterEvent("DeviceClass", ActionType.Add | ActionType.Update)),
            ClusterEventWithHint(ClusterEvent("ResourceSlice", ActionType.Add | ActionType.Update)),
        ]

    def _after_claim_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a claim the pod uses was created or its status changed, or any claim was
        deallocated (its devices are free); a deleted claim only when it was allocated."""
        if not isinstance(new, ResourceClaim):
            return QueueingHint.Queue if not isinstance(old, ResourceClaim) or old.allocation is not None else (
                QueueingHint.QueueSkip)
        found = pod_claims(_store(None, self.handle), pod)
        if isinstance(found, str):
            return QueueingHint.QueueSkip
        if isinstance(old, ResourceClaim) and old.allocation is not None and new.allocation is None:
            return QueueingHint.Queue
        if not any(c.uid == new.uid for c in found):
            return QueueingHint.QueueSkip
        if not isinstance(old, ResourceClaim):
            return QueueingHint.Queue
        # Only the status matters (a driver adding its finalizer changes nothing for the pod).
        same = (old.raw.get("status") or {}) == (new.raw.get("status") or {})
        return QueueingHint.QueueSkip if same else QueueingHint.Queue

    def _after_pod_update(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the updated pod's claims can all be found now."""
        if not isinstance(new, Pod):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip if claim_problem(_store(None, self.handle), new) else QueueingHint.Queue


def allocated_devices(state: CycleState, node_name: str) -> list[dict[str, Any]]:
    """The devices the pod's claims have on ``node_name`` after this cycle's Filter: each claim's
    allocation (``allocated`` true when the claim had it already, false when this cycle would make
    it), one entry per device, those for its extended resources last (claim ``<ns>/<extended-resources>``).
    Empty for a pod without claims or a node Filter did not pass."""
    s = _read_state(state)
    if s is None or not (s.claims or s.extended):
        return []
    made = s.allocations_on(node_name)
    if s.allocator is not None and made is None:
        return []
    out: list[dict[str, Any]] = []
    k = 0
    claims = list(s.claims)
    if s.extended is not None and node_name in s.extended.on_node:
        claims.append(s.extended.claim)  # its allocation is the node's last (its name: <extended-resources>)
    for claim in claims:
        allocation, before = claim.allocation, claim.allocation is not None
        if allocation is None and made is not None and k < len(made):
            allocation, k = made[k], k + 1
        for r in allocation.results if allocation is not None else ():
            out.append({"claim": claim.key, "request": r.request, "driver": r.driver, "pool": r.pool,
                        "device": r.device, "allocated": before})
    return out


class _BindError(Exception):
    """A claim PreBind could not write (its message is the status's)."""


def _score(claims: list[ResourceClaim], allocations: tuple[AllocationResult, ...]) -> int:
    """kube-scheduler's computeScore: for each allocated subrequest of a ``firstAvailable`` list, the
    list's maximum size less its position."""
    score, k = 0, 0
    for claim in claims:
        allocation = claim.allocation
        if allocation is None:
            if k >= len(allocations):
                raise RuntimeError(f"number of allocations {len(allocations)} is smaller than number of claims "
                                   "needing allocation")
            allocation = allocations[k]
            k += 1
        chosen = {r.request for r in allocation.results if "/" in r.request}
        for request in claim.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX - i
    return score
