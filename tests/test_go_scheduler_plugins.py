"""Plugins from sigs.k8s.io/scheduler-plugins, unmodified, schedule real pods on the live test apiserver
through Outrigger.

``outrigger-scheduler-plugins`` (clients/go/schedplugins: its own Go module, at the Kubernetes release
scheduler-plugins v0.34.7 is built against) serves Coscheduling and NodeResourcesAllocatable behind the Go
adapter, with ``--kubeconfig`` so that their Handle's ClientSet and informers are the live apiserver's.
The PodGroup CRD is applied from the scheduler-plugins module in Go's module cache, as its release ships it.

- Coscheduling places a gang all-or-nothing: a PodGroup of minMember N whose N pods fit is bound whole (the
  first N-1 wait in Permit until the last one allows them); one whose N pods cannot all fit binds none, and
  its pods stay pending with Coscheduling's reasons.
- NodeResourcesAllocatable's score decides a placement: the node with the least allocatable CPU, where the
  default plugins pick the emptiest one.

- Pods created while Outrigger runs are not left waiting for the five-minute flush: a gang's pods created
  one by one are bound once the last one comes (its Permit names the others to activate, as kube-scheduler's
  PodsToActivate does), and pods created before their PodGroup are bound once it is created (the framework
  watches PodGroups, the custom resource Coscheduling registers events for).

The first two cases create a gang's pods before the framework starts, the last two while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_go_plugins import BIN, BUILD_SECONDS, GO_DIR, GoHost, _go

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube
T = TypeVar("T")

MODULE_DIR = GO_DIR / "schedplugins"
COMMAND = "outrigger-scheduler-plugins"
TAGS = "k8s1.34"  # the adapter's framework types at Kubernetes 1.34 (clients/go/kube/internal/fwk)
SCHEDULER_PLUGINS = "sigs.k8s.io/scheduler-plugins"
CRD = "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

GANG, ALLOCATABLE, DEFAULT = "sp-gang", "sp-allocatable", "sp-default"  # the profiles (schedulerName)
PERMIT_WAIT_SECONDS = 30


@pytest.fixture(scope="module")
def scheduler_plugins() -> Path:
    """``outrigger-scheduler-plugins``, built as ``make go-build`` builds it."""
    go = _go()
    out = BIN / COMMAND
    env = {**os.environ, "CGO_ENABLED": "0"}
    done = subprocess.run([go, "build", "-trimpath", "-tags", TAGS, "-o", str(out), f"./cmd/{COMMAND}"],
                          cwd=MODULE_DIR, env=env, capture_output=True, text=True, timeout=BUILD_SECONDS)
    assert done.returncode == 0, f"go build ./cmd/{COMMAND} failed:\n{done.stderr[-4000:]}"
    return out


def podgroup_crd() -> Path:
    """The PodGroup CRD of the scheduler-plugins release the module pins, from Go's module cache."""
    done = subprocess.run([_go(), "list", "-m", "-f", "{{.Dir}}", SCHEDULER_PLUGINS], cwd=MODULE_DIR,
                          capture_output=True, text=True, timeout=120, check=True)
    return Path(done.stdout.strip()) / CRD


def scheduler_config() -> dict[str, Any]:
    def profile(name: str, plugin: str | None = None, weight: int = 1, args: dict[str, Any] | None = None) -> Any:
        if plugin is None:
            return {"schedulerName": name}
        return {"schedulerName": name,
                "plugins": {"multiPoint": {"enabled": [{"name": plugin, "weight": weight}]}},
                "pluginConfig": [{"name": plugin, "args": args or {}}]}

    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [
                profile(GANG, "Coscheduling", args={"permitWaitingTimeSeconds": PERMIT_WAIT_SECONDS}),
                # Weighted so that its score outweighs the default plugins' (NodeResourcesFit prefers room).
                profile(ALLOCATABLE, "NodeResourcesAllocatable", weight=10, args={"mode": "Least"}),
                profile(DEFAULT),
            ]}


@contextlib.contextmanager
def scheduling(cluster: LocalCluster, binary: Path, tmp_path: Path, nodes: dict[str, str],
               objects: list[dict[str, Any]]) -> Iterator[FrameworkProcess]:
    """Nodes (name -> cpu) and ``objects`` in the cluster, then the plugin host and the framework started
    on it; on the way out the framework and host stop and the nodes go."""
    cluster.kubectl("apply", "-f", str(podgroup_crd()))
    cluster.kubectl("wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=30s")
    docs = [node_manifest(name, cpu=cpu, labels={"kubernetes.io/hostname": name}) for name, cpu in nodes.items()]
    config, plugins = tmp_path / "scheduler.yaml", tmp_path / "remote-plugins.yaml"
    config.write_text(json.dumps(scheduler_config()))
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        if objects:
            cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objects))
        with GoHost(binary, "--kubeconfig", str(cluster.admin_kubeconfig)) as host:
            plugins.write_text(json.dumps({"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
                                           "plugins": [{"name": "scheduler-plugins", "address": host.address}]}))
            framework = FrameworkProcess(outrigger_kubeconfig(cluster), config, plugins).start()
            try:
                yield framework
            finally:
                framework.stop()
                print(framework.output())  # shown when the test fails
    finally:
        cluster.kubectl("delete", "node", *nodes, "--ignore-not-found")


def pod_group(name: str, namespace: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": min_member}}


def gang(group: str, namespace: str, size: int, cpu: str) -> list[dict[str, Any]]:
    pods = []
    for i in range(size):
        pod = pod_manifest(f"{group}-{i}", namespace, GANG, cpu=cpu)
        pod["metadata"]["labels"] = {POD_GROUP_LABEL: group}
        pods.append(pod)
    return pods


def placements(cluster: LocalCluster, namespace: str) -> dict[str, str]:
    """Pod name -> its node ("" while unbound)."""
    pods = get_json(cluster, "pods", "-n", namespace)["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


def unschedulable(cluster: LocalCluster, namespace: str) -> dict[str, str]:
    """Pod name -> the message of its PodScheduled=False condition, for the pods that have one."""
    out = {}
    for p in get_json(cluster, "pods", "-n", namespace)["items"]:
        for c in p.get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                out[p["metadata"]["name"]] = c.get("message", "")
    return out


def all_of(check: Callable[[], dict[str, T]], names: list[str]) -> Callable[[], dict[str, T] | None]:
    """``check``'s answer once it has a non-empty value for each of ``names`` (None until then)."""
    def done() -> dict[str, T] | None:
        got = check()
        return got if all(got.get(n) for n in names) else None
    return done


def failed_scheduling(cluster: LocalCluster, namespace: str) -> dict[str, list[str]]:
    """Pod name -> the notes of its FailedScheduling events, one per attempt (a repeated note counts again)."""
    out: dict[str, list[str]] = {}
    for ev in get_json(cluster, "events", "-n", namespace)["items"]:
        if ev.get("reason") == "FailedScheduling":
            out.setdefault(ev["involvedObject"]["name"], []).extend([ev.get("message", "")] * (ev.get("count") or 1))
    return out


NODES = {"sp-a": "4", "sp-b": "4"}


def test_coscheduling_binds_a_gang_whose_pods_all_fit(
    scheduler_plugins: Path, kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path
) -> None:
    pods = gang("fits", kube_namespace, 3, cpu="1")
    with scheduling(kube_cluster, scheduler_plugins, tmp_path, NODES,
                    [pod_group("fits", kube_namespace, 3), *pods]):
        names = [p["metadata"]["name"] for p in pods]
        bound = wait_for(all_of(lambda: placements(kube_cluster, kube_namespace), names), 60, "the gang to bind")
        failures = failed_scheduling(kube_cluster, kube_namespace)
    assert sorted(bound) == names and set(bound.values()) <= set(NODES)
    assert failures == {}  # the first two waited in Permit for the third, none was turned away


def test_coscheduling_binds_none_of_a_gang_whose_pods_cannot_all_fit(
    scheduler_plugins: Path, kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path
) -> None:
    # Three pods of 3 CPUs, two nodes of 4: two of them fit (one a node) and wait in Permit, never the third.
    pods = gang("toobig", kube_namespace, 3, cpu="3")
    names = [p["metadata"]["name"] for p in pods]
    with scheduling(kube_cluster, scheduler_plugins, tmp_path, NODES, [pod_group("toobig", kube_namespace, 3), *pods]):
        why = wait_for(all_of(lambda: unschedulable(kube_cluster, kube_namespace), names), 60,
                       "every pod of the gang to be unschedulable")
        events = wait_for(all_of(lambda: failed_scheduling(kube_cluster, kube_namespace), names), 30,
                          "a FailedScheduling event for every pod")
        bound = placements(kube_cluster, kube_namespace)
    assert bound == dict.fromkeys(names, "")
    # The pod that found no node: kube-scheduler's FitError, then Coscheduling's PostFilter rejecting the
    # group; the pods waiting in Permit: rejected by that PostFilter (Coscheduling's own words).
    rejected = "optimistic rejection in PostFilter"

    def unfit(pod: str, message: str) -> bool:
        return message.startswith("0/2 nodes are available: 2 Insufficient cpu.") and message.endswith(
            f", PodGroup {kube_namespace}/toobig gets rejected due to Pod {pod} is unschedulable even after PostFilter")

    notes = [(n, m) for n, ms in events.items() for m in ms]
    for pod, message in [*why.items(), *notes]:
        assert message == rejected or unfit(pod, message), (pod, message)
    assert {m == rejected for _, m in notes} == {True, False}, notes  # both were said


# Pods created while the framework and the host run: bound well before the five-minute flush would retry
# them (a bound on behaviour, not on speed).
SETTLE_SECONDS = 60
PAUSE_SECONDS = 2  # between one pod and the next: each is tried, and turned away, before the next comes


def create(cluster: LocalCluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(objects))


def test_coscheduling_binds_a_gang_whose_pods_are_created_one_by_one_while_outrigger_runs(
    scheduler_plugins: Path, kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path
) -> None:
    # The first two are turned away by PreFilter (too few pods in the group); the third's Permit waits
    # and names the other two to activate, which moves them out of the unschedulable pool at once.
    pods = gang("onebyone", kube_namespace, 3, cpu="1")
    names = [p["metadata"]["name"] for p in pods]
    with scheduling(kube_cluster, scheduler_plugins, tmp_path, NODES, [pod_group("onebyone", kube_namespace, 3)]):
        for i, pod in enumerate(pods):
            if i:
                time.sleep(PAUSE_SECONDS)
            create(kube_cluster, pod)
        bound = wait_for(all_of(lambda: placements(kube_cluster, kube_namespace), names), SETTLE_SECONDS,
                         "the gang created pod by pod to bind")
        failures = failed_scheduling(kube_cluster, kube_namespace)
    assert sorted(bound) == names and set(bound.values()) <= set(NODES)
    assert set(failures) <= set(names[:2]), failures  # only the pods that came before the group was whole


def test_coscheduling_binds_a_gang_whose_podgroup_is_created_after_its_pods(
    scheduler_plugins: Path, kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path
) -> None:
    # Without their PodGroup, Coscheduling's Permit turns every pod away ("PodGroup not found"); the
    # PodGroup's creation is an event Coscheduling registered, which moves them.
    pods = gang("late", kube_namespace, 3, cpu="1")
    names = [p["metadata"]["name"] for p in pods]
    with scheduling(kube_cluster, scheduler_plugins, tmp_path, NODES, []):
        create(kube_cluster, *pods)
        why = wait_for(all_of(lambda: unschedulable(kube_cluster, kube_namespace), names), SETTLE_SECONDS,
                       "every pod to be turned away for want of its PodGroup")
        create(kube_cluster, pod_group("late", kube_namespace, 3))
        bound = wait_for(all_of(lambda: placements(kube_cluster, kube_namespace), names), SETTLE_SECONDS,
                         "the gang to bind once its PodGroup exists")
    assert set(why.values()) == {"PodGroup not found"}, why
    assert sorted(bound) == names and set(bound.values()) <= set(NODES)


# NodeResourcesAllocatable (mode Least) prefers the node with the least allocatable CPU; the default
# plugins (NodeResourcesFit's LeastAllocated) the emptiest.
SCORE_NODES = {"sp-small": "2", "sp-big": "8"}


def test_node_resources_allocatable_picks_the_smallest_node_where_the_default_plugins_pick_the_emptiest(
    scheduler_plugins: Path, kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path
) -> None:
    pods = [pod_manifest("allocatable", kube_namespace, ALLOCATABLE, cpu="1"),
            pod_manifest("default", kube_namespace, DEFAULT, cpu="1")]
    with scheduling(kube_cluster, scheduler_plugins, tmp_path, SCORE_NODES, pods):
        bound = wait_for(all_of(lambda: placements(kube_cluster, kube_namespace), ["allocatable", "default"]), 60,
                         "both pods to bind")
    assert bound == {"allocatable": "sp-small", "default": "sp-big"}


def test_the_host_says_it_was_built_against_kubernetes_1_34(scheduler_plugins: Path) -> None:
    # scheduler-plugins v0.34.7's release: schedplugins/go.mod replaces k8s.io/kubernetes with v1.34.7.
    done = subprocess.run([str(scheduler_plugins), "--version"], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "outrigger scheduler-plugins host 0.1.0-go kubernetes/v1.34.7\n", "")
