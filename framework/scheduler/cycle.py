"""The scheduling cycle (kube-scheduler's ``schedule_one.go``): PreFilter, Filter (the nominated node
first, pods nominated to a node counted on it), PostFilter when no node fits, Score, then Reserve and
Permit on the chosen node before the binding cycle starts; and kube-scheduler's fit error text."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time

import numpy as np

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch, PostFilterResult, PreFilterResult, QueuedPodInfo
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import VIEW_STATE_KEY

from ..batching import OpportunisticBatch, Ranked
from ..canary import CANARY, STABLE
from ..outcomes import Diagnosis, IntArray, ScoreOutcome, num_feasible_nodes_to_find
from ..runtime import Framework
from .binding import BindingCycle
from .records import BINDING, WAITING

__all__ = [
    "NO_NODES_MSG", "POD_VIEW_KEY", "CycleOutcome", "SchedulingCycle", "filter_candidates", "fit_error_message",
]

log = logging.getLogger("outrigger.scheduler")

NO_NODES_MSG = "no nodes available to schedule pods"
# CycleState key of the pod as the cycle's transformers made it look (absent: no PreFilter transformer).
POD_VIEW_KEY = "outrigger.io/pod-view"
# CycleState key of the cycle's Score run (its node batch and ScoreOutcome), kept for cycle observers.
_SCORED_KEY = "outrigger.io/scored"


@dataclasses.dataclass(frozen=True, slots=True)
class CycleOutcome:
    """What a scheduling cycle decided, as told to ``Scheduler.cycle_observers`` once it decided
    (before Reserve, or before PostFilter when no node fits): the pod, the cycle's snapshot, the node
    chosen (None: none fits, ``status`` says why), the plugins that rejected nodes, and the Score run
    that chose (None when the node was found without scoring: a single feasible node, a nominated or
    hinted one)."""

    profile: str
    pod: Pod
    snapshot: Snapshot
    cycle_id: str
    attempt: int
    host: str | None
    status: Status
    rejecting: frozenset[str]
    scored: tuple[NodeBatch, ScoreOutcome] | None


def fit_error_message(num_nodes: int, diagnosis: Diagnosis) -> str:
    """kube-scheduler's FitError text: "0/3 nodes are available: 1 Insufficient cpu, 2 ..."."""
    msg = f"0/{num_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        counts: collections.Counter[str] = collections.Counter()
        for status in diagnosis.node_to_status.statuses.values():
            counts.update(status.reasons)
        if diagnosis.absent_nodes:
            counts.update({reason: diagnosis.absent_nodes for reason in diagnosis.node_to_status.absent.reasons})
        if counts:
            msg += " " + ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items())) + "."
    if diagnosis.post_filter_msg:
        # Appended as it is: preemption's own message already ends its sentence.
        msg += f" {diagnosis.post_filter_msg}"
    return msg


def filter_candidates(snapshot: Snapshot, pre: PreFilterResult | None, diagnosis: Diagnosis) -> IntArray:
    """The rows Filter walks, in node-tree order: all nodes, or those a PreFilter result kept (the
    others take kube-scheduler's "node(s) didn't satisfy plugin(s) [...]" status, naming the plugins
    that narrowed the nodes)."""
    order = snapshot.table.order
    if pre is None or pre.node_names is None:
        return order
    keep = np.zeros(len(snapshot), dtype=np.bool_)
    for name in pre.node_names:
        row = snapshot.row(name)
        if row is not None:
            keep[row] = True
    candidates = order[keep[order]]
    diagnosis.absent_nodes = len(snapshot) - int(candidates.shape[0])
    narrowed = " ".join(sorted(diagnosis.unschedulable_plugins))
    diagnosis.node_to_status.absent = Status(
        Code.UnschedulableAndUnresolvable, (f"node(s) didn't satisfy plugin(s) [{narrowed}]",)
    )
    return candidates


@dataclasses.dataclass(slots=True)
class BatchCycle:
    """What opportunistic batching knows of one cycle: the profile's batch, the pod's signature, the
    cycle's number (every pod popped counts) and the node hinted to it ("" for none)."""

    batch: OpportunisticBatch
    signature: bytes | None
    cycle: int
    hint: str = ""

    def store(self, chosen: str, others: Ranked | None = None, other_count: int = 0) -> None:
        self.batch.store(self.signature, self.hint, chosen, others, self.cycle, other_count)


class SchedulingCycle(BindingCycle):
    """One pod's scheduling cycle (kube-scheduler's ``schedulingCycle`` and ``schedulePod``)."""

    async def schedule_one(self, info: QueuedPodInfo) -> None:
        self.popped += 1  # kube-scheduler's scheduling cycle count: batching reads it
        pod = info.pod
        rec = self.pods.get(pod.uid)
        fwk = self.profiles.get(pod.scheduler_name)
        if rec is None or fwk is None or rec.pod.node_name:
            self.queue.done(pod.uid)
            return
        canary = fwk.canary
        if canary is not None:  # chosen once per cycle: Reserve to Bind run the same variant
            rec.variant = CANARY if canary.chooses(pod) else STABLE
            fwk = canary.variant if rec.variant == CANARY else fwk
        started = time.perf_counter()
        rec.attempts = info.attempts
        self.stats.attempts += 1
        snapshot = self.cache.snapshot()
        self.current_snapshot = snapshot
        cycle_id = f"{pod.uid}:{info.attempts}:{next(self._cycle_ids)}"
        state = CycleState(cycle_id, snapshot, info.attempts)
        self.cycle_states[cycle_id] = state
        if fwk.before_cycle_plugins:
            await self._look_ahead(fwk, pod, snapshot)
        diagnosis = Diagnosis()
        # Batching's hints come from the stable variant's cycles: a canary pod is scheduled on its own.
        batch = None if canary is not None and rec.variant == CANARY else self.batches.get(fwk.profile)
        bc = None if batch is None else BatchCycle(batch, await batch.sign(pod, state), self.popped)
        host: str | None
        try:
            host, status = await self._schedule_pod(fwk, state, pod, snapshot, diagnosis, bc)
        except Exception as exc:
            log.exception("scheduling cycle of %s failed", pod.key)
            host, status = None, Status.failure(f"scheduling cycle failed: {exc}", error=exc)
        if canary is not None:
            self._count_variant(canary.plugin, rec.variant, host, status)
        if self.cycle_observers:
            self._tell_observers(CycleOutcome(
                fwk.profile, pod, snapshot, cycle_id, info.attempts, host, status,
                frozenset(diagnosis.unschedulable_plugins), state.get(_SCORED_KEY),
            ))
        if host is None:
            nominating: str | None = ""  # kube-scheduler's clearNominatedNode, unless PostFilter says otherwise
            # PostFilter (preemption) runs for a pod that fits no node, not when there are no nodes.
            if status.is_rejected and fwk.post_filter_plugins and status.reasons != (NO_NODES_MSG,):
                result, pf = await self._post_filter(fwk, state, pod, snapshot, diagnosis)
                nominating = None if result is None else result.nominated_node_name
                if not pf.ok and pf.reasons:
                    diagnosis.post_filter_msg = pf.message()
                if status.reasons and status.reasons[0].startswith("0/"):
                    status = Status(status.code, (fit_error_message(len(snapshot), diagnosis),), status.plugin)
            self._free_state(cycle_id)
            self._fail(info, status, diagnosis.unschedulable_plugins | diagnosis.pending_plugins, nominating)
            self.stats.attempt_seconds.append(time.perf_counter() - started)
            return
        if self.cache.node_of(pod.uid) is not None:
            # Bound by another scheduler while its cycle ran (a source's informer placed it).
            self._free_state(cycle_id)
            self.queue.done(pod.uid)
            return
        assumed = dataclasses.replace(pod, node_name=host)
        self.cache.assume_pod(assumed, host)
        # kube-scheduler's assume: an assumed pod leaves the nominator (DeleteNominatedPodIfExists), or
        # other pods' Filter would count it twice on its node, as placed there and as nominated.
        self.nominated.pop(pod.uid, None)
        status = await fwk.run_reserve(state, assumed, host)
        if status.ok:
            status = await fwk.run_permit(state, assumed, host)
        if not status.ok and status.code is not Code.Wait:
            await fwk.run_unreserve(state, assumed, host)
            self.cache.forget_pod(pod.uid)
            self._free_state(cycle_id)
            self._fail(info, status, {status.plugin} if status.plugin else set())
            self.stats.attempt_seconds.append(time.perf_counter() - started)
            return
        self._activate_pods(state)  # the end of a successful scheduling cycle, as in kube-scheduler
        self.stats.scheduled += 1
        rec.phase = WAITING if status.code is Code.Wait else BINDING
        self.stats.attempt_seconds.append(time.perf_counter() - started)
        task = asyncio.get_running_loop().create_task(self._binding_cycle(fwk, state, info, assumed, host))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    def _count_variant(self, plugin: str, variant: str, host: str | None, status: Status) -> None:
        result = "scheduled" if host is not None else "error" if status.code is Code.Error else "unschedulable"
        self.stats.canary[(plugin, variant, result)] += 1

    def _tell_observers(self, outcome: CycleOutcome) -> None:
        for observe in self.cycle_observers:
            try:
                observe(outcome)
            except Exception:  # an observer cannot change the cycle
                log.exception("cycle observer %r failed", observe)

    async def _look_ahead(self, fwk: Framework, pod: Pod, snapshot: Snapshot) -> None:
        """Tell the profile's before-cycle plugins (framework.hooks) that this pod's cycle starts, with
        the pods queued behind it: remote plugins with lookahead ask their hosts for those pods'
        answers, so hosts work on them while earlier pods are scheduled."""
        fwk.run_before_cycle(snapshot, pod, lambda n: [
            i.pod for i in self.queue.peek(n) if i.pod.scheduler_name == pod.scheduler_name
        ])

    async def _post_filter(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """PostFilter for the pod as the cycle saw it, on the PostFilter transformers' view."""
        view_pod: Pod = state.get(POD_VIEW_KEY, pod)
        if not fwk.post_filter_transformers:
            return await fwk.run_post_filter(state, view_pod, diagnosis.node_to_status)
        base_view = state.get(VIEW_STATE_KEY)
        _, status = await fwk.run_node_transformers("postFilter", state, view_pod, snapshot)
        try:
            if not status.ok:
                return None, status
            return await fwk.run_post_filter(state, view_pod, diagnosis.node_to_status)
        finally:
            fwk.end_view(state, snapshot, base_view)

    async def _schedule_pod(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis,
        bc: BatchCycle | None = None,
    ) -> tuple[str | None, Status]:
        """Find the node for ``pod``: (node, Success) or (None, why not). ``bc``: the cycle's batching
        (None when OpportunisticBatching is off): after PreFilter the batch may hint a node, tried first
        as a nominated node is, and a success is stored for the next pod."""
        n_all = len(snapshot)
        if n_all == 0:
            return None, Status(Code.UnschedulableAndUnresolvable, (NO_NODES_MSG,))
        if fwk.pre_filter_transformers:
            pod, status = await fwk.run_pre_filter_transformers(state, pod)
            state.write(POD_VIEW_KEY, pod)
            if not status.ok:
                return None, status
        pre, status = await fwk.run_pre_filter(state, pod, diagnosis)
        if not status.ok:
            if status.code is Code.Error:
                return None, status
            diagnosis.node_to_status.absent = status
            diagnosis.pre_filter_msg = status.message()
            return None, Status(status.code, (fit_error_message(n_all, diagnosis),), status.plugin)
        if bc is not None:
            bc.hint = await bc.batch.node_hint(state, pod, bc.signature, bc.cycle, snapshot)
        base, base_view = snapshot, state.get(VIEW_STATE_KEY)
        if fwk.filter_transformers:
            snapshot, status = await fwk.run_node_transformers("filter", state, pod, base)
            if not status.ok:
                return None, status
        try:
            host, feasible, status = await self._filter(fwk, state, pod, snapshot, diagnosis, pre, bc)
        finally:
            if fwk.filter_transformers:
                fwk.end_view(state, base, base_view)
        if feasible is None:
            return host, status
        if fwk.score_transformers:
            view, status = await fwk.run_node_transformers("score", state, pod, base, feasible)
            if not status.ok:
                return None, status
            try:
                return await self._score(fwk, state, pod, view, feasible, bc)
            finally:
                fwk.end_view(state, base, base_view)
        return await self._score(fwk, state, pod, base, feasible, bc)

    async def _filter(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis,
        pre: PreFilterResult | None, bc: BatchCycle | None = None,
    ) -> tuple[str | None, IntArray | None, Status]:
        """Filter on ``snapshot`` (the Filter view): the feasible rows to score, or the outcome
        itself (a node, or why none) when there is nothing to score."""
        n_all = len(snapshot)
        candidates = filter_candidates(snapshot, pre, diagnosis)
        n_cand = int(candidates.shape[0])
        if n_cand == 0:
            return None, None, Status(Code.UnschedulableAndUnresolvable, (fit_error_message(n_all, diagnosis),))
        first = pod.nominated_node_name or (bc.hint if bc is not None else "")
        tried_row = -1  # the first node's row, if it was tried and did not fit
        if first:
            # The node a preemption made room on (or the batch's hint) is most likely the one: try it
            # first (evaluateNominatedNode).
            row = snapshot.row(first)
            if row is not None and bool(np.any(candidates == row)):
                tried = Diagnosis()
                fits = await fwk.run_filter(state, pod, snapshot, np.asarray([row], dtype=np.int64), 1, tried)
                if fits.error is not None:
                    return None, None, fits.error
                nominated = await self._filter_with_nominated(fwk, state, pod, snapshot, fits.feasible, tried)
                if nominated.shape[0]:
                    if bc is not None:
                        bc.store(first)
                    return first, None, SUCCESS
                tried_row = row
        start = self._next_start % n_cand
        walk = np.concatenate((candidates[start:], candidates[:start])) if start else candidates
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n_cand)
        outcome = await fwk.run_filter(state, pod, snapshot, walk, to_find, diagnosis)
        processed = outcome.processed
        if tried_row >= 0 and not bool(np.any(walk[:processed] == tried_row)):
            processed += 1  # kube-scheduler counts the node it tried first among those processed
        self._next_start = (self._next_start + processed) % max(n_all, 1)
        if outcome.error is not None:
            return None, None, outcome.error
        feasible = await self._filter_with_nominated(fwk, state, pod, snapshot, outcome.feasible, diagnosis)
        if feasible.shape[0] == 0:
            return None, None, Status(Code.Unschedulable, (fit_error_message(n_all, diagnosis),))
        if feasible.shape[0] == 1:
            host = snapshot.table.names[int(feasible[0])]
            if bc is not None:
                bc.store(host)
            return host, None, SUCCESS
        return None, feasible, SUCCESS

    async def _score(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray,
        bc: BatchCycle | None = None,
    ) -> tuple[str | None, Status]:
        batch = NodeBatch(snapshot, feasible)
        status = await fwk.run_pre_score(state, pod, batch)
        if not status.ok:
            return None, status
        keep = bc is not None and bc.signature is not None  # the raw scores a batch keeps
        scores = await fwk.run_score(state, pod, batch, record=keep or bool(self.cycle_observers))
        if scores.error is not None:
            return None, scores.error
        if self.cycle_observers:
            state.write(_SCORED_KEY, (batch, scores))
        pick = fwk.select_host(np.arange(feasible.shape[0]), scores.totals)
        host = snapshot.table.names[int(feasible[pick])]
        if bc is not None:
            others = None
            if keep:
                raw = {name: ps.raw for name, ps in scores.by_plugin.items()}
                others = Ranked.of(batch.names, raw, scores.totals).without(pick)
            bc.store(host, others, int(feasible.shape[0]) - 1)
        return host, SUCCESS

    def _nominated_pods_by_row(self, snapshot: Snapshot, pod: Pod) -> dict[int, list[Pod]]:
        """Pods nominated to a node that outrank (or equal) ``pod``: Filter counts them as present."""
        out: dict[int, list[Pod]] = {}
        for uid, node in self.nominated.items():
            rec = self.pods.get(uid)
            row = snapshot.row(node)
            if uid == pod.uid or rec is None or row is None or rec.pod.priority < pod.priority:
                continue
            out.setdefault(row, []).append(rec.pod)
        return out

    async def _filter_with_nominated(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray,
        diagnosis: Diagnosis,
    ) -> IntArray:
        """kube-scheduler's RunFilterPluginsWithNominatedPods for the feasible nodes that have
        nominated pods: the pod must also fit with those pods added (so it does not take the room a
        preemption freed for a more important pod)."""
        nominated = self._nominated_pods_by_row(snapshot, pod)
        if not nominated:
            return feasible
        keep = np.ones(feasible.shape[0], dtype=np.bool_)
        for i, row in enumerate(feasible.tolist()):
            extra = nominated.get(row)
            if not extra:
                continue
            what_if_state = state.clone()
            status = SUCCESS
            for other in extra:
                status = await fwk.run_pre_filter_extension_add_pod(what_if_state, pod, other, row)
                if not status.ok:
                    break
            if status.ok:
                status = await fwk.run_filter_with_node_pods(
                    what_if_state, pod, snapshot, row, (*snapshot.pods[row], *extra)
                )
            if not status.ok:
                keep[i] = False
                diagnosis.node_to_status.statuses[snapshot.table.names[row]] = status
                diagnosis.add_plugin_status(status)
        return feasible[keep]
