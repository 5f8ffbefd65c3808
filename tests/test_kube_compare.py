"""The comparison with the real kube-scheduler (tools/compare/, ``make compare``), small.

Each comparison starts its own etcd + kube-apiserver per scheduler (the binaries of ``make k8s``, with
kube-scheduler). On the live clusters: Outrigger puts every pod of a deterministic workload on the node
kube-scheduler put it, every plugin's score on every node equal to kube-scheduler's logged score; the
FailedScheduling messages of a set of pods that fit nowhere are identical, word for word; a throughput
run of both schedulers binds every pod (no timing is asserted). Without a cluster: the log parser, the
summaries and the report, and the command line's bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kube_cluster import built_bin_dir

from tools.compare.dra import DRA_PODS, DraPod, DraReport, Outcome, run_dra
from tools.compare.kubescores import parse_kube_scores
from tools.compare.placement_workloads import placement_workloads
from tools.compare.placements import (
    PlacementReport,
    PluginAgreement,
    PodPlacement,
    ScoreDisagreement,
    run_placements,
)
from tools.compare.reasons import PodReason, ReasonsReport, run_reasons
from tools.compare.report import CompareResults, throughput_summary, to_json, to_markdown
from tools.compare.run import QUICK_DRA, main
from tools.compare.schedulers import KUBE, OUTRIGGER
from tools.compare.throughput import ThroughputRun, run_throughput
from tools.workloads import WORKLOADS, allocated_claim

SCORE_PLUGINS = {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                 "DynamicResources", "NodeResourcesBalancedAllocation", "ImageLocality",
                 "VolumeBinding"}  # VolumeBinding scores since 1.37 (StorageCapacityScoring on)


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    path = built_bin_dir()
    if not (path / "kube-scheduler").exists():
        pytest.fail(f"kube-scheduler is not in {path}: tests/k8s/build.sh builds it")
    return path


# ---- on live clusters --------------------------------------------------------------------------------


@pytest.mark.kube
def test_every_pod_of_a_deterministic_workload_lands_where_kube_scheduler_puts_it(bin_dir: Path,
                                                                                   tmp_path: Path) -> None:
    (workload,) = placement_workloads(quick=True)
    report = run_placements(workload, tmp_path, bin_dir)
    assert report.error == ""
    assert [p.pod for p in report.pods] == [f"default/{p['metadata']['name']}" for p in workload.pods]
    # Deterministic: kube-scheduler's log has one best node for every pod, and Outrigger chose it.
    assert [(p.pod, p.kind, p.outrigger_node) for p in report.pods] == [
        (p.pod, "deterministic", p.kube_node) for p in report.pods]
    assert report.moved == 0
    # Every Score plugin of the default profile had something to compare, and every score agreed.
    assert set(report.plugins) == SCORE_PLUGINS
    assert [(a.plugin, a.equal, a.only_kube, a.only_outrigger) for a in report.plugins.values()] == [
        (a.plugin, a.compared, 0, 0) for a in report.plugins.values()]
    assert all(a.compared > 0 for a in report.plugins.values())
    assert report.score_disagreements == []


@pytest.mark.kube
def test_failed_scheduling_messages_of_both_are_identical(bin_dir: Path, tmp_path: Path) -> None:
    report = run_reasons(tmp_path, bin_dir)
    assert report.error == ""
    assert [(p.pod, p.identical) for p in report.pods] == [(p.pod, True) for p in report.pods]
    by_pod = {p.pod: p for p in report.pods}
    assert len(by_pod) == 13
    # kube-scheduler's own words: since 1.37 DynamicResources' PostFilter adds nothing for a pod without
    # claims ("no new claims to deallocate, " before the preemption part in 1.35), but still ends the fit
    # error with its "not found" when an earlier PreFilter rejected the pod.
    assert by_pod["conflict"].kube == "0/6 nodes are available: pod affinity terms conflict. not found"
    assert by_pod["cpu6-never"].kube == (
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")
    assert by_pod["cpu6-never"].kube_condition == by_pod["cpu6-never"].kube


@pytest.mark.kube
@pytest.mark.parametrize("scheduler", [KUBE, OUTRIGGER])
def test_a_throughput_run_binds_every_measured_pod(bin_dir: Path, tmp_path: Path, scheduler: str) -> None:
    workload = WORKLOADS["SchedulingPodAntiAffinity"].sized(nodes=20, init_pods=5, measure_pods=15)
    run = run_throughput(workload, scheduler, 1, tmp_path, bin_dir, timeout=120)
    assert (run.error, run.workload, run.scheduler, run.pods) == ("", "SchedulingPodAntiAffinity", scheduler, 15)
    assert run.seconds > 0 and run.pods_per_second == pytest.approx(15 / run.seconds)
    # CPU per pod is not asserted: /proc counts in 10 ms ticks, more than 15 pods may take.
    assert run.create_seconds > 0


ALL_CLAIMED = ("0/4 nodes are available: 4 cannot allocate all claims. preemption: 0/4 nodes are available: 4 "
               "Preemption is not helpful for scheduling.")


@pytest.mark.kube
def test_pods_claiming_devices_get_the_same_nodes_devices_and_messages_from_both(bin_dir: Path,
                                                                                  tmp_path: Path) -> None:
    report = run_dra(tmp_path, bin_dir)
    assert report.error == ""
    assert [(p.pod, p.agrees) for p in report.pods] == [(s.name, True) for s in DRA_PODS]
    # Where the devices decide, both chose the same node and the same devices (the allocator takes a
    # slice's free devices in order; a prioritized list's first subrequest that fits).
    fixed = {p.pod: (p.outrigger.node, p.outrigger.devices) for p in report.pods if p.fixed}
    assert fixed == {
        # dra-b's GPUs under a DeviceTaintRule: dra-a's first, then dra-b's for the pods tolerating it.
        "a100-0": ("dra-a", ["dra-a/gpu-0 for gpu"]), "a100-1": ("dra-a", ["dra-a/gpu-1 for gpu"]),
        "a100-2": ("dra-b", ["dra-b/gpu-0 for gpu"]), "a100-3": ("dra-b", ["dra-b/gpu-1 for gpu"]),
        "shared-0": ("dra-c", ["dra-c/gpu-0 for gpu"]), "shared-1": ("dra-c", ["dra-c/gpu-0 for gpu"]),
        "shared-2": ("dra-c", ["dra-c/gpu-0 for gpu"]), "h100-pair": ("dra-c", ["dra-c/gpu-1 for gpu",
                                                                                  "dra-c/gpu-2 for gpu"]),
        "h100-index-3": ("dra-c", ["dra-c/gpu-3 for gpu"]), "first-available": ("dra-c", ["dra-c/gpu-4 for gpu/h100"]),
        "h100-extended": ("dra-c", ["dra-c/gpu-5 for container-0-request-0", "dra-c/gpu-6 for container-0-request-0"])}
    want = {"dra-a": ["dra-a/gpu-0", "dra-a/gpu-1"], "dra-b": ["dra-b/gpu-0", "dra-b/gpu-1"],
            "dra-c": [f"dra-c/gpu-{i}" for i in range(7)]}
    assert report.kube_devices == want and report.outrigger_devices == want
    # Pods that cannot get devices: kube-scheduler's words, as event and condition, on both.
    missing = ("0/4 nodes are available: request gpu: device class no-such-class does not exist. preemption: 0/4 "
               "nodes are available: 4 Preemption is not helpful for scheduling.")
    unbound = {p.pod: (p.kube.event, p.kube.condition) for p in report.pods if not p.kube.node}
    assert unbound == {"a100-full": (ALL_CLAIMED, ALL_CLAIMED), "a100-three": (ALL_CLAIMED, ALL_CLAIMED),
                       "no-such-class": (missing, missing),
                       "first-available-full": (ALL_CLAIMED, ALL_CLAIMED),
                       "h100-extended-full": (ALL_CLAIMED, ALL_CLAIMED)}
    assert set(unbound) == {s.name for s in DRA_PODS if not s.fits}


@pytest.mark.kube
@pytest.mark.parametrize("workload", [w.name for w in QUICK_DRA])
def test_a_dra_throughput_run_of_both_binds_every_measured_pod(bin_dir: Path, tmp_path: Path, workload: str) -> None:
    (sized,) = [w for w in QUICK_DRA if w.name == workload]
    runs = [run_throughput(sized, s, 1, tmp_path / s, bin_dir, timeout=300) for s in (KUBE, OUTRIGGER)]
    assert [(r.error, r.scheduler, r.pods) for r in runs] == [("", KUBE, sized.measure.count),
                                                              ("", OUTRIGGER, sized.measure.count)]
    assert all(r.seconds > 0 for r in runs)


# ---- the DRA workloads' objects ------------------------------------------------------------------------


def test_the_claim_template_workload_allocates_its_initial_claims_round_robin_over_the_nodes() -> None:
    w = WORKLOADS["SchedulingWithResourceClaimTemplate"].sized(nodes=2, init_claims=3, measure_pods=4)
    objects = w.objects(w) if w.objects else []
    assert [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects] == [
        ("DeviceClass", "gpu.example.com", None), ("ResourceSlice", "scheduler-perf-00000-gpus", None),
        ("ResourceSlice", "scheduler-perf-00001-gpus", None), ("ResourceClaimTemplate", "test-claim-template", "test"),
        ("ResourceClaim", "test-claim-0", "init"), ("ResourceClaim", "test-claim-1", "init"),
        ("ResourceClaim", "test-claim-2", "init")]
    assert [len(o["spec"]["devices"]) for o in objects[1:3]] == [10, 10]
    assert objects[-1]["status"] == allocated_claim("x", "init", "scheduler-perf-00000", "gpu-1")["status"]
    assert objects[-1]["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "scheduler-perf-00000", "device": "gpu-1"}]
    assert w.controllers == ("resourceclaim-controller",)
    assert w.describe() == "2 nodes, 3 allocated claims, 0 initial pods, 4 measured pods"
    pod = w.measure.manifests("default-scheduler")[0]
    assert (pod["metadata"]["name"], pod["spec"]["resourceClaims"]) == (
        "test-dra-0", [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}])


def test_the_shared_claim_workload_gives_five_pods_each_claim() -> None:
    w = WORKLOADS["SchedulingWithResourceClaim"].sized(nodes=3, init_pods=6, measure_pods=10)
    objects = w.objects(w) if w.objects else []
    claims = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "ResourceClaim"]
    assert claims == [("init", "test-claim-0"), ("init", "test-claim-1"), ("test", "test-claim-0"),
                      ("test", "test-claim-1")]
    assert [len(o["spec"]["devices"]) for o in objects if o["kind"] == "ResourceSlice"] == [2, 2, 2]
    assert not any("status" in o for o in objects)
    names = [p["spec"]["resourceClaims"][0]["resourceClaimName"] for p in w.measure.manifests("")]
    assert names == ["test-claim-0"] * 5 + ["test-claim-1"] * 5


def test_the_report_shows_each_devices_outcome_and_the_dra_targets() -> None:
    bound = Outcome("dra-c", ["dra-c/gpu-0 for gpu"])
    dra = DraReport([DraPod("shared-0", True, bound, bound),
                     DraPod("a100-0", False, Outcome("dra-a", ["dra-a/gpu-0 for gpu"]),
                            Outcome("dra-b", ["dra-b/gpu-0 for gpu"])),
                     DraPod("full", False, Outcome(event="no", condition="no"), Outcome(event="yes", condition="no"))],
                    {"dra-c": ["dra-c/gpu-0"]}, {"dra-c": ["dra-c/gpu-0"]})
    runs = [run_of("SchedulingWithResourceClaimTemplate", KUBE, 1, 70),
            run_of("SchedulingWithResourceClaimTemplate", OUTRIGGER, 1, 60)]
    doc = json.loads(json.dumps(to_json(CompareResults(runs, dra=dra), "abc")))
    assert (doc["dra"]["agree"], doc["dra"]["pods"], doc["dra"]["all_agree"]) == (2, 3, False)
    text = to_markdown(doc)
    assert "Devices (DRA, pods created one at a time): 2/3 pods agree; devices allocated per node equal." in text
    assert "| shared-0 | yes | yes | dra-c: dra-c/gpu-0 for gpu |  |" in text
    assert "| a100-0 | no | yes | dra-a: dra-a/gpu-0 for gpu | dra-b: dra-b/gpu-0 for gpu |" in text
    assert "| full | no | no | unschedulable: no | unschedulable: yes |" in text
    assert ("| SchedulingWithResourceClaimTemplate |  | 1 | 70 | 60 | 0.86 (0.86) | ≥ 1.0x, ≥ 56 pods/s: not met |"
            in text)


# ---- kube-scheduler's log --------------------------------------------------------------------------------


def scored(pod: str, plugin: str, node: str, score: int) -> str:
    return (f'I1125 09:17:54.076559   30769 schedule_one.go:830] "Plugin scored node for pod" pod="{pod}" '
            f'plugin="{plugin}" node="{node}" score={score}')


def total(pod: str, node: str, score: int) -> str:
    return (f'I1125 09:17:54.076600   30769 schedule_one.go:898] "Calculated node\'s final score for pod" '
            f'pod="{pod}" node="{node}" score={score}')


LOG_CASES = [
    pytest.param([scored("ns/a", "Fit", "n1", 80), scored("ns/a", "Fit", "n2", 70), total("ns/a", "n1", 80),
                  total("ns/a", "n2", 70)],
                 {"ns/a": ({"n1": {"Fit": 80}, "n2": {"Fit": 70}}, {"n1": 80, "n2": 70}, {"n1"})}, id="one-best"),
    pytest.param([scored("ns/a", "Fit", "n1", 50), scored("ns/a", "Taint", "n1", 300), scored("ns/a", "Fit", "n2", 50),
                  scored("ns/a", "Taint", "n2", 300), total("ns/a", "n1", 350), total("ns/a", "n2", 350)],
                 {"ns/a": ({"n1": {"Fit": 50, "Taint": 300}, "n2": {"Fit": 50, "Taint": 300}},
                           {"n1": 350, "n2": 350}, {"n1", "n2"})}, id="tie"),
    pytest.param([scored("ns/a", "Fit", "n1", 10), total("ns/a", "n1", 10), "I1125 unrelated line",
                  scored("ns/a", "Fit", "n1", 20), scored("ns/a", "Fit", "n2", 30), total("ns/a", "n1", 20),
                  total("ns/a", "n2", 30)],
                 {"ns/a": ({"n1": {"Fit": 20}, "n2": {"Fit": 30}}, {"n1": 20, "n2": 30}, {"n2"})},
                 id="a-second-attempt-replaces-the-first"),
    pytest.param([scored("ns/a", "Fit", "n1", 1), scored("ns/b", "Fit", "n1", 2), total("ns/a", "n1", 1),
                  total("ns/b", "n1", 2)],
                 {"ns/a": ({"n1": {"Fit": 1}}, {"n1": 1}, {"n1"}), "ns/b": ({"n1": {"Fit": 2}}, {"n1": 2}, {"n1"})},
                 id="pods-apart"),
    pytest.param(["I1125 nothing scored"], {}, id="nothing"),
]


@pytest.mark.parametrize(("lines", "want"), LOG_CASES)
def test_kube_scheduler_scores_are_read_from_its_log(lines: list[str], want: dict[str, Any]) -> None:
    got = parse_kube_scores("\n".join(lines))
    assert {pod: (s.plugins, s.totals, s.best()) for pod, s in got.items()} == want


# ---- summaries and the report ----------------------------------------------------------------------------


def run_of(workload: str, scheduler: str, round_: int, pps: float, error: str = "") -> ThroughputRun:
    return ThroughputRun(workload, scheduler, round_, 100, seconds=100 / pps if pps else 0, pods_per_second=pps,
                         scheduler_cpu_ms_per_pod=1.0 if scheduler == KUBE else 2.0, error=error)


RUNS = [
    run_of("SchedulingBasic", KUBE, 1, 200), run_of("SchedulingBasic", OUTRIGGER, 1, 300),
    run_of("SchedulingBasic", OUTRIGGER, 2, 150), run_of("SchedulingBasic", KUBE, 2, 200),
    run_of("SchedulingBasic", KUBE, 3, 100), run_of("SchedulingBasic", OUTRIGGER, 3, 120),
    run_of("TopologySpreading", KUBE, 1, 100), run_of("TopologySpreading", OUTRIGGER, 1, 0, "TimeoutError: late"),
]


def test_throughput_summary_takes_medians_and_the_median_per_round_ratio() -> None:
    basic, spread = throughput_summary(RUNS)
    assert (basic["workload"], basic["rounds"], basic["ratios"], basic["ratio"]) == (
        "SchedulingBasic", 3, [1.5, 0.75, 1.2], 1.2)
    assert (basic[KUBE]["pods_per_second"], basic[OUTRIGGER]["pods_per_second"]) == (200.0, 150.0)
    assert (basic[KUBE]["runs"], basic[OUTRIGGER]["runs"]) == ([200.0, 200.0, 100.0], [300.0, 150.0, 120.0])
    assert (basic["target_ratio"], basic["ratio_met"], basic["target_pods_per_second"],
            basic["pods_per_second_met"]) == (1.0, True, 680.0, False)
    assert (basic[KUBE]["cpu_ms_per_pod"], basic[OUTRIGGER]["cpu_ms_per_pod"]) == (1.0, 2.0)
    # A failed run is reported and leaves no ratio: the target is not met.
    assert (spread["rounds"], spread["ratios"], spread["ratio_met"], spread["target_ratio"], spread["errors"]) == (
        1, [], False, 0.8, ["outrigger round 1: TimeoutError: late"])


def test_the_report_lists_every_disagreement_in_both_forms() -> None:
    placements = PlacementReport("Mixed", "12 nodes", True, pods=[
        PodPlacement("default/a", "n1", "n1", ["n1"], "deterministic", True, 500, 500, 500),
        PodPlacement("default/b", "n2", "n3", ["n1", "n2"], "tie", False, 400, 400, 390),
    ], moved=1, score_disagreements=[ScoreDisagreement("default/b", "n3", "NodeResourcesFit", 90, 80)])
    placements.plugins["NodeResourcesFit"] = PluginAgreement("NodeResourcesFit", 4, 3, 0, 0)
    reasons = ReasonsReport([PodReason("p", "0/1 nodes are available: x.", "0/1 nodes are available: y.", "c", "c"),
                             PodReason("q", "same", "same", "m", "m")])
    results = CompareResults(RUNS[:2], [placements], reasons, {"SchedulingBasic": "5 nodes"}, 12.0)
    doc = json.loads(json.dumps(to_json(results, "abc1234")))
    assert (doc["commit"], doc["seconds"], doc["reasons"]["identical"], doc["reasons"]["pods"]) == ("abc1234", 12.0,
                                                                                                  1, 2)
    assert doc["placements"]["summary"][0] == {
        "workload": "Mixed", "description": "12 nodes", "deterministic_workload": True, "pods": 2, "one_best_node": 1,
        "same_node": 1, "tied": 1, "within_best": 0, "single_feasible_node": 0, "single_same": 0, "moved": 1,
        "all_agree": False, "target_met": False, "score_disagreements": 1, "error": ""}
    assert doc["placements"]["plugins"] == [
        {"plugin": "NodeResourcesFit", "compared": 4, "equal": 3, "only_kube": 0, "only_outrigger": 0}]
    text = to_markdown(doc)
    assert "| Mixed | default/b | n2 (n1, n2) | n3 | 400 / 400 / 390 |" in text
    assert "| Mixed | default/b | n3 | NodeResourcesFit | 90 | 80 |" in text
    assert "| p | no | 0/1 nodes are available: x.<br>Outrigger: 0/1 nodes are available: y. |" in text
    assert "| q | yes | same |" in text
    assert "FailedScheduling messages: 1/2 identical." in text
    assert "| SchedulingBasic | 5 nodes | 1 | 200 | 300 | 1.50 (1.50) | ≥ 1.0x, ≥ 680 pods/s: not met |" in text


# ---- the command line ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        pytest.param(["--rounds", "0"], "--rounds must be at least 1, got 0", id="rounds"),
        pytest.param(["--workloads", "SchedulingBasic,Nope"],
                     "unknown workload(s) Nope (known: SchedulingBasic, SchedulingPodAntiAffinity, "
                     "SchedulingPodAffinity, TopologySpreading, SchedulingWithResourceClaimTemplate, "
                     "SchedulingWithResourceClaim)", id="workload"),
    ],
)
def test_bad_arguments_get_one_line_and_run_nothing(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                    error: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert (exit_.value.code, err.splitlines()[-1]) == (2, f"python -m tools.compare: error: {error}")
