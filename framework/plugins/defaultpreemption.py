"""DefaultPreemption: when a pod fits no node, find lower-priority pods whose eviction makes it fit.

As kube-scheduler's ``defaultpreemption`` (PostFilter):

1. A pod with ``preemptionPolicy: Never`` does not preempt.
2. Candidate nodes are those whose Filter status was Unschedulable (UnschedulableAndUnresolvable
   says evicting pods cannot help; nodes a PreFilter result left out take that code). From a random
   offset, up to ``max(minCandidateNodesAbsolute, nodes * minCandidateNodesPercentage / 100)`` of
   them are dry-run: remove every pod of lower priority than the preemptor; if the pod then passes
   every Filter plugin, add the victims back one by one, most important first, keeping each one
   whose return still lets the pod fit ("reprieve"). What is left are the node's victims.
3. The node is picked by kube-scheduler's order: lowest highest-victim priority, then the smallest
   sum of victim priorities, the fewest victims, and the latest start of the most important victims.
4. Victims waiting at Permit are rejected, the others deleted through the framework's API; the
   preemptor is nominated to the node and retried once the victims are gone.

What-ifs run the real Filter plugins on :func:`framework.whatif.with_node_pods` snapshots, with the
PreFilter state of a cloned CycleState updated through the PreFilter extensions (AddPod/RemovePod).
PodDisruptionBudgets are not modelled (no victim ever violates one).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeToStatus, PostFilterPlugin, PostFilterResult, WaitingPod
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status

from .noderesources import PluginArgsError

if TYPE_CHECKING:
    from ..runtime import Framework

__all__ = ["DefaultPreemption", "PreemptionHandle"]

NAME = "DefaultPreemption"
MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
_MAX_INT32 = 2**31 - 1


class PreemptionHandle(Protocol):
    """What preemption needs from the framework (kube-scheduler's Handle with its PluginsRunner)."""

    def snapshot(self) -> Snapshot: ...

    def framework_for(self, pod: Pod) -> Framework | None: ...

    def waiting_pod(self, uid: str) -> WaitingPod | None: ...

    async def delete_pod(self, pod: Pod, reason: str) -> Status: ...

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class _Candidate:
    row: int
    name: str
    victims: tuple[Pod, ...]


def _parse_args(args: dict[str, Any]) -> tuple[int, int]:
    unknown = set(args) - {"apiVersion", "kind", "minCandidateNodesPercentage", "minCandidateNodesAbsolute"}
    if unknown:
        raise PluginArgsError(f"{NAME}: unknown args field(s) {sorted(unknown)}")
    pct = args.get("minCandidateNodesPercentage", 10)
    absolute = args.get("minCandidateNodesAbsolute", 100)
    if not isinstance(pct, int) or isinstance(pct, bool) or not 0 <= pct <= 100:
        raise PluginArgsError(
            f"{NAME}: minCandidateNodesPercentage: Invalid value: {pct!r}: not in valid range [0, 100]"
        )
    if not isinstance(absolute, int) or isinstance(absolute, bool) or absolute < 0:
        raise PluginArgsError(
            f"{NAME}: minCandidateNodesAbsolute: Invalid value: {absolute!r}: not in valid range [0, inf)"
        )
    if pct == 0 and absolute == 0:
        raise PluginArgsError(
            f"{NAME}: minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero"
        )
    return pct, absolute


def more_important(a: Pod, b: Pod) -> bool:
    """kube-scheduler's ``MoreImportantPod``: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.creation_timestamp < b.creation_timestamp


class DefaultPreemption(PostFilterPlugin):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None, *, seed: int | None = None) -> None:
        self.min_percentage, self.min_absolute = _parse_args(args or {})
        self._handle: PreemptionHandle | None = handle
        self._rng = random.Random(seed)

    def num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_percentage // 100
        return min(max(n, self.min_absolute), num_nodes)

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        handle = self._handle
        if handle is None:
            return None, Status.failure(f"{NAME} has no framework handle", plugin=self.name)
        if pod.preemption_policy == "Never":
            return None, Status(Code.Unschedulable, (f"preemption: {MSG_NEVER}",), self.name)
        fwk = handle.framework_for(pod)
        snapshot = state.snapshot or handle.snapshot()
        if fwk is None:
            return None, Status.failure(f"no profile for pod {pod.key}", plugin=self.name)
        names = snapshot.table.names
        order = snapshot.table.order.tolist()
        potential = [row for row in order if statuses.get(names[row]).code is Code.Unschedulable]
        reasons: dict[str, int] = {}
        candidates: list[_Candidate] = []
        if potential:
            wanted = self.num_candidates(len(potential))
            offset = self._rng.randrange(len(potential))
            for i in range(len(potential)):
                row = potential[(offset + i) % len(potential)]
                victims, status = await self._select_victims(fwk, state, pod, snapshot, row)
                if status.code is Code.Error:
                    return None, status.with_plugin(self.name)
                if status.ok:
                    candidates.append(_Candidate(row, names[row], victims))
                    if len(candidates) >= wanted:
                        break
                else:
                    for reason in status.reasons:
                        reasons[reason] = reasons.get(reason, 0) + 1
        if not candidates:
            # kube-scheduler's FitError over the dry runs; nodes not dry-run count as "not helpful".
            absent = len(names) - len(potential)
            if absent:
                reasons[MSG_NOT_HELPFUL] = absent
            msg = f"preemption: 0/{len(names)} nodes are available:"
            if reasons:
                msg += " " + ", ".join(sorted(f"{n} {r}" for r, n in reasons.items())) + "."
            return PostFilterResult(""), Status(Code.Unschedulable, (msg,), self.name)
        best = pick_one_node(candidates)
        for victim in best.victims:
            waiting = handle.waiting_pod(victim.uid)
            if waiting is not None:
                waiting.reject(self.name, "preempted")
            else:
                status = await handle.delete_pod(victim, f"preempted by {pod.key} on node {best.name}")
                if not status.ok and not status.message().endswith("not found"):
                    return None, Status.failure(f"deleting victim {victim.key}: {status.message()}", plugin=self.name)
            handle.preempted(victim, pod, best.name)
        return PostFilterResult(best.name), SUCCESS

    async def _select_victims(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, row: int
    ) -> tuple[tuple[Pod, ...], Status]:
        """kube-scheduler's SelectVictimsOnNode on one node: the fewest, least important victims."""
        on_node = snapshot.pods[row]
        potential = [p for p in on_node if p.priority < pod.priority]
        if not potential:
            return (), Status(Code.UnschedulableAndUnresolvable, (MSG_NO_VICTIMS,))
        state = state.clone()
        remaining = [p for p in on_node if p.priority >= pod.priority]
        for victim in potential:
            status = await fwk.run_pre_filter_extension_remove_pod(state, pod, victim, row)
            if not status.ok:
                return (), status
        status = await fwk.run_filter_with_node_pods(state, pod, snapshot, row, remaining)
        if not status.ok:
            return (), status
        potential.sort(key=lambda p: (-p.priority, p.creation_timestamp))
        victims: list[Pod] = []
        for candidate in potential:  # most important first: try to keep it
            remaining.append(candidate)
            status = await fwk.run_pre_filter_extension_add_pod(state, pod, candidate, row)
            if not status.ok:
                return (), status
            fits = await fwk.run_filter_with_node_pods(state, pod, snapshot, row, remaining)
            if fits.code is Code.Error:
                return (), fits
            if not fits.ok:
                remaining.pop()
                status = await fwk.run_pre_filter_extension_remove_pod(state, pod, candidate, row)
                if not status.ok:
                    return (), status
                victims.append(candidate)
        if not victims:
            return (), Status.failure(f"expected at least one victim pod on node {snapshot.table.names[row]!r}")
        return tuple(victims), SUCCESS


def pick_one_node(candidates: list[_Candidate]) -> _Candidate:
    """kube-scheduler's pickOneNodeForPreemption (no PodDisruptionBudgets here)."""

    def highest(c: _Candidate) -> int:
        return max(v.priority for v in c.victims)

    def keep(pool: list[_Candidate], score: Any, best: Any) -> list[_Candidate]:
        target = best(score(c) for c in pool)
        return [c for c in pool if score(c) == target]

    pool = keep(candidates, highest, min)
    # Priorities are shifted by MaxInt32+1 so negative priorities still add up as "more victims".
    pool = keep(pool, lambda c: sum(v.priority + _MAX_INT32 + 1 for v in c.victims), min)
    pool = keep(pool, lambda c: len(c.victims), min)

    def earliest_start_of_most_important(c: _Candidate) -> float:
        top = highest(c)
        return min(v.creation_timestamp for v in c.victims if v.priority == top)

    pool = keep(pool, earliest_start_of_most_important, max)
    return pool[0]
