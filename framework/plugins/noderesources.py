"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be.

Filter compares the pod's requests with ``allocatable - requested`` for every node of a batch at
once; Score implements kube-scheduler's three scoring strategies (LeastAllocated, MostAllocated and
RequestedToCapacityRatio) over the columnar snapshot, with CPU and memory counted with the non-zero
defaults for containers that request neither, as kube-scheduler does.

The helpers :func:`is_scalar_resource_name`, :func:`allocatable_and_requested` and
:func:`resource_columns` (the same for several resources, gathered once) are shared with
NodeResourcesBalancedAllocation, which scores from the same per-resource columns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.errors import OutriggerError
from pluginhost.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Node, Pod
from pluginhost.placement import PlacementScorePlugin, PodGroupAssignments, PodGroupInfo
from pluginhost.plugin import (
    ASSIGNED_POD,
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScorePlugin,
)
from pluginhost.snapshot import Snapshot, non_zero_requests
from pluginhost.status import SUCCESS, Code, Status

# framework.dra.counts reads slices' node selectors through framework.dra.pools, which imports this
# package: the counts are taken as a module, which a partial import allows.
from ..dra import counts as dra_counts
from ..dra.extended import IMPLICIT_PREFIX, class_for, is_dra_extended_resource_name
from ..dra.models import DeviceClass

__all__ = [
    "NodeResourcesFit",
    "PluginArgsError",
    "allocatable_and_requested",
    "broken_linear",
    "check_fields",
    "is_extended_resource_name",
    "is_qualified_name",
    "is_scalar_resource_name",
    "parse_resource_specs",
    "resource_columns",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_STATE_KEY = "PreFilterNodeResourcesFit"
_SCORE_KEY = "PreScoreNodeResourcesFit"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
# kube-scheduler's config.MaxCustomPriorityScore: shape scores are 0..10, scaled to 0..MAX_NODE_SCORE.
MAX_CUSTOM_PRIORITY_SCORE = 10
_MAX_UTILIZATION = 100
_DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))
_NATIVE = (CPU, MEMORY, EPHEMERAL_STORAGE)
# Keys every plugin's args may carry besides its own fields (a typed args object in a config file).
_TYPE_META = frozenset({"apiVersion", "kind"})


class PluginArgsError(OutriggerError, ValueError):
    """A plugin's ``pluginConfig`` args are invalid."""


# ---- resource names (k8s.io/kubernetes/pkg/apis/core/v1/helper) ------------------------------

_QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")


def is_qualified_name(value: str) -> bool:
    """apimachinery's ``IsQualifiedName``: ``[prefix/]name`` with a DNS subdomain prefix."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME_RE.fullmatch(name) is not None


def is_extended_resource_name(name: str) -> bool:
    """An extended resource: a domain-prefixed name outside ``kubernetes.io/`` (``example.com/gpu``)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


def is_scalar_resource_name(name: str) -> bool:
    """The resources a node accounts beyond cpu, memory, ephemeral-storage and pods: extended
    resources, hugepages, ``kubernetes.io/``-prefixed native resources and attachable volumes."""
    return (
        is_extended_resource_name(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def allocatable_and_requested(
    snap: Snapshot, rows: IntArray, resource: str, pod_request: int, *, use_requested: bool
) -> tuple[IntArray, IntArray] | None:
    """Per row, the node's allocatable ``resource`` and what would be requested with the pod on it.

    kube-scheduler's ``calculateResourceAllocatableRequest``: CPU and memory come from the non-zero
    requested totals unless ``use_requested``; a scalar resource the pod does not request, and any
    other resource the node does not account (``pods``, unknown names), is left out (None). Rows whose
    allocatable is 0 are for the caller to skip.
    """
    if resource in (CPU, MEMORY):
        c = snap.columns[resource]
        # non_zero_requested holds cpu in column 0 and memory in column 1
        used = snap.requested[rows, c] if use_requested else snap.non_zero_requested[rows, int(resource == MEMORY)]
        return snap.allocatable[rows, c], used + pod_request
    if resource == EPHEMERAL_STORAGE:
        c = snap.columns[resource]
        return snap.allocatable[rows, c], snap.requested[rows, c] + pod_request
    if pod_request == 0 or not is_scalar_resource_name(resource):
        return None
    col = snap.columns.get(resource)
    if col is None:
        return None
    return snap.allocatable[rows, col], snap.requested[rows, col] + pod_request


def resource_columns(
    snap: Snapshot, rows: IntArray, resources: Sequence[str], pod_requests: Sequence[int], *, use_requested: bool,
    devices: dra_counts.DeviceCounts | None = None,
) -> list[tuple[int, IntArray, IntArray]]:
    """:func:`allocatable_and_requested` for several resources at once: ``(i, alloc, used)`` for
    each resource ``resources[i]`` that function does not leave out, in order. With ``devices``, a
    scalar resource a node lists at 0 or not at all counts the node's devices of the class that maps
    it, when it has some (:class:`~framework.dra.counts.DeviceCounts`).

    Each source array is gathered once for all resources (``take`` of whole rows, then column
    views): at a few hundred nodes per batch the scoring plugins' cost is numpy call overhead, so
    fewer, cheaper calls are what makes them fast.
    """
    taken: dict[str, IntArray] = {}

    def rows_of(name: str) -> IntArray:
        arr = taken.get(name)
        if arr is None:
            src = {"alloc": snap.allocatable, "req": snap.requested, "nz": snap.non_zero_requested}[name]
            arr = taken[name] = src.take(rows, axis=0)
        return arr

    out: list[tuple[int, IntArray, IntArray]] = []
    for i, (res, pod_req) in enumerate(zip(resources, pod_requests, strict=True)):
        if res in (CPU, MEMORY):
            c = snap.columns[res]
            # non_zero_requested holds cpu in column 0 and memory in column 1
            used = rows_of("req")[:, c] if use_requested else rows_of("nz")[:, int(res == MEMORY)]
        elif res == EPHEMERAL_STORAGE:
            c = snap.columns[res]
            used = rows_of("req")[:, c]
        elif pod_req != 0 and is_scalar_resource_name(res):
            col = snap.columns.get(res)
            counted = None if devices is None else devices.columns(
                res, [snap.table.nodes[r] for r in rows.tolist()], None if col is None else rows_of("alloc")[:, col],
                None if col is None else rows_of("req")[:, col])
            if counted is not None:
                out.append((i, counted[0], counted[1] + pod_req))
                continue
            if col is None:
                continue
            c = col
            used = rows_of("req")[:, c]
        else:
            continue
        out.append((i, rows_of("alloc")[:, c], used + pod_req))
    return out


# ---- args ------------------------------------------------------------------------------------


def check_fields(args: dict[str, Any], allowed: Sequence[str], where: str) -> None:
    """Strict decoding: kube-scheduler rejects unknown fields in a plugin's args."""
    unknown = sorted(k for k in args if k not in allowed and k not in _TYPE_META)
    if unknown:
        raise PluginArgsError(f"{where}: unknown field {unknown[0]!r} (known fields: {', '.join(allowed)})")


def parse_resource_specs(value: Any, path: str, where: str) -> list[tuple[str, int]]:
    """A ``[{name, weight}]`` list; a missing or zero weight is 1, as kube-scheduler's defaulting."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise PluginArgsError(f"{where}: {path} must be a list of {{name, weight}}")
    out: list[tuple[str, int]] = []
    for i, spec in enumerate(value):
        item = f"{path}[{i}]"
        if not isinstance(spec, dict):
            raise PluginArgsError(f"{where}: {item} must be a mapping with name and weight")
        check_fields(spec, ("name", "weight"), f"{where}: {item}")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise PluginArgsError(f"{where}: {item}.name is required")
        weight = spec.get("weight")
        if weight is None or weight == 0:
            weight = 1
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise PluginArgsError(f"{where}: {item}.weight must be an integer")
        out.append((name, weight))
    return out


@dataclass(frozen=True, slots=True)
class _FitArgs:
    strategy: str
    resources: list[tuple[str, int]]
    shape: tuple[tuple[int, int], ...]  # (utilization, score scaled to 0..MAX_NODE_SCORE)
    ignored: frozenset[str]
    ignored_groups: frozenset[str]


def _parse_shape(raw: Any, path: str) -> tuple[tuple[int, int], ...]:
    where = "NodeResourcesFit"
    if raw is not None and not isinstance(raw, list):
        raise PluginArgsError(f"{where}: {path} must be a list of {{utilization, score}}")
    if not raw:
        raise PluginArgsError(f"{where}: {path}: at least one point must be specified")
    points: list[tuple[int, int]] = []
    for i, p in enumerate(raw):
        item = f"{path}[{i}]"
        if not isinstance(p, dict):
            raise PluginArgsError(f"{where}: {item} must be a mapping with utilization and score")
        check_fields(p, ("utilization", "score"), f"{where}: {item}")
        values = []
        for key in ("utilization", "score"):
            v = p.get(key, 0)
            if not isinstance(v, int) or isinstance(v, bool):
                raise PluginArgsError(f"{where}: {item}.{key} must be an integer")
            values.append(v)
        points.append((values[0], values[1]))
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            raise PluginArgsError(
                f"{where}: {path}[{i}].utilization: {points[i][0]}: values must be sorted in increasing order"
            )
    for i, (util, score) in enumerate(points):
        if not 0 <= util <= _MAX_UTILIZATION:
            raise PluginArgsError(
                f"{where}: {path}[{i}].utilization: {util}: not in valid range [0, {_MAX_UTILIZATION}]"
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise PluginArgsError(
                f"{where}: {path}[{i}].score: {score}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            )
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    return tuple((u, s * scale) for u, s in points)


def _string_list(args: dict[str, Any], key: str) -> list[str]:
    raw = args.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise PluginArgsError(f"NodeResourcesFit: {key} must be a list of strings")
    return list(raw)


def _parse_args(args: dict[str, Any]) -> _FitArgs:
    """NodeResourcesFitArgs with kube-scheduler's v1 defaulting and validation."""
    where = "NodeResourcesFit"
    check_fields(args, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"), where)
    ignored = _string_list(args, "ignoredResources")
    for i, res in enumerate(ignored):
        if not is_qualified_name(res):
            raise PluginArgsError(f"{where}: ignoredResources[{i}]: {res!r} is not a valid resource name")
    groups = _string_list(args, "ignoredResourceGroups")
    for i, group in enumerate(groups):
        if "/" in group:
            raise PluginArgsError(
                f"{where}: ignoredResourceGroups[{i}]: {group!r}: resource group name can't contain '/'"
            )
        if not is_qualified_name(group):
            raise PluginArgsError(f"{where}: ignoredResourceGroups[{i}]: {group!r} is not a valid resource group name")

    strategy = args.get("scoringStrategy")
    if strategy is None:
        return _FitArgs(LEAST_ALLOCATED, list(_DEFAULT_RESOURCES), (), frozenset(ignored), frozenset(groups))
    if not isinstance(strategy, dict):
        raise PluginArgsError(f"{where}: scoringStrategy must be a mapping")
    check_fields(strategy, ("type", "resources", "requestedToCapacityRatio"), f"{where}: scoringStrategy")
    kind = strategy.get("type")
    if kind not in _STRATEGIES:
        supported = ", ".join(_STRATEGIES)
        shown = "" if kind is None else kind
        raise PluginArgsError(
            f"{where}: scoringStrategy.type: unsupported value {shown!r} (supported: {supported})"
        )
    resources = parse_resource_specs(strategy.get("resources"), "scoringStrategy.resources", where)
    for i, (name, weight) in enumerate(resources):
        if not 0 < weight <= 100:
            raise PluginArgsError(
                f"{where}: scoringStrategy.resources[{i}].weight: {weight}: "
                f"resource weight of {name} not in valid range (0, 100]"
            )
    if not resources:
        resources = list(_DEFAULT_RESOURCES)
    ratio = strategy.get("requestedToCapacityRatio")
    shape: tuple[tuple[int, int], ...] = ()
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        if ratio is None:
            raise PluginArgsError(
                f"{where}: scoringStrategy.requestedToCapacityRatio: must be specified when type is "
                f"{REQUESTED_TO_CAPACITY_RATIO}"
            )
        if not isinstance(ratio, dict):
            raise PluginArgsError(f"{where}: scoringStrategy.requestedToCapacityRatio must be a mapping")
        check_fields(ratio, ("shape",), f"{where}: scoringStrategy.requestedToCapacityRatio")
        shape = _parse_shape(ratio.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape")
    elif ratio is not None:
        raise PluginArgsError(
            f"{where}: scoringStrategy.requestedToCapacityRatio: must be nil when type is not "
            f"{REQUESTED_TO_CAPACITY_RATIO}"
        )
    return _FitArgs(kind, resources, shape, frozenset(ignored), frozenset(groups))


# ---- cycle state -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FitState:
    # (resource, amount) pairs the pod requests: cpu, memory, ephemeral-storage (0 when not
    # requested), then the scalar resources in name order. Other names ("pods") are not accounted.
    requests: tuple[tuple[str, int], ...]
    # The requested resources a DeviceClass maps (DRAExtendedResource): a node that does not advertise
    # one leaves it to DynamicResources, which asks the node's devices for it.
    to_dra: frozenset[str] = frozenset()

    def clone(self) -> _FitState:
        return self


@dataclass(frozen=True, slots=True)
class _ScoreState:
    # The pod's request of each configured scoring resource, in the order of the args.
    requests: tuple[int, ...]
    # The devices of the classes scoring resources map, when one does (DRAExtendedResource).
    devices: dra_counts.DeviceCounts | None = None

    def clone(self) -> _ScoreState:
        return self


def _fit_requests(pod: Pod) -> tuple[tuple[str, int], ...]:
    fixed = [(r, pod.requests.get(r, 0)) for r in _NATIVE]
    scalar = sorted((r, v) for r, v in pod.requests.items() if r not in _NATIVE and is_scalar_resource_name(r))
    return tuple(fixed + scalar)


# ---- the plugin ------------------------------------------------------------------------------


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, PlacementScorePlugin,
                       EnqueueExtensions):
    """Filters out nodes without room for the pod's requests and scores the rest by how allocated
    they would be, with the configured strategy; scores a PodGroup's placements by how allocated their
    nodes would be together (MostAllocated whatever the strategy, as kube-scheduler 1.37 does)."""

    name = "NodeResourcesFit"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        parsed = _parse_args(args or {})
        self.strategy = parsed.strategy
        self.resources = parsed.resources
        self.shape = parsed.shape
        self.ignored = parsed.ignored
        self.ignored_groups = parsed.ignored_groups
        self.handle = handle

    # ---- PreFilter / Filter --------------------------------------------------------------------

    def _is_ignored(self, resource: str) -> bool:
        """Only extended resources can be ignored (ignoredResources / ignoredResourceGroups)."""
        if not is_extended_resource_name(resource):
            return False
        return resource in self.ignored or resource.split("/", 1)[0] in self.ignored_groups

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        requests = _fit_requests(pod)
        classes = _device_classes(state, self.handle)
        to_dra = frozenset(r for r, v in requests if v > 0 and classes and is_dra_extended_resource_name(r)
                           and class_for(classes, r) is not None)
        state.write(_STATE_KEY, _FitState(requests, to_dra))
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        fit: _FitState | None = state.get(_STATE_KEY)
        if fit is None:
            return FilterResult.from_mask(
                np.ones(len(batch), dtype=np.bool_),
                Code.Error,
                f"reading {_STATE_KEY!r} from cycle state: PreFilter did not run",
            )
        snap = batch.snapshot
        rows = batch.rows
        need = self._needs(fit, snap)
        if need is not None:
            # Fast path, one gather per array: when every node has room there is nothing to explain.
            free = snap.allocatable.take(rows, axis=0) - snap.requested.take(rows, axis=0)
            if not (free < need).any():
                return FilterResult.passing(len(rows))
        return self._explain(fit, snap, rows)

    def _needs(self, fit: _FitState, snap: Snapshot) -> IntArray | None:
        """Per resource column, what the pod needs free on a node (1 for ``pods``); None when the
        pod requests a resource the snapshot has no column for (no node has it: the slow path)."""
        need = np.zeros(len(snap.resources), dtype=np.int64)
        need[snap.columns[PODS]] = 1
        for res, amount in fit.requests:
            if amount <= 0 or self._is_ignored(res):
                continue
            c = snap.columns.get(res)
            if c is None:
                if res in fit.to_dra:
                    continue  # no node advertises it: DynamicResources asks every node's devices
                return None
            need[c] = amount
        return need

    def _explain(self, fit: _FitState, snap: Snapshot, rows: IntArray) -> FilterResult:
        """Every node's status with all the reasons that apply to it."""
        n = len(rows)
        checks: list[tuple[str, BoolArray, BoolArray | None]] = []
        pods_col = snap.columns[PODS]
        too_many = snap.requested[rows, pods_col] + 1 > snap.allocatable[rows, pods_col]
        checks.append(("Too many pods", too_many, None))
        for res, amount in fit.requests:
            if amount <= 0:
                continue
            if self._is_ignored(res):
                continue
            c = snap.columns.get(res)
            if c is None:
                if res in fit.to_dra:
                    continue
                everywhere = np.ones(n, dtype=np.bool_)
                checks.append((f"Insufficient {res}", everywhere, everywhere))
                continue
            alloc = snap.allocatable[rows, c]
            short = amount > alloc - snap.requested[rows, c]
            if res in fit.to_dra:
                short &= alloc > 0  # the nodes without it leave it to DynamicResources
            # Even an empty node would be too small: preemption cannot help there.
            checks.append((f"Insufficient {res}", short, amount > alloc))
        return _combine(checks, n)

    # ---- PreScore / Score ----------------------------------------------------------------------

    def _pod_score_requests(self, pod: Pod) -> tuple[int, ...]:
        cpu, mem = non_zero_requests(pod)
        nz = {CPU: cpu, MEMORY: mem}
        return tuple(nz.get(r, pod.requests.get(r, 0)) if r != PODS else 0 for r, _ in self.resources)

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        devices = dra_counts.DeviceCounts.for_resources(nodes.snapshot.dra, [r for r, _ in self.resources])
        state.write(_SCORE_KEY, _ScoreState(self._pod_score_requests(pod), devices))
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        pre: _ScoreState | None = state.get(_SCORE_KEY)
        if pre is None:
            pre = _ScoreState(self._pod_score_requests(pod),
                              dra_counts.DeviceCounts.for_resources(batch.snapshot.dra, [r for r, _ in self.resources]))
        requests = pre.requests
        n = len(batch)
        names = [res for res, _ in self.resources]
        total = np.zeros(n, dtype=np.int64)
        weight_sum: IntArray | int = 0
        for i, alloc, used in resource_columns(batch.snapshot, batch.rows, names, requests, use_requested=False,
                                               devices=pre.devices):
            weight = self.resources[i][1]
            has = alloc != 0
            everywhere = bool(has.all())
            safe = alloc if everywhere else np.where(has, alloc, 1)
            if self.strategy == LEAST_ALLOCATED:
                s = np.maximum(alloc - used, 0) * MAX_NODE_SCORE // safe  # 0 when over capacity
            elif self.strategy == MOST_ALLOCATED:
                # Over capacity (pods counted with non-zero defaults) scores as full.
                s = np.minimum(used, alloc) * MAX_NODE_SCORE // safe
            else:
                utilization = np.where(used > alloc, _MAX_UTILIZATION, used * _MAX_UTILIZATION // safe)
                s = broken_linear(self.shape, utilization)
                has &= s > 0  # RequestedToCapacityRatio leaves resources scoring 0 out of the average
                everywhere = bool(has.all())
            if everywhere:
                total += s * weight
                weight_sum = weight_sum + weight
            else:
                total += np.where(has, s * weight, 0)
                weight_sum = weight_sum + np.where(has, weight, 0)
        # RequestedToCapacityRatio rounds (math.Round: half away from zero, exact in integers here).
        rounded = self.strategy == REQUESTED_TO_CAPACITY_RATIO
        if isinstance(weight_sum, int):  # every resource counted on every node
            if weight_sum == 0:
                return total
            out = (2 * total + weight_sum) // (2 * weight_sum) if rounded else total // weight_sum
            return out.astype(np.int64, copy=False)
        denom = np.maximum(weight_sum, 1)
        out = (2 * total + denom) // (2 * denom) if rounded else total // denom
        return np.where(weight_sum > 0, out, 0).astype(np.int64)

    # ---- PlacementScore ------------------------------------------------------------------------

    async def score_placement(self, state: CycleState, group: PodGroupInfo,
                              assignments: PodGroupAssignments) -> tuple[int, Status]:
        """MostAllocated over the placement's nodes as one: per resource, what they hold (CPU and memory
        with the non-zero defaults) plus the proposed pods' requests, over their summed allocatable;
        the resources' weighted mean. Only with TopologyAwareWorkloadScheduling is a group's cycle
        given placements to score."""
        snap = state.snapshot if state.snapshot is not None else (
            self.handle.snapshot() if self.handle is not None else None)
        if snap is None:
            return 0, Status.failure("NodeResourcesFit: no snapshot to score the placement in", plugin=self.name)
        wanted = [0] * len(self.resources)
        for a in assignments.proposed:
            for i, amount in enumerate(self._pod_score_requests(a.pod)):
                wanted[i] += amount
        rows = np.asarray(sorted({r for n in assignments.placement.nodes if (r := snap.row(n)) is not None}),
                          dtype=np.int64)
        total = weight_sum = 0
        names = [res for res, _ in self.resources]
        for i, alloc, used in resource_columns(snap, rows, names, wanted, use_requested=False):
            capacity = int(alloc.sum())
            if capacity == 0:
                continue
            held = int(used.sum()) - wanted[i] * len(rows) + wanted[i]  # the pods' requests once, not per node
            weight = self.resources[i][1]
            total += min(held, capacity) * MAX_NODE_SCORE // capacity * weight
            weight_sum += weight
        return (total // weight_sum if weight_sum else 0), SUCCESS

    # ---- queueing hints --------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # kube-scheduler 1.37 with its default gates (InPlacePodVerticalScaling GA, DRAExtendedResource
        # GA). The scale-up ones (an alpha gate) are not modelled.
        return [
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.Delete), self._after_assigned_pod_delete),
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeAllocatable), self._after_node_change
            ),
            ClusterEventWithHint(ClusterEvent("DeviceClass", ActionType.Add | ActionType.Update), _after_device_class),
            ClusterEventWithHint(
                ClusterEvent(ASSIGNED_POD, ActionType.UpdatePodScaleDown), self._after_assigned_pod_scale_down
            ),
            ClusterEventWithHint(ClusterEvent(TARGET_POD, ActionType.UpdatePodScaleDown), _queue),
        ]

    @staticmethod
    def _after_assigned_pod_delete(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A deleted pod frees room only if it was on (or nominated to) a node."""
        if not isinstance(old, Pod):
            return QueueingHint.Queue
        if not old.node_name and not old.nominated_node_name:
            return QueueingHint.QueueSkip
        return QueueingHint.Queue

    @staticmethod
    def _after_assigned_pod_scale_down(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A placed pod that now asks for less of something the pod requests may leave it room."""
        if not isinstance(old, Pod) or not isinstance(new, Pod):
            return QueueingHint.Queue
        if not new.node_name:
            return QueueingHint.QueueSkip
        wanted = (r for r, amount in pod.requests.items() if amount and (r in _NATIVE or is_scalar_resource_name(r)))
        if any(old.requests.get(r, 0) > new.requests.get(r, 0) for r in wanted):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the added or updated node could hold the pod and has more of what it asks for (the
        resources a DeviceClass maps and the node does not advertise left to DynamicResources)."""
        if not isinstance(new, Node):
            return QueueingHint.Queue
        requests = _fit_requests(pod)
        classes = _device_classes(None, self.handle)
        if classes:
            requests = tuple((r, a) for r, a in requests
                             if new.allocatable.get(r, 0) > 0 or class_for(classes, r) is None)
        if not _fits_empty(requests, new):
            return QueueingHint.QueueSkip
        if not isinstance(old, Node):
            return QueueingHint.Queue
        if new.allocatable.get(PODS, 0) > old.allocatable.get(PODS, 0):
            return QueueingHint.Queue
        for res, amount in requests:
            if amount > 0 and new.allocatable.get(res, 0) > old.allocatable.get(res, 0):
                return QueueingHint.Queue
        return QueueingHint.QueueSkip


def _device_classes(state: CycleState | None, handle: Handle | None) -> Mapping[str, DeviceClass]:
    snap = state.snapshot if state is not None and state.snapshot is not None else (
        handle.snapshot() if handle is not None else None)
    classes = getattr(getattr(snap, "dra", None), "classes", None)
    return classes if isinstance(classes, Mapping) else {}


def _after_device_class(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A class added or changed may now map an extended resource the pod asks for (by its own name, when
    added, or by a new ``extendedResourceName``)."""
    if not isinstance(new, DeviceClass):
        return QueueingHint.Queue
    if isinstance(old, DeviceClass):
        if old.extended_resource_name == new.extended_resource_name:
            return QueueingHint.QueueSkip
    elif IMPLICIT_PREFIX + new.name in pod.requests:
        return QueueingHint.Queue
    if new.extended_resource_name and new.extended_resource_name in pod.requests:
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def _queue(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """The pod itself asks for less now: it may fit somewhere."""
    return QueueingHint.Queue


def _fits_empty(requests: tuple[tuple[str, int], ...], node: Node) -> bool:
    """kube-scheduler's ``isFit``: the pod fits the node with nothing on it (no ignored resources)."""
    if node.allocatable.get(PODS, 0) < 1:
        return False
    return all(amount <= node.allocatable.get(res, 0) for res, amount in requests if amount > 0)


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction over an array: ``shape`` is (utilization, score) points in
    increasing utilization; flat before the first and after the last, linear in between (Go's
    integer division, which truncates toward zero)."""
    utils = np.asarray([u for u, _ in shape], dtype=np.int64)
    scores = np.asarray([s for _, s in shape], dtype=np.int64)
    if len(shape) == 1:
        return np.full(p.shape, scores[0], dtype=np.int64)
    i = np.searchsorted(utils, p, side="left")  # first point with utilization >= p
    inner = (i > 0) & (i < len(shape))
    j = np.clip(i, 1, len(shape) - 1)
    lo_u, hi_u = utils[j - 1], utils[j]
    lo_s, hi_s = scores[j - 1], scores[j]
    num = (hi_s - lo_s) * (p - lo_u)
    den = hi_u - lo_u
    step = np.sign(num) * (np.abs(num) // den)
    out = np.where(i == 0, scores[0], scores[-1])
    result: IntArray = np.where(inner, lo_s + step, out).astype(np.int64)
    return result


def _combine(checks: list[tuple[str, BoolArray, BoolArray | None]], n: int) -> FilterResult:
    """One status per node listing every reason that applies to it, in check order; the code is
    UnschedulableAndUnresolvable when one of them cannot be helped by preemption."""
    bits: IntArray = np.zeros(n, dtype=np.int64)
    unresolvable = np.zeros(n, dtype=np.bool_)
    for i, (_, mask, hopeless) in enumerate(checks):
        bits |= mask.astype(np.int64) << i
        if hopeless is not None:
            unresolvable |= mask & hopeless
    codes = np.where(
        bits == 0,
        np.int8(Code.Success),
        np.where(unresolvable, np.int8(Code.UnschedulableAndUnresolvable), np.int8(Code.Unschedulable)),
    ).astype(np.int8)
    if not bits.any():
        return FilterResult(codes)
    uniq, inverse = np.unique(bits, return_inverse=True)
    table = [tuple(reason for i, (reason, _, _) in enumerate(checks) if int(u) >> i & 1) for u in uniq.tolist()]
    return FilterResult(codes, inverse.astype(np.int32).reshape(-1), table)
