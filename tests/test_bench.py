"""The benchmark harness: ``python -m framework.bench --quick`` end to end, and its pieces."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from framework.bench import (
    SCENARIOS,
    BenchTier,
    RunResult,
    RunSpec,
    evaluate_targets,
    format_table,
    node_manifest,
    run_one,
)
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import ClusterTable
from pluginhost.status import Code

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "framework.bench", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(out.read_text())
    assert report["quick"] is True
    assert report["machine"]["nproc"] >= 1
    assert set(report["scenarios"]) == set(SCENARIOS)
    for name, scenario in report["scenarios"].items():
        assert scenario["runs"], name
        for run in scenario["runs"]:
            assert run["error"] == "", run
            assert run["pods_per_second"] > 0, run
            assert run["all_scheduled"] is True, run
            assert run["bound"] == run["measure_pods"], run
            assert run["peak_rss_mib"] > 0, run
            assert run["leaks"] == {}, run
    assert len(report["scenarios"]["scale"]["runs"]) >= 2
    assert "pods/s" in proc.stdout  # the table


def test_scenario_subset_and_unknown(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "framework.bench", "--quick", "--scenarios", "basic", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(out.read_text())["scenarios"]) == ["basic"]
    bad = subprocess.run(
        [sys.executable, "-m", "framework.bench", "--scenarios", "nope", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2
    assert "unknown scenario" in bad.stderr


def test_run_one_in_process() -> None:
    result = asyncio.run(run_one(RunSpec("inprocess-plugin", nodes=30, init_pods=10, measure_pods=40, chunk=7)))
    assert result.all_scheduled
    assert result.bound == 40
    assert result.nodes_scored == 30
    assert result.attempt_p50_ms > 0


def test_bench_tier_filters_and_scores() -> None:
    table = ClusterTable()
    labels = [{"bench.outrigger.dev/tier": "gold"}, {}, {"bench.outrigger.dev/tier": "bronze"},
              {"bench.outrigger.dev/tier": "silver"}]
    for i, lab in enumerate(labels):
        table.upsert_node(node_from_dict(node_manifest(i, lab)))
    snap = table.snapshot()
    pod = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c"}]}})
    plugin = BenchTier()
    batch = NodeBatch(snap, np.arange(4, dtype=np.int64))
    state = CycleState("c", snap)
    res = asyncio.run(plugin.filter(state, pod, batch))
    assert res.codes.tolist() == [0, int(Code.UnschedulableAndUnresolvable), 0, 0]
    assert asyncio.run(plugin.score(state, pod, batch)).tolist() == [100, 0, 0, 50]


def _result(scenario: str, nodes: int, pods_per_second: float, rss: float = 100.0) -> RunResult:
    scored = {500: 230, 1000: 420, 5000: 500, 15000: 750}[nodes]
    return RunResult(scenario, nodes, 0, 10, scored, 10, 0, 0, True, 1.0, pods_per_second, pods_per_second,
                     0.1, 0.2, 0.3, 0.0, rss)


def test_targets() -> None:
    targets = evaluate_targets({
        "basic": [_result("basic", 5000, 700)],
        "scale": [_result("scale", 500, 1000), _result("scale", 5000, 300), _result("scale", 15000, 200, 2000)],
    })
    assert len(targets) == 3
    basic, rss, linear = targets
    assert basic["met"] is True and basic["gap"] == 20
    assert rss["met"] is False
    # 500 nodes: 1000 x 230; 5000: 300 x 500 = 0.65 of it
    assert linear["met"] is False and "5000 nodes: 0.65" in linear["measured"]
    assert "basic" in format_table([_result("basic", 5000, 700)])
