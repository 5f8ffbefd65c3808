"""Preemption on a real kube-apiserver: what a user sees through kubectl.

One framework process (``outrigger serve --kubeconfig``, with deploy/kubernetes/rbac.yaml's service
account) serves the profile ``outrigger-preemption`` with kube-scheduler's default plugins. Priorities
come from PriorityClass objects named by the pods' ``priorityClassName`` (the API server's Priority
admission sets ``spec.priority``). Victims are bound by ``spec.nodeName`` when created.

No kubelet runs here, so a deleted pod that is bound stays Terminating for good: the tests play the
kubelet and finish each victim's deletion (``--grace-period=0 --force``) when they choose, which is
when the preemptor's room really frees. No disruption controller runs either, so each
PodDisruptionBudget's status is written by the test through the ``status`` subresource, as the
disruption controller would write it (``disruptionsAllowed`` is what the scheduler reads).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for

from clients.client import SchedulerClient
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-preemption"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 1000, burst: 1000}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
"""
PRIORITIES = {"low": 100, "mid": 500, "high": 1000}
PREFIX = "outrigger-preemption-"  # the PriorityClasses' names (cluster-scoped)


@pytest.fixture(scope="module")
def framework(kube_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrameworkProcess]:
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": PREFIX + name},
                "value": value} for name, value in PRIORITIES.items()]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(classes))
    config = tmp_path_factory.mktemp("outrigger-preemption") / "scheduler.yaml"
    config.write_text(CONFIG)
    proc = FrameworkProcess(outrigger_kubeconfig(kube_cluster), config).start()
    try:
        yield proc
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "priorityclass", *(PREFIX + n for n in PRIORITIES))


@contextlib.contextmanager
def cluster_nodes(cluster: LocalCluster, cpus: dict[str, str]) -> Iterator[None]:
    """Nodes (name -> CPUs) for one test, deleted afterwards (those the test did not delete itself)."""
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([node_manifest(n, cpu=c) for n, c in cpus.items()]))
    try:
        yield
    finally:
        cluster.kubectl("delete", "node", *cpus, "--ignore-not-found")


def describe_events(cluster: LocalCluster, namespace: str, name: str) -> list[list[str]]:
    """The Events rows of ``kubectl describe pod``: [type, reason, from, message]."""
    text = cluster.kubectl("describe", "pod", name, "-n", namespace).stdout
    rows = []
    for line in text.split("Events:", 1)[1].splitlines()[3:]:
        m = re.match(r"\s+(\w+)\s+(\w+)\s+\S+\s+(\S+)\s+(.*)$", line)
        if m:
            rows.append([m[1], m[2], m[3], m[4].strip()])
    return rows


def pod(name: str, namespace: str, priority: str, cpu: str, node: str = "", labels: dict[str, str] | None = None
        ) -> dict[str, Any]:
    doc = pod_manifest(name, namespace, PROFILE, cpu=cpu, priorityClassName=PREFIX + priority)
    doc["metadata"]["labels"] = labels or {}
    if node:
        doc["spec"]["nodeName"] = node
    return doc


def pdb(cluster: LocalCluster, namespace: str, name: str, selector: dict[str, str], allowed: int, healthy: int,
        **spec: Any) -> None:
    """A PodDisruptionBudget, and the status a disruption controller would give it."""
    doc = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
           "spec": {"selector": {"matchLabels": selector}, **spec}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(doc))
    status = {"disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": healthy - allowed,
              "expectedPods": healthy}
    cluster.kubectl("patch", "pdb", name, "-n", namespace, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": status}))


def create(cluster: LocalCluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(docs))


def api_pod(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    out = cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def disruption_target(obj: dict[str, Any]) -> dict[str, str] | None:
    conds = obj["status"].get("conditions") or []
    cond = next((c for c in conds if c["type"] == "DisruptionTarget"), None)
    return None if cond is None else {k: cond[k] for k in ("status", "reason", "message")}


def terminating(cluster: LocalCluster, namespace: str, *names: str) -> dict[str, dict[str, str] | None]:
    """Each pod's DisruptionTarget condition once every one of them is Terminating (deleted, not gone)."""
    def check() -> dict[str, dict[str, str] | None] | None:
        objs = [api_pod(cluster, namespace, n) for n in names]
        if all(o is not None and o["metadata"].get("deletionTimestamp") for o in objs):
            return {n: disruption_target(o) for n, o in zip(names, objs, strict=True) if o is not None}
        return None

    found: dict[str, dict[str, str] | None] = wait_for(check, 30, f"{', '.join(names)} to be Terminating")
    return found


def finish_deletion(cluster: LocalCluster, namespace: str, *names: str) -> None:
    """What the kubelet does once the containers stopped: the pod object goes."""
    cluster.kubectl("delete", "pod", *names, "-n", namespace, "--grace-period=0", "--force")


def events_of(cluster: LocalCluster, namespace: str, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the events about ``name``, read through the API (the pod may be gone)."""
    items = get_json(cluster, "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")["items"]
    items.sort(key=lambda e: e.get("eventTime") or e.get("firstTimestamp") or "")
    return [(e["type"], e["reason"], e["message"]) for e in items]


def nominated(cluster: LocalCluster, namespace: str, name: str) -> str:
    obj = api_pod(cluster, namespace, name)
    return "" if obj is None else str(obj["status"].get("nominatedNodeName") or "")


def seen_bound(proc: FrameworkProcess, namespace: str, *names: str) -> None:
    """Wait until the framework's own API lists ``names`` bound: its informers have them in the cache."""
    address = re.search(r"outrigger framework serving on (\S+)", proc.output())
    assert address is not None, proc.output()
    with SchedulerClient(address[1]) as client:
        def check() -> bool:
            phases = {p.ref.name: p.phase for p in client.list_pods(namespace)}
            return all(phases.get(n) == "Bound" for n in names)

        wait_for(check, 30, f"the framework to see {', '.join(names)} bound")


def uid_of(cluster: LocalCluster, namespace: str, name: str) -> str:
    obj = api_pod(cluster, namespace, name)
    assert obj is not None
    return str(obj["metadata"]["uid"])


def wide_node(cluster: LocalCluster, namespace: str, name: str) -> str:
    obj = api_pod(cluster, namespace, name)
    return "" if obj is None else str(obj["spec"].get("nodeName") or "")


DISRUPTION = {"status": "True", "reason": "PreemptionByScheduler",
              "message": f"{PROFILE}: preempting to accommodate a higher priority pod"}


def test_a_high_priority_pod_evicts_the_victims_budgets_allow_and_binds_once_they_are_gone(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str) -> None:
    with cluster_nodes(kube_cluster, {"kp-1": "4", "kp-2": "4"}):
        _evicts_the_victims_budgets_allow(framework, kube_cluster, kube_namespace)


def _evicts_the_victims_budgets_allow(framework: FrameworkProcess, kube_cluster: LocalCluster, ns: str) -> None:
    # kp-1: two low-priority pods of "guarded", whose budget allows one disruption: evicting both (what a
    # 4-CPU pod needs there) violates it once. kp-2: two mid-priority pods, "budgeted" (its budget allows
    # one disruption) and "plain" (no budget): evicting both violates nothing. Fewest violations comes
    # first, so kp-2's higher-priority pods go. Were budgeted's status not read (0 allowed), both nodes
    # would violate once and kp-1's lower priorities would decide.
    pdb(kube_cluster, ns, "guarded", {"app": "guarded"}, allowed=1, healthy=2, minAvailable=1)
    pdb(kube_cluster, ns, "budgeted", {"app": "budgeted"}, allowed=1, healthy=1, maxUnavailable=1)
    create(kube_cluster,
           pod("guarded-1", ns, "low", "2", "kp-1", {"app": "guarded"}),
           pod("guarded-2", ns, "low", "2", "kp-1", {"app": "guarded"}),
           pod("budgeted", ns, "mid", "2", "kp-2", {"app": "budgeted"}),
           pod("plain", ns, "mid", "2", "kp-2"))
    seen_bound(framework, ns, "guarded-1", "guarded-2", "budgeted", "plain")
    create(kube_cluster, pod("urgent", ns, "high", "4"))
    assert get_json(kube_cluster, "pod", "urgent", "-n", ns)["spec"]["priority"] == 1000  # Priority admission

    assert terminating(kube_cluster, ns, "budgeted", "plain") == {"budgeted": DISRUPTION, "plain": DISRUPTION}
    assert wait_for(lambda: nominated(kube_cluster, ns, "urgent"), 20, "urgent's nomination") == "kp-2"
    urgent_uid = uid_of(kube_cluster, ns, "urgent")
    preempted = ("Normal", "Preempted", f"Preempted by pod {urgent_uid} on node kp-2")
    for victim in ("budgeted", "plain"):
        assert wait_for(functools.partial(events_of, kube_cluster, ns, victim), 20, f"{victim}'s event") == [preempted]
    fit = "0/2 nodes are available: 2 Insufficient cpu."
    assert wait_for(lambda: describe_events(kube_cluster, ns, "urgent"), 20, "urgent's event") == [
        ["Warning", "FailedScheduling", PROFILE, fit]]

    # One victim gone: kp-2 still lacks 2 CPUs while "plain" terminates. urgent is tried again and waits
    # for it rather than preempting anew (kube-scheduler's "terminating pod on the nominated node").
    finish_deletion(kube_cluster, ns, "budgeted")
    waiting = (f"{fit} preemption: not eligible due to a terminating pod on the "
               "nominated node.")
    rows = wait_for(lambda: [r for r in describe_events(kube_cluster, ns, "urgent") if r[3] == waiting], 30,
                    "urgent to wait for its victim")
    assert rows == [["Warning", "FailedScheduling", PROFILE, waiting]]
    assert nominated(kube_cluster, ns, "urgent") == "kp-2"
    assert wide_node(kube_cluster, ns, "urgent") == ""

    finish_deletion(kube_cluster, ns, "plain")
    assert wait_for(lambda: wide_node(kube_cluster, ns, "urgent"), 30, "urgent to be bound") == "kp-2"
    scheduled = ["Normal", "Scheduled", PROFILE, f"Successfully assigned {ns}/urgent to kp-2"]
    assert wait_for(lambda: (rows := describe_events(kube_cluster, ns, "urgent"))[-1:] == [scheduled] and rows,
                    20, "urgent's Scheduled event") == [
        ["Warning", "FailedScheduling", PROFILE, fit], ["Warning", "FailedScheduling", PROFILE, waiting], scheduled]
    # The guarded pods were never touched; the victims' events outlive them.
    for name in ("guarded-1", "guarded-2"):
        obj = api_pod(kube_cluster, ns, name)
        assert obj is not None and "deletionTimestamp" not in obj["metadata"] and disruption_target(obj) is None
        assert events_of(kube_cluster, ns, name) == []
    assert events_of(kube_cluster, ns, "plain") == [preempted]


def test_preempting_on_a_node_clears_the_nominations_of_lower_priority_pods(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str) -> None:
    with cluster_nodes(kube_cluster, {"kp-3": "2"}):
        _clears_lower_priority_nominations(framework, kube_cluster, kube_namespace)


def _clears_lower_priority_nominations(framework: FrameworkProcess, kube_cluster: LocalCluster, ns: str) -> None:
    create(kube_cluster, pod("old", ns, "low", "2", "kp-3"))
    seen_bound(framework, ns, "old")
    create(kube_cluster, pod("middle", ns, "mid", "2"))
    assert terminating(kube_cluster, ns, "old") == {"old": DISRUPTION}
    assert wait_for(lambda: nominated(kube_cluster, ns, "middle"), 20, "middle's nomination") == "kp-3"
    middle_uid = uid_of(kube_cluster, ns, "middle")

    # urgent outranks middle: the room middle was promised is urgent's now. "old", already terminating,
    # is its victim too, and is neither deleted nor told again.
    create(kube_cluster, pod("urgent", ns, "high", "2"))
    assert wait_for(lambda: nominated(kube_cluster, ns, "urgent"), 20, "urgent's nomination") == "kp-3"
    assert wait_for(lambda: nominated(kube_cluster, ns, "middle") == "", 20, "middle's nomination to be cleared")
    assert events_of(kube_cluster, ns, "old") == [
        ("Normal", "Preempted", f"Preempted by pod {middle_uid} on node kp-3")]

    finish_deletion(kube_cluster, ns, "old")
    assert wait_for(lambda: wide_node(kube_cluster, ns, "urgent"), 30, "urgent to be bound") == "kp-3"
    no_victims = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 "
                  "nodes are available: 1 No preemption victims found for incoming pod.")
    assert wait_for(lambda: any(r[3] == no_victims for r in describe_events(kube_cluster, ns, "middle")), 30,
                    "middle to find nothing left to preempt")
    assert (wide_node(kube_cluster, ns, "middle"), nominated(kube_cluster, ns, "middle")) == ("", "")


def test_a_preemptor_whose_nominated_node_went_away_loses_its_nomination_through_the_api(
        framework: FrameworkProcess, kube_cluster: LocalCluster, kube_namespace: str) -> None:
    with cluster_nodes(kube_cluster, {"kp-4": "2", "kp-5": "2"}):
        _nomination_cleared_when_no_candidate(framework, kube_cluster, kube_namespace)


def _nomination_cleared_when_no_candidate(framework: FrameworkProcess, kube_cluster: LocalCluster, ns: str) -> None:
    # kp-5 holds a pod of urgent's own priority (no victim there); kp-4 a low-priority one, urgent's victim.
    create(kube_cluster, pod("old", ns, "low", "2", "kp-4"), pod("peer", ns, "high", "2", "kp-5"))
    seen_bound(framework, ns, "old", "peer")
    create(kube_cluster, pod("urgent", ns, "high", "2"))
    assert terminating(kube_cluster, ns, "old") == {"old": DISRUPTION}
    assert wait_for(lambda: nominated(kube_cluster, ns, "urgent"), 20, "urgent's nomination") == "kp-4"

    # kp-4 goes away before its room frees; the victim's deletion then retries urgent, which finds no
    # node to make room on: kube-scheduler's Preempt answers NewPostFilterResultWithNominatedNode("") and
    # handleSchedulingFailure's status patch clears nominatedNodeName.
    kube_cluster.kubectl("delete", "node", "kp-4")
    finish_deletion(kube_cluster, ns, "old")
    no_victims = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 "
                  "nodes are available: 1 No preemption victims found for incoming pod.")
    assert wait_for(lambda: any(r[3] == no_victims for r in describe_events(kube_cluster, ns, "urgent")), 30,
                    "urgent to find no node to preempt on")
    assert wait_for(lambda: nominated(kube_cluster, ns, "urgent") == "", 20, "urgent's nomination to be cleared")
    assert wide_node(kube_cluster, ns, "urgent") == ""
    assert events_of(kube_cluster, ns, "peer") == []
