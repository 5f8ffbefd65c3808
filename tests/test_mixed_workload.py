"""The default profile on a mixed workload, end to end through the scheduler: spread, pod affinity and
anti-affinity, node affinity, taints and tolerations, and gangs of several sizes (the default plugins
plus the Coscheduling example plugin, enabled through multiPoint), all honoured at once."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from framework.config import load_config
from framework.profiles import build_registry
from framework.scheduler import Scheduler
from pluginhost.examples.coscheduling import GROUP_LABEL, MIN_AVAILABLE, Coscheduling
from pluginhost.manifest import node_from_dict, pod_from_dict

# kube-scheduler's defaults plus gang scheduling: an ordinary KubeSchedulerConfiguration.
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
"""
GANGS = {"g2": 2, "g3": 3, "g5": 5}

ZONES = ("za", "zb", "zc")


def nodes() -> list[Any]:
    out = []
    for i in range(12):
        labels = {"topology.kubernetes.io/zone": ZONES[i % 3], "kubernetes.io/hostname": f"n{i}"}
        spec: dict[str, Any] = {}
        if i >= 9:  # n9..n11, one per zone: a GPU pool only tolerating pods may use
            labels["accelerator"] = "gpu"
            spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        allocatable = {"cpu": "8", "memory": "32Gi", "pods": "30"}
        out.append(node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": labels},
                                   "spec": spec, "status": {"allocatable": allocatable}}))
    return out


def pod(name: str, app: str, gang: str = "", **spec: Any) -> Any:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}], **spec}
    meta: dict[str, Any] = {"name": name, "labels": {"app": app}}
    if gang:
        meta["labels"][GROUP_LABEL] = gang
        meta["annotations"] = {MIN_AVAILABLE: str(GANGS[gang])}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body})


def selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def workload() -> list[Any]:
    pods = []
    pods += [pod(f"db-{i}", "db", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector("db")}]}}) for i in range(4)]
    pods += [pod(f"web-{i}", "web", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": selector("web")}]) for i in range(9)]
    pods += [pod(f"cache-{i}", "cache", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector("db")}]}}) for i in range(4)]
    pods += [pod(f"train-{i}", "train", nodeSelector={"accelerator": "gpu"}, tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]) for i in range(3)]
    pods += [pod(f"za-{i}", "zonal", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["za"]}]}]}}}) for i in range(5)]
    pods += [pod(f"{g}-{i}", "gang", gang=g) for g, size in GANGS.items() for i in range(size)]
    return pods


def test_default_profile_places_a_mixed_workload_by_every_rule() -> None:
    async def main() -> Scheduler:
        registry = build_registry()
        registry.register_class(Coscheduling)
        s = Scheduler(load_config(CONFIG, registry.points()), registry, seed=21)
        cluster = nodes()
        await s.apply(cluster)
        task = asyncio.get_running_loop().create_task(s.run())
        # db first, so cache pods have something to be near; the rest together.
        await s.apply(workload()[:4])
        for _ in range(200):
            if all(r.phase == "Bound" for r in s.pods.values()):
                break
            await asyncio.sleep(0.01)
        await s.apply(workload()[4:])
        for _ in range(500):
            done = all(r.phase in ("Bound", "Unschedulable") for r in s.pods.values())
            if done and len(s.pods) == 25 + sum(GANGS.values()):
                break
            await asyncio.sleep(0.01)
        await s.drain()
        await s.stop()
        task.cancel()
        return s

    s = asyncio.run(asyncio.wait_for(main(), 30))
    placed = {r.pod.name: r.pod.node_name for r in s.pods.values()}
    assert all(placed.values()), {n: r.phase for n, r in ((r.pod.name, r) for r in s.pods.values())}
    zone = {n.name: n.labels["topology.kubernetes.io/zone"] for n in nodes()}
    gpu_nodes = {"n9", "n10", "n11"}
    by_app: dict[str, list[str]] = collections.defaultdict(list)
    for name, node_name in placed.items():
        by_app[name.rsplit("-", 1)[0]].append(node_name)
    # Anti-affinity: four db pods on four different nodes, none on the tainted pool.
    assert len(set(by_app["db"])) == 4 and not set(by_app["db"]) & gpu_nodes
    # Spread: 9 web pods over 3 zones with maxSkew 1 is exactly 3 per zone.
    assert sorted(collections.Counter(zone[n] for n in by_app["web"]).values()) == [3, 3, 3]
    # Affinity: every cache pod shares a node with a db pod.
    assert set(by_app["cache"]) <= set(by_app["db"])
    # Taints + nodeSelector: training pods only on the GPU pool; nobody else there.
    assert set(by_app["train"]) <= gpu_nodes
    others = [n for app, ns in by_app.items() if app != "train" for n in ns]
    assert not set(others) & gpu_nodes
    # Node affinity: the zonal pods all in za.
    assert {zone[n] for n in by_app["za"]} == {"za"}
    # Gangs: every member of each group bound (they waited at Permit for each other).
    for g, size in GANGS.items():
        assert len(by_app[g]) == size
    assert sum(1 for ev in s.recent_events() if ev.type == "Bound" and ev.name.startswith("g")) == 10
    assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}
