"""Placements, pod by pod, on identical cluster states: kube-scheduler first, logging its scores; then
Outrigger gets the same pods one at a time on a fresh copy, and a pod it placed elsewhere is moved to
kube-scheduler's node before the next one is created, so every decision of both is taken on the same
cluster. Each pod's node is checked against kube-scheduler's best nodes, and every plugin's score on
every node against kube-scheduler's.

::

    report = run_placements(MIXED[0], workdir, bin_dir)
    report.count("deterministic")       # (pods with one best node, of which Outrigger agreed)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from framework.kube.client import ApiError

from ..localcluster import LocalCluster
from ..workloads import BoundWatch
from .kubescores import PodScores, parse_kube_scores
from .placement_workloads import PlacementWorkload
from .schedulers import (
    KUBE,
    OUTRIGGER,
    SCHEDULER_NAME,
    KubeScheduler,
    OutriggerScheduler,
    cluster_api,
    create_pod,
    fresh_cluster,
)

__all__ = [
    "PlacementReport",
    "PluginAgreement",
    "PodPlacement",
    "ScoreDisagreement",
    "run_placements",
]


@dataclass
class PodPlacement:
    pod: str
    kube_node: str
    outrigger_node: str
    kube_best: list[str]
    #: "deterministic" (one best node), "tie" (several), "single" (one feasible node: not scored).
    kind: str
    agrees: bool
    kube_total: int | None = None
    outrigger_total_on_kube_node: int | None = None
    outrigger_total: int | None = None


@dataclass
class PluginAgreement:
    plugin: str
    compared: int = 0
    equal: int = 0
    only_kube: int = 0
    only_outrigger: int = 0


@dataclass
class ScoreDisagreement:
    pod: str
    node: str
    plugin: str
    kube: int | None
    outrigger: int | None


@dataclass
class PlacementReport:
    workload: str
    description: str
    deterministic: bool
    pods: list[PodPlacement] = field(default_factory=list)
    plugins: dict[str, PluginAgreement] = field(default_factory=dict)
    score_disagreements: list[ScoreDisagreement] = field(default_factory=list)
    #: Pods Outrigger placed elsewhere and that were moved to kube-scheduler's node.
    moved: int = 0
    error: str = ""

    def count(self, kind: str) -> tuple[int, int]:
        """(pods of this kind, of which agree)."""
        pods = [p for p in self.pods if p.kind == kind]
        return len(pods), sum(p.agrees for p in pods)


def run_placements(workload: PlacementWorkload, workdir: Path, bin_dir: Path) -> PlacementReport:
    """kube-scheduler on the workload, then Outrigger pod by pod on kube-scheduler's states."""
    report = PlacementReport(workload.name, workload.description, workload.deterministic)
    try:
        with fresh_cluster(workdir / KUBE, bin_dir) as cluster:
            asyncio.run(_place_nodes(cluster, workload))
            with KubeScheduler(cluster, workdir / KUBE, scores=len(workload.nodes)) as kube:
                kube_nodes = asyncio.run(_kube_places(cluster, workload))
            scores = parse_kube_scores(kube.log.read_text(errors="replace"))
        with fresh_cluster(workdir / OUTRIGGER, bin_dir) as cluster:
            asyncio.run(_place_nodes(cluster, workload))
            ours = OutriggerScheduler(cluster, workdir / OUTRIGGER, scores=len(workload.nodes))
            with ours:
                asyncio.run(_lockstep(cluster, ours, workload, kube_nodes, scores, report))
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    return report


async def _place_nodes(cluster: LocalCluster, workload: PlacementWorkload) -> None:
    api = cluster_api(cluster)
    try:
        for ns in workload.namespaces:
            if ns != "default":
                await api.request("POST", "/api/v1/namespaces", verb="create", resource="namespaces",
                                  body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for node in workload.nodes:
            await api.request("POST", "/api/v1/nodes", verb="create", resource="nodes", body=node)
        for pod in workload.bound:
            await create_pod(api, pod)
    finally:
        await api.close()


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"



async def _kube_places(cluster: LocalCluster, workload: PlacementWorkload) -> dict[str, str]:
    """Create the pods one by one (kube-scheduler queues them in that order); pod key -> node."""
    api = cluster_api(cluster)
    watches = {ns: BoundWatch(api, ns) for ns in workload.namespaces}
    try:
        for w in watches.values():
            await w.start()
        for pod in workload.with_scheduler(workload.pods, SCHEDULER_NAME):
            await create_pod(api, pod)
        out = {}
        for ns, w in watches.items():
            names = [p["metadata"]["name"] for p in workload.pods if p["metadata"]["namespace"] == ns]
            await w.wait(names, 120)
            out.update({f"{ns}/{n}": w.bound[n][1] for n in names})
        return out
    finally:
        for w in watches.values():
            await w.stop()
        await api.close()


async def _debug_scores(session: aiohttp.ClientSession, http: str, key: str) -> dict[str, Any] | None:
    for _ in range(50):  # the table is kept when the pod is scored, before it is bound: seen at once
        async with session.get(f"http://{http}/debug/scores/{key}") as resp:
            if resp.status == 200:
                data: dict[str, Any] = await resp.json()
                return data
            if resp.status != 404:
                raise RuntimeError(f"GET /debug/scores/{key}: {resp.status} {await resp.text()}")
        await asyncio.sleep(0.02)
    return None


async def _lockstep(cluster: LocalCluster, ours: OutriggerScheduler, workload: PlacementWorkload,
                    kube_nodes: dict[str, str], kube_scores: dict[str, PodScores], report: PlacementReport) -> None:
    api = cluster_api(cluster)
    watches = {ns: BoundWatch(api, ns) for ns in workload.namespaces}
    async with aiohttp.ClientSession() as session:
        try:
            for w in watches.values():
                await w.start()
            for pod in workload.with_scheduler(workload.pods, SCHEDULER_NAME):
                key, ns, name = _key(pod), pod["metadata"]["namespace"], pod["metadata"]["name"]
                await create_pod(api, pod)
                await watches[ns].wait([name], 60)
                node = watches[ns].bound[name][1]
                table = await _debug_scores(session, ours.http, key) if key in kube_scores else None
                _compare_pod(report, key, kube_nodes[key], node, kube_scores.get(key), table)
                if node != kube_nodes[key]:
                    # Give Outrigger kube-scheduler's state for the next pod: this one where kube put it.
                    report.moved += 1
                    path = f"/api/v1/namespaces/{ns}/pods/{name}"
                    await api.request("DELETE", path, verb="delete", resource="pods",
                                      body={"gracePeriodSeconds": 0})
                    del watches[ns].bound[name]
                    for _ in range(100):
                        try:
                            await api.request("GET", path, verb="get", resource="pods")
                        except ApiError as exc:
                            if exc.code == 404:
                                break
                            raise
                        await asyncio.sleep(0.05)
                    moved = {**pod, "spec": {**pod["spec"], "nodeName": kube_nodes[key]}}
                    await create_pod(api, moved)
                    await watches[ns].wait([name], 60)
        finally:
            for w in watches.values():
                await w.stop()
            await api.close()


def _compare_pod(report: PlacementReport, key: str, kube_node: str, node: str, kube: PodScores | None,
                 table: dict[str, Any] | None) -> None:
    if kube is None or not kube.totals:
        report.pods.append(PodPlacement(key, kube_node, node, [kube_node], "single", node == kube_node))
        return
    best = kube.best()
    ours: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    for row in (table or {}).get("nodes") or ():
        ours[row["node"]] = {p: int(s["weighted"]) for p, s in row["scores"].items()}
        totals[row["node"]] = int(row["total"])
    kind = "deterministic" if len(best) == 1 else "tie"
    report.pods.append(PodPlacement(key, kube_node, node, sorted(best), kind, node in best,
                                    kube.totals.get(kube_node), totals.get(kube_node), totals.get(node)))
    for n, plugins in kube.plugins.items():
        mine = ours.get(n)
        if mine is None:
            for plugin, score in plugins.items():
                agreement = report.plugins.setdefault(plugin, PluginAgreement(plugin))
                agreement.compared += 1
                agreement.only_kube += 1
                report.score_disagreements.append(ScoreDisagreement(key, n, plugin, score, None))
            continue
        for plugin in sorted(plugins.keys() | mine.keys()):
            agreement = report.plugins.setdefault(plugin, PluginAgreement(plugin))
            k, o = plugins.get(plugin), mine.get(plugin)
            agreement.compared += 1
            agreement.only_kube += o is None and k is not None
            agreement.only_outrigger += k is None and o is not None
            # A plugin one side did not run scores 0 there (PreScore's Skip): equal if the other says 0.
            if (k or 0) == (o or 0):
                agreement.equal += 1
            else:
                report.score_disagreements.append(ScoreDisagreement(key, n, plugin, k, o))
