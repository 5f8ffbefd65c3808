"""VolumeBinding: kube-scheduler's volume binder (``pkg/scheduler/framework/plugins/volumebinding``,
v1.37): a pod's PersistentVolumeClaims decide where it may run, and binding them is part of binding
the pod.

- **PreFilter** looks the pod's claims up (``persistentVolumeClaim`` and ``ephemeral`` volumes). A pod
  without claims is Skip. A missing, lost or deleted claim, or an ephemeral claim another pod owns,
  rejects the pod outright; so does a claim that should already be bound (its class binds at once,
  or it names its volume): ``pod has unbound immediate PersistentVolumeClaims``. Claims of a
  ``WaitForFirstConsumer`` class stay to be bound on the node chosen.
- **Filter**, per node: a bound claim's volume must allow the node (``node(s) didn't match
  PersistentVolume's node affinity``; a volume that does not exist: ``node(s) unavailable due to one
  or more pvc(s) bound to non-existent pv(s)``). Each unbound claim, smallest request first, takes the
  smallest available volume of its class that fits it and the node (a volume pre-bound to the claim
  wins); the rest must be provisionable there: a class with a provisioner whose
  ``allowedTopologies`` admit the node (``node(s) didn't find available persistent volumes to
  bind``). A claim the scheduler already gave a node (``volume.kubernetes.io/selected-node``) is for
  that node only. The answer is UnschedulableAndUnresolvable with every reason that applies.
- **Reserve** assumes the choice for the node picked: each chosen volume reads as pre-bound to its
  claim (``spec.claimRef``, ``pv.kubernetes.io/bound-by-controller``), each claim to provision reads
  as annotated with the node, so the next pods see them taken. **Unreserve** rolls that back.
- **PreBind** (:mod:`.bindvolumes`) writes the bindings through the cluster's
  :class:`~pluginhost.snapshot.VolumeWriter` (the volume's ``claimRef``; the claim's ``selected-node``),
  then completes each static binding as the PV controller does (the claim's ``volumeName`` with
  ``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``, both objects' phase ``Bound``), and
  waits, up to ``bindTimeoutSeconds`` (600), until the cluster shows every claim fully bound. A
  provisioned claim waits for its provisioner and the PV controller (the embedded store provisions at
  once).
- **PreScore/Score**: kube-scheduler's StorageCapacityScoring feature gate is beta and on since v1.37,
  so the plugin scores every pod (PreScore is Success even for a pod without claims, which then
  scores 0 everywhere). On a node where the pod binds existing volumes, their claims' requests and
  the volumes' capacities are summed per class (the volume's ``storageClassName``); each class scores
  ``shape(requested * 100 / capacity)`` (``shape(100)`` when the capacity is 0 or exceeded), and the
  node the rounded mean over its classes. ``shape`` (``VolumeBindingArgs``) defaults to
  ``[{utilization: 0, score: 10}, {utilization: 100, score: 0}]``, scores multiplied by 10: the
  emptier the volumes after binding, the higher. Claims to provision score by the capacity the
  node's CSIStorageCapacity objects report, which Outrigger does not model, so they count for
  nothing (as upstream when a driver reports no capacity); a node with only those scores 0. With
  the gate turned off (``--feature-gates StorageCapacityScoring=false``) PreScore answers Skip, as in
  v1.35, and ``shape`` is refused as upstream refuses it then.

Not modelled: CSIStorageCapacity and CSIDriver objects (capacity is never short), the in-tree to CSI
translation of a volume's node affinity, and VolumeAttributesClass checks beyond equal names.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework import features
from pluginhost.model import (
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
)
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ReservePlugin,
    ScorePlugin,
)
from pluginhost.snapshot import NodeTable, VolumeStore, VolumeStoreError
from pluginhost.status import SUCCESS, Code, Status

from .bindvolumes import PodVolumes, bind_pod_volumes, bind_volume_to_claim, revert_assumed
from .helpers import BoolArray, IntArray
from .labels import label_selector_matches
from .noderesources import MAX_CUSTOM_PRIORITY_SCORE, PluginArgsError, broken_linear
from .volumeutil import (
    CSI_NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    UPDATE,
    ClaimProblem,
    claim_names,
    claim_problem,
    delay_binding,
    pv_affinity,
    topology_mask,
)

__all__ = [
    "DEFAULT_BIND_TIMEOUT",
    "MSG_BIND_CONFLICT",
    "MSG_NODE_CONFLICT",
    "MSG_NOT_ENOUGH_SPACE",
    "MSG_PV_NOT_EXIST",
    "MSG_UNBOUND_IMMEDIATE",
    "VolumeBinding",
]

log = logging.getLogger("outrigger.volumebinding")

MSG_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
MSG_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
MSG_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
MSG_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
MSG_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
#: kube-scheduler's VolumeBindingArgs default (seconds).
DEFAULT_BIND_TIMEOUT = 600
#: How often PreBind looks whether the cluster shows the claims bound.
POLL_SECONDS = 0.1
#: kube-scheduler's VolumeBindingArgs ``shape`` default with StorageCapacityScoring on, as
#: (utilization, score) points, scores in 0..10 (MaxCustomPriorityScore).
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, MAX_CUSTOM_PRIORITY_SCORE), (100, 0))

_STATE_KEY = "VolumeBinding"
_SKIP = Status(Code.Skip)
_NAME = "VolumeBinding"


_NOTHING = PodVolumes()


@dataclass(slots=True)
class _Claims:
    """The pod's claims as PreFilter sorted them (GetPodVolumeClaims)."""

    bound: list[PersistentVolumeClaim]
    delayed: list[PersistentVolumeClaim]
    volumes_by_class: dict[str, list[PersistentVolume]]


@dataclass(slots=True)
class _State:
    """The cycle's volume decisions; shared by clones, as upstream (Clone returns the same data)."""

    store: VolumeStore
    claims: _Claims | None = None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False

    def clone(self) -> _State:
        return self


#: The state of every pod without claims (nothing in it ever changes): such pods cost one lookup.
_NO_CLAIMS = _State(VolumeStore(), all_bound=True)


def _size(pvc: PersistentVolumeClaim) -> int:
    return pvc.storage or 0


class VolumeBinding(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin,
                    EnqueueExtensions):
    """kube-scheduler's VolumeBinding (see the module docstring)."""

    name = _NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = dict(args or {})
        unknown = set(args) - {"apiVersion", "kind", "bindTimeoutSeconds", "shape"}
        if unknown:
            raise PluginArgsError(f"{_NAME}: unknown args field(s) {sorted(unknown)}")
        timeout = args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT)
        if timeout is None:
            timeout = DEFAULT_BIND_TIMEOUT
        if not isinstance(timeout, int) or isinstance(timeout, bool):
            raise PluginArgsError(f"{_NAME}: bindTimeoutSeconds must be an integer, got {timeout!r}")
        if timeout < 0:
            raise PluginArgsError(
                f"{_NAME}: bindTimeoutSeconds: Invalid value: {timeout}: invalid BindTimeoutSeconds, "
                "should not be a negative value"
            )
        self.capacity_scoring = features.enabled("StorageCapacityScoring")
        if not self.capacity_scoring and args.get("shape") is not None:
            raise PluginArgsError(
                f"{_NAME}: shape: Invalid value: {args['shape']!r}: unexpected field `shape`, remove it or turn on "
                "the feature gate StorageCapacityScoring"
            )
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.shape = tuple((u, s * scale) for u, s in _parse_shape(args.get("shape")))
        self.bind_timeout = float(timeout)
        self.handle = handle

    # ---- PreFilter -----------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            state.write(_STATE_KEY, _NO_CLAIMS)
            return None, _SKIP
        store = _store(state, self.handle)
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        immediate = False
        has_claim = False
        for _, name, ephemeral in claim_names(pod):
            has_claim = True
            found = claim_problem(store, pod, name, ephemeral)
            if isinstance(found, ClaimProblem):
                return None, Status(Code.UnschedulableAndUnresolvable, (found.message,), _NAME)
            # The binder reads the claim through its assume cache (a claim this scheduler annotated).
            pvc = store.claim(pod.namespace, name) or found
            if pvc.fully_bound:
                bound.append(pvc)
            elif delay_binding(store, pvc) and not pvc.volume_name:
                delayed.append(pvc)
            else:
                immediate = True  # should be bound already (by the PV controller), or pre-bound to a volume
        if not has_claim:
            state.write(_STATE_KEY, _NO_CLAIMS)
            return None, _SKIP
        if immediate:
            return None, Status(Code.UnschedulableAndUnresolvable, (MSG_UNBOUND_IMMEDIATE,), _NAME)
        by_class = {pvc.storage_class: store.volumes_of_class(pvc.storage_class) for pvc in delayed}
        state.write(_STATE_KEY, _State(store, _Claims(bound, delayed, by_class)))
        return None, SUCCESS

    # ---- Filter --------------------------------------------------------------------------------

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        s = _read_state(state)
        n = len(batch)
        claims = s.claims
        if claims is None:
            return FilterResult.passing(n)
        table = batch.snapshot.table
        rows = batch.rows
        names = [table.names[r] for r in rows.tolist()]

        # Bound claims: their volumes must allow the node (checkBoundClaims, in claim order).
        node_conflict = np.zeros(n, dtype=np.bool_)
        pv_missing = np.zeros(n, dtype=np.bool_)
        decided = np.zeros(n, dtype=np.bool_)
        for pvc in claims.bound:
            pv = s.store.volume(pvc.volume_name)
            if pv is None:
                pv_missing |= ~decided
                break
            failing = ~pv_affinity(pv).mask(table, rows) & ~decided
            node_conflict |= failing
            decided |= failing

        bind_conflict = np.zeros(n, dtype=np.bool_)
        errors: dict[int, str] = {}
        chosen: list[list[tuple[PersistentVolume, PersistentVolumeClaim]]] = [[] for _ in range(n)]
        provision: list[list[PersistentVolumeClaim]] = [[] for _ in range(n)]
        if claims.delayed:
            self._unbound(s, claims, table, rows, names, bind_conflict, errors, chosen, provision)

        reasons: list[tuple[str, ...]] = []
        index: dict[tuple[str, ...], int] = {}
        codes = np.zeros(n, dtype=np.int8)
        reason_index = np.zeros(n, dtype=np.int32)
        for i in range(n):
            if i in errors:
                codes[i] = Code.Error
                key: tuple[str, ...] = (errors[i],)
            else:
                why = []
                if node_conflict[i]:
                    why.append(MSG_NODE_CONFLICT)
                if bind_conflict[i]:
                    why.append(MSG_BIND_CONFLICT)
                if pv_missing[i]:
                    why.append(MSG_PV_NOT_EXIST)
                if not why:
                    s.by_node[names[i]] = (PodVolumes(chosen[i], provision[i]) if chosen[i] or provision[i]
                                           else _NOTHING)
                    continue
                codes[i] = Code.UnschedulableAndUnresolvable
                key = tuple(why)
            reason_index[i] = index.setdefault(key, len(index))
        if index:
            reasons = list(index)
        return FilterResult(codes, reason_index, reasons)

    def _unbound(self, s: _State, claims: _Claims, table: NodeTable, rows: IntArray, names: list[str],
                 bind_conflict: BoolArray, errors: dict[int, str],
                 chosen: list[list[tuple[PersistentVolume, PersistentVolumeClaim]]],
                 provision: list[list[PersistentVolumeClaim]]) -> None:
        """FindPodVolumes for the unbound claims of a WaitForFirstConsumer class, node by node but
        array-wise over the batch."""
        n = int(rows.shape[0])
        names_arr = np.asarray(names, dtype=object)
        live = np.ones(n, dtype=np.bool_)  # nodes not yet failed by a claim annotated for another node
        annotated: list[PersistentVolumeClaim] = []
        to_match: list[PersistentVolumeClaim] = []
        for pvc in claims.delayed:
            selected = pvc.annotations.get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(pvc)
                continue
            other = live & (names_arr != selected)
            bind_conflict |= other
            live &= ~other
            annotated.append(pvc)
        # Each node's claims left to provision, in upstream's order: annotated ones, then unmatched.
        unmatched: list[tuple[PersistentVolumeClaim, BoolArray]] = [
            (pvc, live.copy()) for pvc in annotated
        ]
        if to_match:
            taken: dict[str, BoolArray] = {}  # volume name -> the nodes where an earlier claim chose it
            for pvc in sorted(to_match, key=_size):
                found = self._match(s, pvc, claims.volumes_by_class.get(pvc.storage_class, []), table, rows, live,
                                    taken, chosen)
                unmatched.append((pvc, live & ~found))
        # checkVolumeProvisions, claim by claim: the first failing claim decides a node.
        settled = ~live
        for pvc, need in unmatched:
            need = need & ~settled
            if not need.any():
                continue
            class_name = pvc.storage_class
            if not class_name:
                for i in np.flatnonzero(need).tolist():
                    errors[i] = f'no class for claim "{pvc.key}"'
                settled |= need
                continue
            cls = s.store.storage_class(class_name)
            if cls is None:
                for i in np.flatnonzero(need).tolist():
                    errors[i] = f'failed to find storage class "{class_name}"'
                settled |= need
                continue
            if not cls.provisioner or cls.provisioner == NO_PROVISIONER:
                fail = need
            else:
                fail = need & ~topology_mask(cls, table, rows)
            bind_conflict |= fail
            settled |= fail
            for i in np.flatnonzero(need & ~fail).tolist():
                provision[i].append(pvc)

    @staticmethod
    def _match(s: _State, pvc: PersistentVolumeClaim, volumes: list[PersistentVolume], table: NodeTable, rows: IntArray,
               live: BoolArray, taken: dict[str, BoolArray],
               chosen: list[list[tuple[PersistentVolume, PersistentVolumeClaim]]]) -> BoolArray:
        """FindMatchingVolume for one claim on every live node: the nodes where it found a volume
        (recorded in ``chosen`` and ``taken``)."""
        n = int(rows.shape[0])
        request = _size(pvc)
        candidates: list[PersistentVolume] = []
        for pv in volumes:
            if pv.claim_ref is not None and not pv.bound_to(pvc):
                continue
            if pv.storage < request or pv.volume_mode != pvc.volume_mode:
                continue
            if pv.volume_attributes_class_name != pvc.volume_attributes_class_name or pv.deletion_timestamp is not None:
                continue
            if pv.bound_to(pvc):
                # Pre-bound to this claim: it decides (its node affinity, nothing else).
                ok = pv_affinity(pv).mask(table, rows) & live & ~taken.get(pv.name, np.zeros(n, dtype=np.bool_))
                for i in np.flatnonzero(ok).tolist():
                    chosen[i].append((pv, pvc))
                taken[pv.name] = taken.get(pv.name, np.zeros(n, dtype=np.bool_)) | ok
                return ok
            if pv.phase != "Available" or pv.storage_class != pvc.storage_class:
                continue
            if pvc.selector is not None and not _selector_matches(pvc, pv):
                continue
            if not set(pvc.access_modes) <= set(pv.access_modes):
                continue
            candidates.append(pv)
        found = np.zeros(n, dtype=np.bool_)
        if not candidates:
            return found
        # The smallest volume that fits (the first listed among equals).
        candidates.sort(key=lambda v: v.storage)
        for pv in candidates:
            free = live & ~found
            if not free.any():
                break
            held = taken.get(pv.name)
            if held is not None:
                free &= ~held
            ok = free & pv_affinity(pv).mask(table, rows)
            if not ok.any():
                continue
            for i in np.flatnonzero(ok).tolist():
                chosen[i].append((pv, pvc))
            taken[pv.name] = ok if held is None else held | ok
            found |= ok
        return found

    # ---- PreScore / Score ----------------------------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        # With StorageCapacityScoring on (v1.37's default) kube-scheduler scores every pod, even one
        # whose PreFilter was Skip (its state is there, and empty); with it off, it has no scorer.
        if not self.capacity_scoring:
            return _SKIP
        try:
            _read_state(state)
        except RuntimeError as exc:
            return Status.failure(str(exc), plugin=_NAME)
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        out = np.zeros(len(batch), dtype=np.int64)
        if not self.capacity_scoring:
            return out
        s = _read_state(state)
        if not s.by_node:
            return out
        names = batch.snapshot.table.names
        for i, row in enumerate(batch.rows.tolist()):
            volumes = s.by_node.get(names[row])
            if volumes is not None and volumes.static:
                out[i] = self._static_score(volumes)
        return out

    def _static_score(self, volumes: PodVolumes) -> int:
        """The node's score for binding ``volumes.static``: per class (the volume's own
        ``storageClassName``), requested and capacity summed; each class's utilization through the
        shape; the mean rounded half away from zero."""
        classes: dict[str, list[int]] = {}
        for pv, pvc in volumes.static:
            sums = classes.setdefault(pv.storage_class_name, [0, 0])
            sums[0] += pvc.storage or 0
            sums[1] += pv.storage
        utilization = np.asarray(
            [100 if cap == 0 or req > cap else req * 100 // cap for req, cap in classes.values()], dtype=np.int64
        )
        total = int(broken_linear(self.shape, utilization).sum())
        return (2 * total + len(classes)) // (2 * len(classes))  # math.Round of a non-negative mean

    # ---- Reserve / Unreserve -------------------------------------------------------------------

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(_STATE_KEY)
        if s is _NO_CLAIMS:
            return SUCCESS
        if not isinstance(s, _State):
            return Status.failure("not found", plugin=_NAME)
        volumes = s.by_node.get(node_name)
        if volumes is None:
            s.all_bound = True  # the pod has no claims
            return SUCCESS
        if self._all_bound(s.store, pod):
            s.all_bound = True
            return SUCCESS
        s.all_bound = False
        store = s.store
        static: list[tuple[PersistentVolume, PersistentVolumeClaim]] = []
        dynamic: list[PersistentVolumeClaim] = []
        try:
            for pv, pvc in volumes.static:
                new, dirty = bind_volume_to_claim(pv, pvc)
                if dirty:
                    store.assume_volume(new)
                static.append((new, pvc))
            for pvc in volumes.dynamic:
                annotated = dataclasses.replace(pvc, annotations={**pvc.annotations, ANN_SELECTED_NODE: node_name})
                store.assume_claim(annotated)
                dynamic.append(annotated)
        except VolumeStoreError as exc:
            revert_assumed(store, PodVolumes(static, dynamic))
            return Status.failure(str(exc), plugin=_NAME)
        s.by_node[node_name] = PodVolumes(static, dynamic)
        return SUCCESS

    @staticmethod
    def _all_bound(store: VolumeStore, pod: Pod) -> bool:
        for _, name, _ in claim_names(pod):
            pvc = store.claim(pod.namespace, name)
            if pvc is None or not pvc.fully_bound:
                return False
        return True

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.get(_STATE_KEY)
        if s is _NO_CLAIMS or not isinstance(s, _State):
            return
        volumes = s.by_node.get(node_name)
        if volumes is not None:
            revert_assumed(s.store, volumes)

    # ---- PreBind -------------------------------------------------------------------------------

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(_STATE_KEY)
        if s is _NO_CLAIMS:
            return _SKIP
        if not isinstance(s, _State):
            return Status.failure("not found", plugin=_NAME)
        if s.all_bound:
            return _SKIP
        if node_name not in s.by_node:
            return Status.failure(f'no pod volume found for node "{node_name}"', plugin=_NAME)
        return SUCCESS

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(_STATE_KEY)
        if s is _NO_CLAIMS:
            return SUCCESS
        if not isinstance(s, _State):
            return Status.failure("not found", plugin=_NAME)
        if s.all_bound:
            return SUCCESS
        volumes = s.by_node.get(node_name)
        if volumes is None:
            return Status.failure(f'no pod volume found for node "{node_name}"', plugin=_NAME)
        node = _node(state, self.handle, node_name)
        if node is None:
            return Status.failure(f'binding volumes: failed to get node "{node_name}": node "{node_name}" not found',
                                  plugin=_NAME)
        return await bind_pod_volumes(s.store, node, volumes, timeout=self.bind_timeout, plugin=_NAME)

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Upstream also registers CSIDriver and CSIStorageCapacity events, objects no source here keeps.
        return [
            ClusterEventWithHint(ClusterEvent(STORAGE_CLASS, ActionType.Add | UPDATE), _after_class_change),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.Add | UPDATE), _after_claim_change),
            ClusterEventWithHint(ClusterEvent(PERSISTENT_VOLUME, ActionType.Add | UPDATE)),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.Add | UPDATE), _after_csinode_change),
        ]


def _store(state: CycleState, handle: Handle | None) -> VolumeStore:
    snapshot = state.snapshot if state.snapshot is not None else (handle.snapshot() if handle is not None else None)
    return snapshot.volumes if snapshot is not None else VolumeStore()


def _parse_shape(raw: Any) -> tuple[tuple[int, int], ...]:
    """VolumeBindingArgs ``shape``, validated as kube-scheduler validates it with StorageCapacityScoring
    on (an absent or empty one is the default)."""
    if raw is None or raw == []:
        return DEFAULT_SHAPE
    if not isinstance(raw, list):
        raise PluginArgsError(f"{_NAME}: shape must be a list of {{utilization, score}}")
    points: list[tuple[int, int]] = []
    for i, point in enumerate(raw):
        if not isinstance(point, dict):
            raise PluginArgsError(f"{_NAME}: shape[{i}] must be a mapping with utilization and score")
        unknown = sorted(set(point) - {"utilization", "score"})
        if unknown:
            raise PluginArgsError(f"{_NAME}: shape[{i}]: unknown field {unknown[0]!r}")
        values = [point.get(key, 0) for key in ("utilization", "score")]
        for key, v in zip(("utilization", "score"), values, strict=True):
            if not isinstance(v, int) or isinstance(v, bool):
                raise PluginArgsError(f"{_NAME}: shape[{i}].{key} must be an integer, got {v!r}")
        points.append((values[0], values[1]))
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            raise PluginArgsError(
                f"{_NAME}: shape[{i}].utilization: Invalid value: {points[i][0]}: values must be sorted in "
                "increasing order"
            )
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= 100:
            raise PluginArgsError(
                f"{_NAME}: shape[{i}].utilization: Invalid value: {utilization}: not in valid range [0, 100]"
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise PluginArgsError(
                f"{_NAME}: shape[{i}].score: Invalid value: {score}: not in valid range "
                f"[0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            )
    return tuple(points)


def _read_state(state: CycleState) -> _State:
    s = state.get(_STATE_KEY)
    if not isinstance(s, _State):
        raise RuntimeError("not found")  # the cycle state's error: PreFilter did not run
    return s


def _selector_matches(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return label_selector_matches(pvc.selector, pv.labels)


def _node(state: CycleState, handle: Handle | None, name: str) -> Node | None:
    snapshot = state.snapshot if state.snapshot is not None else (handle.snapshot() if handle is not None else None)
    if snapshot is None:
        return None
    row = snapshot.row(name)
    return None if row is None else snapshot.table.nodes[row]


def _after_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A claim the pod uses was added or changed (a claim of another namespace, or another claim, not)."""
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return QueueingHint.QueueSkip
    if any(name == new.name for _, name, _ in claim_names(pod)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _after_class_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A new class, or a class whose allowedTopologies changed (the binding mode cannot change)."""
    if old is None or new is None:
        return QueueingHint.Queue
    return QueueingHint.Queue if old.allowed_topologies != new.allowed_topologies else QueueingHint.QueueSkip


def _after_csinode_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A new CSINode, or one whose migrated-plugins annotation changed."""
    if old is None or new is None:
        return QueueingHint.Queue
    key = "storage.alpha.kubernetes.io/migrated-plugins"
    return QueueingHint.Queue if old.annotations.get(key) != new.annotations.get(key) else QueueingHint.QueueSkip
