"""PodGroup cycles on the real API server (kube-apiserver v1.37.2 with GenericWorkload and
``scheduling.k8s.io/v1beta1`` served), driven as a user does with kubectl, scheduled by ``outrigger serve
--feature-gates GenericWorkload=true`` and, with the same expectations, by the real kube-scheduler v1.37.2
with the same gate: a gang of four is bound as a whole, a gang that does not fit in what is left binds
nothing, and of two gangs that together do not fit one is bound whole while the other waits. What is
checked through the API: the pods bound, each PodGroup's ``PodGroupInitiallyScheduled`` condition, and
the FailedScheduling messages."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
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

PROFILE = "outrigger-scheduler"
KUBE_SCHEDULER = "kube-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 500, burst: 500}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
  plugins:
    # Their PodGroupPostFilter (preemption of groups, claims) is not modelled: without them the group's
    # status is kube-scheduler's own for a profile with no PodGroupPostFilter plugin.
    multiPoint: {{disabled: [{{name: DefaultPreemption}}, {{name: DynamicResources}}]}}
"""


def pod_group(name: str, namespace: str, min_count: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def member(name: str, namespace: str, group: str, cpu: str) -> dict[str, Any]:
    return pod_manifest(name, namespace, PROFILE, cpu=cpu, schedulingGroup={"podGroupName": group})


class Gangs:
    """Two nodes of 2 cpus and the scheduler under test (Outrigger, or kube-scheduler) with GenericWorkload on."""

    def __init__(self, cluster: LocalCluster, namespace: str, tmp_path: Path, scheduler: str) -> None:
        self.cluster, self.ns, self.tmp = cluster, namespace, tmp_path
        base = namespace[:40].rstrip("-")
        self.nodes = [f"{base}-a", f"{base}-b"]
        self.apply(*(node_manifest(n, cpu="2") for n in self.nodes))
        self.framework: FrameworkProcess | None = None
        self.kube: subprocess.Popen[bytes] | None = None
        if scheduler == KUBE_SCHEDULER:
            return
        config = tmp_path / "scheduler.yaml"
        config.write_text(CONFIG)
        self.framework = FrameworkProcess(outrigger_kubeconfig(cluster), config)
        self.framework.argv += ["--feature-gates", "GenericWorkload=true"]

    def start(self) -> None:
        if self.framework is not None:
            self.framework.start()
            return
        self.kube = start_kube_scheduler(self.cluster, self.tmp, CONFIG, "GenericWorkload=true")

    def apply(self, *docs: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def node_of(self, pod: str) -> str:
        found: str = get_json(self.cluster, "pod", pod, "-n", self.ns)["spec"].get("nodeName", "")
        return found

    def condition(self, group: str) -> tuple[str, str, str, int] | None:
        status = get_json(self.cluster, "podgroups.scheduling.k8s.io", group, "-n", self.ns).get("status") or {}
        for c in status.get("conditions") or ():
            if c["type"] == "PodGroupInitiallyScheduled":
                return c["status"], c["reason"], c["message"], c.get("observedGeneration", 0)
        return None

    def failed(self, pod: str) -> list[str]:
        items = get_json(self.cluster, "events.events.k8s.io", "-n", self.ns, "--field-selector",
                         f"reason=FailedScheduling,regarding.name={pod}")["items"]
        return [e["note"] for e in items]

    def close(self) -> None:
        if self.framework is not None:
            self.framework.stop()
        if self.kube is not None:
            stop_process(self.kube)


@pytest.fixture(params=["outrigger", KUBE_SCHEDULER])
def gangs(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[Gangs]:
    rig = Gangs(kube_cluster, kube_namespace, tmp_path, request.param)
    try:
        yield rig
    finally:
        rig.close()


def test_a_gang_of_four_is_bound_whole_and_one_that_does_not_fit_binds_nothing(gangs: Gangs) -> None:
    ns = gangs.ns
    gangs.start()
    # Four pods of 500m on two nodes of 2 cpus: the gang takes half the room.
    gangs.apply(pod_group("workers", ns, 4), *(member(f"w{i}", ns, "workers", "500m") for i in range(4)))
    wait_for(lambda: gangs.condition("workers"), 60, "the workers' condition")
    assert all(gangs.node_of(f"w{i}") in gangs.nodes for i in range(4))
    # observedGeneration is the PodGroup's metadata.generation, which this API server does not set for
    # PodGroups: 0, left out of the condition as kube-scheduler's omitempty leaves it.
    assert gangs.condition("workers") == ("True", "Scheduled", "", 0)
    # Three pods of 1 cpu, minCount 3, in the 2 cpus left: t0 and t1 fit, t2 does not, and nothing is bound.
    gangs.apply(pod_group("trainers", ns, 3), *(member(f"t{i}", ns, "trainers", "1") for i in range(3)))
    wait_for(lambda: gangs.condition("trainers"), 60, "the trainers' condition")
    group = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
    assert gangs.condition("trainers") == ("False", "Unschedulable", group, 0)
    notes = wait_for(lambda: [gangs.failed(f"t{i}") for i in range(3)] if all(
        gangs.failed(f"t{i}") for i in range(3)) else None, 60, "the trainers' FailedScheduling events")
    assert [n[0] for n in notes] == [
        f"pod group is unschedulable, {group}",
        f"pod group is unschedulable, {group}",
        "0/2 nodes are available: 2 Insufficient cpu.",
    ]
    assert [gangs.node_of(f"t{i}") for i in range(3)] == ["", "", ""]
    assert all(gangs.node_of(f"w{i}") for i in range(4))


def test_two_gangs_that_together_do_not_fit_one_is_bound_whole_the_other_waits(gangs: Gangs) -> None:
    ns = gangs.ns
    gangs.start()
    # 4 cpus; two gangs of three 1-cpu pods (minCount 3) applied at once: one is placed, the other waits.
    gangs.apply(pod_group("red", ns, 3), pod_group("blue", ns, 3),
                *(member(f"{g}{i}", ns, g, "1") for i in range(3) for g in ("red", "blue")))
    wait_for(lambda: gangs.condition("red") and gangs.condition("blue"), 60, "both conditions")
    conditions = {g: gangs.condition(g) for g in ("red", "blue")}
    placed = next(g for g, c in conditions.items() if c is not None and c[0] == "True")
    waiting = "blue" if placed == "red" else "red"
    assert conditions[placed] == ("True", "Scheduled", "", 0)
    # The waiting gang's first pod takes the last cpu, its second fits nowhere: 1 + 1 < 3.
    assert conditions[waiting] == ("False", "Unschedulable",
                                   "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, ", 0)
    assert all(gangs.node_of(f"{placed}{i}") in gangs.nodes for i in range(3))
    assert [gangs.node_of(f"{waiting}{i}") for i in range(3)] == ["", "", ""]
