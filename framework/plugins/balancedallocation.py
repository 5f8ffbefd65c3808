"""NodeResourcesBalancedAllocation: favour nodes whose resources the pod would leave more evenly used.

For each configured resource (CPU and memory by default) the fraction ``requested / allocatable``
is taken (capped at 1), and a node's balance is ``int64((1 - std) * 100)``, where ``std`` is the
standard deviation of those fractions (``|f1 - f2| / 2`` for two resources). Since kube-scheduler
v1.37 the score is the change in balance the pod brings, as its ``balancedResourceScorer``
(``requested, allocated, allocatable``) computes it: the balance with the pod and without it, then
``50 + (50 + with - without) / 2`` in Go's integer division. 75 means the pod changes nothing; a pod
that evens the node out scores above, one that skews it below. The pod's requests are its real ones
(no non-zero defaults), and pods requesting none of the resources are not scored at all (PreScore
answers Skip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import CPU, MEMORY, PODS, Pod
from pluginhost.plugin import MAX_NODE_SCORE, CycleState, Handle, NodeBatch, PreScorePlugin, ScorePlugin
from pluginhost.status import SUCCESS, Status

# framework.dra.counts reads slices' node selectors through framework.dra.pools, which imports this
# package: the counts are taken as a module, which a partial import allows.
from ..dra import counts as dra_counts
from .noderesources import PluginArgsError, check_fields, parse_resource_specs, resource_columns

__all__ = ["NodeResourcesBalancedAllocation"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_SCORE_KEY = "PreScoreNodeResourcesBalancedAllocation"
_DEFAULT_RESOURCES = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class _BalancedState:
    # The pod's request of each configured resource, in the order of the args.
    requests: tuple[int, ...]
    # The devices of the classes the resources map, when one does (DRAExtendedResource).
    devices: dra_counts.DeviceCounts | None = None

    def clone(self) -> _BalancedState:
        return self


def _parse_args(args: dict[str, Any]) -> tuple[str, ...]:
    """NodeResourcesBalancedAllocationArgs: ``resources`` with weight 1 (the only weight allowed)."""
    where = "NodeResourcesBalancedAllocation"
    check_fields(args, ("resources",), where)
    specs = parse_resource_specs(args.get("resources"), "resources", where)
    seen: set[str] = set()
    for i, (name, weight) in enumerate(specs):
        if name in seen:
            raise PluginArgsError(f"{where}: resources[{i}].name: duplicate value {name!r}")
        seen.add(name)
        if weight != 1:
            raise PluginArgsError(f"{where}: resources[{i}].weight: {weight}: must be 1")
    return tuple(name for name, _ in specs) or _DEFAULT_RESOURCES


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    """Scores nodes by how close the fractions of their resources in use would be to each other."""

    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.resources = _parse_args(args or {})

    def _pod_requests(self, pod: Pod) -> tuple[int, ...]:
        return tuple(0 if r == PODS else pod.requests.get(r, 0) for r in self.resources)

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        requests = self._pod_requests(pod)
        if not any(requests):
            # A best-effort pod would otherwise pile onto whichever node is best balanced already.
            return Status.skip()
        state.write(_SCORE_KEY, _BalancedState(requests, dra_counts.DeviceCounts.for_resources(nodes.snapshot.dra,
                                                                                    self.resources)))
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        pre: _BalancedState | None = state.get(_SCORE_KEY)
        requests = pre.requests if pre is not None else self._pod_requests(pod)
        n = len(batch)
        if not any(requests):
            return np.zeros(n, dtype=np.int64)
        devices = pre.devices if pre is not None else (
            dra_counts.DeviceCounts.for_resources(batch.snapshot.dra, self.resources))
        with_pod: list[tuple[FloatArray, npt.NDArray[np.bool_]]] = []
        without_pod: list[tuple[FloatArray, npt.NDArray[np.bool_]]] = []
        columns = resource_columns(batch.snapshot, batch.rows, self.resources, requests, use_requested=True,
                                   devices=devices)
        for i, alloc, used in columns:
            valid = alloc != 0
            denominator = np.where(valid, alloc, 1).astype(np.float64)
            # `used` counts the pod; the node's own use (upstream's `allocated`) is without it.
            allocated = used - requests[i]
            with_pod.append((np.minimum(used.astype(np.float64) / denominator, 1.0), valid))
            without_pod.append((np.minimum(allocated.astype(np.float64) / denominator, 1.0), valid))
        change = MAX_NODE_SCORE // 2 + _balance(with_pod, n) - _balance(without_pod, n)
        # Both balances lie in [50, 100], so `change` is never negative and floor division is Go's
        # truncating one.
        return MAX_NODE_SCORE // 2 + change // 2


def _balance(fractions: list[tuple[FloatArray, npt.NDArray[np.bool_]]], n: int) -> IntArray:
    """:func:`_balanced_score`, with a shortcut for the default two resources (cpu, memory)."""
    if len(fractions) != 2:
        return _balanced_score(fractions, n)
    (f1, v1), (f2, v2) = fractions
    std = np.abs((f1 - f2) / 2)
    if not (v1.all() and v2.all()):
        std = np.where(v1 & v2, std, 0.0)
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def _balanced_score(fractions: list[tuple[FloatArray, npt.NDArray[np.bool_]]], n: int) -> IntArray:
    """``int64((1 - std) * MaxNodeScore)`` per node over the fractions valid on it (upstream's
    ``balancedResourceScore``).

    The float operations are those of kube-scheduler, in the same order, so the truncated results
    agree bit for bit: sums start at 0.0 and add only the valid fractions (adding 0.0 for the others
    changes nothing), and two fractions use ``|f1 - f2| / 2`` rather than the general formula.
    """
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float64)
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    for f, valid in fractions:
        first = np.where(valid & (count == 0), f, first)
        second = np.where(valid & (count == 1), f, second)
        total = total + np.where(valid, f, 0.0)
        count += valid
    std = np.zeros(n, dtype=np.float64)
    two = count == 2
    std = np.where(two, np.abs((first - second) / 2), std)
    many = count > 2
    if many.any():
        k = np.maximum(count, 1).astype(np.float64)
        mean = total / k
        sq = np.zeros(n, dtype=np.float64)
        for f, valid in fractions:
            d = f - mean
            sq = sq + np.where(valid, d * d, 0.0)
        std = np.where(many, np.sqrt(sq / k), std)
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
