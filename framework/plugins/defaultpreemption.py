"""DefaultPreemption: when a pod fits no node, find lower-priority pods whose eviction makes it fit.

As kube-scheduler's ``defaultpreemption`` (PostFilter):

1. A pod with ``preemptionPolicy: Never`` does not preempt, nor does one whose nominated node still
   has a lower-priority pod terminating because a preemption deleted it (its room is coming).
2. Candidate nodes are those whose Filter status was Unschedulable (UnschedulableAndUnresolvable
   says evicting pods cannot help; nodes a PreFilter result left out take that code). From a random
   offset they are dry-run: remove every pod of lower priority than the preemptor; if the pod then
   passes every Filter plugin, add the victims back one by one ("reprieve"), keeping each one whose
   return still lets the pod fit: first the pods whose eviction would violate a PodDisruptionBudget,
   then the others, most important first within each group. What is left are the node's victims,
   with the number of them that violate a budget. The dry runs stop once
   ``max(minCandidateNodesAbsolute, nodes * minCandidateNodesPercentage / 100)`` nodes have victims
   and one of them violates no budget.
3. The node is picked by kube-scheduler's order: the fewest PodDisruptionBudget violations, then the
   lowest highest-victim priority, the smallest sum of victim priorities, the fewest victims, and the
   latest start of the most important victims; candidates that violate no budget come first in a tie.
4. A victim waiting at Permit is preempted there (its wait ends with the Error "preempted", so it is
   retried after the error backoff, not marked unschedulable), and one whose PreBind plugins are
   running is cancelled ("preempted by DefaultPreemption"): both in memory, as kube-scheduler 1.37
   does. The others, and those whose wait or PreBind had just ended, are deleted through the
   framework's API (a victim already being deleted is left to finish); the preemptor is nominated to
   the node and retried once the victims are gone.

A victim's eviction violates a PodDisruptionBudget (policy/v1) of its namespace whose selector matches
it (an absent or empty selector matches nothing here, as in kube-scheduler) when the budget's
``status.disruptionsAllowed`` is used up by the more important victims before it; a pod listed in the
budget's ``disruptedPods`` is already counted and takes nothing. The budgets come from the cluster
source: as the disruption controller keeps them on a live cluster, worked out by the embedded store
otherwise (:mod:`framework.disruption`).

What-ifs run the real Filter plugins on :func:`framework.whatif.with_node_pods` snapshots, with the
PreFilter state of a cloned CycleState updated through the PreFilter extensions (AddPod/RemovePod).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pluginhost.model import Pod, PodDisruptionBudget
from pluginhost.placement import (
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from pluginhost.plugin import CycleState, NodeToStatus, PostFilterPlugin, PostFilterResult
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status

from .noderesources import PluginArgsError
from .podgrouppreemption import Budget as _Budget
from .podgrouppreemption import GroupPreemptionHandle, preempt_in_memory, preempt_pod_group, terminating_by_preemption

if TYPE_CHECKING:
    from ..runtime import Framework

__all__ = [
    "DefaultPreemption",
    "PreemptionHandle",
    "filter_pods_with_pdb_violation",
    "more_important",
    "terminating_by_preemption",
]

NAME = "DefaultPreemption"
MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_MAX_INT32 = 2**31 - 1


class PreemptionHandle(GroupPreemptionHandle, Protocol):
    """What preemption needs from the framework (kube-scheduler's Handle with its PluginsRunner): the
    cycle's snapshot, the profiles, waiting pods and pods in PreBind, deleting and telling victims,
    the PodDisruptionBudgets, and the PodGroups (a group's preemption)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    row: int
    name: str
    #: Most important first.
    victims: tuple[Pod, ...]
    pdb_violations: int = 0


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


def _importance(p: Pod) -> tuple[int, float]:
    """Sorts pods most important first (:func:`more_important`)."""
    return -p.priority, p.creation_timestamp


def filter_pods_with_pdb_violation(
    pods: list[Pod], pdbs: list[PodDisruptionBudget] | list[_Budget]
) -> tuple[list[Pod], list[Pod]]:
    """kube-scheduler's ``FilterVictimsWithPDBViolation``: ``pods`` (in the order given) split into those
    whose eviction, after the ones before them, would exceed a budget's ``disruptionsAllowed`` and
    those whose would not. A pod without labels matches no budget; a pod a budget lists in
    ``disruptedPods`` does not count against it again. Budgets are taken in the order given, and a pod
    stops at the first one it exceeds: the budgets after it are not charged for that pod (v1.37; v1.35
    charged every budget matching the pod)."""
    budgets = [b if isinstance(b, _Budget) else _Budget.of(b) for b in pdbs]
    allowed = [b.allowed for b in budgets]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if not budget.covers(pod) or pod.name in budget.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
                    break
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


class DefaultPreemption(PostFilterPlugin, PodGroupPostFilterPlugin):
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
        if self._waiting_for_victims(pod, snapshot, statuses):
            # Nil result: the nomination stays, the room is coming.
            return None, Status(Code.Unschedulable, (f"preemption: {MSG_TERMINATING}",), self.name)
        names = snapshot.table.names
        order = snapshot.table.order.tolist()
        potential = [row for row in order if statuses.get(names[row]).code is Code.Unschedulable]
        reasons: dict[str, int] = {}
        error: Status | None = None
        candidates: list[_Candidate] = []
        if potential:
            budgets = [_Budget.of(pdb) for pdb in handle.pod_disruption_budgets()]
            wanted = self.num_candidates(len(potential))
            offset = self._rng.randrange(len(potential))
            clean: list[_Candidate] = []  # violating no budget
            violating: list[_Candidate] = []
            for i in range(len(potential)):
                row = potential[(offset + i) % len(potential)]
                victims, violations, status = await self._select_victims(fwk, state, pod, snapshot, row, budgets)
                if status.ok and not victims:
                    status = Status.failure(f"expected at least one victim pod on node {names[row]!r}")
                if status.ok:
                    group = clean if violations == 0 else violating
                    if len(group) < wanted:
                        group.append(_Candidate(row, names[row], victims, violations))
                    if clean and len(clean) + len(violating) >= wanted:
                        break
                elif status.code is Code.Error:
                    error = error or status
                else:
                    for reason in status.reasons:
                        reasons[reason] = reasons.get(reason, 0) + 1
            candidates = clean + violating
        if not candidates:
            if error is not None:
                return None, error.with_plugin(self.name)
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
            in_memory = self._preempt_in_memory(handle, victim)
            if not in_memory:
                if victim.deletion_timestamp is not None:
                    continue  # its deletion has begun already: nothing to send, nothing to tell
                status = await handle.delete_pod(victim, f"preempted by {pod.key} on node {best.name}")
                if not status.ok and not status.message().endswith("not found"):
                    return None, Status.failure(f"deleting victim {victim.key}: {status.message()}", plugin=self.name)
            handle.preempted(victim, pod, best.name, in_memory)
        return PostFilterResult(best.name), SUCCESS

    def _preempt_in_memory(self, handle: PreemptionHandle, victim: Pod) -> bool:
        return preempt_in_memory(handle, victim, self.name)

    async def pod_group_post_filter(
        self, state: CycleState, group: PodGroupInfo, schedule: PodGroupSchedulingFunc
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """Preemption for a PodGroup that cannot be placed (:mod:`.podgrouppreemption`)."""
        handle = self._handle
        if handle is None:
            return None, Status.failure(f"{NAME} has no framework handle", plugin=self.name)
        return await preempt_pod_group(self.name, handle, state, group, schedule)

    @staticmethod
    def _waiting_for_victims(pod: Pod, snapshot: Snapshot, statuses: NodeToStatus) -> bool:
        """kube-scheduler's PodEligibleToPreemptOthers: a pod nominated to a node where a lower-priority
        pod is still terminating by preemption waits for it rather than preempting again (unless the
        node can no longer take it at all)."""
        node = pod.nominated_node_name
        if not node or statuses.get(node).code is Code.UnschedulableAndUnresolvable:
            return False
        row = snapshot.row(node)
        if row is None:
            return False
        return any(p.priority < pod.priority and terminating_by_preemption(p) for p in snapshot.pods[row])

    async def _select_victims(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, row: int, budgets: list[_Budget]
    ) -> tuple[tuple[Pod, ...], int, Status]:
        """kube-scheduler's SelectVictimsOnNode on one node: the fewest, least important victims, those
        whose eviction violates a PodDisruptionBudget reprieved first; and how many of them violate one."""
        on_node = snapshot.pods[row]
        potential = [p for p in on_node if p.priority < pod.priority]
        if not potential:
            return (), 0, Status(Code.UnschedulableAndUnresolvable, (MSG_NO_VICTIMS,))
        state = state.clone()
        remaining = [p for p in on_node if p.priority >= pod.priority]
        for victim in potential:
            status = await fwk.run_pre_filter_extension_remove_pod(state, pod, victim, row)
            if not status.ok:
                return (), 0, status
        status = await fwk.run_filter_with_node_pods(state, pod, snapshot, row, remaining)
        if not status.ok:
            return (), 0, status
        potential.sort(key=_importance)
        violating, non_violating = filter_pods_with_pdb_violation(potential, budgets)
        victims: list[Pod] = []
        violations = 0
        for group, violates in ((violating, True), (non_violating, False)):
            for candidate in group:  # most important first: try to keep it
                remaining.append(candidate)
                status = await fwk.run_pre_filter_extension_add_pod(state, pod, candidate, row)
                if not status.ok:
                    return (), 0, status
                fits = await fwk.run_filter_with_node_pods(state, pod, snapshot, row, remaining)
                if fits.code is Code.Error:
                    return (), 0, fits
                if not fits.ok:
                    remaining.pop()
                    status = await fwk.run_pre_filter_extension_remove_pod(state, pod, candidate, row)
                    if not status.ok:
                        return (), 0, status
                    victims.append(candidate)
                    violations += 1 if violates else 0
        if violating and non_violating:
            victims.sort(key=_importance)
        return tuple(victims), violations, SUCCESS


def pick_one_node(candidates: list[_Candidate]) -> _Candidate:
    """kube-scheduler's pickOneNodeForPreemption: each criterion keeps the candidates that score best on
    it, the next one breaks their tie, and the first candidate left wins."""

    def highest(c: _Candidate) -> int:
        return max(v.priority for v in c.victims)

    def keep(pool: list[_Candidate], score: Any, best: Any) -> list[_Candidate]:
        target = best(score(c) for c in pool)
        return [c for c in pool if score(c) == target]

    pool = keep(candidates, lambda c: c.pdb_violations, min)
    pool = keep(pool, highest, min)
    # Priorities are shifted by MaxInt32+1 so negative priorities still add up as "more victims".
    pool = keep(pool, lambda c: sum(v.priority + _MAX_INT32 + 1 for v in c.victims), min)
    pool = keep(pool, lambda c: len(c.victims), min)

    def earliest_start_of_most_important(c: _Candidate) -> float:
        top = highest(c)
        return min(v.creation_timestamp for v in c.victims if v.priority == top)

    pool = keep(pool, earliest_start_of_most_important, max)
    return pool[0]
