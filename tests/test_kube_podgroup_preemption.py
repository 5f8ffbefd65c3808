"""Preemption for a PodGroup on the real API server (kube-apiserver v1.37.2 with GenericWorkload and
``scheduling.k8s.io/v1beta1`` served), scheduled by ``outrigger serve --feature-gates GenericWorkload=true``
with kube-scheduler's default plugins: a high-priority gang that does not fit preempts a lower-priority
gang whose PodGroup says ``disruptionMode: all``, every pod of that gang is evicted (DisruptionTarget, then
deleted), and the high-priority gang is bound whole once they are gone. The same expectations are
checked with the real kube-scheduler v1.37.2 (same gate, same profile).

No kubelet runs, so a deleted bound pod stays Terminating: the test finishes the deletions itself
(``--grace-period=0 --force``), as in test_kube_preemption.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import (
    FrameworkProcess,
    get_json,
    node_manifest,
    outrigger_kubeconfig,
    pod_manifest,
    start_kube_scheduler,
    stop_process,
    wait_for,
)

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-group-preemption"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 500, burst: 500}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
"""
HIGH = "outrigger-group-preemption-high"


def pod_group(name: str, ns: str, min_count: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec}}


def member(name: str, ns: str, group: str, **spec: Any) -> dict[str, Any]:
    return pod_manifest(name, ns, PROFILE, cpu="1", schedulingGroup={"podGroupName": group}, **spec)


@pytest.mark.parametrize("scheduler", ["outrigger", "kube-scheduler"])
def test_a_high_priority_gang_evicts_a_lower_priority_gang_whole_and_is_bound_whole(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path, scheduler: str) -> None:
    cluster, ns = kube_cluster, kube_namespace
    base = ns[:40].rstrip("-")
    nodes = [f"{base}-a", f"{base}-b"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [*(node_manifest(n, cpu="2") for n in nodes),
         {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": HIGH}, "value": 1000}]))
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    proc: FrameworkProcess | None = None
    kube: subprocess.Popen[bytes] | None = None
    if scheduler == "outrigger":
        proc = FrameworkProcess(outrigger_kubeconfig(cluster), config)
        proc.argv += ["--feature-gates", "GenericWorkload=true"]
        proc.start()
    else:
        kube = start_kube_scheduler(cluster, tmp_path, CONFIG, "GenericWorkload=true")
    try:
        def node_of(pod: str) -> str:
            obj = get_json(cluster, "pod", pod, "-n", ns)
            return str(obj["spec"].get("nodeName") or "")

        # The low gang fills both nodes (4 cpus).
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [pod_group("low", ns, 4, disruptionMode={"all": {}}),
             *(member(f"low{i}", ns, "low") for i in range(4))]))
        wait_for(lambda: all(node_of(f"low{i}") for i in range(4)), 90, "the low gang to be bound")
        high_group = pod_group("high", ns, 2, priorityClassName=HIGH)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [high_group, *(member(f"high{i}", ns, "high", priorityClassName=HIGH) for i in range(2))]))
        pg = get_json(cluster, "podgroups.scheduling.k8s.io", "high", "-n", ns)
        assert pg["spec"]["priority"] == 1000  # the API server resolves the class

        def terminating() -> list[dict[str, Any]] | None:
            objs = [get_json(cluster, "pod", f"low{i}", "-n", ns) for i in range(4)]
            return objs if all(o["metadata"].get("deletionTimestamp") for o in objs) else None

        victims = wait_for(terminating, 90, "every pod of the low gang to be Terminating")
        for obj in victims:
            cond = next(c for c in obj["status"]["conditions"] if c["type"] == "DisruptionTarget")
            assert {k: cond[k] for k in ("status", "reason", "message")} == {
                "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{PROFILE}: preempting to accommodate a higher priority podgroup"}
        notes = wait_for(lambda: [e for e in get_json(cluster, "events.events.k8s.io", "-n", ns, "--field-selector",
                                                      "reason=Preempted")["items"]] or None, 60, "Preempted events")
        assert {(e["regarding"]["name"], e["note"], e["related"]["kind"]) for e in notes} >= {
            (f"low{i}", f"Preempted by podgroup {pg['metadata']['uid']} on node cluster", "PodGroup")
            for i in range(4)}
        # Nothing of the high gang is bound while the victims are still there.
        assert [node_of(f"high{i}") for i in range(2)] == ["", ""]
        cluster.kubectl("delete", "pod", *(f"low{i}" for i in range(4)), "-n", ns, "--grace-period=0", "--force")
        wait_for(lambda: all(node_of(f"high{i}") for i in range(2)), 90, "the high gang to be bound")
        assert all(node_of(f"high{i}") in nodes for i in range(2))
        status = get_json(cluster, "podgroups.scheduling.k8s.io", "high", "-n", ns).get("status") or {}
        cond = next(c for c in status.get("conditions") or () if c["type"] == "PodGroupInitiallyScheduled")
        assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
    finally:
        if proc is not None:
            proc.stop()
        if kube is not None:
            stop_process(kube)
        cluster.kubectl("delete", "node", *nodes, "--ignore-not-found")
        cluster.kubectl("delete", "priorityclass", HIGH, "--ignore-not-found")
