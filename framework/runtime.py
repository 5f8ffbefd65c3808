"""The runtime: runs one extension point over a profile's ordered plugins, with the framework's rules.

It holds no policy. Each ``run_*`` method loops over the point's plugins in configured order,
honours Skip, stops at the first rejection and attributes a plugin's failure to it by name
("running "NodeName" filter plugin: ..."), exactly as kube-scheduler's ``frameworkImpl`` does.
Plugins may be in-process objects or adapters for remote plugin hosts; the runtime cannot tell. It
knows a plugin by the points it declares and by the hooks of :mod:`framework.hooks` it declares (work
started ahead of a plugin's turn), whoever implements them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    CycleState,
    FilterPlugin,
    FilterResult,
    FilterTransformer,
    Handle,
    NodeBatch,
    NodeToStatus,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PostFilterTransformer,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreFilterTransformer,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    ScoreTransformer,
    runs_at,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, ViewError, apply_pod_change, apply_view, changes_of

from .hooks import BeforeCycle, FilterAhead, Upcoming

__all__ = [
    "MAX_PERMIT_TIMEOUT",
    "Diagnosis",
    "FilterOutcome",
    "Framework",
    "ObservedCall",
    "PluginObserver",
    "PluginScores",
    "ScoreOutcome",
    "WaitingPodHandle",
    "WaitingPods",
    "go_duration",
    "num_feasible_nodes_to_find",
]

log = logging.getLogger("outrigger.runtime")

MAX_PERMIT_TIMEOUT = 15 * 60.0  # kube-scheduler caps a Permit wait at 15 minutes
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_VALID_CODES = frozenset(int(c) for c in Code)
# Filter walks the cluster in windows so it can stop once it has enough feasible nodes without a
# Python loop per node; a window is never smaller than this.
MIN_FILTER_WINDOW = 256

IntArray = npt.NDArray[np.int64]


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before Filter stops (kube-scheduler's adaptive rule:
    with no percentage configured, ``50 - nodes/125`` percent, at least 5%, at least 100 nodes)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if pct >= 100:
        return num_all_nodes
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class Diagnosis:
    """Why a pod did not fit: per-node statuses and the plugins that rejected it."""

    node_to_status: NodeToStatus = field(default_factory=NodeToStatus)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    absent_nodes: int = 0  # nodes a PreFilter result left out (they take node_to_status.absent)

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.code is Code.Pending:
            self.pending_plugins.add(status.plugin)
        elif status.is_rejected:
            self.unschedulable_plugins.add(status.plugin)


@dataclass(slots=True)
class FilterOutcome:
    """The result of the Filter phase for one pod."""

    feasible: IntArray  # snapshot rows, in the order they were found
    processed: int  # nodes examined (feasible + rejected), for the rotating start index
    error: Status | None = None


@dataclass(slots=True)
class PluginScores:
    raw: IntArray
    normalized: IntArray
    weighted: IntArray


@dataclass(slots=True)
class ScoreOutcome:
    totals: IntArray
    by_plugin: dict[str, PluginScores] = field(default_factory=dict)
    error: Status | None = None


class ObservedCall(Protocol):
    """One plugin call an observer follows: told how it ended."""

    def done(self, result: Any) -> None: ...  # the plugin's Status (FilterResult for Filter; None if it has none)

    def failed(self, exc: BaseException) -> None: ...


class PluginObserver(Protocol):
    """Told about each plugin call of the per-point loops (framework.instrument: spans and metrics).
    ``start`` returns None for a call it does not follow."""

    def start(self, point: str, plugin: Plugin, nodes: int = -1) -> ObservedCall | None: ...


def go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` writes it (``500ms``, ``1.5s``, ``1m30s``,
    ``1h0m0s``): kube-scheduler's Permit timeout message prints the plugin's timeout that way."""
    ns = round(seconds * 1e9)
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)

    def frac(value: int, unit: int) -> str:
        whole, rest = divmod(value, unit)
        if not rest:
            return str(whole)
        return f"{whole}." + f"{rest:0{len(str(unit)) - 1}d}".rstrip("0")

    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{frac(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{frac(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    out = frac(rest, 10**9) + "s"
    if hours or minutes:
        out = f"{minutes}m{out}"
    if hours:
        out = f"{hours}h{out}"
    return sign + out


def _failed(point: str, plugin: Plugin, status: Status) -> Status:
    return Status(
        Code.Error,
        (f"running {point} plugin {plugin.name!r}: {status.message() or status.code.name}",),
        plugin.name,
        status.error,
    )


def _raised(point: str, plugin: Plugin, exc: BaseException) -> Status:
    return Status(Code.Error, (f"running {point} plugin {plugin.name!r}: {exc}",), plugin.name, exc)


class Framework:
    """One profile's plugins, one ordered list per extension point, and the rules to run them."""

    def __init__(
        self,
        profile: str,
        plugins: Mapping[str, Sequence[Plugin]],
        score_weights: Mapping[str, int],
        *,
        percentage_of_nodes_to_score: int | None = None,
        waiting_pods: WaitingPods | None = None,
        handle: Handle | None = None,
        rng: random.Random | None = None,
    ) -> None:
        def typed(point: str, cls: type) -> list[Any]:
            out = list(plugins.get(point, ()))
            for p in out:
                if not isinstance(p, cls):
                    raise TypeError(f"plugin {p.name!r} does not extend {point}")
            return out

        self.profile = profile
        self.pre_enqueue_plugins: list[PreEnqueuePlugin] = typed("preEnqueue", PreEnqueuePlugin)
        queue_sort: list[QueueSortPlugin] = typed("queueSort", QueueSortPlugin)
        self.pre_filter_plugins: list[PreFilterPlugin] = typed("preFilter", PreFilterPlugin)
        self.filter_plugins: list[FilterPlugin] = typed("filter", FilterPlugin)
        self.post_filter_plugins: list[PostFilterPlugin] = typed("postFilter", PostFilterPlugin)
        self.pre_score_plugins: list[PreScorePlugin] = typed("preScore", PreScorePlugin)
        self.score_plugins: list[ScorePlugin] = typed("score", ScorePlugin)
        self.reserve_plugins: list[ReservePlugin] = typed("reserve", ReservePlugin)
        self.permit_plugins: list[PermitPlugin] = typed("permit", PermitPlugin)
        self.pre_bind_plugins: list[PreBindPlugin] = typed("preBind", PreBindPlugin)
        self.bind_plugins: list[BindPlugin] = typed("bind", BindPlugin)
        self.post_bind_plugins: list[PostBindPlugin] = typed("postBind", PostBindPlugin)
        # Transformers run before their point's plugins, in the point's order; a plugin that only
        # transforms is not called as a plugin of the point.
        self.pre_filter_transformers = [p for p in self.pre_filter_plugins if isinstance(p, PreFilterTransformer)]
        self.filter_transformers = [p for p in self.filter_plugins if isinstance(p, FilterTransformer)]
        self.score_transformers = [p for p in self.score_plugins if isinstance(p, ScoreTransformer)]
        self.post_filter_transformers = [p for p in self.post_filter_plugins if isinstance(p, PostFilterTransformer)]
        self.pre_filter_plugins = [p for p in self.pre_filter_plugins if runs_at(p, "preFilter")]
        self.filter_plugins = [p for p in self.filter_plugins if runs_at(p, "filter")]
        self.score_plugins = [p for p in self.score_plugins if runs_at(p, "score")]
        self.post_filter_plugins = [p for p in self.post_filter_plugins if runs_at(p, "postFilter")]
        if len(queue_sort) != 1:
            raise ValueError(
                f"only one queue sort plugin required for profile with scheduler name {profile!r}, "
                f"but got {len(queue_sort)}"
            )
        if not self.bind_plugins:
            raise ValueError(f"at least one bind plugin is needed for profile with scheduler name {profile!r}")
        self.queue_sort_plugin = queue_sort[0]
        self._filter_finishers = [
            p for p in self.filter_plugins if type(p).filter_finished is not FilterPlugin.filter_finished
        ]
        # Plugins told of each cycle before it starts, with whether this profile runs them at Filter
        # and at Score.
        filter_names = {p.name for p in self.filter_plugins}
        score_names = {p.name for p in self.score_plugins}
        self.before_cycle_plugins: list[tuple[BeforeCycle, bool, bool]] = [
            (p, p.name in filter_names, p.name in score_names)
            for p in dict.fromkeys((*self.filter_plugins, *self.score_plugins)) if isinstance(p, BeforeCycle)
        ]
        self.score_weights = {p.name: int(score_weights.get(p.name, 1)) or 1 for p in self.score_plugins}
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPods()
        self.handle = handle
        self._rng = rng or random.Random()
        self.observer: PluginObserver | None = None  # set by framework.instrument when traced or measured
        self.plugins: dict[str, Plugin] = {}
        for point_plugins in plugins.values():
            for p in point_plugins:
                self.plugins[p.name] = p

    def run_before_cycle(self, snapshot: Snapshot, pod: Pod, upcoming: Upcoming) -> None:
        """Tell the :class:`~framework.hooks.BeforeCycle` plugins that ``pod``'s cycle starts; the
        queue behind it is looked at once, and only if one of them asks."""
        seen: dict[int, Sequence[Pod]] = {}

        def once(n: int) -> Sequence[Pod]:
            if n not in seen:
                seen[n] = upcoming(n)
            return seen[n]

        for pl, at_filter, at_score in self.before_cycle_plugins:
            try:
                pl.before_cycle(snapshot, pod, once, at_filter, at_score)
            except Exception:  # the hook is an optimization: the cycle does not depend on it
                log.exception("before_cycle of plugin %r failed", pl.name)

    # ---- queueing ------------------------------------------------------------------------------

    async def run_pre_enqueue(self, pod: Pod) -> Status:
        for pl in self.pre_enqueue_plugins:
            try:
                status = await pl.pre_enqueue(pod)
            except Exception as exc:
                return _raised("PreEnqueue", pl, exc)
            if not status.ok:
                if status.is_rejected or status.code is Code.Pending:
                    return status.with_plugin(pl.name)
                return _failed("PreEnqueue", pl, status)
        return SUCCESS

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort_plugin.less(a, b)

    # ---- transformers (cycle-scoped views) ----------------------------------------------------

    async def run_pre_filter_transformers(self, state: CycleState, pod: Pod) -> tuple[Pod, Status]:
        """The pod as this cycle's PreFilter, Filter, PostFilter and Score plugins see it: each
        PreFilter transformer's change applied in order. ``pod`` itself is never changed."""
        for pl in self.pre_filter_transformers:
            try:
                change, status = await pl.before_pre_filter(state, pod)
                if status.ok:
                    pod = apply_pod_change(pod, change)
            except Exception as exc:
                return pod, _raised("BeforePreFilter", pl, exc)
            if not status.ok:
                if status.is_rejected:
                    return pod, status.with_plugin(pl.name)
                return pod, _failed("BeforePreFilter", pl, status)
        return pod, SUCCESS

    async def run_node_transformers(
        self, point: str, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntArray | None = None
    ) -> tuple[Snapshot, Status]:
        """The snapshot as the plugins of ``point`` ("filter", "score" or "postFilter") see it: each
        transformer of the point applies its node changes on the previous one's view. The view (added
        to the one ``state`` already carries, e.g. a what-if's nodes) is put in ``state`` under
        ``VIEW_STATE_KEY`` so remote plugins get it; :meth:`end_view` puts the base back."""
        by_point: dict[str, list[Any]] = {
            "filter": self.filter_transformers,
            "score": self.score_transformers,
            "postFilter": self.post_filter_transformers,
        }
        transformers = by_point[point]
        if not transformers:
            return snapshot, SUCCESS
        base_view: NodeView = state.get(VIEW_STATE_KEY) or NodeView()
        view = base_view
        what = {"filter": "BeforeFilter", "score": "BeforeScore", "postFilter": "BeforePostFilter"}[point]
        current = snapshot
        for pl in transformers:
            state.write(VIEW_STATE_KEY, view)
            state.snapshot = current
            try:
                if point == "filter":
                    changes, status = await pl.before_filter(state, pod, current)
                elif point == "postFilter":
                    changes, status = await pl.before_post_filter(state, pod, current)
                else:
                    all_rows = rows if rows is not None else current.table.order
                    changes, status = await pl.before_score(state, pod, NodeBatch(current, all_rows))
                if status.ok:
                    more = changes_of(changes)
                    if more:
                        current = apply_view(current, NodeView(changes=more))
                        view = view.then(more)
            except (Exception, ViewError) as exc:
                self.end_view(state, snapshot, base_view)
                return snapshot, _raised(what, pl, exc)
            if not status.ok:
                self.end_view(state, snapshot, base_view)
                return snapshot, status.with_plugin(pl.name) if status.is_rejected else _failed(what, pl, status)
        state.write(VIEW_STATE_KEY, view)
        state.snapshot = current
        return current, SUCCESS

    def end_view(self, state: CycleState, snapshot: Snapshot, view: NodeView | None) -> None:
        """Put ``state`` back on ``snapshot`` and ``view`` (what it carried before a phase's view)."""
        state.snapshot = snapshot
        if view:
            state.write(VIEW_STATE_KEY, view)
        else:
            state.delete(VIEW_STATE_KEY)

    # ---- PreFilter / Filter / PostFilter -------------------------------------------------------

    async def run_pre_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PreFilterResult | None, Status]:
        """PreFilter plugins in order. Skip marks the plugin's Filter as skipped; a result narrows
        the node set; UnschedulableAndUnresolvable stops at once, Unschedulable after all ran."""
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        returned = SUCCESS
        obs = self.observer
        for pl in self.pre_filter_plugins:
            call = obs.start("PreFilter", pl) if obs is not None else None
            try:
                r, status = await pl.pre_filter(state, pod)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return None, _raised("PreFilter", pl, exc)
            if call is not None:
                call.done(status)
            if status.is_skip:
                state.skip_filter.add(pl.name)
                continue
            if not status.ok:
                status = status.with_plugin(pl.name)
                if status.code is Code.UnschedulableAndUnresolvable:
                    diagnosis.add_plugin_status(status)
                    return None, status
                if status.code in (Code.Unschedulable, Code.Pending):
                    # Keep going: later PreFilter plugins must still prepare state for preemption.
                    diagnosis.add_plugin_status(status)
                    returned = status
                    continue
                return None, _failed("PreFilter", pl, status)
            if r is not None and r.node_names is not None:
                narrowing.append(pl.name)
                result = r if result is None else result.merge(r)
                if not result.node_names:
                    # The narrowing plugins rejected the pod: only their events may requeue it.
                    diagnosis.unschedulable_plugins.update(narrowing)
                    if len(narrowing) == 1:
                        msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
                    else:  # kube-scheduler lists the plugins sorted by name
                        msg = f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}] simultaneously"
                    return result, Status(Code.UnschedulableAndUnresolvable, (msg,))
        # As kube-scheduler: the plugins that narrowed the nodes count as rejectors (their events may
        # requeue the pod), and the fit error names them for the nodes they left out.
        diagnosis.unschedulable_plugins.update(narrowing)
        return result, returned

    async def run_filter(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        candidates: IntArray,
        num_to_find: int,
        diagnosis: Diagnosis,
    ) -> FilterOutcome:
        """Filter ``candidates`` (rows, in walk order) until ``num_to_find`` nodes are feasible.

        Each window of nodes goes through the Filter plugins in order; a plugin only sees nodes that
        every earlier plugin accepted, so a node's status names the first plugin that rejected it.
        """
        plugins = [p for p in self.filter_plugins if p.name not in state.skip_filter]
        if not plugins:
            take = candidates[:num_to_find]
            return FilterOutcome(take, int(take.shape[0]))
        if not self._filter_finishers:
            return await self._filter_windows(state, pod, snapshot, candidates, num_to_find, diagnosis, plugins)
        try:
            return await self._filter_windows(state, pod, snapshot, candidates, num_to_find, diagnosis, plugins)
        finally:
            for pl in self._filter_finishers:
                # Also for plugins skipped by now (an ignored failure skips the rest of the cycle after
                # the plugin took its streams). Releasing per-cycle resources must not fail the cycle.
                try:
                    await pl.filter_finished(state)
                except Exception:
                    log.exception("filter_finished of plugin %r failed", pl.name)

    async def _filter_windows(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        candidates: IntArray,
        num_to_find: int,
        diagnosis: Diagnosis,
        plugins: list[FilterPlugin],
    ) -> FilterOutcome:
        total = int(candidates.shape[0])
        found: list[IntArray] = []
        n_found = 0
        pos = 0
        names = snapshot.table.names
        statuses = diagnosis.node_to_status.statuses
        obs = self.observer
        # The first plugin that can filter ahead, when others come before it, gets each window ahead
        # of its turn and works on it while they run (later ones see only surviving nodes).
        prefetchers: list[FilterAhead] = []
        for i, pl in enumerate(plugins):
            if isinstance(pl, FilterAhead):
                prefetchers = [pl] if i > 0 else []
                break
        while pos < total and n_found < num_to_find:
            window = min(total - pos, max(MIN_FILTER_WINDOW, 2 * (num_to_find - n_found)))
            rows = candidates[pos : pos + window]
            alive = np.ones(window, dtype=np.bool_)
            rejected: list[tuple[Plugin, IntArray, FilterResult, npt.NDArray[np.bool_]]] = []
            # Its answers are read in configured order, so statuses name the first rejecting plugin.
            ahead: dict[str, Awaitable[FilterResult] | FilterResult] = {}
            for pl in prefetchers:
                # Sending the window is the observed call; its answer is read later, at the plugin's turn.
                call = obs.start("FilterPrefetch", pl, window) if obs is not None else None
                try:
                    ahead[pl.name] = await pl.prefetch_filter(state, pod, NodeBatch(snapshot, rows))
                except Exception as exc:
                    if call is not None:
                        call.failed(exc)
                    _discard(ahead)
                    return FilterOutcome(np.empty(0, np.int64), pos, _raised("Filter", pl, exc))
                if call is not None:
                    call.done(None)
            for pl in plugins:
                idx = np.flatnonzero(alive)
                if idx.shape[0] == 0:
                    break
                batch = NodeBatch(snapshot, rows[idx])
                call = None
                try:
                    early = ahead.pop(pl.name, None)
                    if early is not None:
                        whole = early if isinstance(early, FilterResult) else await early
                        res = whole.take(idx) if len(whole) == window else whole
                    else:
                        call = obs.start("Filter", pl, len(batch)) if obs is not None else None
                        res = await pl.filter(state, pod, batch)
                except Exception as exc:
                    if call is not None:
                        call.failed(exc)
                    _discard(ahead)
                    return FilterOutcome(np.empty(0, np.int64), pos, _raised("Filter", pl, exc))
                if call is not None:
                    call.done(res)
                bad = _check_filter_result(pl, res, len(batch))
                if bad is not None:
                    _discard(ahead)
                    return FilterOutcome(np.empty(0, np.int64), pos, bad)
                codes = res.codes
                failed = codes != 0
                if failed.any():
                    not_rejection = failed & (codes != Code.Unschedulable)
                    not_rejection &= codes != Code.UnschedulableAndUnresolvable
                    not_rejection &= codes != Code.Pending
                    if not_rejection.any():
                        i = int(np.flatnonzero(not_rejection)[0])
                        st = res.status_at(i, pl.name)
                        _discard(ahead)
                        return FilterOutcome(np.empty(0, np.int64), pos, _failed("filter", pl, st))
                    alive[idx[failed]] = False
                    rejected.append((pl, idx, res, failed))
            _discard(ahead)  # every node rejected before these plugins' turn: their answers are not needed
            ok = np.flatnonzero(alive)
            need = num_to_find - n_found
            if ok.shape[0] > need:
                cut = int(ok[need - 1]) + 1  # examine up to (and including) the last node we keep
                ok = ok[:need]
            else:
                cut = window
            found.append(rows[ok])
            n_found += int(ok.shape[0])
            for rejector, idx, res, failed in rejected:
                js = np.flatnonzero(failed)
                ws = idx[js]
                kept = ws < cut
                js, ws = js[kept], ws[kept]
                # One Status per distinct answer of the plugin in this window, shared by its nodes.
                keys = res.codes[js].astype(np.int64) << 32
                if res.reason_index is not None:
                    keys |= res.reason_index[js].astype(np.int64)
                shared: dict[int, Status] = {}
                for j, w, key in zip(js.tolist(), rows[ws].tolist(), keys.tolist(), strict=True):
                    found_st = shared.get(key)
                    if found_st is None:
                        found_st = shared[key] = res.status_at(j, rejector.name)
                        diagnosis.add_plugin_status(found_st)
                    statuses[names[w]] = found_st
            pos += cut
        feasible = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
        return FilterOutcome(feasible, pos)

    async def run_filter_with_node_pods(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, row: int, pods: Sequence[Pod]
    ) -> Status:
        """Every Filter plugin on node ``row`` as if it held exactly ``pods`` (preemption's victims
        removed, nominated pods added). In-process plugins read the what-if snapshot; remote ones get
        the same difference as a node view (CycleContext.node_view) to apply to their mirror."""
        from .whatif import node_pods_view, with_node_pods

        base = state.get(VIEW_STATE_KEY)
        view = (base if isinstance(base, NodeView) else NodeView()).then(node_pods_view(snapshot, row, pods))
        state.write(VIEW_STATE_KEY, view)
        try:
            return await self.run_filter_on_node(state, pod, with_node_pods(snapshot, row, pods), row)
        finally:
            if base is None:
                state.delete(VIEW_STATE_KEY)
            else:
                state.write(VIEW_STATE_KEY, base)

    async def run_filter_on_node(self, state: CycleState, pod: Pod, snapshot: Snapshot, row: int) -> Status:
        """Every Filter plugin on one node (preemption's what-ifs): Success or the first rejection."""
        diagnosis = Diagnosis()
        outcome = await self.run_filter(state, pod, snapshot, np.asarray([row], dtype=np.int64), 1, diagnosis)
        if outcome.error is not None:
            return outcome.error
        if outcome.feasible.shape[0]:
            return SUCCESS
        return diagnosis.node_to_status.get(snapshot.table.names[row])

    async def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> Status:
        """Tell PreFilter plugins that ``other`` is now on node ``row`` (their state is updated)."""
        return await self._run_pre_filter_extensions(state, pod, other, row, add=True)

    async def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, other: Pod, row: int) -> Status:
        """Tell PreFilter plugins that ``other`` left node ``row``."""
        return await self._run_pre_filter_extensions(state, pod, other, row, add=False)

    async def _run_pre_filter_extensions(
        self, state: CycleState, pod: Pod, other: Pod, row: int, *, add: bool
    ) -> Status:
        point = "PreFilterExtensionAddPod" if add else "PreFilterExtensionRemovePod"
        for pl in self.pre_filter_plugins:
            if pl.name in state.skip_filter:
                continue
            ext = pl.pre_filter_extensions()
            if ext is None:
                continue
            try:
                status = await (ext.add_pod if add else ext.remove_pod)(state, pod, other, row)
            except Exception as exc:
                return _raised(point, pl, exc)
            if not status.ok:
                return _failed(point, pl, status)
        return SUCCESS

    async def run_post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        obs = self.observer
        for pl in self.post_filter_plugins:
            call = obs.start("PostFilter", pl) if obs is not None else None
            try:
                r, status = await pl.post_filter(state, pod, statuses)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return None, _raised("PostFilter", pl, exc)
            if call is not None:
                call.done(status)
            if status.ok:
                return r, status
            if status.code is Code.UnschedulableAndUnresolvable:
                return r, status.with_plugin(pl.name)
            if not status.is_rejected:
                # kube-scheduler keeps a PostFilter plugin's error as it is (its message ends the fit
                # error: "... pod affinity terms conflict. not found"), unlike the other points'.
                return None, Status(Code.Error, (status.message() or status.code.name,), pl.name, status.error)
            if r is not None and r.nominated_node_name:
                result = r
            reasons.extend(status.reasons)
            rejector = rejector or pl.name
        return result, Status(Code.Unschedulable, tuple(reasons), rejector)

    # ---- PreScore / Score ----------------------------------------------------------------------

    async def run_pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        obs = self.observer
        for pl in self.pre_score_plugins:
            call = obs.start("PreScore", pl) if obs is not None else None
            try:
                status = await pl.pre_score(state, pod, nodes)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return _raised("PreScore", pl, exc)
            if call is not None:
                call.done(status)
            if status.is_skip:
                state.skip_score.add(pl.name)
                continue
            if not status.ok:
                return _failed("PreScore", pl, status)
        return SUCCESS

    async def run_score(self, state: CycleState, pod: Pod, nodes: NodeBatch, record: bool = False) -> ScoreOutcome:
        """Score, NormalizeScore, the [0, 100] check and weights; totals per node of ``nodes``."""
        n = len(nodes)
        totals = np.zeros(n, dtype=np.int64)
        out = ScoreOutcome(totals)
        obs = self.observer
        for pl in self.score_plugins:
            if pl.name in state.skip_score:
                continue
            call = obs.start("Score", pl) if obs is not None else None
            try:
                raw = await pl.score(state, pod, nodes)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                out.error = _raised("Score", pl, exc)
                return out
            if call is not None:
                call.done(None)
            raw = np.asarray(raw)
            if raw.shape != (n,) or not np.issubdtype(raw.dtype, np.integer):
                out.error = Status.failure(
                    f"running Score plugin {pl.name!r}: returned {raw.shape[0] if raw.ndim else 0} "
                    f"scores for {n} nodes",
                    plugin=pl.name,
                )
                return out
            # NormalizeScore rewrites in place: give it a copy so the raw scores stay for explain.
            scores = raw.astype(np.int64, copy=isinstance(pl, ScoreExtensions) or raw.dtype != np.int64)
            if isinstance(pl, ScoreExtensions):
                call = obs.start("NormalizeScore", pl) if obs is not None else None
                try:
                    status = await pl.normalize_score(state, pod, nodes, scores)
                except Exception as exc:
                    if call is not None:
                        call.failed(exc)
                    out.error = _raised("NormalizeScore", pl, exc)
                    return out
                if call is not None:
                    call.done(status)
                if not status.ok:
                    out.error = _failed("NormalizeScore", pl, status)
                    return out
            if n and (int(scores.min()) < MIN_NODE_SCORE or int(scores.max()) > MAX_NODE_SCORE):
                bad = int(scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)][0])
                out.error = Status.failure(
                    f"plugin {pl.name!r} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                    plugin=pl.name,
                )
                return out
            weighted = scores * self.score_weights[pl.name]
            totals += weighted
            if record:
                out.by_plugin[pl.name] = PluginScores(raw.astype(np.int64), scores, weighted)
        return out

    def select_host(self, rows: IntArray, totals: IntArray) -> int:
        """The row with the highest total score; ties broken uniformly at random."""
        best = np.flatnonzero(totals == totals.max())
        pick = int(best[0]) if best.shape[0] == 1 else int(best[self._rng.randrange(best.shape[0])])
        return int(rows[pick])

    # ---- Reserve / Permit ----------------------------------------------------------------------

    async def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        obs = self.observer
        for pl in self.reserve_plugins:
            call = obs.start("Reserve", pl) if obs is not None else None
            try:
                status = await pl.reserve(state, pod, node)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return _raised("Reserve", pl, exc)
            if call is not None:
                call.done(status)
            if not status.ok:
                if status.is_rejected:
                    return status.with_plugin(pl.name)
                return _failed("Reserve", pl, status)
        return SUCCESS

    async def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order; failures are logged, never stop it."""
        obs = self.observer
        for pl in reversed(self.reserve_plugins):
            call = obs.start("Unreserve", pl) if obs is not None else None
            try:
                await pl.unreserve(state, pod, node)
                if call is not None:
                    call.done(None)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                # One line (a dead plugin host fails every Unreserve alike); the traceback at debug level.
                log.error("Unreserve of plugin %r failed for pod %s: %s", pl.name, pod.key, exc)
                log.debug("Unreserve of plugin %r failed", pl.name, exc_info=True)

    async def run_permit(self, state: CycleState, pod: Pod, node: str) -> Status:
        waits: dict[str, float] = {}
        obs = self.observer
        for pl in self.permit_plugins:
            call = obs.start("Permit", pl) if obs is not None else None
            try:
                status, timeout = await pl.permit(state, pod, node)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return _raised("Permit", pl, exc)
            if call is not None:
                call.done(status)
            if status.ok:
                continue
            if status.is_rejected:
                return status.with_plugin(pl.name)
            if status.code is Code.Wait:
                waits[pl.name] = min(max(float(timeout), 0.0), MAX_PERMIT_TIMEOUT)
                continue
            return _failed("Permit", pl, status)
        if waits:
            self.waiting_pods.add(pod, node, waits)
            return Status(Code.Wait, (f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"',))
        return SUCCESS

    async def wait_on_permit(self, pod: Pod) -> Status:
        wp = self.waiting_pods.get(pod.uid)
        if wp is None:
            return SUCCESS
        try:
            status = await wp.result
        finally:
            self.waiting_pods.remove(pod.uid)
        if status.ok or status.is_rejected:
            return status
        return Status(Code.Error, (f"waiting on permit for pod: {status.message()}",), status.plugin)

    # ---- binding cycle -------------------------------------------------------------------------

    async def run_pre_bind_pre_flights(self, state: CycleState, pod: Pod, node: str) -> Status:
        """Success if any PreBind plugin has work for this pod, Skip if none has."""
        result = Status.skip()
        for pl in self.pre_bind_plugins:
            try:
                status = await pl.pre_bind_pre_flight(state, pod, node)
            except Exception as exc:
                return _raised("PreBindPreFlight", pl, exc)
            if status.is_skip:
                continue
            if not status.ok:
                return status.with_plugin(pl.name) if status.is_rejected else _failed("PreBindPreFlight", pl, status)
            result = SUCCESS
        return result

    async def run_pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        obs = self.observer
        for pl in self.pre_bind_plugins:
            call = obs.start("PreBind", pl) if obs is not None else None
            try:
                status = await pl.pre_bind(state, pod, node)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return _raised("PreBind", pl, exc)
            if call is not None:
                call.done(status)
            if status.is_skip:
                continue
            if not status.ok:
                return status.with_plugin(pl.name) if status.is_rejected else _failed("PreBind", pl, status)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        """The first Bind plugin that does not Skip decides."""
        obs = self.observer
        for pl in self.bind_plugins:
            call = obs.start("Bind", pl) if obs is not None else None
            try:
                status = await pl.bind(state, pod, node)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                return _raised("Bind", pl, exc)
            if call is not None:
                call.done(status)
            if status.is_skip:
                continue
            if not status.ok:
                return status.with_plugin(pl.name) if status.is_rejected else _failed("Bind", pl, status)
            return status.with_plugin(pl.name)
        return Status.failure("bind status: Skip, every Bind plugin skipped the pod")

    async def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        obs = self.observer
        for pl in self.post_bind_plugins:
            call = obs.start("PostBind", pl) if obs is not None else None
            try:
                await pl.post_bind(state, pod, node)
                if call is not None:
                    call.done(None)
            except Exception as exc:
                if call is not None:
                    call.failed(exc)
                log.exception("PostBind of plugin %r failed for pod %s", pl.name, pod.key)



def _discard(ahead: dict[str, Awaitable[FilterResult] | FilterResult]) -> None:
    """Drop prefetched answers nobody will read (their streams recognise the late replies)."""
    for early in ahead.values():
        if inspect.iscoroutine(early):
            early.close()
    ahead.clear()


def _check_filter_result(pl: Plugin, res: Any, n: int) -> Status | None:
    """A plugin's Filter answer must have one valid code per node it was sent."""
    if not isinstance(res, FilterResult):
        return Status.failure(f"running filter plugin {pl.name!r}: returned {type(res).__name__}", plugin=pl.name)
    if len(res) != n:
        return Status.failure(
            f"running filter plugin {pl.name!r}: returned {len(res)} answers for {n} nodes", plugin=pl.name
        )
    if n and (int(res.codes.min()) < 0 or int(res.codes.max()) > max(_VALID_CODES)):
        return Status.failure(f"running filter plugin {pl.name!r}: returned an unknown status code", plugin=pl.name)
    return None


# ---- waiting pods (Permit) ---------------------------------------------------------------------


class WaitingPodHandle:
    """A pod held at Permit until every waiting plugin allows it, one rejects it, or a wait times out."""

    def __init__(self, pod: Pod, node_name: str, waits: Mapping[str, float]) -> None:
        loop = asyncio.get_running_loop()
        self._pod = pod
        self._node_name = node_name
        self._pending = dict(waits)
        self.deadline = loop.time() + max(waits.values(), default=0.0)
        self.result: asyncio.Future[Status] = loop.create_future()
        self._timers = [
            loop.call_later(timeout, self._timeout, plugin, timeout) for plugin, timeout in waits.items()
        ]

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        self._pending.pop(plugin, None)
        if not self._pending:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.Unschedulable, (message,), plugin))

    def _timeout(self, plugin: str, waited: float) -> None:
        self.reject(plugin, f"rejected due to timeout after waiting {go_duration(waited)} at plugin {plugin}")

    def _finish(self, status: Status) -> None:
        if self.result.done():
            return
        for t in self._timers:
            t.cancel()
        self.result.set_result(status)


class WaitingPods:
    """The pods waiting at Permit, by pod UID (shared by the profiles of one scheduler)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPodHandle] = {}

    def add(self, pod: Pod, node_name: str, waits: Mapping[str, float]) -> WaitingPodHandle:
        wp = WaitingPodHandle(pod, node_name, waits)
        self._pods[pod.uid] = wp
        return wp

    def get(self, uid: str) -> WaitingPodHandle | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __iter__(self) -> Any:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
