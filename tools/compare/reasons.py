"""Reasons: a set of pods that fit nowhere (:data:`REASONS`, tests/test_plugin_messages.py's cluster as API
objects), and each pod's ``FailedScheduling`` event from both schedulers, compared verbatim with the
``PodScheduled`` condition's message.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..localcluster import LocalCluster
from ..workloads import node_manifest, pod_manifest
from .schedulers import KUBE, OUTRIGGER, SCHEDULER_NAME, SCHEDULERS, cluster_api, create_pod, fresh_cluster

__all__ = ["REASONS", "PodReason", "ReasonsReport", "run_reasons"]


_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "20"}


def _reasons_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster objects, pods that fit nowhere): tests/test_plugin_messages.py's cluster, as API objects."""
    def node(name: str, labels: dict[str, str] | None = None, alloc: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
        doc = node_manifest(name, labels)
        doc["spec"] = spec
        doc["status"]["capacity"] = dict(alloc or _CAPACITY)
        doc["status"]["allocatable"] = dict(alloc or _CAPACITY)
        return doc

    def pod(name: str, labels: dict[str, str] | None = None, cpu: str = "", **spec: Any) -> dict[str, Any]:
        doc = pod_manifest(name, "default", SCHEDULER_NAME, labels=labels, **spec)
        container = doc["spec"]["containers"][0]
        del container["ports"]
        container["resources"] = {"requests": {"cpu": cpu}} if cpu else {}
        return doc

    by_name = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]}]}]}}}
    conflict = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]},
                         {"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
    on_big = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
    filler = pod("filler", {"app": "filler"}, "7", nodeName="big", affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "intruder"}}, "topologyKey": "zone"}]}})
    filler["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    objects = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high-never"},
         "value": 100, "preemptionPolicy": "Never"},
        node("taint-a", taints=[{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]),
        node("taint-b", taints=[{"key": "gpu", "value": "true", "effect": "NoExecute"}]),
        node("cordon", unschedulable=True),
        node("small", {"zone": "z1"}, {"cpu": "1", "memory": "16Gi", "pods": "20"}),
        node("big", {"zone": "z2"}, {"cpu": "8", "memory": "16Gi", "pods": "20"}),
        node("tiny", None, {"cpu": "1", "memory": "16Gi", "pods": "1"}),
        filler,
        pod("tiny-filler", nodeName="tiny"),
    ]
    ports_big = pod("ports-big", cpu="100m", affinity=on_big)
    ports_big["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    memory = pod("memory")
    memory["spec"]["containers"][0]["resources"] = {"requests": {"memory": "20Gi"}}
    extended = pod("extended")
    extended["spec"]["containers"][0]["resources"] = {"requests": {"example.com/foo": "1"},
                                                      "limits": {"example.com/foo": "1"}}
    pods = [
        pod("cpu6", cpu="6"),
        pod("cpu6-never", cpu="6", priorityClassName="high-never"),
        pod("selector", nodeSelector={"zone": "z3"}),
        pod("name-small", cpu="6", affinity=by_name),
        pod("conflict", affinity=conflict),
        ports_big,
        pod("spread", {"app": "spread"}, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]),
        pod("affinity", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "nothing"}}, "topologyKey": "zone"}]}}),
        pod("anti", nodeSelector={"zone": "z2"}, affinity={"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "filler"}}, "topologyKey": "zone"}]}}),
        pod("intruder", {"app": "intruder"}, nodeSelector={"zone": "z2"}),
        extended,
        pod("tolerate-all", cpu="20", tolerations=[{"operator": "Exists"}]),
        memory,
    ]
    return objects, pods


#: (cluster objects, pods that fit nowhere) of the reasons comparison.
REASONS = _reasons_cluster()


@dataclass
class PodReason:
    pod: str
    kube: str
    outrigger: str
    kube_condition: str
    outrigger_condition: str

    @property
    def identical(self) -> bool:
        return bool(self.kube) and self.kube == self.outrigger and self.kube_condition == self.outrigger_condition


@dataclass
class ReasonsReport:
    pods: list[PodReason] = field(default_factory=list)
    error: str = ""


_PATHS = {"Node": "/api/v1/nodes", "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses"}


async def _failed_scheduling(cluster: LocalCluster, pods: list[dict[str, Any]],
                             objects: list[dict[str, Any]], timeout: float) -> dict[str, tuple[str, str]]:
    """Create the objects and the pods; pod -> (its last FailedScheduling note, PodScheduled message)."""
    api = cluster_api(cluster)
    try:
        for obj in objects:
            path = _PATHS.get(obj["kind"], f"/api/v1/namespaces/{obj.get('metadata', {}).get('namespace')}/pods")
            await api.request("POST", path, verb="create", resource=obj["kind"].lower(), body=obj)
        for pod in pods:
            await create_pod(api, pod)
        names = {p["metadata"]["name"] for p in pods}
        deadline = time.monotonic() + timeout
        notes: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            events = await api.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events", verb="list",
                                       resource="events")
            latest: dict[str, tuple[str, str]] = {}
            for ev in events.get("items") or ():
                name = str((ev.get("regarding") or {}).get("name") or "")
                if ev.get("reason") == "FailedScheduling" and name in names:
                    stamp = str(ev.get("eventTime") or (ev.get("series") or {}).get("lastObservedTime") or "")
                    if name not in latest or stamp >= latest[name][0]:
                        latest[name] = (stamp, str(ev.get("note") or ""))
            if latest.keys() == names:
                listed = await api.request("GET", "/api/v1/namespaces/default/pods", verb="list", resource="pods")
                conditions = {}
                for item in listed.get("items") or ():
                    for cond in (item.get("status") or {}).get("conditions") or ():
                        if cond.get("type") == "PodScheduled":
                            conditions[item["metadata"]["name"]] = str(cond.get("message") or "")
                if conditions.keys() >= names:
                    notes = {n: (latest[n][1], conditions[n]) for n in names}
                    break
            await asyncio.sleep(0.5)
        return notes
    finally:
        await api.close()


def run_reasons(workdir: Path, bin_dir: Path, timeout: float = 60.0) -> ReasonsReport:
    """Each scheduler on a fresh copy of :data:`REASONS`; their FailedScheduling events, pod by pod."""
    report = ReasonsReport()
    objects, pods = REASONS
    got: dict[str, dict[str, tuple[str, str]]] = {}
    try:
        for name, cls in SCHEDULERS.items():
            with fresh_cluster(workdir / name, bin_dir) as cluster, cls(cluster, workdir / name):
                got[name] = asyncio.run(_failed_scheduling(cluster, pods, objects, timeout))
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    for pod in pods:
        name = pod["metadata"]["name"]
        k = got.get(KUBE, {}).get(name, ("", ""))
        o = got.get(OUTRIGGER, {}).get(name, ("", ""))
        report.pods.append(PodReason(name, k[0], o[0], k[1], o[1]))
    return report
