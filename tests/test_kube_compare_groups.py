"""The PodGroup comparison with the real kube-scheduler (tools/compare/groups.py, part of ``make compare``).

On live clusters (one API server per scheduler, GenericWorkload and TopologyAwareWorkloadScheduling on):
scheduler_perf's ``GangScheduling/10Nodes_3Gangs`` gives the same outcome for every gang under both.
Without a cluster: what counts as a difference, the node shapes that make identical nodes ties, and the
report's pods/s ratio.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kube_cluster import built_bin_dir

from tools.compare.group_workloads import Wave, mix, perf_shape, preemption_shape
from tools.compare.groups import GroupOutcome, GroupReport, GroupRun, SameGroup, node_shapes, run_groups
from tools.compare.report import groups_json, to_markdown
from tools.compare.schedulers import KUBE, OUTRIGGER

SCHEDULED = [("PodGroupInitiallyScheduled", "True", "Scheduled", "")]


@pytest.mark.kube
def test_scheduler_perfs_gang_shape_gets_the_same_outcome_for_every_gang(tmp_path: Path) -> None:
    bin_dir = built_bin_dir()
    if not (bin_dir / "kube-scheduler").exists():
        pytest.fail(f"kube-scheduler is not in {bin_dir}: tests/k8s/build.sh builds it")
    report = run_groups(perf_shape("gang", 10, 3, 3), tmp_path, bin_dir)
    assert report.error == ""
    assert [(g.group, g.differences) for g in report.groups] == [(f"gang-{i}", []) for i in range(3)]
    for g in report.groups:
        assert g.kube.conditions == SCHEDULED
        assert len(g.kube.bound) == 3 and g.kube.messages == {}
    # 9 pods of 100m on 10 identical nodes: LeastAllocated spreads them one to a node under both.
    for run in report.runs.values():
        assert (run.bound, run.pods) == (9, 9)
        assert run.load == [("scheduler-perf-00000", 0, 1), ("scheduler-perf-00000", 1, 9)]
        assert run.seconds > 0
    assert report.agrees


@pytest.mark.kube
def test_workload_preemptions_podgroups_shape_evicts_the_same_gangs_under_both(tmp_path: Path) -> None:
    """GangPreemptionPodGroups at its integration size, the low gangs disruptionMode All: two low gangs of
    two 600m pods (a host port each: one pod of each on either node), then a gang of two 3500m pods of
    priority 9999999 that fits only once every low pod is gone; both evict all four for it and bind it."""
    bin_dir = built_bin_dir()
    if not (bin_dir / "kube-scheduler").exists():
        pytest.fail(f"kube-scheduler is not in {bin_dir}: tests/k8s/build.sh builds it")
    report = run_groups(preemption_shape("podgroups", 2, 2, 1, 2, disrupt_all=True), tmp_path, bin_dir)
    assert report.error == ""
    assert [(g.group, g.differences) for g in report.groups] == [("low-gang-0", []), ("low-gang-1", []),
                                                                 ("gang-0", [])]
    low = [f"low-pod-gang-{i}" for i in range(4)]
    for g in report.groups:
        assert g.kube.conditions == SCHEDULED
    assert [(g.kube.bound, g.kube.evicted) for g in report.groups[:2]] == [({}, low[:2]), ({}, low[2:])]
    assert sorted(report.groups[2].kube.bound) == ["pod-gang-0", "pod-gang-1"]
    for run in report.runs.values():
        assert run.evicted == [(name, "gang-0") for name in low]
        assert (run.bound, run.pods) == (2, 2)
        assert run.load == [("scheduler-perf-00000", 1, 2)]
    assert report.agrees


def _outcome(**kw: object) -> GroupOutcome:
    base = GroupOutcome(conditions=list(SCHEDULED), bound={"p0": "n1"}, shapes=["n1"], domains=1,
                        messages={"p1": ("note", "message")})
    for k, v in kw.items():
        setattr(base, k, v)
    return base


@pytest.mark.parametrize(("change", "differs"), [
    ({}, []),
    ({"conditions": []}, ["conditions"]),
    ({"bound": {"p0": "n2"}}, []),  # another node of the same shape: a tie
    ({"bound": {"p2": "n1"}}, ["pods"]),
    ({"shapes": ["n3"]}, ["nodes"]),
    ({"domains": 2}, ["domains"]),
    ({"messages": {"p1": ("note", "other")}}, ["messages"]),
    ({"conditions": [], "domains": 0}, ["conditions", "domains"]),
    ({"evicted": ["p3"]}, ["victims"]),
])
def test_what_differs_between_two_outcomes(change: dict[str, object], differs: list[str]) -> None:
    assert _outcome().same(_outcome(**change)) == differs


RACED = [("PodGroupInitiallyScheduled", "False", "Unschedulable", "pod group is unschedulable, ")]


@pytest.mark.parametrize(("kube", "outrigger", "raced", "differs"), [
    # kube-scheduler's False over its own True, a pod left behind alike: its race, tolerated.
    ({"conditions": RACED}, {}, True, []),
    # Only that way round: Outrigger keeps its True, so a False from it is a difference.
    ({}, {"conditions": RACED}, False, ["conditions"]),
    # Not with other pods bound, nothing bound, no pod left behind, or other messages.
    ({"conditions": RACED, "bound": {"p2": "n1"}}, {}, False, ["conditions", "pods"]),
    ({"conditions": RACED, "bound": {}, "shapes": []}, {"bound": {}, "shapes": []}, False, ["conditions"]),
    ({"conditions": RACED, "messages": {}}, {"messages": {}}, False, ["conditions"]),
    ({"conditions": RACED, "messages": {"p1": ("note", "other")}}, {}, False, ["conditions", "messages"]),
    # Another False message is no race.
    ({"conditions": [("PodGroupInitiallyScheduled", "False", "Unschedulable", "other, ")]}, {}, False,
     ["conditions"]),
])
def test_kube_schedulers_condition_race_is_tolerated_only_as_it_happens(
        kube: dict[str, object], outrigger: dict[str, object], raced: bool, differs: list[str]) -> None:
    same = SameGroup("g", _outcome(**kube), _outcome(**outrigger))
    assert (same.raced, same.differences, same.agrees) == (raced, differs, not differs)


def test_identical_nodes_share_a_shape_and_racks_of_them_too() -> None:
    gang = perf_shape("gang", 3, 1, 3)
    assert node_shapes(gang) == {f"scheduler-perf-0000{i}": "scheduler-perf-00000" for i in range(3)}
    tas = perf_shape("tas", 201, 1, 4)  # racks are interchangeable: rack-0, rack-1, rack-2 alike
    assert set(node_shapes(tas).values()) == {"node-0"}
    shapes = node_shapes(mix())
    assert shapes["race-b"] == "race-a"
    assert len({shapes[f"main-{i}"] for i in range(6)}) == 6  # scores decide among them


def test_the_report_gives_the_ratio_over_timed_workloads_and_lists_what_differs() -> None:
    timed = GroupReport("GangScheduling/x", "10 nodes", True, [SameGroup("g", _outcome(), _outcome())],
                        {KUBE: GroupRun(KUBE, 9, 9, 0.5), OUTRIGGER: GroupRun(OUTRIGGER, 9, 9, 0.25)})
    untimed = GroupReport("Mix-7", "mix", False, [SameGroup("h", _outcome(), _outcome(domains=0))],
                          {KUBE: GroupRun(KUBE, 2, 1), OUTRIGGER: GroupRun(OUTRIGGER, 2, 1)})
    doc = groups_json([timed, untimed])
    assert doc["pods_per_second"] == {KUBE: 18.0, OUTRIGGER: 36.0}
    assert doc["ratio"] == 2.0
    assert [(w["workload"], w["agree"], w["groups"], w["all_agree"]) for w in doc["workloads"]] == [
        ("GangScheduling/x", 1, 1, True), ("Mix-7", 0, 1, False)]
    assert doc["workloads"][1]["differences"][0]["differ"] == ["domains"]
    text = to_markdown({"commit": "abc", "machine": {"cpus": 2}, "seconds": 1.0, "sizes": {},
                        "throughput": {"summary": []}, "placements": {"summary": [], "plugins": [], "disagreements": {},
                                                                      "score_disagreements": {}},
                        "reasons": None, "groups": doc})
    assert f"{KUBE} 18, {OUTRIGGER} 36, ratio 2.00" in text
    assert "| GangScheduling/x (10 nodes) | 1/1 | yes | 9 / 9 | 18 / 36 |" in text
    assert "- Mix-7 h: domains differ;" in text


def test_workload_preemptions_shapes_keep_scheduler_perfs_waves_and_priorities() -> None:
    basic = preemption_shape("basic", 2, 10, 1, 2)
    assert basic.name == "GangPreemptionBasic/2Nodes_1PreemptorGang_2Pods_Evicting_10InitPods"
    assert basic.waves == (Wave((), tuple(f"pod-low-priority-{i}" for i in range(10))),
                           Wave(("gang-0",), ("pod-gang-0", "pod-gang-1")))
    low = {p["metadata"]["name"]: p["spec"] for p in basic.pods}
    # Five 40m pods a node: host ports 8000..8004, priority 0 (no class); the gang's pods 3970m of class 8888888.
    assert sorted({s["containers"][0]["ports"][0]["hostPort"] for n, s in low.items() if "low" in n}) == [
        8000, 8001, 8002, 8003, 8004]
    assert [(s.get("priorityClassName"), s["containers"][0]["resources"]["requests"]["cpu"],
             s["terminationGracePeriodSeconds"]) for s in (low["pod-low-priority-0"], low["pod-gang-1"])] == [
        (None, "40m", 0), ("perf-8888888", "3970m", 0)]
    groups = preemption_shape("podgroups", 2, 2, 1, 2, disrupt_all=True)
    assert groups.name == "GangPreemptionPodGroups/2Nodes_1PreemptorGang_2Pods_Evicting_2LowPriorityGangs_All"
    assert [w.groups for w in groups.waves] == [("low-gang-0", "low-gang-1"), ("gang-0",)]
    specs = {o["metadata"]["name"]: o.get("spec", o.get("value")) for o in groups.objects}
    assert specs["low-gang-1"] == {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "perf-1000",
                                   "disruptionMode": {"all": {}}}
    assert specs["gang-0"] == {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "perf-9999999"}
    assert (specs["perf-1000"], specs["perf-9999999"]) == (1000, 9999999)
    # A host port per gang keeps a gang's pods on different nodes.
    assert [p["spec"]["containers"][0]["ports"][0]["hostPort"] for p in groups.pods] == [8000, 8000, 8001, 8001,
                                                                                         9000, 9000]
    affinity = preemption_shape("affinity", 3, 6, 1, 3)
    assert [len(w.pods) for w in affinity.waves] == [3, 6, 3]
    assert affinity.pods[-1]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "labelSelector"]["matchLabels"]["app"] == "blue"
    with pytest.raises(ValueError, match="unknown workload_preemption shape 'other'"):
        preemption_shape("other", 2, 2, 1, 2)


def test_victims_that_differ_make_the_workload_disagree_and_are_listed() -> None:
    same = [("low-0", "gang-0"), ("low-1", "gang-0")]
    report = GroupReport("GangPreemptionBasic/x", "2 nodes", True, [SameGroup("gang-0", _outcome(), _outcome())],
                         {KUBE: GroupRun(KUBE, 2, 2, 1.0, evicted=same),
                          OUTRIGGER: GroupRun(OUTRIGGER, 2, 2, 1.0, evicted=[*same, ("low-2", "gang-0")])})
    assert (report.same_load, report.same_victims, report.agrees) == (True, False, False)
    doc = groups_json([report])
    assert (doc["workloads"][0]["same_victims"], doc["workloads"][0]["all_agree"]) == (False, False)
    text = to_markdown({"commit": "abc", "machine": {"cpus": 2}, "seconds": 1.0, "sizes": {},
                        "throughput": {"summary": []}, "placements": {"summary": [], "plugins": [], "disagreements": {},
                                                                      "score_disagreements": {}},
                        "reasons": None, "groups": doc})
    assert (f"- GangPreemptionBasic/x: victims differ; {KUBE} 2 evicted, {OUTRIGGER} 3; only {KUBE}'s: [], "
            f"only {OUTRIGGER}'s: [('low-2', 'gang-0')]") in text
    # Which preemptor evicted which victim is a tie among identical nodes: only the victims count.
    report.runs[OUTRIGGER].evicted = [("low-0", "gang-1"), ("low-1", "gang-0")]
    assert report.agrees
