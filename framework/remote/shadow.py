"""Shadow plugins: a remote plugin called on live scheduling cycles whose verdicts never change a
placement, compared with what each cycle decided (docs/plugins-live.md).

An endpoint with a ``shadow`` block (:class:`~framework.remote.config.ShadowConfig`) has its plugins
(or those listed) left out of the registry. Once the scheduler runs, :class:`Shadows` builds one
adapter per shadow plugin and profile (configured with the args the profile gives a plugin of that
name) and observes every scheduling cycle (``Scheduler.cycle_observers``): after the cycle decided,
the cycle's pod, snapshot, chosen node and Score run are put in the plugin's bounded queue (full:
the cycle is dropped and counted) and a background task evaluates them, one at a time, each within
the plugin's budget:

- the shadow's PreFilter (if it has one) and Filter over every node of the cycle's snapshot: a chosen
  node it rejects is a *rejected placement*; a pod that fit nowhere only because the live plugin of
  the shadow's name rejected nodes, and that the shadow lets onto one of them, *would have been placed*;
- its PreScore, Score and NormalizeScore (if it has them) over the nodes the cycle scored (and the
  shadow's Filter passed): its scores replace those of the live plugin of its name, or are added with
  the configured weight when the profile scores no such plugin; a chosen node outside the top-score
  set is a *score change*.

Every count, the latency of each evaluation and a bounded ring of examples (pod, live node, the
shadow's node, both totals) make the report (:meth:`Shadows.report`): the Prometheus metrics
``outrigger_shadow_*``, ``GetShadowReport`` and ``outrigger shadow-report``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pluginhost.plugin import (
    CycleState,
    FilterPlugin,
    NodeBatch,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.status import Code

from .adapter import RemotePlugin
from .classes import adapter_class
from .config import ShadowConfig
from .endpoint import Endpoint

#: What a host answers when a call names a generation its mirror does not hold (pluginhost.mirror).
_NOT_HELD = "is no longer held by the mirror"

__all__ = ["ShadowPlugin", "ShadowStats", "Shadows", "Verdict"]

log = logging.getLogger("outrigger.remote")

_LATENCIES = 4096  # evaluation latencies kept per plugin (for the report's percentiles)


@dataclass
class ShadowStats:
    """What one shadow plugin's evaluations found (counts since start)."""

    observed: int = 0  # live cycles offered to it
    dropped: int = 0  # not evaluated: its queue was full
    evaluated: int = 0  # evaluations that finished
    errors: int = 0  # evaluations that failed (a call failed or the plugin answered an error)
    timeouts: int = 0  # evaluations abandoned at the budget
    changed: int = 0  # the chosen node would have changed (rejected, or outside the top-score set)
    rejected: int = 0  # the shadow's Filter rejects the node the cycle chose
    placed: int = 0  # an unschedulable pod the shadow would have let onto a node
    score_changed: int = 0  # with the shadow's scores the chosen node is outside the top-score set
    latencies: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=_LATENCIES))
    examples: collections.deque[dict[str, Any]] = field(default_factory=lambda: collections.deque(maxlen=20))


@dataclass
class Verdict:
    """One evaluation: the node the shadow would choose ("" none, None: no opinion) and why it differs."""

    node: str | None = None
    kind: str = ""  # "", "rejected", "placed" or "score"
    live_score: int | None = None  # the live total of the chosen node
    shadow_score: int | None = None  # the shadow's total of its node
    shadow_score_of_live: int | None = None  # the shadow's total of the chosen node


class ShadowPlugin:
    """One shadow plugin: its adapters (one per profile), its queue, its worker and its counts."""

    def __init__(self, name: str, endpoint: Endpoint, config: ShadowConfig) -> None:
        self.name = name
        self.endpoint = endpoint
        self.config = config
        self.adapters: dict[str, RemotePlugin] = {}
        self.stats = ShadowStats(examples=collections.deque(maxlen=config.examples))
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=config.queue)
        self.worker: asyncio.Task[None] | None = None
        self.busy = False  # an evaluation is under way
        self.abandoned: set[asyncio.Task[Verdict]] = set()  # evaluations over the budget, cancelled
        #: The cache's snapshot now (for hosts that follow the mirror); None: the cycle's is used.
        self.current: Callable[[], Any] | None = None
        #: Per profile: the weight of its Score when no live plugin of its name scores.
        self.weights: dict[str, int] = {}

    def offer(self, outcome: Any) -> None:
        self.stats.observed += 1
        if outcome.profile not in self.adapters:
            return
        try:
            self.queue.put_nowait(outcome)
        except asyncio.QueueFull:
            self.stats.dropped += 1

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            outcome = await self.queue.get()
            self.busy = True
            started = time.perf_counter()
            task = loop.create_task(self._evaluate(outcome))
            try:
                done, _ = await asyncio.wait({task}, timeout=self.config.budget)
            except asyncio.CancelledError:
                task.cancel()
                raise
            self.stats.latencies.append(time.perf_counter() - started)
            self.busy = self.queue.qsize() > 0
            if not done:
                # Over the budget: abandoned, not awaited (the worker goes on to the next cycle; the
                # calls under way end with their own deadlines).
                self.stats.timeouts += 1
                task.cancel()
                self.abandoned.add(task)
                task.add_done_callback(_forget(self.abandoned))
                continue
            exc = task.exception()
            if exc is not None:
                self.stats.errors += 1
                log.info("shadow plugin %r on pod %s: %s", self.name, outcome.pod.key, exc)
                continue
            self.stats.evaluated += 1
            self._count(outcome, task.result())

    def _count(self, outcome: Any, verdict: Verdict) -> None:
        st = self.stats
        if not verdict.kind:
            return
        st.changed += 1
        if verdict.kind == "rejected":
            st.rejected += 1
        elif verdict.kind == "placed":
            st.placed += 1
        else:
            st.score_changed += 1
        st.examples.append({
            "pod": outcome.pod.key, "profile": outcome.profile, "kind": verdict.kind,
            "liveNode": outcome.host or "", "shadowNode": verdict.node or "",
            "liveScore": verdict.live_score, "shadowScore": verdict.shadow_score,
            "shadowScoreOfLiveNode": verdict.shadow_score_of_live,
        })

    async def _evaluate(self, outcome: Any) -> Verdict:
        """:meth:`evaluate`, once more on the cache as it is then when the host's mirror holds no longer (or
        never held) the generation the first try read: a host whose mirror stream began after that cycle
        starts from a full copy of a later generation."""
        try:
            return await self.evaluate(outcome)
        except Exception as exc:
            adapter = self.adapters[outcome.profile]
            if not (adapter.follows_mirror and self.current is not None and _NOT_HELD in str(exc)):
                raise
            log.info("shadow plugin %r on pod %s: %s; evaluated again on the cache as it is now", self.name,
                     outcome.pod.key, exc)
            return await self.evaluate(outcome)

    async def evaluate(self, outcome: Any) -> Verdict:
        """The shadow's verdict on one decided cycle (see the module docstring)."""
        adapter = self.adapters[outcome.profile]
        snapshot = outcome.snapshot
        if adapter.follows_mirror and self.current is not None:
            # Its host keeps only the mirror's recent generations, and the shadow lags behind the
            # cycles: it answers on the cache as it is now (the pod may already be placed there).
            snapshot = self.current()
        state = CycleState(f"shadow:{self.name}:{outcome.cycle_id}", snapshot, outcome.attempt)
        pod = outcome.pod
        passing: set[str] | None = None  # None: the shadow did not filter
        if isinstance(adapter, PreFilterPlugin):
            pre, status = await adapter.pre_filter(state, pod)
            if status.is_rejected:
                passing = set()
            elif not status.ok and not status.is_skip:
                raise RuntimeError(f"PreFilter: {status.message() or status.code.name}")
            elif status.is_skip:
                state.skip_filter.add(self.name)
            elif pre is not None and pre.node_names is not None:
                passing = set(pre.node_names)
        if "Filter" in self.config.points and isinstance(adapter, FilterPlugin) and self.name not in state.skip_filter:
            rows = snapshot.table.order
            if passing is not None:
                rows = np.asarray([r for r in rows.tolist() if snapshot.table.names[r] in passing], dtype=np.int64)
            passing = set()
            if rows.shape[0]:
                try:
                    result = await adapter.filter(state, pod, NodeBatch(snapshot, rows))
                finally:
                    await adapter.filter_finished(state)
                if bool(np.any(result.codes == int(Code.Error))):
                    raise RuntimeError("Filter answered an error")
                passing = {snapshot.table.names[int(r)] for r in rows[result.codes == 0].tolist()}
        if outcome.host is None:
            # Placed only if the live plugin of its name was the one rejecting, and the shadow lets it on.
            if passing and outcome.rejecting == frozenset({self.name}):
                return Verdict(sorted(passing)[0], "placed")
            return Verdict()
        if passing is not None and outcome.host not in passing:
            return Verdict("" if not passing else sorted(passing)[0], "rejected")
        if "Score" in self.config.points and isinstance(adapter, ScorePlugin) and outcome.scored is not None:
            return await self._score(adapter, state, outcome, passing)
        return Verdict(outcome.host)

    async def _score(self, adapter: RemotePlugin, state: CycleState, outcome: Any,
                     passing: set[str] | None) -> Verdict:
        batch, live = outcome.scored
        snapshot = state.snapshot
        assert snapshot is not None
        names = list(batch.names)
        rows = [snapshot.row(n) if passing is None or n in passing else None for n in names]
        keep = np.asarray([r is not None for r in rows], dtype=np.bool_)
        if outcome.host not in {n for n, r in zip(names, rows, strict=True) if r is not None}:
            return Verdict(outcome.host)  # the chosen node is gone from the snapshot it answers on
        nodes = NodeBatch(snapshot, np.asarray([r for r in rows if r is not None], dtype=np.int64))
        totals = live.totals[keep].astype(np.int64)
        names = [n for n, k in zip(names, keep.tolist(), strict=True) if k]
        if isinstance(adapter, PreScorePlugin):
            status = await adapter.pre_score(state, outcome.pod, nodes)
            if status.is_skip:
                return Verdict(outcome.host)
            if not status.ok:
                raise RuntimeError(f"PreScore: {status.message() or status.code.name}")
        scores = np.asarray(await adapter.score(state, outcome.pod, nodes), dtype=np.int64)
        if isinstance(adapter, ScoreExtensions):
            status = await adapter.normalize_score(state, outcome.pod, nodes, scores)
            if not status.ok:
                raise RuntimeError(f"NormalizeScore: {status.message() or status.code.name}")
        if scores.shape[0] and (int(scores.min()) < 0 or int(scores.max()) > 100):
            raise RuntimeError(f"Score returned {int(scores.max())} outside [0, 100]")
        mine = live.by_plugin.get(self.name)
        weight = self.weights.get(outcome.profile, self.config.weight)
        # With a live plugin of its name, the shadow's scores take its place; else they are added.
        combined = totals + scores * weight - (mine.weighted[keep] if mine is not None else 0)
        i_live = names.index(outcome.host)
        best = int(combined.max())
        if int(combined[i_live]) == best:
            return Verdict(outcome.host)
        top = sorted(n for n, v in zip(names, combined.tolist(), strict=True) if v == best)
        return Verdict(top[0], "score", int(totals[i_live]), best, int(combined[i_live]))

    def report(self) -> dict[str, Any]:
        st = self.stats
        lat = sorted(st.latencies)

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else 0.0

        return {
            "plugin": self.name, "endpoint": self.endpoint.name, "profiles": sorted(self.adapters),
            "points": list(self.config.points), "budgetMs": round(self.config.budget * 1000, 3),
            "observed": st.observed, "dropped": st.dropped, "evaluated": st.evaluated, "errors": st.errors,
            "timeouts": st.timeouts, "changed": st.changed, "rejected": st.rejected, "placed": st.placed,
            "scoreChanged": st.score_changed, "latencyMs": {"p50": pct(0.5), "p99": pct(0.99)},
            "examples": list(st.examples),
        }


class Shadows:
    """Every shadow plugin of a framework's remote endpoints (see the module docstring)."""

    def __init__(self, endpoints: list[Endpoint]) -> None:
        self.plugins: list[ShadowPlugin] = []
        for ep in endpoints:
            shadow = ep.config.shadow
            if shadow is None:
                continue
            for name in ep.manifests:
                if shadow.covers(name):
                    self.plugins.append(ShadowPlugin(name, ep, shadow))
        self.scheduler: Any = None

    async def start(self, scheduler: Any, publisher: Any, services: Any) -> None:
        """Build and configure each shadow plugin's adapters (one per profile, with the args the
        profile gives a plugin of its name), observe the scheduler's cycles and start evaluating."""
        self.scheduler = scheduler
        if not self.plugins:
            return
        for sp in self.plugins:
            cls = adapter_class(sp.endpoint.manifests[sp.name])
            sp.current = scheduler.cache.snapshot
            for profile in scheduler.config.profiles:
                adapter = cls(sp.endpoint, dict(profile.plugin_args.get(sp.name, {})), scheduler.handle)
                adapter.profile = profile.scheduler_name
                adapter.shadow = True
                adapter.publisher, adapter.services = publisher, services
                adapter.scores_enabled = "Score" in sp.config.points and "score" in adapter.points
                sp.adapters[profile.scheduler_name] = adapter
                sp.weights[profile.scheduler_name] = profile.score_weights.get(sp.name, sp.config.weight)
            await sp.endpoint.configure_all()
            sp.worker = asyncio.get_running_loop().create_task(sp.run())
        scheduler.cycle_observers.append(self.observe)
        scheduler.shadow_report = self.report
        log.info("shadow plugins: %s", ", ".join(f"{sp.name} ({sp.endpoint.name})" for sp in self.plugins))

    def observe(self, outcome: Any) -> None:
        for sp in self.plugins:
            sp.offer(outcome)

    async def idle(self, timeout: float) -> None:
        """Wait (bounded) until every queued cycle is evaluated (tests, benchmarks)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(not sp.queue.empty() or sp.busy for sp in self.plugins):
            if loop.time() > deadline:
                raise TimeoutError(f"shadow evaluations still queued after {timeout}s")
            await asyncio.sleep(0.01)

    def report(self) -> list[dict[str, Any]]:
        return [sp.report() for sp in self.plugins]

    async def close(self) -> None:
        if self.scheduler is not None and self.observe in self.scheduler.cycle_observers:
            self.scheduler.cycle_observers.remove(self.observe)
        for sp in self.plugins:
            tasks = [t for t in (sp.worker, *sp.abandoned) if t is not None]
            for task in tasks:
                task.cancel()
            if tasks:  # bounded: a call that does not heed cancellation must not hold the shutdown
                await asyncio.wait(tasks, timeout=2.0)


def _forget(tasks: set[asyncio.Task[Verdict]]) -> Callable[[asyncio.Task[Verdict]], None]:
    def done(task: asyncio.Task[Verdict]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned evaluation's failure is not reported again
    return done
