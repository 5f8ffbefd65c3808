"""Outrigger scheduling a real kube-apiserver: what a user sees through kubectl.

One framework process (``outrigger serve --kubeconfig``, with the token of deploy/kubernetes/rbac.yaml's
service account) serves the profile ``outrigger-scheduler``: kube-scheduler's default plugins plus the
example NodeLabels plugin served by its own plugin host process, so a remote plugin takes part in every
decision below. Two nodes: ``kr-ssd`` (``disktype=ssd``) and ``kr-hdd``, 4 CPUs each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_remote_harness import HostProcess

from pluginhost.examples.nodelabels import REQUIRE
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 1000, burst: 1000}}
leaderElection: {{leaderElect: false}}  # one framework (tests/test_kube_leader.py elects)
profiles:
- schedulerName: {PROFILE}
  plugins:
    multiPoint:
      enabled:
      - name: NodeLabels
"""
NODES = ("kr-ssd", "kr-hdd")


@pytest.fixture(scope="module")
def framework(kube_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrameworkProcess]:
    workdir = tmp_path_factory.mktemp("outrigger")
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    nodes = [node_manifest("kr-ssd", labels={"disktype": "ssd"}), node_manifest("kr-hdd")]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(nodes))
    with HostProcess("pluginhost.examples.nodelabels:NodeLabels") as host:
        config, plugins = workdir / "scheduler.yaml", workdir / "remote-plugins.yaml"
        config.write_text(CONFIG)
        plugins.write_text(yaml.safe_dump({"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
                                           "plugins": [{"name": "labels", "address": host.address}]}))
        proc = FrameworkProcess(kubeconfig, config, plugins).start()
        try:
            yield proc
        finally:
            proc.stop()
            kube_cluster.kubectl("delete", "node", *NODES)


def create(cluster: LocalCluster, *pods: dict[str, object]) -> None:
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(pods))


def wide_node(cluster: LocalCluster, namespace: str, name: str) -> str:
    """The NODE column of ``kubectl get pod -o wide``."""
    row = cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "wide", "--no-headers").stdout.split()
    return row[6]


def describe_events(cluster: LocalCluster, namespace: str, name: str) -> list[list[str]]:
    """The Events rows of ``kubectl describe pod``: [type, reason, from, message]."""
    text = cluster.kubectl("describe", "pod", name, "-n", namespace).stdout
    rows = []
    for line in text.split("Events:", 1)[1].splitlines()[3:]:
        m = re.match(r"\s+(\w+)\s+(\w+)\s+\S+\s+(\S+)\s+(.*)$", line)
        if m:
            rows.append([m[1], m[2], m[3], m[4].strip()])
    return rows


def pod_scheduled(cluster: LocalCluster, namespace: str, name: str) -> dict[str, str] | None:
    conditions = get_json(cluster, "pod", name, "-n", namespace)["status"].get("conditions") or []
    cond = next((c for c in conditions if c["type"] == "PodScheduled"), None)
    return None if cond is None else {k: cond.get(k, "") for k in ("status", "reason", "message")}


def test_the_framework_runs_with_the_outrigger_scheduler_role(framework: FrameworkProcess,
                                                              kube_cluster: LocalCluster) -> None:
    kubeconfig = framework.argv[framework.argv.index("--kubeconfig") + 1]
    who = kube_cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}",
                               kubeconfig=Path(kubeconfig)).stdout
    assert who == "system:serviceaccount:outrigger:outrigger"
    assert "in sync with the cluster: " in framework.output()


def test_pod_of_a_profile_is_bound_where_the_remote_plugin_lets_it(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str) -> None:
    create(kube_cluster, pod_manifest("web", kube_namespace, PROFILE, annotations={REQUIRE: "disktype=ssd"}))
    node = wait_for(lambda: wide_node(kube_cluster, kube_namespace, "web") not in ("<none>", "") and
                    wide_node(kube_cluster, kube_namespace, "web"), 30, "web to be bound")
    assert node == "kr-ssd"
    rows = wait_for(lambda: describe_events(kube_cluster, kube_namespace, "web"), 20, "web's events")
    assert rows == [["Normal", "Scheduled", PROFILE, f"Successfully assigned {kube_namespace}/web to kr-ssd"]]
    assert pod_scheduled(kube_cluster, kube_namespace, "web") == {"status": "True", "reason": "", "message": ""}


FITS_NOWHERE = [  # (name, cpu, annotations, the fit message)
    # More than a whole node: evicting pods cannot help (UnschedulableAndUnresolvable), as in kube-scheduler.
    ("too-big", "64", {},
     "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are "
     "available: 2 Preemption is not helpful for scheduling."),
    ("no-gpu-node", "1", {REQUIRE: "gpu"},
     "0/2 nodes are available: 2 node(s) didn't have the required label(s) gpu. "
     "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."),
]


@pytest.mark.parametrize(("name", "cpu", "annotations", "message"), FITS_NOWHERE, ids=[c[0] for c in FITS_NOWHERE])
def test_pod_that_fits_nowhere_shows_failed_scheduling_and_the_condition(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str,
        name: str, cpu: str, annotations: dict[str, str], message: str) -> None:
    create(kube_cluster, pod_manifest(name, kube_namespace, PROFILE, cpu=cpu, annotations=annotations))
    cond = wait_for(lambda: pod_scheduled(kube_cluster, kube_namespace, name), 30, f"{name}'s condition")
    assert cond == {"status": "False", "reason": "Unschedulable", "message": message}
    rows = wait_for(lambda: describe_events(kube_cluster, kube_namespace, name), 20, f"{name}'s events")
    assert rows[0] == ["Warning", "FailedScheduling", PROFILE, message]
    assert wide_node(kube_cluster, kube_namespace, name) == "<none>"


def test_pod_for_another_scheduler_is_left_alone(framework: FrameworkProcess, kube_cluster: LocalCluster,
                                                 kube_namespace: str) -> None:
    create(kube_cluster, pod_manifest("theirs", kube_namespace, "someone-else"))
    create(kube_cluster, pod_manifest("ours", kube_namespace, PROFILE))  # seen after "theirs" on the watch
    wait_for(lambda: wide_node(kube_cluster, kube_namespace, "ours") != "<none>", 30, "ours to be bound")
    pod = get_json(kube_cluster, "pod", "theirs", "-n", kube_namespace)
    assert (pod["spec"].get("nodeName"), pod["status"].get("conditions")) == (None, None)
    events = get_json(kube_cluster, "events.events.k8s.io", "-n", kube_namespace,
                      "--field-selector", "regarding.name=theirs")["items"]
    assert events == []


def test_pod_outrigger_cannot_model_gets_failed_scheduling_naming_the_reason(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str) -> None:
    # The API server takes each quantity up to an int64; Outrigger's columns need their sum to fit too.
    pod = pod_manifest("huge", kube_namespace, PROFILE)
    pod["spec"]["containers"] = [{"name": n, "image": "registry.k8s.io/pause:3.10",
                                  "resources": {"requests": {"memory": "8E"}}} for n in ("a", "b")]
    create(kube_cluster, pod)
    message = ("Outrigger cannot schedule this pod: spec.containers: the pod's memory requests add up to more "
               "than the largest quantity")
    cond = wait_for(lambda: pod_scheduled(kube_cluster, kube_namespace, "huge"), 30, "the condition")
    assert cond == {"status": "False", "reason": "SchedulerError", "message": message}
    rows = wait_for(lambda: describe_events(kube_cluster, kube_namespace, "huge"), 20, "the event")
    assert rows == [["Warning", "FailedScheduling", PROFILE, message]]
    assert f"pod {kube_namespace}/huge: {message}" in framework.output()
