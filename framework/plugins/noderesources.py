"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be.

Filter compares the pod's requests with ``allocatable - requested`` for every node of a batch at
once; Score implements kube-scheduler's LeastAllocated and MostAllocated strategies over the
columnar snapshot (CPU and memory counted with the non-zero defaults, as kube-scheduler does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Pod
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from pluginhost.snapshot import non_zero_requests
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["NodeResourcesFit", "PluginArgsError"]

IntArray = npt.NDArray[np.int64]
_STATE_KEY = "PreFilterNodeResourcesFit"
_SCORE_KEY = "PreScoreNodeResourcesFit"
_STRATEGIES = ("LeastAllocated", "MostAllocated")


class PluginArgsError(ValueError):
    """A plugin's ``pluginConfig`` args are invalid."""


@dataclass(frozen=True, slots=True)
class _FitState:
    # (resource, amount) pairs the pod requests, "pods" excluded; the fixed four first, then the rest sorted.
    requests: tuple[tuple[str, int], ...]

    def clone(self) -> _FitState:
        return self


def _parse_args(args: dict[str, Any]) -> tuple[str, list[tuple[str, int]], frozenset[str], tuple[str, ...]]:
    strategy = args.get("scoringStrategy") or {}
    if not isinstance(strategy, dict):
        raise PluginArgsError("NodeResourcesFit: scoringStrategy must be a mapping")
    kind = strategy.get("type", "LeastAllocated")
    if kind not in _STRATEGIES:
        supported = ", ".join(_STRATEGIES)
        raise PluginArgsError(f"NodeResourcesFit: scoringStrategy.type {kind!r} is not supported (use {supported})")
    resources: list[tuple[str, int]] = []
    for i, spec in enumerate(strategy.get("resources") or [{"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1}]):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise PluginArgsError(f"NodeResourcesFit: scoringStrategy.resources[{i}].name is required")
        weight = spec.get("weight", 1)
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise PluginArgsError(f"NodeResourcesFit: scoringStrategy.resources[{i}].weight must be in [1, 100]")
        resources.append((spec["name"], weight))
    ignored = frozenset(args.get("ignoredResources") or ())
    groups = tuple(args.get("ignoredResourceGroups") or ())
    return kind, resources, ignored, groups


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeResourcesFit"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.strategy, self.resources, self.ignored, self.ignored_groups = _parse_args(args or {})

    # ---- PreFilter / Filter --------------------------------------------------------------------

    def _is_ignored(self, resource: str) -> bool:
        if resource in self.ignored:
            return True
        group = resource.split("/", 1)[0] if "/" in resource else ""
        return bool(group) and group in self.ignored_groups

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        fixed = [(r, pod.requests.get(r, 0)) for r in (CPU, MEMORY, EPHEMERAL_STORAGE)]
        scalar = sorted(
            (r, v) for r, v in pod.requests.items() if r not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
        )
        state.write(_STATE_KEY, _FitState(tuple(fixed + scalar)))
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
        masks: list[tuple[str, npt.NDArray[np.bool_]]] = []
        pods_col = snap.columns[PODS]
        too_many = snap.requested[rows, pods_col] + 1 > snap.allocatable[rows, pods_col]
        masks.append(("Too many pods", too_many))
        if any(v for _, v in fit.requests):
            for res, amount in fit.requests:
                if amount <= 0:
                    continue
                if res not in (CPU, MEMORY, EPHEMERAL_STORAGE) and self._is_ignored(res):
                    continue
                c = snap.columns.get(res)
                if c is None:
                    short = np.ones(len(rows), dtype=np.bool_)
                else:
                    short = amount > snap.allocatable[rows, c] - snap.requested[rows, c]
                masks.append((f"Insufficient {res}", short))
        return _combine(masks, len(rows))

    # ---- PreScore / Score ----------------------------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        cpu, mem = non_zero_requests(pod)
        req = {r: pod.requests.get(r, 0) for r, _ in self.resources}
        req[CPU] = cpu
        req[MEMORY] = mem
        state.write(_SCORE_KEY, req)
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        req: dict[str, int] | None = state.get(_SCORE_KEY)
        if req is None:
            cpu, mem = non_zero_requests(pod)
            req = {r: pod.requests.get(r, 0) for r, _ in self.resources} | {CPU: cpu, MEMORY: mem}
        snap = batch.snapshot
        rows = batch.rows
        n = len(rows)
        total = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for res, weight in self.resources:
            pod_req = req.get(res, 0)
            c = snap.columns.get(res)
            if c is None:
                continue
            if res == CPU:
                used = snap.non_zero_requested[rows, 0] + pod_req
            elif res == MEMORY:
                used = snap.non_zero_requested[rows, 1] + pod_req
            else:
                if pod_req == 0 and res != EPHEMERAL_STORAGE:
                    continue  # a scalar resource the pod does not request is not scored
                used = snap.requested[rows, c] + pod_req
            alloc = snap.allocatable[rows, c]
            has = alloc > 0
            safe = np.where(has, alloc, 1)
            if self.strategy == "LeastAllocated":
                s = np.where(used > alloc, 0, (alloc - used) * MAX_NODE_SCORE // safe)
            else:  # MostAllocated: a node over capacity scores as full
                s = np.where(used > alloc, MAX_NODE_SCORE, used * MAX_NODE_SCORE // safe)
            total += np.where(has, s * weight, 0)
            weight_sum += np.where(has, weight, 0)
        return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0).astype(np.int64)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.Delete)),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeAllocatable)),
        ]


def _combine(masks: list[tuple[str, npt.NDArray[np.bool_]]], n: int) -> FilterResult:
    """One Unschedulable status per node listing every reason that applies to it, in check order."""
    bits = np.zeros(n, dtype=np.int64)
    for i, (_, m) in enumerate(masks):
        bits |= m.astype(np.int64) << i
    codes = np.where(bits != 0, np.int8(Code.Unschedulable), np.int8(0)).astype(np.int8)
    if not codes.any():
        return FilterResult(codes)
    uniq, inverse = np.unique(bits, return_inverse=True)
    table = [tuple(reason for i, (reason, _) in enumerate(masks) if int(u) >> i & 1) for u in uniq.tolist()]
    return FilterResult(codes, inverse.astype(np.int32).reshape(-1), table)
