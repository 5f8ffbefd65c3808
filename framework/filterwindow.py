"""Filter over the cluster in windows: the Framework's Filter phase for one pod.

The candidates (snapshot rows, in walk order from ``nextStartNodeIndex``) go through the Filter plugins a
window at a time, so the phase can stop once it has ``numFeasibleNodesToFind`` feasible nodes without a
Python loop per node. Within a window each plugin sees only the nodes every earlier plugin accepted, so
a node's status names the first plugin that rejected it.

A plugin whose Filter costs much a node (:class:`~framework.hooks.CostlyFilter`: DynamicResources
searching each node's devices) is not sent the whole window: from it on, the plugins get the nodes that
survived the cheaper ones a few at a time, in order, until one more node than still needed passes them.
Where the window is cut then depends only on nodes that were tried, so the feasible nodes, their order,
the rejections counted and the next start index are those of filtering the whole window; the nodes past
the cut are never tried, as kube-scheduler's findNodesThatPassFilters stops once it has enough (its
workers overshoot by what they have in flight, as the smallest chunk here does).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, NodeBatch
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status

from .hooks import CostlyFilter, FilterAhead
from .outcomes import (
    Diagnosis,
    FilterOutcome,
    IntArray,
    Raised,
    Rejection,
    check_filter_result,
    failed_status,
    raised_status,
    record_rejections,
)

__all__ = ["MIN_COSTLY_CHUNK", "MIN_FILTER_WINDOW", "WindowedFilter"]

#: A window is never smaller than this (numpy's per-call cost is paid once for many nodes).
MIN_FILTER_WINDOW = 256
#: The fewest nodes a costly plugin is sent at once (kube-scheduler runs 16 filter workers).
MIN_COSTLY_CHUNK = 16

#: ``Framework._observed``: awaits a plugin's call under the observer; its result or :class:`Raised`.
Observe = Callable[..., Awaitable[Any]]
Ahead = dict[str, Awaitable[FilterResult] | FilterResult]


class WindowedFilter:
    """One pod's Filter phase over ``plugins`` (those not skipped), see the module docstring."""

    def __init__(self, observe: Observe, state: CycleState, pod: Pod, snapshot: Snapshot,
                 plugins: list[FilterPlugin]) -> None:
        self.observe = observe
        self.state = state
        self.pod = pod
        self.snapshot = snapshot
        self.plugins = plugins
        # The first plugin that can filter ahead, when others come before it, gets each window ahead
        # of its turn and works on it while they run (later ones see only surviving nodes).
        first_ahead = next((pl for pl in plugins if isinstance(pl, FilterAhead)), None)
        self.prefetcher = first_ahead if first_ahead is not plugins[0] else None
        self.costly_from = next((i for i, pl in enumerate(plugins)
                                 if isinstance(pl, CostlyFilter) and pl.filter_is_costly(state)), len(plugins))

    async def run(self, candidates: IntArray, num_to_find: int, diagnosis: Diagnosis) -> FilterOutcome:
        """Filter ``candidates`` until ``num_to_find`` nodes are feasible; rejections go to ``diagnosis``."""
        total = int(candidates.shape[0])
        found: list[IntArray] = []
        n_found = 0
        pos = 0
        while pos < total and n_found < num_to_find:
            need = num_to_find - n_found
            window = min(total - pos, max(MIN_FILTER_WINDOW, 2 * need))
            rows = candidates[pos : pos + window]
            alive, rejected, error = await self._window(rows, need)
            if error is not None:
                return FilterOutcome(np.empty(0, np.int64), pos, error)
            ok = np.flatnonzero(alive)
            if ok.shape[0] > need:
                cut = int(ok[need - 1]) + 1  # examine up to (and including) the last node we keep
                ok = ok[:need]
            else:
                cut = window
            found.append(rows[ok])
            n_found += int(ok.shape[0])
            record_rejections(diagnosis, self.snapshot.table.names, rows, rejected, cut)
            pos += cut
        feasible = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
        return FilterOutcome(feasible, pos)

    async def _window(self, rows: IntArray, need: int) -> tuple[npt.NDArray[np.bool_], list[Rejection], Status | None]:
        """One window through the plugins: which nodes are alive (a node past the cut that a costly
        plugin never tried is not), each plugin's rejections, or the error that fails the cycle."""
        window = int(rows.shape[0])
        alive = np.ones(window, dtype=np.bool_)
        rejected: list[Rejection] = []
        # Its answers are read in configured order, so statuses name the first rejecting plugin.
        ahead: Ahead = {}
        try:
            if self.prefetcher is not None:
                # Sending the window is the observed call; its answer is read later, at the plugin's turn.
                pre = self.prefetcher
                sent = await self.observe("FilterPrefetch", pre, pre.prefetch_filter(
                    self.state, self.pod, NodeBatch(self.snapshot, rows)), window, error_point="Filter", tell=False)
                if isinstance(sent, Raised):
                    return alive, rejected, sent.status
                ahead[pre.name] = sent
            head, tail = self.plugins[: self.costly_from], self.plugins[self.costly_from :]
            error = await self._through(head, rows, np.arange(window), alive, rejected, ahead)
            if error is not None or not tail:
                return alive, rejected, error
            todo = np.flatnonzero(alive)
            start = kept = 0
            # One more than needed decides the cut as the whole window would (see the module docstring).
            while start < todo.shape[0] and kept <= need:
                part = todo[start : start + max(MIN_COSTLY_CHUNK, need + 1 - kept)]
                error = await self._through(tail, rows, part, alive, rejected, ahead)
                if error is not None:
                    return alive, rejected, error
                kept += int(np.count_nonzero(alive[part]))
                start += int(part.shape[0])
            alive[todo[start:]] = False
            return alive, rejected, None
        finally:
            _discard(ahead)  # every node rejected before these plugins' turn: their answers are not needed

    async def _through(self, plugins: list[FilterPlugin], rows: IntArray, positions: IntArray,
                       alive: npt.NDArray[np.bool_], rejected: list[Rejection], ahead: Ahead) -> Status | None:
        """``plugins`` in order on the window's ``positions`` still alive; the error that fails the cycle."""
        window = int(rows.shape[0])
        for pl in plugins:
            idx = positions[alive[positions]]
            if idx.shape[0] == 0:
                break
            batch = NodeBatch(self.snapshot, rows[idx])
            early = ahead.get(pl.name)
            if early is not None:
                try:
                    whole = early if isinstance(early, FilterResult) else await early
                except Exception as exc:
                    return raised_status("Filter", pl, exc)
                ahead[pl.name] = whole  # later chunks of the window read it again
                res = whole.take(idx) if len(whole) == window else whole
            else:
                got = await self.observe("Filter", pl, pl.filter(self.state, self.pod, batch), len(batch))
                if isinstance(got, Raised):
                    return got.status
                res = got
            bad = check_filter_result(pl, res, len(batch))
            if bad is not None:
                return bad
            failed = res.codes != 0
            if failed.any():
                not_rejection = failed & (res.codes != Code.Unschedulable)
                not_rejection &= res.codes != Code.UnschedulableAndUnresolvable
                not_rejection &= res.codes != Code.Pending
                if not_rejection.any():
                    st = res.status_at(int(np.flatnonzero(not_rejection)[0]), pl.name)
                    return failed_status("filter", pl, st)
                alive[idx[failed]] = False
                rejected.append((pl, idx, res, failed))
        return None


def _discard(ahead: Ahead) -> None:
    """Drop prefetched answers nobody will read (their streams recognise the late replies)."""
    for early in ahead.values():
        if inspect.iscoroutine(early):
            early.close()
    ahead.clear()
