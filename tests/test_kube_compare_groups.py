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

from tools.compare.group_workloads import mix, perf_shape
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
])
def test_what_differs_between_two_outcomes(change: dict[str, object], differs: list[str]) -> None:
    assert _outcome().same(_outcome(**change)) == differs


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
