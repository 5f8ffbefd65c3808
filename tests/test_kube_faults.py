"""Faults on the live cluster: a forbidden API and an API server that goes away. Each is logged in one
line naming the verb and the resource, retried with backoff, and scheduling resumes by itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kube_framework import DEPLOY, STARTUP_SECONDS, FrameworkProcess, node_manifest, pod_manifest, wait_for

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}  # one framework (tests/test_kube_leader.py elects)
profiles:
- schedulerName: {PROFILE}
"""


def node_of(cluster: LocalCluster, namespace: str, name: str) -> str:
    return cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "jsonpath={.spec.nodeName}").stdout


def test_forbidden_list_is_logged_once_and_scheduling_starts_when_the_role_is_granted(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    account = f"nobody-{kube_namespace[:40]}"
    kubeconfig = kube_cluster.service_account_kubeconfig(kube_namespace, account)  # no role yet
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node)))
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    proc = FrameworkProcess(kubeconfig, config).start(wait_synced=False)
    try:
        # The first list follows the process's start-up, which takes tens of seconds on a loaded machine.
        line = wait_for(lambda: next((x for x in proc.lines if "list nodes: 403 Forbidden" in x), ""),
                        STARTUP_SECONDS + 30, "the forbidden line")
        assert line.split(" WARNING ", 1)[1] == (
            f'outrigger.kube: list nodes: 403 Forbidden: nodes is forbidden: User '
            f'"system:serviceaccount:{kube_namespace}:{account}" cannot list resource "nodes" in API group "" '
            f"at the cluster scope; retrying with backoff ({line.split('backoff (')[1]}"
        )
        assert line.endswith("s, doubling to 30s)")
        kube_cluster.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"), "-f", str(DEPLOY / "rbac.yaml"))
        kube_cluster.kubectl("create", "clusterrolebinding", f"outrigger-scheduler:{account}",
                             "--clusterrole=outrigger-scheduler", f"--serviceaccount={kube_namespace}:{account}")
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(pod_manifest("late", kube_namespace, PROFILE)))
        assert wait_for(lambda: node_of(kube_cluster, kube_namespace, "late"), 60, "the pod to be bound") == node
        forbidden = [x for x in proc.lines if "list nodes: 403 Forbidden" in x]
        assert len(forbidden) == 1  # one line for the whole streak, not one per retry
        assert any("nodes: the API server answers again" in x for x in proc.lines)
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "node", node)
        kube_cluster.kubectl("delete", "clusterrolebinding", f"outrigger-scheduler:{account}", check=False)


def test_api_server_restart_is_ridden_out_and_scheduling_resumes(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kube_cluster.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"), "-f", str(DEPLOY / "rbac.yaml"))
    kubeconfig = kube_cluster.service_account_kubeconfig("outrigger", "outrigger")
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node)))
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    proc = FrameworkProcess(kubeconfig, config).start()
    try:
        kube_cluster.restart_apiserver()
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(pod_manifest("after", kube_namespace, PROFILE)))
        assert wait_for(lambda: node_of(kube_cluster, kube_namespace, "after"), 90, "the pod to be bound") == node
        assert "Traceback" not in proc.output()
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "node", node)
