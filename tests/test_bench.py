"""The benchmark harness: ``python -m tools.bench --quick`` end to end, and its pieces."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from kube_cluster import built_bin_dir

import tools.bench.extender as extender_scenarios
from framework.plugins.balancedallocation import NodeResourcesBalancedAllocation, _balanced_score
from framework.plugins.interpodaffinity import InterPodAffinity
from framework.plugins.nodeports import _PortIndex
from framework.plugins.noderesources import NodeResourcesFit, allocatable_and_requested, broken_linear
from framework.plugins.podaffinityindex import PodIndex
from framework.plugins.podcolumns import changed_rows
from pluginhost.manifest import finish_pod, node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code
from tools.bench import apiserver as kube_bench
from tools.bench import otlpcollector
from tools.bench.plugins import BenchTier
from tools.bench.report import evaluate_targets, format_table
from tools.bench.runner import initial_pods, median_run, run_one
from tools.bench.runs import WINDOW_SECONDS, RunResult, RunSpec
from tools.bench.scenarios import SCENARIOS
from tools.bench.servers import ServerProcess
from tools.localcluster import BIN_ENV
from tools.workloads import scheduler_perf_node as node_manifest
from tools.workloads import scheduler_perf_pod

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(out.read_text())
    assert report["quick"] is True
    assert report["repeat"] == 1
    assert report["machine"]["nproc"] >= 1
    assert set(report["scenarios"]) == {name for name, s in SCENARIOS.items() if s.default} == set(SCENARIOS) - {
        "apiserver", "apiserver-traced"}
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
    for name in ("remote-streams", "extender", "extender-names"):  # the processes they start report bytes
        (run,) = report["scenarios"][name]["runs"]
        assert run["metrics"]["bytes_per_pod"] > 0 and run["metrics"]["calls_per_pod"] >= 1, run
    # remote's plugin declares lookahead: its cycles read answers asked for ahead, a few pods per exchange.
    (ahead,) = report["scenarios"]["remote"]["runs"]
    assert ahead["metrics"]["bytes_per_pod"] > 0 and ahead["metrics"]["answered_ahead_per_pod"] >= 0.5, ahead
    assert ahead["metrics"]["calls_per_pod"] < 0.5, ahead
    assert report["scenarios"]["remote-streams"]["runs"][0]["metrics"]["answered_ahead_per_pod"] == 0
    # Node names are much smaller on the wire than v1 Node objects.
    full = report["scenarios"]["extender"]["runs"][0]["metrics"]["bytes_sent_per_pod"]
    names = report["scenarios"]["extender-names"]["runs"][0]["metrics"]["bytes_sent_per_pod"]
    assert names * 3 < full
    # Tracing: every measured pod's context is sampled (a root, its cycles, points and plugin calls).
    (traced,) = report["scenarios"]["remote-traced"]["runs"]
    assert traced["metrics"]["spans_per_pod"] >= 10, traced
    # Each pod's Score batch is split over the replicas: both replicas of replicas-2 were used.
    assert [report["scenarios"][f"replicas-{n}"]["runs"][0]["metrics"]["replicas_used"] for n in (1, 2)] == [1, 2]
    assert "pods/s" in proc.stdout  # the table


@pytest.mark.kube
def test_quick_apiserver_run_goes_through_the_api_server(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--scenarios", "apiserver", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env={**os.environ, BIN_ENV: str(built_bin_dir())},
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(out.read_text())
    (api,) = report["scenarios"]["apiserver"]["runs"]
    assert (api["error"], api["all_scheduled"], api["bound"], api["measure_pods"]) == ("", True, 200, 200), api
    assert api["pods_per_second"] > 0 and api["peak_rss_mib"] > 0
    # Every measured pod seen bound on a watch, the scheduler's client at scheduler_perf's qps/burst, each
    # process's CPU accounted.
    m = api["metrics"]
    assert (m["qps"], m["burst"], m["nproc"]) == (5000, 5000, report["machine"]["nproc"])
    assert m["create_pods_per_second"] > 0 and m["create_to_bound_p99_ms"] >= m["create_to_bound_p50_ms"] > 0
    for process in ("apiserver", "etcd", "framework", "creator", "watcher"):
        assert m[f"cpu_ms_per_pod_{process}"] > 0, (process, m)
    shares = sum(v for k, v in m.items() if k.startswith("cpu_share_"))
    assert 0.95 <= shares <= 1.05, m  # every process, the rest of the machine and idle: the whole capacity
    assert api["cycle_pods_per_second"] > 0 and api["attempt_p99_ms"] >= api["attempt_p50_ms"] > 0


@pytest.mark.kube
def test_quick_traced_apiserver_run_exports_one_context_per_pod_to_the_collector(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--scenarios", "apiserver-traced", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        # A queue that cannot fill: on a loaded machine the export thread may fall behind, and a full queue
        # drops whole traces (by design), which would make the count below depend on the load.
        env={**os.environ, BIN_ENV: str(built_bin_dir()), "OTEL_BSP_MAX_QUEUE_SIZE": "1000000"},
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (api,) = json.loads(out.read_text())["scenarios"]["apiserver-traced"]["runs"]
    assert (api["error"], api["all_scheduled"], api["bound"], api["measure_pods"]) == ("", True, 200, 200), api
    m = api["metrics"]
    # Each measured pod's scheduling context reached the collector process over OTLP/gRPC, once: the pods
    # are scheduled at their first attempt, so contexts exported = pods bound.
    assert (m["contexts_exported"], m["export_queue_full"]) == (api["bound"], 0) == (200, 0), m
    # And each says it ended bound, though the binding's watch event reaches the framework after it ends.
    assert m["contexts_exported_bound"] == 200, m
    # A context is its root, the two cycles, the points and a span per plugin call; sent in batches.
    assert m["spans_per_pod"] >= 10 and m["otlp_bytes_per_pod"] > 0 and m["otlp_requests"] >= 1, m
    assert m["cpu_ms_per_pod_collector"] > 0 and m["cpu_ms_per_pod_framework"] > 0, m


def test_the_collector_counts_spans_and_the_namespaces_scheduling_contexts() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def span(name: str, namespace: str = "", result: str = "") -> Span:
        attrs = [KeyValue(key=k, value=AnyValue(string_value=v))
                 for k, v in (("k8s.namespace.name", namespace), ("outrigger.result", result)) if v]
        return Span(name=name, attributes=attrs)

    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[
        ScopeSpans(spans=[span("SchedulePod", "namespace-2", "bound"), span("SchedulingCycle"), span("Filter")]),
        ScopeSpans(spans=[span("SchedulePod", "namespace-2", "unschedulable"),
                          span("SchedulePod", "namespace-1", "bound"), span("BindingCycle", "namespace-2")]),
    ])])
    data = request.SerializeToString()
    counts = otlpcollector.Counts()
    otlpcollector.count_request(data, "namespace-2", counts)
    otlpcollector.count_request(data, "namespace-2", counts)
    assert counts == otlpcollector.Counts(requests=2, bytes=2 * len(data), spans=12, roots=6, contexts=4, bound=2)


def test_scenario_subset_and_unknown(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--quick", "--scenarios", "basic", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(out.read_text())["scenarios"]) == ["basic"]
    bad = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--scenarios", "nope", "--out", str(out)],
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


@pytest.mark.parametrize(
    ("budget", "want_created"),
    [
        pytest.param(0.0, 40, id="no-budget-all-created"),
        pytest.param(300.0, 40, id="budget-not-reached"),
        pytest.param(1e-9, 7, id="budget-spent-after-the-first-chunk"),
    ],
)
def test_the_measured_window_stops_creating_pods_when_its_budget_is_spent(budget: float, want_created: int) -> None:
    spec = RunSpec("inprocess-plugin", nodes=30, init_pods=10, measure_pods=40, chunk=7, budget=budget)
    result = asyncio.run(run_one(spec))
    # The pods created before the budget ran out are all scheduled and are what the window measured.
    assert (result.measure_pods, result.bound, result.all_scheduled) == (want_created, want_created, True)


@pytest.mark.parametrize(("pids", "before", "after", "pods", "want"), [
    pytest.param([101], {101: 1.5}, {101: 2.0}, 100, 5.0, id="one-host"),
    pytest.param([101, 102], {101: 1.0, 102: 3.0}, {101: 1.25, 102: 3.5}, 250, 3.0, id="replicas-summed"),
    pytest.param([101], {101: 2.0}, {101: 0.0}, 100, 0.0, id="host-gone-before-detach"),
])
def test_remote_scenarios_report_the_plugin_hosts_cpu_per_pod(
    monkeypatch: pytest.MonkeyPatch, pids: list[int], before: dict[int, float], after: dict[int, float],
    pods: int, want: float,
) -> None:
    """The framework's cpu_ms_per_pod leaves the plugin hosts out: their CPU between the window's
    mark and detach is reported beside it (procstat.process_cpu: 0 for a process that is gone)."""
    import tools.bench.remote as remote_bench

    scenario = remote_bench.RemotePluginScenario()
    scenario._host_pids = pids
    current = dict(before)
    monkeypatch.setattr(remote_bench, "process_cpu", lambda pid: current[pid])
    scenario.mark()
    current.update(after)
    asyncio.run(scenario.detach())
    assert scenario.metrics(pods)["host_cpu_ms_per_pod"] == want


@pytest.mark.parametrize(("name", "chunk"), [("basic", 500), ("remote-go-fit", 50), ("extender", 20),
                                             ("extender-names", 20), ("replicas-1", 20), ("remote", 200),
                                             ("remote-traced", 200), ("remote-shadow", 200)])
def test_full_runs_have_the_time_budget_and_the_scenarios_chunk(name: str, chunk: int) -> None:
    specs = [SCENARIOS[name].full(s) for s in SCENARIOS[name].runs(quick=False)]
    assert [(s.budget, s.chunk) for s in specs] == [(WINDOW_SECONDS, chunk)] * len(specs)


@pytest.mark.parametrize(
    ("bound", "want"),
    [
        pytest.param(False, ["", "", "", "", ""], id="scheduled"),
        pytest.param(True, ["scheduler-perf-00000", "scheduler-perf-00001", "scheduler-perf-00002",
                            "scheduler-perf-00000", "scheduler-perf-00001"], id="bound-round-robin"),
    ],
)
def test_initial_pods_are_bound_round_robin_when_the_scenario_asks(bound: bool, want: list[str]) -> None:
    pods = initial_pods(RunSpec("basic", nodes=3, init_pods=5, measure_pods=1), bound)
    assert [(p.namespace, p.name, p.node_name) for p in pods] == [
        ("init", f"pod-00000{i}", node) for i, node in enumerate(want)]


@pytest.mark.parametrize("name", ["basic", "remote", "replicas-1", "replicas-2", "extender", "extender-names"])
def test_only_the_slow_plugin_scenarios_bind_their_initial_pods(name: str) -> None:
    assert SCENARIOS[name].bind_init_pods == name.startswith(("replicas-", "extender"))


def test_run_one_binds_the_initial_pods_without_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SCENARIOS["inprocess-plugin"], "bind_init_pods", True)
    result = asyncio.run(run_one(RunSpec("inprocess-plugin", nodes=30, init_pods=10, measure_pods=40, chunk=7)))
    # The store places the initial pods as they come (no settling wait) and the measured ones still fit.
    assert (result.all_scheduled, result.bound, result.init_pods) == (True, 40, 10)


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
                     0.1, 0.2, 0.3, 0.0, rss, rss / 2)


def test_median_run_keeps_every_sample_and_the_highest_rss() -> None:
    runs = [_result("basic", 5000, 700, 100), _result("basic", 5000, 900, 300), _result("basic", 5000, 800, 200)]
    merged = median_run(runs)
    assert merged.pods_per_second == 800
    assert merged.pods_per_second_samples == [700, 900, 800]
    assert merged.peak_rss_mib == 300
    broken = dataclasses.replace(runs[0], all_scheduled=False)
    assert median_run([runs[1], broken]).all_scheduled is False


def test_targets() -> None:
    targets = evaluate_targets({
        "basic": [_result("basic", 5000, 700)],
        "scale": [_result("scale", 500, 1000), _result("scale", 5000, 300), _result("scale", 15000, 200, 2000)],
    })
    assert len(targets) == 3
    basic, rss, linear = targets
    assert basic["met"] is True and basic["gap"] == 20
    assert rss["met"] is False
    # 500 nodes: 1000 x 230; 5000: 300 x 500 = 0.65 of it; 15000: 200 x 750 = 1.0 of 5000's
    assert linear["met"] is False and "5000: 0.65" in linear["measured"]
    assert "worst pair 500 -> 5000 nodes: 0.65" in linear["measured"]
    fine = evaluate_targets({"scale": [_result("scale", 500, 1000), _result("scale", 1000, 600)]})
    assert fine[0]["met"] is True and fine[0]["gap"] == 0.1  # 600 x 420 / (1000 x 230) = 1.096
    assert "basic" in format_table([_result("basic", 5000, 700)])


def test_ratio_targets() -> None:
    remote = dataclasses.replace(_result("remote", 5000, 2400), metrics={"bytes_per_pod": 5000.0})
    targets = evaluate_targets({
        "basic": [_result("basic", 5000, 3000)],
        "inprocess-plugin": [_result("inprocess-plugin", 5000, 2800)],
        "remote": [remote],
        "extender": [_result("extender", 5000, 200)],
        "extender-names": [_result("extender-names", 5000, 1000)],
    })
    by = {t["target"]: t for t in targets}
    assert by["remote >= 0.6 x basic"]["met"] is True and by["remote >= 0.6 x basic"]["gap"] == 0.2
    assert "5000 bytes on the wire per pod" in by["remote >= 0.6 x basic"]["measured"]
    assert by["remote >= 0.8 x inprocess-plugin (stretch)"]["met"] is True
    full = by["remote >= 10 x extender (full v1 Node objects)"]
    assert full["met"] is True and "remote / extender = 12.00" in full["measured"]
    names = by["remote >= 3 x extender (nodeCacheCapable, node names)"]
    assert names["met"] is False and names["gap"] == -0.6
    # Tracing and replicas compare with their own baselines, in that direction (scenario / baseline).
    more = {t["target"]: t for t in evaluate_targets({
        "remote": [remote], "remote-traced": [_result("remote-traced", 5000, 1800)],
        "replicas-1": [_result("replicas-1", 5000, 100)], "replicas-2": [_result("replicas-2", 5000, 170)],
    })}
    traced = more["tracing on >= 0.85 x tracing off (remote)"]
    assert traced["met"] is False and traced["gap"] == -0.1 and "remote-traced / remote = 0.75" in traced["measured"]
    replicas = more["2 replicas >= 1.6 x 1 replica (CPU-heavy remote Score)"]
    assert replicas["met"] is True and replicas["gap"] == 0.1
    # A scenario that did not run: no target about it.
    assert [t["target"] for t in evaluate_targets({"remote": [remote]})] == []


def test_extender_wire_format_and_plugin() -> None:
    """The extender speaks ExtenderArgs / ExtenderFilterResult / HostPriorityList, and the plugin maps
    its answers to Filter codes and 0..100 scores, with node objects and with node names."""
    import http.client
    import threading

    from tools.bench.httpextender import ExtenderPlugin, ExtenderServer

    server = ExtenderServer(("127.0.0.1", 0))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        labels = [{"bench.outrigger.dev/tier": "gold"}, {}, {"bench.outrigger.dev/tier": "bronze"},
                  {"bench.outrigger.dev/tier": "silver"}]
        manifests = [node_manifest(i, lab) for i, lab in enumerate(labels)]
        table = ClusterTable()
        for m in manifests:
            table.upsert_node(node_from_dict(m))
        snap = table.snapshot()
        pod = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"containers": [{"name": "c"}]}})
        batch = NodeBatch(snap, np.arange(4, dtype=np.int64))
        state = CycleState("c", snap)

        # The raw wire format.
        conn = http.client.HTTPConnection("127.0.0.1", int(server.address.rpartition(":")[2]), timeout=5)
        body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": manifests}}).encode()
        conn.request("POST", "/filter", body)
        result = json.loads(conn.getresponse().read())
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == [
            "scheduler-perf-00000", "scheduler-perf-00002", "scheduler-perf-00003"]
        assert list(result["FailedAndUnresolvableNodes"]) == ["scheduler-perf-00001"]
        assert result["FailedNodes"] == {} and result["Error"] == ""
        conn.request("POST", "/prioritize", body)
        assert [h["Score"] for h in json.loads(conn.getresponse().read())] == [10, 0, 0, 5]
        conn.close()

        for cache_capable in (False, True):
            if cache_capable:
                server.cache_nodes({"items": manifests})
            plugin = ExtenderPlugin({"urlPrefix": f"http://{server.address}", "nodeCacheCapable": cache_capable})
            try:
                res = asyncio.run(plugin.filter(state, pod, batch))
                assert res.codes.tolist() == [0, int(Code.UnschedulableAndUnresolvable), 0, 0]
                assert res.status_at(1).reasons == ("node(s) didn't have label bench.outrigger.dev/tier",)
                # MaxExtenderPriority 10 scaled to MaxNodeScore 100: the in-process BenchTier's scores.
                assert asyncio.run(plugin.score(state, pod, batch)).tolist() == [100, 0, 0, 50]
                assert plugin.calls == 2 and plugin.bytes_sent > 0 and plugin.bytes_received > 0
            finally:
                plugin.close()
        assert server.calls == {"filter": 3, "prioritize": 3}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---- the optimizations the benchmark drove: same answers as the straightforward forms ------------


def test_changed_rows_finds_every_changed_row_and_only_touched_ones() -> None:
    """changed_rows compares row versions: it must report every row whose pods differ, and nothing
    but rows that a mutation touched (re-placing the same pods counts as touched), across pod and
    node changes, including rows moved by a node removal."""
    rng = random.Random(5)
    table = ClusterTable()
    for i in range(40):
        table.upsert_node(Node(name=f"n{i}", allocatable={"cpu": 8000, "pods": 100}))
    placed: list[str] = []
    where: dict[str, str] = {}  # pod uid -> node
    old = table.snapshot()
    for step in range(300):
        touched: set[str] = set()
        for _ in range(rng.randrange(1, 6)):
            op = rng.random()
            names = table.node_names()
            if op < 0.5 or not placed:
                pod = finish_pod(Pod(name=f"p{step}-{len(placed)}", uid=f"u{step}-{len(placed)}"))
                node = rng.choice(names)
                if table.place_pod(pod, node):
                    placed.append(pod.uid)
                    where[pod.uid] = node
                    touched.add(node)
            elif op < 0.8:
                uid = placed.pop(rng.randrange(len(placed)))
                assert table.unplace_pod(uid) is not None
                touched.add(where.pop(uid))
            elif op < 0.9:
                victim = rng.choice(names)
                for orphan in table.remove_node(victim):
                    placed.remove(orphan.uid)
                    del where[orphan.uid]
                touched.update(table.node_names())  # rows may have moved
            else:
                name = f"x{step}"
                table.upsert_node(Node(name=name, allocatable={"cpu": 8000, "pods": 100}))
                touched.add(name)
        new = table.snapshot()
        changed = changed_rows(new, old)
        n = min(len(new), len(old))
        differing = [r for r in range(n) if new.pods[r] != old.pods[r] or new.names[r] != old.names[r]]
        assert set(differing) <= set(changed)
        assert all(r >= n or new.names[r] in touched for r in changed)
        assert changed_rows(new, new) == []
        assert changed_rows(new, None) == list(range(len(new)))
        old = new


def _affinity_pod(name: str, kind: str) -> Pod:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if kind == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == "pref":
        spec["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": term}]}}
    return pod_from_dict({"metadata": {"name": name, "uid": name, "labels": {"app": "x"}}, "spec": spec})


def test_inter_pod_affinity_index_is_incremental_and_exact() -> None:
    rng = random.Random(9)
    table = ClusterTable()
    names = [f"n{i}" for i in range(60)]
    for i, name in enumerate(names):
        table.upsert_node(node_from_dict(node_manifest(i) | {"metadata": {"name": name}}))
    plugin = InterPodAffinity()
    placed: list[str] = []
    for step in range(300):
        action = rng.random()
        if action < 0.6 or not placed:
            p = _affinity_pod(f"p{step}", rng.choice(["none", "anti", "pref"]))
            table.place_pod(p, rng.choice([n for n in names if table.node(n) is not None]))
            placed.append(p.uid)
        elif action < 0.95:
            table.unplace_pod(placed.pop(rng.randrange(len(placed))))
        else:
            gone = rng.choice([n for n in names if table.node(n) is not None])
            placed = [u for u in placed if u not in {p.uid for p in table.remove_node(gone)}]
        snap = table.snapshot()
        incremental = plugin._pod_index(snap)
        fresh = PodIndex(snap, None)
        assert incremental.with_affinity == fresh.with_affinity
        assert incremental.with_required_anti == fresh.with_required_anti


def _port_pod(name: str, port: int) -> Pod:
    return pod_from_dict({"metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port}]}]}})


def test_node_ports_index_follows_snapshots() -> None:
    rng = random.Random(3)
    table = ClusterTable()
    for i in range(40):
        table.upsert_node(node_from_dict(node_manifest(i)))
    index = _PortIndex()
    placed: list[str] = []
    for step in range(200):
        if rng.random() < 0.65 or not placed:
            p = _port_pod(f"p{step}", rng.choice([8080, 8081, 9000]))
            table.place_pod(p, rng.choice(table.node_names()))
            placed.append(p.uid)
        else:
            table.unplace_pod(placed.pop(rng.randrange(len(placed))))
        snap = table.snapshot()
        index.sync(snap)
        fresh = _PortIndex()
        fresh.sync(snap)
        assert index.by_port == fresh.by_port
        assert index.by_ip_port == fresh.by_ip_port


def _random_cluster(rng: random.Random, n: int) -> tuple[Snapshot, list[Pod]]:
    table = ClusterTable()
    for i in range(n):
        alloc = {"pods": str(rng.choice([0, 1, 3, 110])), "cpu": str(rng.choice([0, 1, 2, 4])),
                 "memory": rng.choice(["0", "1Gi", "4Gi", "32Gi"]), "ephemeral-storage": rng.choice(["0", "10Gi"])}
        if rng.random() < 0.3:
            alloc["example.com/gpu"] = str(rng.choice([0, 1, 4]))
        table.upsert_node(node_from_dict({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}}))

    def random_pod(name: str) -> Pod:
        req: dict[str, str] = {}
        if rng.random() < 0.8:
            req["cpu"] = rng.choice(["100m", "500m", "1", "3"])
        if rng.random() < 0.8:
            req["memory"] = rng.choice(["128Mi", "1Gi", "3Gi"])
        if rng.random() < 0.2:
            req["ephemeral-storage"] = "1Gi"
        if rng.random() < 0.2:
            req["example.com/gpu"] = "1"
        c: dict[str, Any] = {"name": "c", "resources": {"requests": req, "limits": dict(req)}}
        return pod_from_dict({"metadata": {"name": name, "uid": name}, "spec": {"containers": [c]}})

    for i in range(n * 2):
        table.place_pod(random_pod(f"placed{i}"), f"n{rng.randrange(n)}")
    return table.snapshot(), [random_pod(f"incoming{i}") for i in range(8)]


def _reference_fit_score(plugin: NodeResourcesFit, requests: tuple[int, ...], snap: Snapshot,
                         rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The per-resource form the plugin had before (kube-scheduler's formulas, one resource at a time)."""
    n = len(rows)
    total = np.zeros(n, dtype=np.int64)
    weight_sum = np.zeros(n, dtype=np.int64)
    for (res, weight), pod_req in zip(plugin.resources, requests, strict=True):
        cols = allocatable_and_requested(snap, rows, res, pod_req, use_requested=False)
        if cols is None:
            continue
        alloc, used = cols
        has = alloc != 0
        safe = np.where(has, alloc, 1)
        if plugin.strategy == "LeastAllocated":
            s = np.where(used > alloc, 0, (alloc - used) * 100 // safe)
        elif plugin.strategy == "MostAllocated":
            s = np.minimum(used, alloc) * 100 // safe
        else:
            s = broken_linear(plugin.shape, np.where(used > alloc, 100, used * 100 // safe))
            has &= s > 0
        total += np.where(has, s * weight, 0)
        weight_sum += np.where(has, weight, 0)
    denom = np.maximum(weight_sum, 1)
    rounded = plugin.strategy == "RequestedToCapacityRatio"
    out = (2 * total + denom) // (2 * denom) if rounded else total // denom
    return np.where(weight_sum > 0, out, 0).astype(np.int64)


def _reference_balanced(resources: tuple[str, ...], requests: tuple[int, ...], snap: Snapshot,
                        rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    # kube-scheduler 1.37: 50 + (50 + balance with the pod - balance without it) / 2, Go's integer division.
    with_pod, without_pod = [], []
    for res, pod_req in zip(resources, requests, strict=True):
        cols = allocatable_and_requested(snap, rows, res, pod_req, use_requested=True)
        if cols is None:
            continue
        alloc, used = cols
        valid = alloc != 0
        denominator = np.where(valid, alloc, 1).astype(np.float64)
        with_pod.append((np.minimum(used.astype(np.float64) / denominator, 1.0), valid))
        without_pod.append((np.minimum((used - pod_req).astype(np.float64) / denominator, 1.0), valid))
    change = 50 + _balanced_score(with_pod, len(rows)) - _balanced_score(without_pod, len(rows))
    return 50 + change // 2


FIT_ARGS: list[dict[str, Any]] = [
    {},
    {"scoringStrategy": {"type": "MostAllocated",
                         "resources": [{"name": "cpu", "weight": 2}, {"name": "example.com/gpu", "weight": 3}]}},
    {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                         "resources": [{"name": "memory", "weight": 1}, {"name": "ephemeral-storage", "weight": 2}],
                         "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                {"utilization": 100, "score": 10}]}}},
]


@pytest.mark.parametrize("args", FIT_ARGS)
def test_fit_filter_and_score_match_the_per_resource_forms(args: dict[str, Any]) -> None:
    rng = random.Random(len(str(args)))
    snap, incoming = _random_cluster(rng, 50)
    plugin = NodeResourcesFit(args)
    rows = np.asarray(rng.sample(range(50), 40), dtype=np.int64)
    batch = NodeBatch(snap, rows)

    async def check(p: Pod) -> None:
        state = CycleState("c", snap)
        await plugin.pre_filter(state, p)
        got = await plugin.filter(state, p, batch)
        want = plugin._explain(state.read("PreFilterNodeResourcesFit"), snap, rows)
        assert [got.status_at(i) for i in range(len(rows))] == [want.status_at(i) for i in range(len(rows))]
        await plugin.pre_score(state, p, batch)
        requests = state.read("PreScoreNodeResourcesFit").requests
        assert (await plugin.score(state, p, batch)).tolist() == _reference_fit_score(plugin, requests, snap,
                                                                                         rows).tolist()

    for p in incoming:
        asyncio.run(check(p))


@pytest.mark.parametrize("resources", [None, ["cpu", "memory", "example.com/gpu"], ["memory"]])
def test_balanced_allocation_matches_the_per_resource_form(resources: list[str] | None) -> None:
    rng = random.Random(11)
    snap, incoming = _random_cluster(rng, 50)
    args = {} if resources is None else {"resources": [{"name": r} for r in resources]}
    plugin = NodeResourcesBalancedAllocation(args)
    rows = np.asarray(rng.sample(range(50), 40), dtype=np.int64)
    batch = NodeBatch(snap, rows)
    for p in incoming:
        requests = plugin._pod_requests(p)
        if not any(requests):
            continue
        got = asyncio.run(plugin.score(CycleState("c", snap), p, batch))
        assert got.tolist() == _reference_balanced(plugin.resources, requests, snap, rows).tolist()


def test_scenario_processes_are_stopped_on_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that does not come up is an error naming it; one that did is stopped when the run
    fails inside the scenario's environment."""
    with pytest.raises(RuntimeError, match="extender did not start"):
        ServerProcess([sys.executable, "-c", "print('nope')"], "extender").start()

    seen: list[ServerProcess] = []

    class Spy(ServerProcess):
        def start(self) -> str:
            seen.append(self)
            return super().start()

    monkeypatch.setattr(extender_scenarios, "ServerProcess", Spy)

    async def main() -> None:
        scenario = SCENARIOS["extender-names"]
        async with scenario.environment(RunSpec("extender-names", nodes=5, init_pods=0, measure_pods=0)):
            assert seen[0].proc is not None and seen[0].proc.poll() is None
            raise ValueError("the run failed")

    with pytest.raises(ValueError, match="the run failed"):
        asyncio.run(main())
    proc = seen[0].proc
    assert proc is not None and proc.poll() is not None  # stopped


# ---- the apiserver scenario's arithmetic (tools/bench/apiserver.py) ----------------------------------------


@pytest.mark.parametrize(("q", "buckets", "want"), [
    (0.5, {0.001: 0, 0.002: 10, 0.004: 20, float("inf"): 20}, 0.002),  # the 10th of 20: top of the second bucket
    (0.75, {0.001: 0, 0.002: 10, 0.004: 20, float("inf"): 20}, 0.003),  # halfway into the third
    (0.99, {0.001: 5, 0.002: 5, float("inf"): 10}, 0.002),  # in +Inf: the highest finite bound
    (0.5, {0.001: 0, float("inf"): 0}, 0.0),  # nothing observed
    (0.5, {}, 0.0),
])
def test_histogram_quantile_interpolates_as_prometheus(q: float, buckets: dict[float, float], want: float) -> None:
    assert kube_bench.histogram_quantile(q, buckets) == pytest.approx(want)


@pytest.mark.parametrize(("created", "bound", "want"), [
    ([1, 2, 3, 4], [1.5, 2.5, 3.5, 4.5], 0),  # each binding came as soon as its pod: the creator was the bound
    ([1, 1, 1, 1], [2, 3, 4, 5], 4),  # all created before the first binding: all four waited
    ([1, 1, 2, 2, 3], [1.5, 2.5, 2.6, 3.5, 3.6], 1),
    ([1, 2], [1.5, 5], 0),  # bindings after the last creation are not counted
    ([1, 2, 3], [2.5, 5, 6], 1),
    ([], [], 0),
])
def test_min_backlog_is_the_fewest_pods_waiting_while_pods_were_still_created(
        created: list[float], bound: list[float], want: int) -> None:
    assert kube_bench._min_backlog(created, bound) == want


def test_cpu_shares_split_the_machine_between_processes_others_and_idle() -> None:
    before = kube_bench.CpuSample({"apiserver": 10.0, "framework": 5.0, "watcher": 1.0}, 100.0, 400.0, 0.0)
    after = kube_bench.CpuSample({"apiserver": 13.0, "framework": 6.0, "watcher": 1.5}, 106.0, 410.0, 5.0)
    shares = before.shares(after, pods=1000, extra={"creator": 0.5})
    assert shares == {
        "cpu_share_apiserver": 0.3, "cpu_ms_per_pod_apiserver": 3.0,
        "cpu_share_framework": 0.1, "cpu_ms_per_pod_framework": 1.0,
        "cpu_share_watcher": 0.05, "cpu_ms_per_pod_watcher": 0.5,
        "cpu_share_creator": 0.05, "cpu_ms_per_pod_creator": 0.5,
        "cpu_share_other": 0.1, "cpu_ms_per_pod_other": 1.0,  # 6 s busy, 5 s of it ours
        "cpu_share_idle": 0.4,
    }


def test_the_apiserver_run_is_scheduler_perfs_schedulingbasic() -> None:
    (full,) = SCENARIOS["apiserver"].runs(quick=False)
    assert (full.nodes, full.init_pods, full.measure_pods) == (5000, 1000, 10000)
    node, pod = node_manifest(7, api=True), scheduler_perf_pod("namespace-2", 3, scheduler=kube_bench.SCHEDULER)
    assert node["metadata"]["name"] == "scheduler-perf-00007"
    assert node["status"] == {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                              "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                              "conditions": [{"status": "True", "type": "Ready"}], "phase": "Running"}
    (container,) = pod["spec"]["containers"]
    assert (pod["metadata"], container["image"], container["ports"]) == (
        {"name": "pod-000003", "namespace": "namespace-2"}, "registry.k8s.io/pause:3.10.1", [{"containerPort": 80}])
    assert container["resources"] == {"limits": {"cpu": "100m", "memory": "500Mi"},
                                      "requests": {"cpu": "100m", "memory": "500Mi"}}
    config = kube_bench.scheduler_config()
    assert "clientConnection: {qps: 5000, burst: 5000}" in config and "leaderElect: false" in config


def test_connections_counts_what_a_process_holds_to_a_port() -> None:
    async def run() -> tuple[int, int, int]:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        counter = kube_bench.Connections(os.getpid(), port)
        opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await asyncio.sleep(0.05)
        first = len(counter.sample())
        counter.seen |= counter.sample()
        opened[0][1].close()
        opened.append(await asyncio.open_connection("127.0.0.1", port))
        await asyncio.sleep(0.05)
        now = counter.sample()
        counter.seen |= now
        for _, writer in opened:
            writer.close()
        server.close()
        return first, len(now), len(counter.seen)

    # Three held; one closed and another opened: still three at once, four seen in all.
    assert asyncio.run(run()) == (3, 3, 4)
