"""The example plugin NodeRank (pluginhost/examples/noderank.py) in process, in its three versions:
version 1 filters on the pod's minimum rank, version 2 adds Score (the node's rank), version 3 scores
``100 - rank``. The kube-apiserver test that upgrades, shadows and canaries it over the wire is
tests/test_live_sequence_kube.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.config import load_config
from framework.profiles import build_registry
from framework.scheduler import Scheduler, explain_pod
from pluginhost.examples.noderank import MIN_RANK, RANK, NodeRank, NodeRankLow, NodeRankV1
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: NodeRank}]
"""
# n-none has no rank label, n-bad one that is not a number: both rank 0.
RANKS = {"n10": "10", "n50": "50", "n90": "90", "n-none": None, "n-bad": "high"}


def explain(cls: type[Any], min_rank: str | None) -> dict[str, Any]:
    registry = build_registry()
    registry.register_class(cls)
    scheduler = Scheduler(load_config(CONFIG, registry.points()), registry, seed=0)
    nodes = [f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {{{RANK}: '{r}'}} }}\n" if r is not None
             else f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n" for n, r in RANKS.items()]
    docs = [d + "status: {allocatable: {cpu: '8', memory: 8Gi, pods: '110'}}\n" for d in nodes]
    annotations = f", annotations: {{{MIN_RANK}: '{min_rank}'}}" if min_rank is not None else ""
    pod_doc = (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, uid: uid-p{annotations}}}\n"
               "spec: {containers: [{name: c}]}\n")
    objects = parse_objects("---\n".join(docs), "nodes.yaml")
    pod = next(o for o in parse_objects(pod_doc, "pod.yaml") if isinstance(o, Pod))

    async def run() -> dict[str, Any]:
        await scheduler.apply([o for o in objects if isinstance(o, Node)])
        return await explain_pod(scheduler.profiles["default-scheduler"], scheduler.cache.snapshot(), pod)

    return asyncio.run(run())


@pytest.mark.parametrize(("cls", "min_rank", "fits", "scores"), [
    (NodeRankV1, None, set(RANKS), None),
    (NodeRankV1, "50", {"n50", "n90"}, None),
    (NodeRankV1, "91", set(), None),
    (NodeRank, None, set(RANKS), {"n10": 10, "n50": 50, "n90": 90, "n-none": 0, "n-bad": 0}),
    (NodeRank, "10", {"n10", "n50", "n90"}, {"n10": 10, "n50": 50, "n90": 90}),
    (NodeRankLow, None, set(RANKS), {"n10": 90, "n50": 50, "n90": 10, "n-none": 100, "n-bad": 100}),
])
def test_each_version_filters_and_scores_by_rank(cls: type[Any], min_rank: str | None, fits: set[str],
                                                 scores: dict[str, int] | None) -> None:
    nodes = explain(cls, min_rank)["nodes"]
    assert {n for n, v in nodes.items() if v["total"] is not None} == fits
    for name in set(RANKS) - fits:
        assert nodes[name]["filter"]["plugin"] == "NodeRank"
        assert nodes[name]["filter"]["reasons"] == [f"node(s) ranked below {min_rank}"]
    got = {n: nodes[n]["scores"]["NodeRank"]["raw"] for n in fits if "NodeRank" in nodes[n]["scores"]}
    assert got == (scores or {})


def test_a_minimum_rank_that_is_no_number_fits_nowhere_and_says_why() -> None:
    nodes = explain(NodeRankV1, "high")["nodes"]
    reasons = {n: tuple(nodes[n]["filter"]["reasons"]) for n in nodes}
    assert reasons == dict.fromkeys(RANKS, (f"annotation {MIN_RANK} must be a whole number, got 'high'",))
