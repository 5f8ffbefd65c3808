"""The PodGroup scheduling algorithm (kube-scheduler 1.37's ``podGroupSchedulingAlgorithm`` and what it
calls): where a group's pods would go in one snapshot, and whether the group can be placed at all.
Nothing it does outlives it: every Reserve it makes is undone before it returns.

- **Default** (``podGroupSchedulingDefaultAlgorithm``): PlacementFeasible (GangScheduling) before and
  after each pod; each pod is scheduled in order with its own CycleState, as a single pod is but with no
  PostFilter, then Reserved and assumed into the group's snapshot (a view), so the pods after it see it.
  Any outcome but Success undoes what it assumed.
- **Placements** (TopologyAwareWorkloadScheduling, ``podGroupSchedulingPlacementAlgorithm``): the
  PlacementGenerate plugin's placements, each tried with the default algorithm on a snapshot of its
  nodes; among those where the group fits, the PlacementScore plugins' best.

:meth:`GroupAlgorithm.explain_group` runs it for a group without Reserve, and answers per placement.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pluginhost.model import Pod, pod_on_node
from pluginhost.placement import Placement, PlacementProgress, PodGroupAssignments, PodGroupInfo, ProposedAssignment
from pluginhost.plugin import CycleState, QueuedPodInfo
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view

from .. import features
from ..outcomes import Diagnosis
from ..podgroup_queue import member_order
from ..runtime import Framework
from ..runtime_podgroup import run_placement_feasible, run_placement_generate, run_placement_score
from .cycle import SchedulingCycle
from .placements import placement_snapshot

__all__ = [
    "POD_GROUP_UNSCHEDULABLE",
    "GroupAlgorithm",
    "GroupResult",
    "GroupRun",
    "PodResult",
    "unschedulable_group",
    "validate_group",
]

log = logging.getLogger("outrigger.scheduler")

#: kube-scheduler's errPodGroupUnschedulable: the first reason of a group status that carries it.
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"

_Undo = list[tuple[Framework, CycleState, Pod, str]]


def _as_error(status: Status) -> str:
    """Status.AsError().Error(): the error a status carries (the group's), else its message."""
    return POD_GROUP_UNSCHEDULABLE if status.reasons[:1] == (POD_GROUP_UNSCHEDULABLE,) else status.message()


def unschedulable_group(*reasons: str) -> Status:
    """``NewStatus(Unschedulable, reasons...).WithError(errPodGroupUnschedulable)``: the error's text
    leads the reasons, as Status.Reasons() puts it."""
    return Status(Code.Unschedulable, (POD_GROUP_UNSCHEDULABLE, *reasons))


@dataclass(slots=True)
class PodResult:
    """One pod's outcome in a group cycle: the node found (None if none), its status, the CycleState
    its cycle ran with, the node a PodGroupPostFilter nominated it to ("" for none), and the pod as
    assumed on ``node`` (None without a node)."""

    info: QueuedPodInfo
    status: Status
    node: str | None = None
    state: CycleState | None = None
    nominating: str = ""
    assumed: Pod | None = None


@dataclass(slots=True)
class GroupResult:
    """The group's outcome: its status, each pod's (in queue order), whether any pod was newly placed,
    whether it waits for a preemption, and the placement it was found in ("" for all nodes)."""

    status: Status
    pods: list[PodResult] = field(default_factory=list)
    any_scheduled: bool = False
    waiting_on_preemption: bool = False
    placement: str = ""


@dataclass(slots=True)
class GroupRun:
    """One run of the algorithm: the profile, the group and its unscheduled pods in queue order, the
    snapshot, how many of its pods were scheduled before (bound or assumed), and the group cycle's
    state. ``states`` collects the cycle states it registers (the caller frees them); ``trace``, when
    a list, gets each placement's outcome (explain); ``reserve`` False leaves Reserve out (explain);
    ``base_view``, when set, is how ``snapshot`` differs from the cycle's (a preemption's victims taken
    out), which remote plugins apply to their mirror before each pod's own view."""

    fwk: Framework
    pgi: PodGroupInfo
    members: list[QueuedPodInfo]
    snapshot: Snapshot
    scheduled: int
    gstate: CycleState
    states: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] | None = None
    reserve: bool = True
    base_view: NodeView | None = None


def validate_group(pods: Sequence[Pod], scheduled: Sequence[Pod], priority: int, profiles: Sequence[str]) -> str:
    """kube-scheduler's validatePodGroup: "" when the group is consistent, else the error's text."""
    scheduler = pods[0].scheduler_name if pods else ""
    policy = ""
    for pod in (*pods, *scheduled):
        if pod.scheduler_name != scheduler:
            return ("all pods in a single pod group should have the same .spec.schedulerName set, "
                    f'got: "{pod.scheduler_name}" and "{scheduler}"')
        if pod.priority != priority:
            return ("all pods in a single pod group should have the same priority as the pod group's priority, "
                    f"got {pod.priority} and {priority}")
        own = pod.preemption_policy or "PreemptLowerPriority"
        if not policy:
            policy = own
        elif own != policy:
            return f"all pods in a single pod group should have the same preemption policy, got {own} and {policy}"
    if scheduler not in profiles:
        return f'profile not found for scheduler name "{scheduler}"'
    return ""


def _status_json(status: Status) -> dict[str, Any]:
    return {"code": status.code.name, "reasons": list(status.reasons)}


class GroupAlgorithm(SchedulingCycle):
    """Where a group's pods would go (see the module docstring); the cycle that acts on it is
    :class:`~framework.scheduler.podgroup.PodGroupCycle`."""

    #: Breaks ties between placements (the scheduler's seeded random source).
    _rng: random.Random

    async def _group_algorithm(self, run: GroupRun) -> GroupResult:
        """runRootSchedulingAlgorithm: the group's outcome; every assumption it made is undone."""
        undo: _Undo = []
        try:
            if features.enabled("TopologyAwareWorkloadScheduling"):
                result = await self._placement_algorithm(run)
            else:  # one implicit placement of every node
                pstate = CycleState(run.gstate.cycle_id, run.snapshot, run.gstate.attempt)
                result = await self._default_algorithm(run, pstate, run.snapshot, undo)
        finally:
            await self._revert(undo)
        if result.status.ok and not result.any_scheduled:
            # The framework needs at least one pod newly placed to call the group scheduled.
            result.status = unschedulable_group()
        return result

    async def _revert(self, undo: _Undo) -> None:
        while undo:
            fwk, state, pod, node = undo.pop()
            await fwk.run_unreserve(state, pod, node)

    async def _placement_algorithm(self, run: GroupRun) -> GroupResult:
        """podGroupSchedulingPlacementAlgorithm: the group tried in each placement PlacementGenerate
        proposes (each attempt undone after it); among those where it works, the PlacementScore plugins'
        best (ties broken at random)."""
        placements, status = await run_placement_generate(run.fwk, run.gstate, run.pgi, run.snapshot.names)
        if not status.ok:
            return GroupResult(status)
        first: GroupResult | None = None
        works: list[tuple[Placement, GroupResult, CycleState]] = []
        for placement in placements:
            seen = placement_snapshot(run.snapshot, placement.nodes)
            pstate = CycleState(run.gstate.cycle_id, seen, run.gstate.attempt)
            undo: _Undo = []
            result = await self._default_algorithm(run, pstate, seen, undo, placement)
            result.placement = placement.name
            await self._revert(undo)
            if run.trace is not None:
                run.trace.append({"placement": placement.name, "nodes": list(placement.nodes),
                                  **self._explained(result)})
            if result.status.code is Code.Error:
                return result
            first = first or result
            if result.status.ok:
                works.append((placement, result, pstate))
        if not works:
            assert first is not None
            first.status = unschedulable_group(
                f"0/{len(placements)} placements are available, first placement status: {_as_error(first.status)}"
            )
            return first
        if len(works) == 1:
            return works[0][1]
        assignments = [
            PodGroupAssignments(placement, [ProposedAssignment(pr.info.pod, pr.node, pr.state) for pr in result.pods
                                            if pr.status.ok and pr.node])
            for placement, result, _ in works
        ]
        scores, status = await run_placement_score(run.fwk, run.gstate, run.pgi, assignments, [w[2] for w in works])
        if not status.ok:
            return GroupResult(status)
        if run.trace is not None:
            by_name = {entry["placement"]: entry for entry in run.trace}
            for score in scores:
                by_name[score.placement.name]["score"] = {"total": score.total, "plugins": dict(score.scores)}
        best = max(range(len(works)), key=lambda i: (scores[i].total, self._rng.random()))
        return works[best][1]

    async def _default_algorithm(self, run: GroupRun, pstate: CycleState, snapshot: Snapshot,
                                 undo: _Undo, placement: Placement | None = None) -> GroupResult:
        """podGroupSchedulingDefaultAlgorithm: PlacementFeasible, then each pod in order with
        PlacementFeasible after it; any outcome but Success reverts what it assumed. ``placement`` is
        the one tried (None: every node), for the group's trace."""
        mark = len(undo)
        progress = PlacementProgress(len(run.members), run.scheduled)
        feasible = await run_placement_feasible(run.fwk, pstate, run.pgi, progress)
        result = GroupResult(feasible)
        if feasible.code is Code.Error:
            result.status = Status.failure(f"failed to evaluate placement feasibility: {feasible.message()}")
            return result
        if feasible.code is Code.Unschedulable:
            result.status = unschedulable_group(*feasible.reasons)
            return result
        # The pods placed so far: ``view`` as remote plugins apply it to their mirror, ``seen`` the
        # snapshot with them, one pod added to the last pod's (not every earlier pod again each time).
        view, seen = NodeView(), snapshot
        for member in run.members:
            pod_result = await self._simulate_pod(run, member, seen, view, undo)
            result.pods.append(pod_result)
            st = pod_result.status
            if not st.ok and not st.is_rejected:
                result.status = Status.failure(f"failed to schedule other pod from a pod group: {st.message()}")
                break
            if st.ok and pod_result.assumed is not None:
                placed = NodeView(added_pods=(pod_result.assumed,))
                view, seen = view.then(placed), apply_view(seen, placed)
            progress = PlacementProgress(progress.remaining - 1, progress.scheduled + (1 if st.ok else 0))
            feasible = await run_placement_feasible(run.fwk, pstate, run.pgi, progress)
            if feasible.code is Code.Error:
                result.status = Status.failure(f"failed to evaluate placement feasibility: {feasible.message()}")
                break
            result.status = feasible
            if feasible.code is Code.Unschedulable:
                break
            result.any_scheduled = result.any_scheduled or st.ok
        if result.status.code is Code.Wait:
            result.status = unschedulable_group(*result.status.reasons)
        if not result.status.ok:
            await self._revert(undo[mark:])
            del undo[mark:]
            result.any_scheduled = False
        return result

    async def _simulate_pod(self, run: GroupRun, member: QueuedPodInfo, seen: Snapshot, view: NodeView,
                            undo: _Undo) -> PodResult:
        """podGroupPodSchedulingAlgorithm: one pod's cycle in ``seen``, the group's snapshot plus the
        pods placed before it (``view``), PostFilter not run; then Reserve on the node found."""
        pod, fwk = member.pod, run.fwk
        state = CycleState(f"{pod.uid}:{member.attempts}:{next(self._cycle_ids)}", seen, member.attempts)
        self.cycle_states[state.cycle_id] = state  # remote plugins read and write it by its id
        run.states.append(state.cycle_id)
        seen_view = run.base_view.then(view) if run.base_view else view
        if seen_view:
            state.write(VIEW_STATE_KEY, seen_view)
        try:
            host, status = await self._schedule_pod(fwk, state, pod, seen, Diagnosis())
        except Exception as exc:
            log.exception("scheduling cycle of %s (pod group) failed", pod.key)
            host, status = None, Status.failure(f"scheduling cycle failed: {exc}", error=exc)
        if host is None:
            return PodResult(member, status, host, state)
        assumed = pod_on_node(pod, host)
        if not run.reserve:
            return PodResult(member, status, host, state, assumed=assumed)
        status = await fwk.run_reserve(state, assumed, host)
        if not status.ok:
            await fwk.run_unreserve(state, assumed, host)
            return PodResult(member, status, None, state)
        undo.append((fwk, state, assumed, host))
        return PodResult(member, status, host, state, assumed=assumed)

    @staticmethod
    def _explained(result: GroupResult) -> dict[str, Any]:
        return {
            "status": _status_json(result.status),
            "pods": [{"pod": pr.info.pod.key, "node": pr.node, "status": _status_json(pr.status)}
                     for pr in result.pods],
        }

    async def explain_group(self, namespace: str, name: str) -> dict[str, Any]:
        """Why a PodGroup's pending pods would (or would not) be placed now: the group algorithm run on
        the current cluster with nothing reserved, assumed or bound. The answer has the group's status,
        each pod's node and status (pods the algorithm did not reach are left out), and with
        TopologyAwareWorkloadScheduling each placement tried with its own outcome and score."""
        pg = self.cache.podgroups.get(namespace, name)
        key = f"{namespace}/{name}"
        if pg is None:
            return {"podGroup": key, "status": _status_json(Status.failure(
                f'podgroup.scheduling.k8s.io "{name}" not found'))}
        scheduled = self.cache.podgroups.state(namespace, name).scheduled_pods()
        done = {p.uid for p in scheduled}
        members = sorted(
            (self.queue.info(p.uid) or QueuedPodInfo(p) for p in self.cache.podgroups.members(namespace, name)
             if p.uid not in done and not p.node_name),
            key=member_order,
        )
        out: dict[str, Any] = {"podGroup": key, "scheduled": len(scheduled)}
        if not members:
            # Nothing for a cycle to do (every member placed, or none created yet); validating would
            # compare the scheduled pods against an empty group.
            return {**out, "status": _status_json(unschedulable_group("no pending pods")), "pods": []}
        err = validate_group([m.pod for m in members], scheduled, pg.queue_priority, list(self.profiles))
        if err:
            return {**out, "status": _status_json(Status.failure(err)), "pods": []}
        snapshot = self.cache.snapshot()
        run = GroupRun(self.profiles[members[0].pod.scheduler_name], PodGroupInfo(pg, [m.pod for m in members]),
                       members, snapshot, len(scheduled), CycleState(f"explain:podgroup/{key}", snapshot),
                       trace=[], reserve=False)
        try:
            result = await self._group_algorithm(run)
        finally:
            for cycle_id in run.states:
                self._free_state(cycle_id)
        out.update(self._explained(result))
        if run.trace:
            out["placements"] = run.trace
        return out
