"""The PodGroup scheduling cycle (kube-scheduler 1.37's ``schedule_one_podgroup.go``, GenericWorkload on):
the unscheduled pods of one group are scheduled in one snapshot, and the outcome is all or nothing.

1. The group is checked (:func:`validate_group`): one scheduler name, the group's priority and one
   preemption policy on every pod, scheduled members included; an error fails every pod with it.
2. The algorithm (:meth:`PodGroupCycle._default_algorithm`) asks PlacementFeasible (GangScheduling)
   before and after each pod whether the group can still be placed, and schedules each pod in order
   with its own CycleState as a single pod is, PostFilter left out; a pod that fits is Reserved and
   assumed into the cycle's snapshot (a view), so the pods after it see it. Any outcome but Success
   undoes every assumption. With TopologyAwareWorkloadScheduling the group is tried in each placement
   the PlacementGenerate plugin proposes, and the PlacementScore plugins pick among those that work.
3. An unschedulable group runs the PodGroupPostFilter plugins.
4. The outcome is submitted pod by pod in queue order: the pods of a placed group are assumed in the
   cache, Reserved and Permitted (GangScheduling's Permit), then bound in their own binding cycles; the
   others fail with the group's message (``pod group is unschedulable, ...``) or their own fit error.
5. The group's ``PodGroupInitiallyScheduled`` condition is written (never back from True), and the
   queue takes the group back (:meth:`~framework.podgroup_queue.GroupSchedulingQueue.add_attempted_group`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pluginhost.model import Pod
from pluginhost.placement import Placement, PlacementProgress, PodGroupAssignments, PodGroupInfo, ProposedAssignment
from pluginhost.plugin import ClusterEvent, CycleState, QueuedPodInfo
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view
from pluginhost.workload import (
    CONDITION_INITIALLY_SCHEDULED,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    PodGroup,
    PodGroupCondition,
)

from .. import features
from ..outcomes import Diagnosis
from ..podgroup_queue import GroupSchedulingQueue, QueuedPodGroupInfo
from ..podgroups.store import POD_GROUP_RESOURCE
from ..runtime import Framework
from ..runtime_podgroup import (
    run_placement_feasible,
    run_placement_generate,
    run_placement_score,
    run_pod_group_post_filter,
)
from .cycle import SchedulingCycle
from .placements import placement_snapshot
from .records import BINDING, WAITING

__all__ = ["POD_GROUP_UNSCHEDULABLE", "GroupResult", "PodGroupCycle", "PodResult", "validate_group"]

log = logging.getLogger("outrigger.scheduler")

#: kube-scheduler's errPodGroupUnschedulable: the first reason of a group status that carries it.
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"


def _as_error(status: Status) -> str:
    """Status.AsError().Error(): the error a status carries (the group's), else its message."""
    return POD_GROUP_UNSCHEDULABLE if status.reasons[:1] == (POD_GROUP_UNSCHEDULABLE,) else status.message()


def _unschedulable(*reasons: str) -> Status:
    """``NewStatus(Unschedulable, reasons...).WithError(errPodGroupUnschedulable)``: the error's text
    leads the reasons, as Status.Reasons() puts it."""
    return Status(Code.Unschedulable, (POD_GROUP_UNSCHEDULABLE, *reasons))


@dataclass(slots=True)
class PodResult:
    """One pod's outcome in a group cycle: the node found (None if none), its status, the CycleState
    its cycle ran with, and the node a PodGroupPostFilter nominated it to ("" for none)."""

    info: QueuedPodInfo
    status: Status
    node: str | None = None
    state: CycleState | None = None
    nominating: str = ""


@dataclass(slots=True)
class GroupResult:
    """The group's outcome: its status, each pod's (in queue order), whether any pod was newly placed,
    and whether it waits for a preemption."""

    status: Status
    pods: list[PodResult] = field(default_factory=list)
    any_scheduled: bool = False
    waiting_on_preemption: bool = False


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


class PodGroupCycle(SchedulingCycle):
    """The scheduling loop's step for a pod group popped from the queue (single pods go on to
    :class:`~framework.scheduler.cycle.SchedulingCycle`)."""

    #: The cycle states of the group cycle under way, freed when it ends (a pod sent to its binding
    #: cycle keeps its own).
    _group_states: list[str]
    #: Breaks ties between placements (the scheduler's seeded random source).
    _rng: random.Random

    async def schedule_one(self, info: QueuedPodInfo) -> None:
        if isinstance(info, QueuedPodGroupInfo):
            await self.schedule_group(info)
        else:
            await super().schedule_one(info)

    def _cluster_event(self, event: ClusterEvent, old: Any, new: Any, exclude: str = "") -> None:
        super()._cluster_event(event, old, new, exclude)
        if event.resource != POD_GROUP_RESOURCE or not isinstance(self.queue, GroupSchedulingQueue):
            return
        if new is None:
            self.queue.podgroup_deleted(old.namespace, old.name)
            return
        # Its pods join it (they may need PreEnqueue, which is async): done on the event loop.
        task = asyncio.get_running_loop().create_task(self.queue.podgroup_changed(new.namespace, new.name))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    @property
    def _group_queue(self) -> GroupSchedulingQueue:
        queue = self.queue
        assert isinstance(queue, GroupSchedulingQueue)
        return queue

    async def schedule_group(self, group: QueuedPodGroupInfo) -> None:
        """One PodGroup scheduling cycle (kube-scheduler's scheduleOnePodGroup)."""
        started = time.perf_counter()
        self.popped += 1
        snapshot = self.cache.snapshot()
        self.current_snapshot = snapshot
        pg = self.cache.podgroups.get(group.namespace, group.group_name)
        if pg is None:
            err = f'podgroup.scheduling.k8s.io "{group.group_name}" not found'
            await self._fail_group_early(group, None, err)
            return
        scheduled = self.cache.podgroups.state(pg.namespace, pg.name).scheduled_pods()
        err = validate_group([m.pod for m in group.members], scheduled, pg.queue_priority, list(self.profiles))
        if err:
            await self._fail_group_early(group, pg, err)
            return
        members = self._skip_gone(group)
        if not members:
            await self._group_queue.add_attempted_group(group, Status())
            return
        fwk = self.profiles[members[0].pod.scheduler_name]
        pgi = PodGroupInfo(pg, [m.pod for m in members])
        self.stats.attempts += len(members)
        gstate = CycleState(f"{group.key}:{group.attempts}:{next(self._cycle_ids)}", snapshot, group.attempts)
        self._group_states = []
        result = await self._group_algorithm(fwk, gstate, pgi, members, snapshot, len(scheduled))
        root = result.status
        self._complete(result, members)
        if root.code is Code.Unschedulable:
            await self._group_post_filter(fwk, gstate, pgi, members, snapshot, len(scheduled), result)
        for cycle_id in self._group_states:
            self._free_state(cycle_id)
        await self._submit(fwk, result)
        await self._write_condition(pg, result.status)
        self._count_group(fwk.profile, result, time.perf_counter() - started)
        await self._group_queue.add_attempted_group(group, root)

    def _skip_gone(self, group: QueuedPodGroupInfo) -> list[QueuedPodInfo]:
        """skipPodGroupPodSchedule: members deleted (or being deleted) or placed meanwhile leave the cycle."""
        kept = []
        for member in group.members:
            rec = self.pods.get(member.pod.uid)
            if rec is None or rec.pod.node_name or rec.pod.deletion_timestamp is not None \
                    or self.cache.node_of(member.pod.uid) is not None:
                self.queue.done(member.pod.uid)
                continue
            kept.append(member)
        return kept

    async def _fail_group_early(self, group: QueuedPodGroupInfo, pg: PodGroup | None, err: str) -> None:
        """handlePodGroupFailureBeforeScheduling: every pod fails with the error, the condition says
        SchedulerError (unless the group itself is missing), and the group is requeued."""
        status = Status.failure(err)
        for member in group.members:
            self._fail(member, status, set())
        if pg is not None:
            await self._write_condition(pg, status)
        await self._group_queue.add_attempted_group(group, status)

    async def _group_algorithm(
        self, fwk: Framework, gstate: CycleState, pgi: PodGroupInfo, members: list[QueuedPodInfo],
        snapshot: Snapshot, scheduled: int,
    ) -> GroupResult:
        """runRootSchedulingAlgorithm: the group's outcome; every assumption it made is undone."""
        undo: list[tuple[Framework, CycleState, Pod, str]] = []
        try:
            if features.enabled("TopologyAwareWorkloadScheduling"):
                result = await self._placement_algorithm(fwk, gstate, pgi, members, snapshot, scheduled)
            else:
                pstate = CycleState(gstate.cycle_id, snapshot, gstate.attempt)  # the one implicit placement
                result = await self._default_algorithm(fwk, pstate, pgi, members, snapshot, scheduled, undo)
        finally:
            await self._revert(undo)
        if result.status.ok and not result.any_scheduled:
            # The framework needs at least one pod newly placed to call the group scheduled.
            result.status = _unschedulable()
        return result

    async def _revert(self, undo: list[tuple[Framework, CycleState, Pod, str]]) -> None:
        while undo:
            fwk, state, pod, node = undo.pop()
            await fwk.run_unreserve(state, pod, node)

    async def _placement_algorithm(
        self, fwk: Framework, gstate: CycleState, pgi: PodGroupInfo, members: list[QueuedPodInfo],
        snapshot: Snapshot, scheduled: int,
    ) -> GroupResult:
        """podGroupSchedulingPlacementAlgorithm: the group tried in each placement PlacementGenerate
        proposes (each attempt undone after it); among those where it works, the PlacementScore plugins'
        best (ties broken at random)."""
        placements, status = await run_placement_generate(fwk, gstate, pgi, snapshot.names)
        if not status.ok:
            return GroupResult(status)
        first: GroupResult | None = None
        works: list[tuple[Placement, GroupResult, CycleState]] = []
        for placement in placements:
            seen = placement_snapshot(snapshot, placement.nodes)
            pstate = CycleState(gstate.cycle_id, seen, gstate.attempt)
            undo: list[tuple[Framework, CycleState, Pod, str]] = []
            result = await self._default_algorithm(fwk, pstate, pgi, members, seen, scheduled, undo)
            await self._revert(undo)
            if result.status.code is Code.Error:
                return result
            first = first or result
            if result.status.ok:
                works.append((placement, result, pstate))
        if not works:
            assert first is not None
            first.status = _unschedulable(
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
        scores, status = await run_placement_score(fwk, gstate, pgi, assignments, [w[2] for w in works])
        if not status.ok:
            return GroupResult(status)
        best = max(range(len(works)), key=lambda i: (scores[i].total, self._rng.random()))
        return works[best][1]

    async def _default_algorithm(
        self, fwk: Framework, pstate: CycleState, pgi: PodGroupInfo, members: list[QueuedPodInfo],
        snapshot: Snapshot, scheduled: int, undo: list[tuple[Framework, CycleState, Pod, str]],
    ) -> GroupResult:
        """podGroupSchedulingDefaultAlgorithm: PlacementFeasible, then each pod in order with
        PlacementFeasible after it; any outcome but Success reverts what it assumed."""
        mark = len(undo)
        progress = PlacementProgress(len(members), scheduled)
        feasible = await run_placement_feasible(fwk, pstate, pgi, progress)
        result = GroupResult(feasible)
        if feasible.code is Code.Error:
            result.status = Status.failure(f"failed to evaluate placement feasibility: {feasible.message()}")
            return result
        if feasible.code is Code.Unschedulable:
            result.status = _unschedulable(*feasible.reasons)
            return result
        view = NodeView()
        for member in members:
            pod_result = await self._simulate_pod(fwk, member, snapshot, view, undo)
            result.pods.append(pod_result)
            st = pod_result.status
            if not st.ok and not st.is_rejected:
                result.status = Status.failure(f"failed to schedule other pod from a pod group: {st.message()}")
                break
            if st.ok and pod_result.node is not None:
                view = view.then(NodeView(added_pods=(dataclasses.replace(member.pod, node_name=pod_result.node),)))
            progress = PlacementProgress(progress.remaining - 1, progress.scheduled + (1 if st.ok else 0))
            feasible = await run_placement_feasible(fwk, pstate, pgi, progress)
            if feasible.code is Code.Error:
                result.status = Status.failure(f"failed to evaluate placement feasibility: {feasible.message()}")
                break
            result.status = feasible
            if feasible.code is Code.Unschedulable:
                break
            result.any_scheduled = result.any_scheduled or st.ok
        if result.status.code is Code.Wait:
            result.status = _unschedulable(*result.status.reasons)
        if not result.status.ok:
            await self._revert(undo[mark:])
            del undo[mark:]
            result.any_scheduled = False
        return result

    async def _simulate_pod(
        self, fwk: Framework, member: QueuedPodInfo, snapshot: Snapshot, view: NodeView,
        undo: list[tuple[Framework, CycleState, Pod, str]],
    ) -> PodResult:
        """podGroupPodSchedulingAlgorithm: one pod's cycle in the group's snapshot plus the pods placed
        before it (PostFilter is not run), then Reserve on the node found."""
        pod = member.pod
        seen = apply_view(snapshot, view) if view else snapshot
        state = CycleState(f"{pod.uid}:{member.attempts}:{next(self._cycle_ids)}", seen, member.attempts)
        self.cycle_states[state.cycle_id] = state  # remote plugins read and write it by its id
        self._group_states.append(state.cycle_id)
        if view:
            state.write(VIEW_STATE_KEY, view)
        try:
            host, status = await self._schedule_pod(fwk, state, pod, seen, Diagnosis())
        except Exception as exc:
            log.exception("scheduling cycle of %s (pod group) failed", pod.key)
            host, status = None, Status.failure(f"scheduling cycle failed: {exc}", error=exc)
        if host is None:
            return PodResult(member, status, None, state)
        assumed = dataclasses.replace(pod, node_name=host)
        status = await fwk.run_reserve(state, assumed, host)
        if not status.ok:
            await fwk.run_unreserve(state, assumed, host)
            return PodResult(member, status, None, state)
        undo.append((fwk, state, assumed, host))
        return PodResult(member, status, host, state)

    def _complete(self, result: GroupResult, members: list[QueuedPodInfo]) -> None:
        """completePodGroupAlgorithmResult: the pods the algorithm did not reach take the group's status."""
        for member in members[len(result.pods):]:
            result.pods.append(PodResult(member, result.status))

    async def _group_post_filter(
        self, fwk: Framework, gstate: CycleState, pgi: PodGroupInfo, members: list[QueuedPodInfo],
        snapshot: Snapshot, scheduled: int, result: GroupResult,
    ) -> None:
        """RunPodGroupPostFilterPlugins and applyPodGroupPostFilterResult."""

        async def schedule() -> tuple[None, Status]:
            again = await self._group_algorithm(fwk, CycleState(gstate.cycle_id, snapshot), pgi, members,
                                                snapshot, scheduled)
            return None, again.status

        pf_result, status = await run_pod_group_post_filter(fwk, gstate, pgi, schedule)
        if status.ok:
            result.waiting_on_preemption = True
            nominated = pf_result.nominated if pf_result is not None else {}
            for pr in result.pods:
                pr.nominating = nominated.get(pr.info.pod.key, "")
        if status.code is Code.Error:
            result.status = status
        else:
            result.status = Status(result.status.code, (*result.status.reasons, status.message()), result.status.plugin)

    async def _submit(self, fwk: Framework, result: GroupResult) -> None:
        """submitPodGroupAlgorithmResult: each pod in queue order to its binding cycle or back to the queue."""
        group = result.status
        for pr in result.pods:
            info, st = pr.info, pr.status
            if group.code is Code.Error:
                self._fail(info, st if st.code is Code.Error else group, set())
            elif not st.ok:
                self._fail(info, st, set(), pr.nominating or None)
            elif group.ok:
                assert pr.state is not None and pr.node is not None
                await self._commit(fwk, info, pr.state, pr.node)
                continue
            elif result.waiting_on_preemption:
                self._fail(info, group, set(), pr.nominating or None)
            else:
                self._fail(info, Status(Code.Unschedulable, (POD_GROUP_UNSCHEDULABLE, group.message())), set())

    async def _commit(self, fwk: Framework, info: QueuedPodInfo, state: CycleState, host: str) -> None:
        """prepareForBindingCycle for a pod of a placed group: assumed in the cache, Reserve, Permit, then
        its binding cycle (as a single pod's)."""
        pod = info.pod
        state.delete(VIEW_STATE_KEY)  # the group's snapshot is over: the binding cycle sees the cluster
        self.cycle_states[state.cycle_id] = state
        assumed = dataclasses.replace(pod, node_name=host)
        self.cache.assume_pod(assumed, host)
        self.nominated.pop(pod.uid, None)
        status = await fwk.run_reserve(state, assumed, host)
        if status.ok:
            status = await fwk.run_permit(state, assumed, host)
        if not status.ok and status.code is not Code.Wait:
            await fwk.run_unreserve(state, assumed, host)
            self.cache.forget_pod(pod.uid)
            self._free_state(state.cycle_id)
            self._fail(info, status, {status.plugin} if status.plugin else set())
            return
        self._activate_pods(state)
        self.stats.scheduled += 1
        rec = self.pods.get(pod.uid)
        if rec is not None:
            rec.attempts = info.attempts
            rec.phase = WAITING if status.code is Code.Wait else BINDING
        task = asyncio.get_running_loop().create_task(self._binding_cycle(fwk, state, info, assumed, host))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    async def _write_condition(self, pg: PodGroup, status: Status) -> None:
        """updatePodGroupCondition: PodGroupInitiallyScheduled True/Scheduled, False/Unschedulable or
        False/SchedulerError, at the group's generation; never back from True; nothing when unchanged."""
        if status.ok:
            cond = PodGroupCondition(CONDITION_INITIALLY_SCHEDULED, "True", REASON_SCHEDULED, status.message())
        elif status.is_rejected:
            cond = PodGroupCondition(CONDITION_INITIALLY_SCHEDULED, "False", REASON_UNSCHEDULABLE, status.message())
        else:
            cond = PodGroupCondition(CONDITION_INITIALLY_SCHEDULED, "False", REASON_SCHEDULER_ERROR, status.message())
        existing = pg.condition(CONDITION_INITIALLY_SCHEDULED)
        if existing is not None and existing.status == "True" and cond.status != "True":
            return
        cond = dataclasses.replace(cond, observed_generation=pg.generation)
        if existing is not None and (existing.status, existing.reason, existing.message,
                                     existing.observed_generation) == (cond.status, cond.reason, cond.message,
                                                                       cond.observed_generation):
            return  # SetStatusCondition changed nothing: no write
        if existing is None or existing.status != cond.status:
            cond = dataclasses.replace(cond, last_transition_time=_now_rfc3339())
        else:
            cond = dataclasses.replace(cond, last_transition_time=existing.last_transition_time)
        try:
            await self.cache.podgroups.writer.write_condition(pg, cond)
        except Exception:
            log.exception("writing the condition of pod group %s failed", pg.key)

    def _count_group(self, profile: str, result: GroupResult, seconds: float) -> None:
        """kube-scheduler's scheduler_podgroup_schedule_attempts_total{result, profile}."""
        status = result.status
        if status.ok:
            outcome = "scheduled"
        elif status.is_rejected:
            outcome = "waiting_on_preemption" if result.waiting_on_preemption else "unschedulable"
        else:
            outcome = "error"
        self.stats.podgroup_attempts[(outcome, profile)] += 1
        self.stats.attempt_seconds.append(seconds)


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

