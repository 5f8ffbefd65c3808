"""The runtime: runs one extension point over a profile's ordered plugins, with the framework's rules.

It holds no policy. Each ``run_*`` method loops over the point's plugins in configured order,
honours Skip, stops at the first rejection and attributes a plugin's failure to it by name
("running "NodeName" filter plugin: ..."), exactly as kube-scheduler's ``frameworkImpl`` does.
Plugins may be in-process objects or adapters for remote plugin hosts; the runtime cannot tell. It
knows a plugin by the points it declares and by the hooks of :mod:`framework.hooks` it declares (work
started ahead of a plugin's turn), whoever implements them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from pluginhost.model import Pod
from pluginhost.placement import PlacementFeasiblePlugin
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    POINT_CLASSES,
    TRANSFORMER_CLASSES,
    BindPlugin,
    CycleState,
    FilterPlugin,
    Handle,
    NodeBatch,
    NodeToStatus,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    runs_at,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view

from .filterwindow import WindowedFilter
from .hooks import BeforeCycle, Upcoming
from .outcomes import (
    Diagnosis,
    FilterOutcome,
    IntArray,
    ObservedCall,
    PluginObserver,
    PluginScores,
    Raised,
    ScoreOutcome,
    error_text,
    failed_status,
    invalid_score_status,
    out_of_range,
    plugin_failure,
    raised_status,
    status_of,
)
from .transformers import end_view, transform_nodes, transform_pod
from .waiting import MAX_PERMIT_TIMEOUT, PodInPreBind, WaitingPods

__all__ = ["Framework", "ObservedCall", "PluginObserver"]

log = logging.getLogger("outrigger.runtime")

# CycleState key of the PreBind plugins whose PreBindPreFlight answered Skip for the cycle's pod.
SKIP_PRE_BIND_KEY = "outrigger.io/skip-pre-bind"

T = TypeVar("T")


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
        placement_score_weights: Mapping[str, int] | None = None,
    ) -> None:
        def typed(point: str) -> list[Any]:
            cls = POINT_CLASSES[point]  # from the points table (pluginhost.plugin.POINTS)
            out = list(plugins.get(point, ()))
            for p in out:
                if not isinstance(p, cls):
                    raise TypeError(f"plugin {p.name!r} does not extend {point}")
            return out

        self.profile = profile
        self.canary: Any = None  # this profile's canary variant (framework.canary.Canary), if any
        self.pre_enqueue_plugins: list[PreEnqueuePlugin] = typed("preEnqueue")
        queue_sort: list[QueueSortPlugin] = typed("queueSort")
        self.pre_filter_plugins: list[PreFilterPlugin] = typed("preFilter")
        self.filter_plugins: list[FilterPlugin] = typed("filter")
        self.post_filter_plugins: list[PostFilterPlugin] = typed("postFilter")
        self.pre_score_plugins: list[PreScorePlugin] = typed("preScore")
        self.score_plugins: list[ScorePlugin] = typed("score")
        self.reserve_plugins: list[ReservePlugin] = typed("reserve")
        self.permit_plugins: list[PermitPlugin] = typed("permit")
        self.pre_bind_plugins: list[PreBindPlugin] = typed("preBind")
        self.bind_plugins: list[BindPlugin] = typed("bind")
        self.post_bind_plugins: list[PostBindPlugin] = typed("postBind")
        # Transformers run before their point's plugins, in the point's order; a plugin that only
        # transforms is not called as a plugin of the point.
        def transformers(point: str, of: list[Any]) -> list[Any]:
            return [p for p in of if isinstance(p, TRANSFORMER_CLASSES[point][0])]

        self.pre_filter_transformers = transformers("preFilter", self.pre_filter_plugins)
        self.filter_transformers = transformers("filter", self.filter_plugins)
        self.score_transformers = transformers("score", self.score_plugins)
        self.post_filter_transformers = transformers("postFilter", self.post_filter_plugins)
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
        self.observer: PluginObserver | None = None  # set by framework.observe.instrument when traced or measured
        self.plugins: dict[str, Plugin] = {}
        for point_plugins in plugins.values():
            for p in point_plugins:
                self.plugins[p.name] = p
        self._pod_group_points(plugins, placement_score_weights or {})

    def _pod_group_points(self, plugins: Mapping[str, Sequence[Plugin]], weights: Mapping[str, int]) -> None:
        """The PodGroup cycle's points (framework.runtime_podgroup runs them), and each PlacementScore
        plugin's weight (1 when unset)."""
        self.pod_group_plugins: dict[str, list[Plugin]] = {
            point: list(plugins.get(point, ()))
            for point in ("placementGenerate", "placementScore", "podGroupPostFilter")
        }
        self.placement_score_weights = {
            p.name: int(weights.get(p.name, 1)) or 1 for p in self.pod_group_plugins["placementScore"]
        }
        #: Every plugin of the profile that implements PlacementFeasible (upstream wires GangScheduling in
        #: whenever GenericWorkload is on; no configuration names the point): found once, as a group
        #: cycle asks the point before and after each of its pods in each placement.
        self.placement_feasible_plugins: list[PlacementFeasiblePlugin] = [
            p for p in self.plugins.values() if isinstance(p, PlacementFeasiblePlugin)
        ]

    async def _observed(self, point: str, pl: Plugin, call: Awaitable[T], nodes: int = -1, *,
                        error_point: str = "", tell: bool = True) -> T | Raised:
        """Await ``call``, a call of ``pl`` at ``point``, under the observer: its result, or
        :class:`Raised` when it raised (the Error status names the plugin and ``error_point`` or
        ``point``). ``tell``: whether the observer is told what the call returned."""
        obs = self.observer
        observed = obs.start(point, pl, nodes) if obs is not None else None
        try:
            result = await call
        except BaseException as exc:  # a cancelled call (a preempted PreBind) is told too, then goes on
            if observed is not None:
                observed.failed(exc)
            if not isinstance(exc, Exception):
                raise
            return Raised(raised_status(error_point or point, pl, exc), exc)
        if observed is not None:
            observed.done(status_of(result) if tell else None)
        return result

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
                return raised_status("PreEnqueue", pl, exc)
            if not status.ok:
                if status.is_rejected or status.code is Code.Pending:
                    return status.with_plugin(pl.name)
                return failed_status("PreEnqueue", pl, status)
        return SUCCESS

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort_plugin.less(a, b)

    # ---- transformers (cycle-scoped views) ----------------------------------------------------

    async def run_pre_filter_transformers(self, state: CycleState, pod: Pod) -> tuple[Pod, Status]:
        """The pod as this cycle's PreFilter, Filter, PostFilter and Score plugins see it
        (:func:`framework.transformers.transform_pod`)."""
        return await transform_pod(self.pre_filter_transformers, state, pod)

    async def run_node_transformers(
        self, point: str, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntArray | None = None
    ) -> tuple[Snapshot, Status]:
        """The snapshot as the plugins of ``point`` ("filter", "score" or "postFilter") see it
        (:func:`framework.transformers.transform_nodes`)."""
        by_point: dict[str, list[Any]] = {
            "filter": self.filter_transformers,
            "score": self.score_transformers,
            "postFilter": self.post_filter_transformers,
        }
        return await transform_nodes(point, by_point[point], state, pod, snapshot, rows)

    def end_view(self, state: CycleState, snapshot: Snapshot, view: NodeView | None) -> None:
        """Put ``state`` back on ``snapshot`` and ``view`` (what it carried before a phase's view)."""
        end_view(state, snapshot, view)

    # ---- PreFilter / Filter / PostFilter -------------------------------------------------------

    async def run_pre_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PreFilterResult | None, Status]:
        """PreFilter plugins in order. Skip marks the plugin's Filter as skipped; a result narrows
        the node set; UnschedulableAndUnresolvable stops at once, Unschedulable after all ran."""
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        returned = SUCCESS
        for pl in self.pre_filter_plugins:
            got = await self._observed("PreFilter", pl, pl.pre_filter(state, pod))
            if isinstance(got, Raised):
                return None, got.status
            r, status = got
            if status.is_skip:
                state.skip_filter.add(pl.name)
                continue
            if not status.ok:
                status = status.with_plugin(pl.name)
                if status.code is Code.UnschedulableAndUnresolvable:
                    diagnosis.add_plugin_status(status)
                    return None, status
                if status.code is Code.Unschedulable:  # Pending too is an Error here, as in kube-scheduler
                    # Keep going: later PreFilter plugins must still prepare state for preemption.
                    diagnosis.add_plugin_status(status)
                    returned = status
                    continue
                return None, failed_status("PreFilter", pl, status)
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
        windows = WindowedFilter(self._observed, state, pod, snapshot, plugins)
        if not self._filter_finishers:
            return await windows.run(candidates, num_to_find, diagnosis)
        try:
            return await windows.run(candidates, num_to_find, diagnosis)
        finally:
            for pl in self._filter_finishers:
                # Also for plugins skipped by now (an ignored failure skips the rest of the cycle after
                # the plugin took its streams). Releasing per-cycle resources must not fail the cycle.
                try:
                    await pl.filter_finished(state)
                except Exception:
                    log.exception("filter_finished of plugin %r failed", pl.name)

    async def run_filter_with_node_pods(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, row: int, pods: Sequence[Pod]
    ) -> Status:
        """Every Filter plugin on node ``row`` as if it held exactly ``pods`` (preemption's victims
        removed, nominated pods added). In-process plugins read the what-if snapshot; remote ones get
        the same difference as a node view (CycleContext.node_view) to apply to their mirror."""
        from .whatif import node_pods_view

        base = state.get(VIEW_STATE_KEY)
        change = node_pods_view(snapshot, row, pods)
        state.write(VIEW_STATE_KEY, (base if isinstance(base, NodeView) else NodeView()).then(change))
        try:
            return await self.run_filter_on_node(state, pod, apply_view(snapshot, change), row)
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
                return raised_status(point, pl, exc)
            if not status.ok:
                return failed_status(point, pl, status)
        return SUCCESS

    async def run_sign(self, state: CycleState, pod: Pod,
                       signer: Callable[[Pod], Awaitable[bytes | None]]) -> bytes | None:
        """SignPod (kube-scheduler's ``Framework.SignPod``): ``signer``'s signature of ``pod`` in the cycle
        of ``state`` (None: not batched); a method so that instrumentation gives it the Sign point's span."""
        return await signer(pod)

    async def run_post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for pl in self.post_filter_plugins:
            got = await self._observed("PostFilter", pl, pl.post_filter(state, pod, statuses))
            if isinstance(got, Raised):
                return None, got.status
            r, status = got
            if status.ok:
                return r, status
            if status.code is Code.UnschedulableAndUnresolvable:
                return r, status.with_plugin(pl.name)
            if not status.is_rejected:
                # kube-scheduler keeps a PostFilter plugin's error as it is (its message ends the fit
                # error: "... pod affinity terms conflict. not found"), unlike the other points'.
                return None, Status(Code.Error, (error_text(status),), pl.name, status.error)
            if r is not None:  # kube-scheduler keeps any result but a no-op: "" clears the nomination
                result = r
            reasons.extend(status.reasons)
            rejector = rejector or pl.name
        return result, Status(Code.Unschedulable, tuple(reasons), rejector)

    # ---- PreScore / Score ----------------------------------------------------------------------

    async def run_pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        for pl in self.pre_score_plugins:
            status = await self._observed("PreScore", pl, pl.pre_score(state, pod, nodes))
            if isinstance(status, Raised):
                return status.status
            if status.is_skip:
                state.skip_score.add(pl.name)
                continue
            if not status.ok:
                return failed_status("PreScore", pl, status)
        return SUCCESS

    async def run_score(self, state: CycleState, pod: Pod, nodes: NodeBatch, record: bool = False) -> ScoreOutcome:
        """Score, NormalizeScore, the [0, 100] check and weights; totals per node of ``nodes``."""
        n = len(nodes)
        totals = np.zeros(n, dtype=np.int64)
        out = ScoreOutcome(totals)
        for pl in self.score_plugins:
            if pl.name in state.skip_score:
                continue
            got = await self._observed("Score", pl, pl.score(state, pod, nodes))
            if isinstance(got, Raised):
                out.error = got.status
                return out
            raw = np.asarray(got)
            if raw.shape != (n,) or not np.issubdtype(raw.dtype, np.integer):
                out.error = Status.failure(
                    plugin_failure("Score", pl.name, f"returned {raw.shape[0] if raw.ndim else 0} scores for {n} "
                                   "nodes"),
                    plugin=pl.name,
                )
                return out
            # NormalizeScore rewrites in place: give it a copy so the raw scores stay for explain.
            scores = raw.astype(np.int64, copy=isinstance(pl, ScoreExtensions) or raw.dtype != np.int64)
            if isinstance(pl, ScoreExtensions):
                status = await self._observed("NormalizeScore", pl, pl.normalize_score(state, pod, nodes, scores))
                if isinstance(status, Raised):
                    out.error = status.status
                    return out
                if not status.ok:
                    out.error = failed_status("NormalizeScore", pl, status)
                    return out
            if n and out_of_range(scores, MAX_NODE_SCORE):  # MIN_NODE_SCORE is 0
                bad = int(scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)][0])
                out.error = invalid_score_status(pl, bad)
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
        for pl in self.reserve_plugins:
            status = await self._observed("Reserve", pl, pl.reserve(state, pod, node))
            if isinstance(status, Raised):
                return status.status
            if not status.ok:
                if status.is_rejected:
                    return status.with_plugin(pl.name)
                return failed_status("Reserve", pl, status)
        return SUCCESS

    async def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order; failures are logged, never stop it."""
        for pl in reversed(self.reserve_plugins):
            got = await self._observed("Unreserve", pl, pl.unreserve(state, pod, node))
            if isinstance(got, Raised):
                # One line (a dead plugin host fails every Unreserve alike); the traceback at debug level.
                log.error("Unreserve of plugin %r failed for pod %s: %s", pl.name, pod.key, got.exc)
                log.debug("Unreserve of plugin %r failed", pl.name, exc_info=got.exc)

    async def run_permit(self, state: CycleState, pod: Pod, node: str) -> Status:
        """Permit plugins in order. A rejection or an error stops them; when some asked to wait, the pod
        waits (kube-scheduler's AddWaitingPod) and the status is the last waiting plugin's with the
        reason "one or more plugins asked to wait and no plugin rejected pod" appended."""
        waits: dict[str, float] = {}
        waited = SUCCESS
        for pl in self.permit_plugins:
            got = await self._observed("Permit", pl, pl.permit(state, pod, node))
            if isinstance(got, Raised):
                return got.status
            status, timeout = got
            if status.ok:
                continue
            if status.is_rejected:
                return status.with_plugin(pl.name)
            if status.code is Code.Wait:
                waits[pl.name] = min(max(float(timeout), 0.0), MAX_PERMIT_TIMEOUT)
                waited = status
                continue
            return failed_status("Permit", pl, status)
        if waits:
            self.waiting_pods.add(pod, node, waits)
            reasons = (*waited.reasons, "one or more plugins asked to wait and no plugin rejected pod")
            return Status(Code.Wait, reasons, waited.plugin)
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
        """Success if any PreBind plugin has work for this pod, Skip if none has; the plugins that
        answered Skip are not called at PreBind (kube-scheduler's SkipPreBindPlugins)."""
        skip: set[str] = set()
        for pl in self.pre_bind_plugins:
            try:
                status = await pl.pre_bind_pre_flight(state, pod, node)
            except Exception as exc:
                return raised_status("PreBindPreFlight", pl, exc)
            if status.code is Code.Error:
                return failed_status("PreBindPreFlight", pl, status)
            if not status.ok and not status.is_skip:
                return Status.failure(
                    f'PreBindPreFlight {pl.name} returned "{status.code.name}", which is unsupported. It is supposed '
                    "to return Success, Skip, or Error status", plugin=pl.name)
            if status.is_skip:
                skip.add(pl.name)
        state.write(SKIP_PRE_BIND_KEY, frozenset(skip))
        return SUCCESS if len(skip) < len(self.pre_bind_plugins) else Status.skip()

    async def run_pre_bind(
        self, state: CycleState, pod: Pod, node: str, entry: PodInPreBind | None = None
    ) -> Status:
        """PreBind plugins in order (those whose pre-flight said Skip are not called). ``entry``: the
        pod's place among the pods in PreBind; a preemption that cancels it stops the running plugin,
        and the status names the plugin and the cause, as a cancelled context does in kube-scheduler."""
        skip = state.get(SKIP_PRE_BIND_KEY, frozenset())
        for pl in self.pre_bind_plugins:
            if pl.name in skip:
                continue
            call = self._observed("PreBind", pl, pl.pre_bind(state, pod, node))
            status = await (call if entry is None else entry.run(call))
            if isinstance(status, str):
                return Status.failure(plugin_failure("PreBind", pl.name, status), plugin=pl.name)
            if isinstance(status, Raised):
                return status.status
            if status.is_skip:
                continue
            if not status.ok:
                return status.with_plugin(pl.name) if status.is_rejected else failed_status("PreBind", pl, status)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        """The first Bind plugin that does not Skip decides; if all Skip, the last one's reasons fail it."""
        skipped = ""
        for pl in self.bind_plugins:
            status = await self._observed("Bind", pl, pl.bind(state, pod, node))
            if isinstance(status, Raised):
                return status.status
            if status.is_skip:
                skipped = status.message()
                continue
            if not status.ok:
                return status.with_plugin(pl.name) if status.is_rejected else failed_status("Bind", pl, status)
            return status.with_plugin(pl.name)
        return Status.failure(skipped)

    async def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        for pl in self.post_bind_plugins:
            got = await self._observed("PostBind", pl, pl.post_bind(state, pod, node))
            if isinstance(got, Raised):
                log.error("PostBind of plugin %r failed for pod %s", pl.name, pod.key, exc_info=got.exc)
