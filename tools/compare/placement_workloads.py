"""The placement comparison's workloads: nodes, pods already bound and pods to schedule in order. A
deterministic one built to have one best node per pod and to exercise every Score plugin of the default
profile (:data:`MIXED`), and scheduler_perf's shapes at 50 nodes (identical nodes: ties everywhere).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..workloads import WORKLOADS, Workload, node_manifest, pod_manifest
from .schedulers import SCHEDULER_NAME

__all__ = ["MIXED", "PlacementWorkload", "placement_workloads"]


@dataclass(frozen=True)
class PlacementWorkload:
    """Nodes, pods already bound (``spec.nodeName`` set) and pods to schedule, in order."""

    name: str
    description: str
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    #: Built so that every pod has one best node (every pod must land where kube-scheduler put it).
    deterministic: bool = False
    namespaces: tuple[str, ...] = ("default",)
    #: Pods created already bound, before any is scheduled.
    bound: list[dict[str, Any]] = field(default_factory=list)

    def with_scheduler(self, pods: list[dict[str, Any]], scheduler: str) -> list[dict[str, Any]]:
        return [{**p, "spec": {**p["spec"], "schedulerName": scheduler}} for p in pods]


def _mixed(nodes: int = 12, pods: int = 36, seed: int = 19) -> PlacementWorkload:
    """Nodes of different sizes, already used to different degrees (a bound filler pod each), zones,
    disks, images and PreferNoSchedule taints; pods of different requests with preferred node affinity,
    preferred pod (anti-)affinity, soft spread constraints, tolerations and images: every Score plugin
    of the default profile has something to say, and the totals differ from node to node."""
    rng = random.Random(seed)
    app_image = {"names": ["registry.example/app:v1"], "sizeBytes": 300 * 1024 * 1024}
    db_image = {"names": ["registry.example/db:v2"], "sizeBytes": 800 * 1024 * 1024}
    node_docs: list[dict[str, Any]] = []
    fillers: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"mixed-{i:02d}"
        labels = {"topology.kubernetes.io/zone": f"z{i % 3}", "disk": "ssd" if i % 2 else "hdd"}
        doc = node_manifest(name, labels)
        cpu = f"{2000 + 500 * i}m"
        memory = f"{6 + (i * 7) % nodes}Gi"  # 7 is prime to the node counts used: every node differs
        doc["status"]["capacity"] = {"pods": "110", "cpu": cpu, "memory": memory}
        doc["status"]["allocatable"] = dict(doc["status"]["capacity"])
        if i % 5 == 0:
            doc["spec"]["taints"] = [{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}]
        images = ([app_image] if i % 4 == 0 else []) + ([db_image] if i % 6 == 1 else [])
        if images:
            doc["status"]["images"] = images
        node_docs.append(doc)
        # Spread what is left free (so NodeResourcesFit and BalancedAllocation spread over 0..100): up to
        # 70% of the cpu and of the memory in use, in different orders.
        used_cpu = (2000 + 500 * i) * 7 * ((i * 11) % nodes) // (10 * nodes)
        used_memory = (6 + (i * 7) % nodes) * 1024 * 7 * ((i * 5) % nodes) // (10 * nodes)
        filler = pod_manifest(f"filler-{i:02d}", "default", SCHEDULER_NAME, labels={"app": "filler"},
                              nodeName=name)
        requests = {"cpu": f"{used_cpu}m", "memory": f"{used_memory}Mi"}
        filler["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": dict(requests)}
        fillers.append(filler)
    pod_docs = []
    for j in range(pods):
        kind = ("web", "db", "batch")[j % 3]
        spec: dict[str, Any] = {}
        pref: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            pref.append({"weight": rng.choice((10, 30, 60)), "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": [rng.choice(("ssd", "hdd"))]}]}})
        if rng.random() < 0.3:
            pref.append({"weight": rng.choice((5, 20)), "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [f"z{rng.randrange(3)}"]}]}})
        affinity: dict[str, Any] = {}
        if pref:
            affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": pref}
        if kind == "web" and rng.random() < 0.6:
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 40, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                                   "topologyKey": "topology.kubernetes.io/zone"}}]}
        if kind == "db":
            affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                                   "topologyKey": "kubernetes.io/hostname"}}]}
        if affinity:
            spec["affinity"] = affinity
        if kind == "batch" and rng.random() < 0.7:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "batch"}}}]
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "maintenance", "operator": "Exists", "effect": "PreferNoSchedule"}]
        doc = pod_manifest(f"{kind}-{j:03d}", "default", SCHEDULER_NAME, labels={"app": kind}, **spec)
        container = doc["spec"]["containers"][0]
        container["image"] = {"web": "registry.example/app:v1", "db": "registry.example/db:v2"}.get(kind,
                                                                                                   container["image"])
        cpu = f"{rng.choice((100, 250, 500, 750, 1000, 1500))}m"
        memory = f"{rng.choice((128, 256, 512, 1024, 2048))}Mi"
        container["resources"] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
        pod_docs.append(doc)
    return PlacementWorkload(f"Mixed-{seed}", f"{nodes} nodes of different sizes, {pods} pods exercising every "
                             "Score plugin", node_docs, pod_docs, deterministic=True, bound=fillers)


def _from_perf(workload: Workload, nodes: int, init: int, measure: int) -> PlacementWorkload:
    wl = workload.sized(nodes=nodes, init_pods=init, measure_pods=measure)
    pods = [*wl.init.manifests(SCHEDULER_NAME), *wl.measure.manifests(SCHEDULER_NAME)]
    return PlacementWorkload(wl.name, f"{wl.describe()} (identical nodes: tied scores)", wl.node_manifests(), pods,
                             namespaces=wl.namespaces)


#: The deterministic placement workloads: one best node for every pod in kube-scheduler's log (checked:
#: these seeds and sizes have no tie; larger ones do, by coincidences of integer sums).
MIXED = [_mixed(seed=seed) for seed in (19, 1, 3)]


def placement_workloads(quick: bool = False) -> list[PlacementWorkload]:
    if quick:
        return [_mixed(12, 24, 19)]
    return [
        *MIXED,
        _from_perf(WORKLOADS["SchedulingBasic"], 50, 50, 100),
        _from_perf(WORKLOADS["SchedulingPodAntiAffinity"], 50, 10, 30),
        _from_perf(WORKLOADS["SchedulingPodAffinity"], 50, 40, 60),
        _from_perf(WORKLOADS["TopologySpreading"], 51, 60, 90),
    ]
