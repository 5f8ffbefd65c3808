"""TaintToleration: keep pods off nodes with taints they do not tolerate, and prefer nodes with fewer
untolerated ``PreferNoSchedule`` taints.

Filter rejects a node with a ``NoSchedule``/``NoExecute`` taint the pod does not tolerate, with
``node(s) had untolerated taint(s)`` (UnschedulableAndUnresolvable: evicting pods cannot remove a
taint, so preemption does not try the node). The reason names no taint, word for word
kube-scheduler's (v1.37), so the fit error counts all such nodes under one entry. Since v1.37 it
also implements PreFilter, which does nothing (it only skips pods whose resize is deferred, behind a
gate that is off by default); the comparison operators of tolerations (``Gt``/``Lt``) stay behind
their alpha gate, off in v1.37, so only ``Equal`` and ``Exists`` are modelled. Score counts the node's
``PreferNoSchedule`` taints that the pod's tolerations with effect ``""`` or ``PreferNoSchedule`` do
not tolerate; NormalizeScore maps the counts to [0, 100] reversed (fewest untolerated taints → 100).

Nodes are grouped by their distinct taint lists (a per-node-table memo, see
:func:`framework.plugins.taints.taint_set_index`), so a pod's tolerations are evaluated once per
distinct list and the per-node answers are a gather.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Node, Pod, Toleration
from pluginhost.plugin import (
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
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.snapshot import NodeTable
from pluginhost.status import SUCCESS, Code, Status

from .helpers import IntArray, default_normalize_score
from .taints import (
    do_not_schedule_taint,
    find_matching_untolerated_taint,
    taint_set_index,
    tolerations_tolerate_taint,
)

__all__ = ["ERR_REASON_UNTOLERATED", "TaintToleration"]

_PRE_SCORE_KEY = "PreScoreTaintToleration"
_FILTER_CACHE_KEY = "TaintToleration/filter"


ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"


@dataclass(frozen=True, slots=True, eq=False)
class _FilterAnswers:
    """A pod's Filter answer per distinct taint list of one node table."""

    table: NodeTable
    untolerated: npt.NDArray[np.bool_]  # per taint list: has a NoSchedule/NoExecute taint the pod does not tolerate

    def clone(self) -> _FilterAnswers:
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations: tuple[Toleration, ...]  # effect "" or PreferNoSchedule

    def clone(self) -> _PreScoreState:
        return self


def _filter_answers(table: NodeTable, pod: Pod) -> _FilterAnswers:
    index = taint_set_index(table)
    untolerated = np.fromiter(
        (find_matching_untolerated_taint(taints, pod.tolerations, do_not_schedule_taint) is not None
         for taints in index.sets),
        dtype=np.bool_,
        count=len(index.sets),
    )
    return _FilterAnswers(table, untolerated)


def _prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


class TaintToleration(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions, EnqueueExtensions):
    name = "TaintToleration"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle

    # ---- PreFilter -----------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    # ---- Filter --------------------------------------------------------------------------------

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        table = batch.snapshot.table
        index = taint_set_index(table)
        if "NoSchedule" not in index.effects and "NoExecute" not in index.effects:
            return FilterResult.passing(len(batch))
        answers: _FilterAnswers | None = state.get(_FILTER_CACHE_KEY)
        if answers is None or answers.table is not table:
            answers = _filter_answers(table, pod)
            state.write(_FILTER_CACHE_KEY, answers)
        if not answers.untolerated.any():
            return FilterResult.passing(len(batch))
        rejected = answers.untolerated[index.ids[batch.rows]]
        return FilterResult.from_mask(rejected, Code.UnschedulableAndUnresolvable, ERR_REASON_UNTOLERATED)

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        state.write(_PRE_SCORE_KEY, _PreScoreState(_prefer_no_schedule_tolerations(pod)))
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        pre: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if pre is None:
            raise RuntimeError(f'failed to read "{_PRE_SCORE_KEY}" from cycleState: not found')
        index = taint_set_index(batch.snapshot.table)
        if "PreferNoSchedule" not in index.effects:
            return np.zeros(len(batch), dtype=np.int64)
        counts = np.fromiter(
            (
                sum(
                    1
                    for taint in taints
                    if taint.effect == "PreferNoSchedule" and not tolerations_tolerate_taint(pre.tolerations, taint)
                )
                for taints in index.sets
            ),
            dtype=np.int64,
            count=len(index.sets),
        )
        return counts[index.ids[batch.rows]]

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return SUCCESS

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeTaint), self._after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent(TARGET_POD, ActionType.UpdatePodToleration), self._after_target_pod_toleration_change
            ),
        ]

    @staticmethod
    def _after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue only when the node went from having an untolerated NoSchedule/NoExecute taint (or
        not existing) to having none."""
        if not isinstance(new, Node):
            return QueueingHint.Queue
        was_untolerated = True
        if isinstance(old, Node):
            was_untolerated = (
                find_matching_untolerated_taint(old.taints, pod.tolerations, do_not_schedule_taint) is not None
            )
        is_untolerated = find_matching_untolerated_taint(new.taints, pod.tolerations, do_not_schedule_taint) is not None
        return QueueingHint.Queue if was_untolerated and not is_untolerated else QueueingHint.QueueSkip

    @staticmethod
    def _after_target_pod_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The pod's own tolerations changed (a TargetPod event is always about the pod itself): it may
        tolerate a taint now."""
        return QueueingHint.Queue
