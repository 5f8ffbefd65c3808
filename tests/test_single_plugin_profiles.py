"""Every in-tree plugin enabled alone, at each of its extension points and at all of them (multiPoint),
explained on one small cluster: exact statuses and scores, computed by hand from kube-scheduler's formulas.

Enabling a plugin at Filter or Score without the PreFilter/PreScore that builds its state fails the
cycle with an Error naming the plugin and the missing state, as kube-scheduler does; NodeResourcesFit,
NodeResourcesBalancedAllocation and NodeAffinity recompute instead, also as kube-scheduler does.

The cluster (tests/data/single-plugin-cluster.yaml): node a (zone z1, 4 cpu/8Gi, disk=ssd, holds pod
web-0 with hostPort 8080 and image registry.local/app:1 of 500 MB), node b (z2, 8 cpu/16Gi, tainted
dedicated=gpu:NoSchedule), node c (z1, 2 cpu/4Gi, disk=ssd, tainted spot=true:PreferNoSchedule). The pod
(web-1, 1 cpu/1Gi, hostPort 8080) prefers disk=ssd (weight 10), prefers no app=web pod in its zone
(weight 5), and spreads over zones (ScheduleAnyway).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main

DATA = Path(__file__).parent / "data"
OK = "Success"
# A rejected node's filter status as "code: reasons", kube-scheduler's words.
PORTS_IN_USE = "Unschedulable: node(s) didn't have free ports for the requested pod ports"
UNTOLERATED = "UnschedulableAndUnresolvable: node(s) had untolerated taint(s)"

# (plugin, point or "*" for multiPoint, status code, non-Success filter statuses, totals per node or None,
#  a substring of the error)
CASES: list[tuple[str, str, str, dict[str, str], dict[str, int] | None, str]] = [
    ("DefaultPreemption", "postFilter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    # 500 MB on 1 of 3 nodes: 100 * (166666666 - 23Mi) // (1000Mi - 23Mi) = 13
    ("ImageLocality", "score", OK, {}, {"a": 13, "b": 0, "c": 0}, ""),
    ("InterPodAffinity", "filter", "Error", {}, None, "'PreFilterInterPodAffinity'"),
    ("InterPodAffinity", "preFilter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    ("InterPodAffinity", "score", "Error", {}, None, "'PreScoreInterPodAffinity'"),
    # preferred anti-affinity -5 in z1 (a, c), 0 in z2 (b); normalized (s - min) * 100 / (max - min)
    ("InterPodAffinity", "*", OK, {}, {"a": 0, "b": 100, "c": 0}, ""),
    ("NodeAffinity", "filter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    # weight 10 on a and c, normalized to 100
    ("NodeAffinity", "score", OK, {}, {"a": 100, "b": 0, "c": 100}, ""),
    ("NodeAffinity", "*", OK, {}, {"a": 100, "b": 0, "c": 100}, ""),
    ("NodeDeclaredFeatures", "filter", "Error", {}, None, '"PreFilterNodeDeclaredFeatures"'),
    # the pod needs no declared feature: PreFilter answers Skip, so Filter does not run
    ("NodeDeclaredFeatures", "*", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    ("NodeName", "filter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    # the pod names no node: PreFilter keeps every node (1.37)
    ("NodeName", "preFilter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    ("NodeName", "*", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    ("NodePorts", "filter", "Error", {}, None, '"PreFilterNodePorts"'),
    ("NodePorts", "*", OK, {"a": PORTS_IN_USE}, {"b": 0, "c": 0}, ""),
    # the change in balance (1.37): 100 * (1 - std of requested fractions) with the pod and without,
    # 50 + (50 + with - without) // 2: a (2/4, 2Gi/8Gi) 87, (1/4, 1Gi/8Gi) 93 -> 72; b (1/8, 1/16) 96,
    # empty 100 -> 73; c (1/2, 1/4) 87, empty 100 -> 68
    ("NodeResourcesBalancedAllocation", "score", OK, {}, {"a": 72, "b": 73, "c": 68}, ""),
    ("NodeResourcesBalancedAllocation", "*", OK, {}, {"a": 72, "b": 73, "c": 68}, ""),
    ("NodeResourcesFit", "filter", "Error", {}, None, "'PreFilterNodeResourcesFit'"),
    # LeastAllocated: a (50 + 75) // 2, b (87 + 93) // 2, c (50 + 75) // 2
    ("NodeResourcesFit", "score", OK, {}, {"a": 62, "b": 90, "c": 62}, ""),
    ("NodeResourcesFit", "*", OK, {}, {"a": 62, "b": 90, "c": 62}, ""),
    ("NodeUnschedulable", "filter", OK, {}, {"a": 0, "b": 0, "c": 0}, ""),
    ("PodTopologySpread", "filter", "Error", {}, None, '"PreFilterPodTopologySpread"'),
    ("PodTopologySpread", "score", "Error", {}, None, '"PreScorePodTopologySpread"'),
    # z1 holds one app=web pod, z2 none: b scores best
    ("PodTopologySpread", "*", OK, {}, {"a": 0, "b": 100, "c": 0}, ""),
    ("TaintToleration", "filter", OK, {"b": UNTOLERATED}, {"a": 0, "c": 0}, ""),
    ("TaintToleration", "score", "Error", {}, None, '"PreScoreTaintToleration"'),
    # c has one PreferNoSchedule taint: reverse-normalized to 0, a to 100
    ("TaintToleration", "*", OK, {"b": UNTOLERATED}, {"a": 100, "c": 0}, ""),
]


def config(plugin: str, point: str) -> str:
    base = "      enabled: [{name: PrioritySort}, {name: DefaultBinder}%s]\n      disabled: [{name: '*'}]\n"
    if point == "*":
        plugins = "    multiPoint:\n" + base % f", {{name: {plugin}}}"
    else:
        plugins = "    multiPoint:\n" + base % "" + f"    {point}:\n      enabled: [{{name: {plugin}}}]\n"
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: default-scheduler\n  plugins:\n" + plugins
    )


@pytest.mark.parametrize(
    ("plugin", "point", "code", "rejected", "totals", "error"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_plugin_alone_at_a_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plugin: str, point: str, code: str,
    rejected: dict[str, str], totals: dict[str, int] | None, error: str,
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config(plugin, point))
    argv = ["explain", "--config", str(cfg), "--cluster", str(DATA / "single-plugin-cluster.yaml"),
            "--pod", str(DATA / "single-plugin-pod.yaml"), "-o", "json"]
    assert main(argv) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert result["status"]["code"] == code
    if error:
        assert plugin in result["status"]["reasons"][0] and error in result["status"]["reasons"][0]
        assert result["selected"] is None
        return
    filters = {
        n: f"{v['filter']['code']}: {', '.join(v['filter']['reasons'])}"
        for n, v in result["nodes"].items()
        if v["filter"]["code"] != OK
    }
    assert filters == rejected
    got = {n: v["total"] for n, v in result["nodes"].items() if v["total"] is not None}
    assert got == totals
    best = max(got.values())
    assert result["selected"] in {n for n, t in got.items() if t == best}
