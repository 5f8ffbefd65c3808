"""On a live cluster: InterPodAffinity's namespaceSelector reads the Namespace labels the informer holds
(labels set after the framework started included), and the Scheduler API refuses Delete in one line, as
it refuses Apply: the API server holds the objects. The plugin's two sources of namespace labels (the
Handle's, or its args in the embedded store) are table-tested below without a cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for

from framework.plugins.interpodaffinity import InterPodAffinity
from tools.localcluster import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "outrigger-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
"""
HOSTNAME = "kubernetes.io/hostname"


def affinity_to(labels: dict[str, str], namespace_labels: dict[str, str]) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "namespaceSelector": {"matchLabels": namespace_labels},
            "topologyKey": HOSTNAME}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def pod_status(cluster: LocalCluster, namespace: str, name: str) -> tuple[str, str]:
    """(node, the PodScheduled=False message) of a pod."""
    out = cluster.kubectl("get", "pod", name, "-n", namespace, "-o",
                          "jsonpath={.spec.nodeName}|{.status.conditions[?(@.type=='PodScheduled')].message}").stdout
    node, _, message = out.partition("|")
    return node, message


@pytest.mark.kube
def test_namespace_selector_reads_live_namespace_labels_and_delete_is_refused(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    other = f"{kube_namespace[:55]}-db"
    team = kube_namespace[-40:].strip("-")
    nodes = [f"{kube_namespace[:40]}-n{i}" for i in range(3)]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [node_manifest(n, labels={HOSTNAME: n}) for n in nodes]))
    kube_cluster.kubectl("create", "namespace", other)
    # A database pod already bound to the second node, in the other namespace.
    db = pod_manifest("db", other, PROFILE)
    db["metadata"]["labels"] = {"app": "db"}
    db["spec"]["nodeName"] = nodes[1]
    kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(db))
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    proc = FrameworkProcess(kubeconfig, config).start()
    try:
        # Labelled after the framework listed the namespaces: the informer's update carries the label.
        kube_cluster.kubectl("label", "namespace", other, f"team={team}")
        near = pod_manifest("near", kube_namespace, PROFILE, affinity=affinity_to({"app": "db"}, {"team": team}))
        nowhere = pod_manifest("nowhere", kube_namespace, PROFILE,
                               affinity=affinity_to({"app": "db"}, {"team": f"{team}-none"}))
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all([near, nowhere]))
        assert wait_for(lambda: pod_status(kube_cluster, kube_namespace, "near")[0], 60, "near to be bound") == nodes[1]
        message = wait_for(lambda: pod_status(kube_cluster, kube_namespace, "nowhere")[1], 60, "nowhere's reason")
        assert message.startswith("0/") and "didn't match pod affinity rules" in message

        address = next(m[1] for line in proc.lines if (m := re.search(r"serving on (\S+)", line)))
        deleted = subprocess.run([sys.executable, "-m", "framework.cli", "delete", "pod", "near", "-n", kube_namespace,
                                  "--server", address], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert deleted.returncode != 0
        assert deleted.stderr.strip().splitlines() == [
            "error: this framework schedules a Kubernetes cluster: delete pods and nodes through its API server "
            "(kubectl delete)"]
        assert pod_status(kube_cluster, kube_namespace, "near")[0] == nodes[1]  # nothing changed
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "pods", "--all", "-n", other, "--grace-period=0", "--force")
        kube_cluster.kubectl("delete", "namespace", other, "--wait=false")
        kube_cluster.kubectl("delete", "node", *nodes)


class _Handle:
    def __init__(self, labels: Mapping[str, Mapping[str, str]] | None) -> None:
        self.labels = labels

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        if self.labels is None:
            return None
        return self.labels.get(namespace) or {}


LIVE = {"a": {"team": "x", "kubernetes.io/metadata.name": "a"}}
CASES = [
    # (handle, plugin args, namespace, labels the plugin sees)
    ("live: the API server's labels", _Handle(LIVE), {"namespaceLabels": {"a": {"team": "y"}}}, "a",
     {"team": "x", "kubernetes.io/metadata.name": "a"}),
    ("live: a namespace the informer does not have has none", _Handle(LIVE), {}, "gone", {}),
    ("embedded store: the args, plus the name label", _Handle(None), {"namespaceLabels": {"a": {"team": "y"}}}, "a",
     {"team": "y", "kubernetes.io/metadata.name": "a"}),
    ("no handle: the args, plus the name label", None, {}, "b", {"kubernetes.io/metadata.name": "b"}),
]


@pytest.mark.parametrize(("handle", "args", "namespace", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_namespace_labels_come_from_the_cluster_when_it_has_namespaces(
        handle: _Handle | None, args: dict[str, Any], namespace: str, want: dict[str, str]) -> None:
    plugin = InterPodAffinity(args, handle)  # type: ignore[arg-type]
    assert dict(plugin.namespace_labels(namespace)) == want


def test_live_labels_are_read_each_time_not_kept() -> None:
    labels: dict[str, dict[str, str]] = {"a": {"team": "x"}}
    plugin = InterPodAffinity({}, _Handle(labels))  # type: ignore[arg-type]
    assert dict(plugin.namespace_labels("a")) == {"team": "x"}
    labels["a"] = {"team": "z"}  # the informer saw the namespace relabelled
    assert dict(plugin.namespace_labels("a")) == {"team": "z"}
