"""The PodGroup scheduling cycle (kube-scheduler 1.37's ``schedule_one_podgroup.go``, GenericWorkload on):
the unscheduled pods of one group are scheduled in one snapshot, and the outcome is all or nothing.

1. The group is checked (:func:`validate_group`): one scheduler name, the group's priority and one
   preemption policy on every pod, scheduled members included; an error fails every pod with it.
2. The algorithm (:mod:`.podgroup_algorithm`) asks PlacementFeasible (GangScheduling)
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
import time
from typing import Any

from pluginhost.model import pod_on_node
from pluginhost.placement import Placement, PodGroupAssignments, PodGroupInfo, ProposedAssignment
from pluginhost.plugin import ClusterEvent, CycleState, QueuedPodInfo
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

from ..podgroup_queue import GroupSchedulingQueue, QueuedPodGroupInfo
from ..podgroups.store import POD_GROUP_RESOURCE
from ..runtime import Framework
from ..runtime_podgroup import run_pod_group_post_filter
from .podgroup_algorithm import (
    POD_GROUP_UNSCHEDULABLE,
    GroupAlgorithm,
    GroupResult,
    GroupRun,
    PodResult,
    validate_group,
)
from .records import BINDING, WAITING

__all__ = ["PodGroupCycle"]

log = logging.getLogger("outrigger.scheduler")


class PodGroupCycle(GroupAlgorithm):
    """The scheduling loop's step for a pod group popped from the queue (single pods go on to
    :class:`~framework.scheduler.cycle.SchedulingCycle`)."""


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
            self._decided_conditions.pop(old.key, None)
            self.queue.podgroup_deleted(old.namespace, old.name)
            return
        # Its pods join it (they may need PreEnqueue, which is async): done on the event loop.
        task = asyncio.get_running_loop().create_task(self.queue.podgroup_changed(new.namespace, new.name))
        tasks: set[asyncio.Task[None]] = self.__dict__.setdefault("_podgroup_tasks", set())
        tasks.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(tasks.discard)

    @property
    def _decided_conditions(self) -> dict[str, tuple[str, str]]:
        """group key -> (its uid, the status of the PodGroupInitiallyScheduled condition last handed to
        the writer). Only a True is read back: a write that was lost is made again by the next cycle."""
        decided: dict[str, tuple[str, str]] = self.__dict__.setdefault("_decided", {})
        return decided

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
        self.stats.attempts += len(members)
        for member in members:
            self.pods[member.pod.uid].attempts = member.attempts
        gstate = CycleState(f"{group.key}:{group.attempts}:{next(self._cycle_ids)}", snapshot, group.attempts)
        run = GroupRun(fwk, PodGroupInfo(pg, [m.pod for m in members]), members, snapshot, len(scheduled), gstate)
        try:
            result = await self._group_algorithm(run)
            root = result.status
            self._complete(result, members)
            if root.code is Code.Unschedulable:
                await self._group_post_filter(run, result)
        except Exception as exc:  # a plugin that raised (a remote one past its failurePolicy): the group's error
            log.exception("scheduling cycle of pod group %s failed", group.key)
            result = GroupResult(Status.failure(f"scheduling cycle failed: {exc}", error=exc))
            root = result.status
            self._complete(result, members)
        for cycle_id in run.states:
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

    def _complete(self, result: GroupResult, members: list[QueuedPodInfo]) -> None:
        """completePodGroupAlgorithmResult: the pods the algorithm did not reach take the group's status."""
        for member in members[len(result.pods):]:
            result.pods.append(PodResult(member, result.status))

    async def _group_post_filter(self, run: GroupRun, result: GroupResult) -> None:
        """RunPodGroupPostFilterPlugins (with a function that runs the group's algorithm again) and
        applyPodGroupPostFilterResult: Success marks the group waiting on preemption and nominates its
        pods; an error replaces the group's status; otherwise the PostFilter status's text is added to
        the group's reasons (empty when no plugin spoke, as upstream's is)."""

        async def schedule(view: NodeView | None = None) -> tuple[PodGroupAssignments, Status]:
            seen = apply_view(run.snapshot, view) if view else run.snapshot
            again = dataclasses.replace(run, snapshot=seen, base_view=view or None,
                                        gstate=CycleState(run.gstate.cycle_id, seen), states=[])
            try:
                found = await self._group_algorithm(again)
            finally:
                run.states.extend(again.states)
            proposed = [ProposedAssignment(pr.info.pod, pr.node or "", pr.state) for pr in found.pods]
            return PodGroupAssignments(Placement(found.placement, ()), proposed), found.status

        pf_result, status = await run_pod_group_post_filter(run.fwk, run.gstate, run.pgi, schedule)
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
        assumed = pod_on_node(pod, host)
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
        decided = self._decided_conditions.get(pg.key)
        if cond.status != "True" and decided is not None and decided == (pg.uid, "True"):
            # A True handed to the writer may not be in the cached group yet (nor sent): a group placed
            # with a pod left behind is tried again at once, and that cycle must not take the True back
            # (kube-scheduler reads it from its informer, and loses that race now and then).
            return
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
        self._decided_conditions[pg.key] = (pg.uid, cond.status)
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

