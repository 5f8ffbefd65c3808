"""The console's buffers stay bounded whatever the cluster size, and nothing is recorded while nobody
looks (framework/console: attempts.py, spans.py, core.py; docs/console.md, "Memory")."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from opentelemetry.trace import SpanContext

from framework.console.attempts import GROUP_NODES, TOP_NODES, Attempt, AttemptLog, filter_groups, top_scores
from framework.console.core import Console
from framework.console.spans import SpanRing, WatchSampler
from framework.outcomes import PluginScores, ScoreOutcome
from pluginhost.status import Code, Status


def test_five_thousand_rejected_nodes_are_a_few_groups_of_counts() -> None:
    fit = Status(Code.Unschedulable, ("Insufficient cpu",), plugin="NodeResourcesFit")
    taint = Status(Code.UnschedulableAndUnresolvable, ("node(s) had untolerated taint {a: b}",),
                   plugin="TaintToleration")
    statuses = {f"n{i:04d}": fit if i % 5 else taint for i in range(5000)}
    groups = filter_groups(statuses)
    assert [(g["plugin"], g["code"], g["reasons"], g["count"], len(g["nodes"])) for g in groups] == [
        ("NodeResourcesFit", "Unschedulable", ["Insufficient cpu"], 4000, GROUP_NODES),
        ("TaintToleration", "UnschedulableAndUnresolvable", ["node(s) had untolerated taint {a: b}"], 1000,
         GROUP_NODES),
    ]
    assert groups[1]["nodes"][:3] == ["n0000", "n0005", "n0010"]


def test_the_best_nodes_of_five_thousand_are_kept_by_total_then_name() -> None:
    n = 5000
    totals = np.arange(n, dtype=np.int64) % 997  # ties: 996 appears for several rows
    outcome = ScoreOutcome(totals, {"A": PluginScores(totals * 2, totals, totals)})
    names = [f"n{i:04d}" for i in range(n)]
    rows = np.arange(n, dtype=np.int64)
    got = top_scores(names, rows, outcome)
    assert len(got) == TOP_NODES
    assert [(r["node"], r["total"]) for r in got[:6]] == [
        ("n0996", 996), ("n1993", 996), ("n2990", 996), ("n3987", 996), ("n4984", 996), ("n0995", 995)]
    assert got[0]["scores"] == {"A": {"raw": 1992, "normalized": 996, "weighted": 996}}
    assert top_scores(names[:3], rows[:3], ScoreOutcome(totals[:3], {}), top=10) == [
        {"node": "n0002", "total": 2, "scores": {}}, {"node": "n0001", "total": 1, "scores": {}},
        {"node": "n0000", "total": 0, "scores": {}}]


def test_attempt_log_keeps_the_latest_attempts_of_the_latest_pods() -> None:
    log = AttemptLog(max_pods=3, per_pod=2)
    for pod in ("a", "b", "c", "a", "d"):
        for attempt in (1, 2, 3):
            log.add(Attempt(pod, "p", attempt))
    assert len(log) == 3
    assert [a.attempt for a in log.of("a")] == [2, 3]
    assert log.of("b") == []  # the least recently attempted pod went first
    assert [a.attempt for a in log.of("d")] == [2, 3]


class _Span:
    def __init__(self, trace_id: int, span_id: int) -> None:
        self.context = SpanContext(trace_id, span_id, False)


def test_span_ring_keeps_only_while_watching_and_is_bounded() -> None:
    looking = [False]
    ring = SpanRing(lambda: looking[0], max_traces=2, max_spans=3)
    ring.on_end(_Span(1, 1))  # type: ignore[arg-type]
    assert len(ring) == 0
    looking[0] = True
    for trace in (1, 2, 3):
        for span in range(5):
            ring.on_end(_Span(trace, span + 1))  # type: ignore[arg-type]
    assert len(ring) == 2 and ring.dropped == 6  # 2 over the limit in each of the three traces
    assert ring.trace(f"{1:032x}") == [] and ring.trace("not-hex") == []
    sampler = WatchSampler(lambda: looking[0])
    assert sampler.should_sample(None, 1, "SchedulePod").decision.is_sampled()
    looking[0] = False
    assert not sampler.should_sample(None, 1, "SchedulePod").decision.is_sampled()


class _Stats:
    attempts = scheduled = bound = unschedulable = errors = 0
    attempt_seconds: list[float] = []


class _Scheduler:
    stats = _Stats()

    def pending_count(self) -> dict[str, int]:
        return {"active": 1, "backoff": 2, "unschedulable": 3, "gated": 4}


@pytest.mark.parametrize(("streams", "touched", "recorded"), [(0, False, False), (0, True, True), (1, False, True)])
def test_attempts_are_recorded_only_while_someone_looks(streams: int, touched: bool, recorded: bool) -> None:
    async def scenario() -> Any:
        console = Console(_Scheduler())
        if touched:
            console.touch()
        queues = [console.subscribe() for _ in range(streams)]
        got = console.begin("default/p", "default-scheduler", 1)
        first = await asyncio.wait_for(queues[0].get(), 5) if queues else None
        await console.close()
        assert not console.streams and console._ticker is None
        return got, first

    got, first = asyncio.run(scenario())
    assert (got is not None) == recorded
    if first is not None:
        assert first["queues"] == {"active": 1, "backoff": 2, "unschedulable": 3, "gated": 4}
        assert first["p50Ms"] is None and first["podsPerSec"] == 0.0
