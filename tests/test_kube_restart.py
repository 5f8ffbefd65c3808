"""A restarted framework relists and carries on: SIGKILL it while 2000 pods are being scheduled, start it
again, and every pod ends bound exactly once or pending with its reason, checked through the API.

20 nodes of 95 CPUs and 2000 pods of 1 CPU: 1900 pods fit, 100 cannot. The API server refuses a second
binding of a pod, the framework treats that refusal as handled; pods that the killed framework had
assumed but not bound are scheduled again by the new one.
"""

from __future__ import annotations

import collections
import ssl
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-scheduler"
NODES, NODE_CPU, PODS = 20, 95, 2000
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 2000, burst: 2000}}
leaderElection: {{leaderElect: false}}  # one framework (tests/test_kube_leader.py elects)
profiles:
- schedulerName: {PROFILE}
"""


def delete_all_pods(cluster: LocalCluster, namespace: str) -> None:
    """One deletecollection request, grace period 0 (kubectl deletes 2000 pods one request at a time)."""
    request = urllib.request.Request(
        f"{cluster.server}/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", method="DELETE",
        headers={"Authorization": f"Bearer {cluster.admin_token}"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(cluster.ca_file)),
                                timeout=60) as response:
        response.read()


def bound_count(cluster: LocalCluster, namespace: str) -> int:
    out = cluster.kubectl("get", "pods", "-n", namespace, "--field-selector", "spec.nodeName!=", "-o", "name").stdout
    return len(out.split())


def settled(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]] | None:
    """Every pod, once each is bound or has PodScheduled=False with a reason; None before."""
    pods: list[dict[str, Any]] = get_json(cluster, "pods", "-n", namespace)["items"]
    for pod in pods:
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        if not pod["spec"].get("nodeName") and conditions.get("PodScheduled", {}).get("reason") != "Unschedulable":
            return None
    return pods if len(pods) == PODS else None


def test_sigkill_while_scheduling_then_restart_binds_every_pod_once_or_leaves_it_pending_with_a_reason(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    names = [f"{kube_namespace[:40]}-{i}" for i in range(NODES)]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([node_manifest(n, str(NODE_CPU)) for n in names]))
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    first = FrameworkProcess(kubeconfig, config).start()
    second = FrameworkProcess(kubeconfig, config)
    try:
        batches = [[pod_manifest(f"p{i}", kube_namespace, PROFILE) for i in range(b, PODS, 4)] for b in range(4)]
        with ThreadPoolExecutor(4) as pool:  # four users creating pods at once
            creating = [pool.submit(kube_cluster.kubectl, "create", "-f", "-", input=yaml.safe_dump_all(batch),
                                    timeout=120) for batch in batches]
            wait_for(lambda: bound_count(kube_cluster, kube_namespace) >= 300, 60, "300 pods bound", interval=0.2)
            first.kill()
            killed_at = bound_count(kube_cluster, kube_namespace)
            for future in creating:
                future.result()
        assert killed_at < PODS - 100  # killed mid-way, not after the end
        second.start()
        pods = wait_for(lambda: settled(kube_cluster, kube_namespace), 120, "every pod bound or pending", interval=2)
    finally:
        first.kill()
        second.stop()
        delete_all_pods(kube_cluster, kube_namespace)
        kube_cluster.kubectl("delete", "node", *names)

    bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    per_node = collections.Counter(bound.values())
    assert max(per_node.values()) <= NODE_CPU  # no node over-committed (1 CPU a pod)
    assert (len(bound), len(pending)) == (NODES * NODE_CPU, PODS - NODES * NODE_CPU)
    messages = {c["message"].split(" preemption:")[0] for p in pending
                for c in p["status"]["conditions"] if c["type"] == "PodScheduled"}
    assert messages == {f"0/{NODES} nodes are available: {NODES} Insufficient cpu."}
    # Bound exactly once: the one Scheduled event a pod may have names the node the API has for it.
    events = get_json(kube_cluster, "events.events.k8s.io", "-n", kube_namespace,
                      "--field-selector", "reason=Scheduled")["items"]
    scheduled = collections.Counter(e["regarding"]["name"] for e in events)
    assert max(scheduled.values()) == 1
    assert all(e["note"] == f"Successfully assigned {kube_namespace}/{e['regarding']['name']} to "
               f"{bound[e['regarding']['name']]}" for e in events)
    assert "Traceback" not in second.output()
