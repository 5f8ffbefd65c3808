"""The group comparison's workloads (:mod:`.groups`): nodes, Workloads and PodGroups, and the pods that
name them, for kube-scheduler's PodGroup cycle (GenericWorkload and TopologyAwareWorkloadScheduling on).

scheduler_perf's ``podgroup`` shapes (test/integration/scheduler_perf/podgroup/: BasicScheduling,
GangScheduling, TopologyAwareScheduling) keep their templates (pods of 100m and 100Mi, gangs whose minCount
is their size, racks of 100 nodes of 4 cpus for TAS) and are scaled for two cores: 500 nodes, 100 groups of
3 pods (upstream's performance size is 5000 nodes, 1000 groups) and 3 groups of 100 pods (upstream: 3 of
1000); 75 gangs of 4 for TAS (upstream: 750). ``--quick`` and the suite run upstream's integration sizes
(``10Nodes_3Gangs``). Their nodes are identical: which node a pod gets is a tie, so what is compared is
each group's outcome and how many of the workload's pods each node ends with.

:func:`mix` is a seeded mix on nodes of different sizes, where scores decide each pod's node: gangs that
fit (a Workload's gang and basic groups, a group kept to the zone that holds most of it), a gang that
does not fit, a gang that fits with fewer than all its pods (minCount below its size), a basic group with
a pod that fits nowhere, and two gangs racing for the same room. Each category has a pool of nodes of
its own (``pool`` label, pods select it), so one group's outcome never depends on another's but the
race's. Its groups are created step by step (``steps``): a group's pods first, then its PodGroup, so
that its first cycle has all its pods in their order on both schedulers (all at once, each scheduler's
queue takes the pods of the initial list in an order of its own: kube-scheduler's differs from run to
run); the two racing gangs are one step, their PodGroups first (seen by a watch), then their pods in turns,
red's first: each gang is held at PreEnqueue until its last pod is seen, and of two complete gangs of one
priority the queue takes first the one whose first pod it saw first (kube-scheduler's PrioritySort over a
group's timestamp, that of the member that made it), so red, whose pods also complete first, takes the
room on both schedulers. (Pods first and then its PodGroup, kube-scheduler queues a group's pods one by
one when the PodGroup comes and may pop it with only the first: a gang short of its pods fails, and the
other took the room once, under load.)

A workload with ``preemption`` set needs workload-aware preemption (DefaultPreemption's PodGroupPostFilter)
and runs with the default profile: scheduler_perf's ``workload_preemption`` shapes (:func:`preemption_shape`:
GangPreemptionBasic, GangPreemptionPodGroups with the low gangs' disruptionMode Single, upstream's, or All,
GangPreemptionAffinity) keep their templates (nodes of 4 cpus, low-priority pods or gangs filling them,
then gangs of high priority whose pods fit only once they are evicted, host ports spreading each) and their
steps as ``waves``, in one namespace (upstream's low and high namespaces only sort them; the low gangs are
``low-gang-<i>`` here). Their priorities are PriorityClasses (the API server's Priority admission is on).
They run at their integration sizes (2 nodes) with ``--quick`` and at upstream's performance sizes
(100 nodes) otherwise.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..workloads import PAUSE_IMAGE, node_manifest, pod_manifest
from .schedulers import SCHEDULER_NAME

__all__ = ["API", "GroupWorkload", "Wave", "group_workloads", "mix", "perf_shape", "preemption_shape",
           "preemption_shapes"]

API = "scheduling.k8s.io/v1beta1"
ZONE = "topology.kubernetes.io/zone"
RACK = "topology.kubernetes.io/rack"


@dataclass(frozen=True)
class GroupWorkload:
    """Nodes, Workloads and PodGroups (``objects``, created first) and pods, in one namespace."""

    name: str
    description: str
    namespace: str
    nodes: list[dict[str, Any]]
    objects: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    #: The groups, step by step: a step of one group creates its pods one at a time in order, then its
    #: PodGroup (so that its first cycle has all its pods, in that order); a step of several gangs creates
    #: their PodGroups, waits for a watch to see them, then creates their pods one at a time in order. Each
    #: step is waited for before the next. Without steps every PodGroup is created first, then all the pods
    #: concurrently, timed.
    steps: tuple[tuple[str, ...], ...] = ()
    #: Node labels naming interchangeable domains (the racks of identical nodes): not part of a node's shape.
    symmetric_labels: tuple[str, ...] = ()
    #: Needs workload-aware preemption: run with the default profile (DefaultPreemption's PodGroupPostFilter).
    preemption: bool = False
    #: scheduler_perf's steps (``workload_preemption``): each wave's PodGroups are created, then its pods
    #: all at once, and every one of them is waited for bound before the next wave; the last wave is timed.
    #: Pods of earlier waves gone at the end are the victims, compared too.
    waves: tuple[Wave, ...] = ()


@dataclass(frozen=True)
class Wave:
    """One createPodGroups + createPods step of scheduler_perf: these PodGroups, then these pods."""

    groups: tuple[str, ...]
    pods: tuple[str, ...]


def pod_group(name: str, ns: str, *, min_count: int = 0, topology: str = "", workload: tuple[str, str] | None = None,
              ) -> dict[str, Any]:
    """A PodGroup: a gang of ``min_count`` (0: the basic policy), kept to one ``topology`` domain."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if workload is not None:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    return {"apiVersion": API, "kind": "PodGroup", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def workload(name: str, ns: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """A Workload whose templates are ``groups``' specs (each PodGroup names its template)."""
    templates = []
    for g in groups:
        ref = g["spec"]["workloadRef"]
        templates.append({"name": ref["templateName"], "schedulingPolicy": g["spec"]["schedulingPolicy"],
                          **({"schedulingConstraints": g["spec"]["schedulingConstraints"]}
                             if "schedulingConstraints" in g["spec"] else {})})
    return {"apiVersion": API, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"podGroupTemplates": templates}}


def member(name: str, ns: str, group: str, cpu: str, memory: str = "100Mi", pool: str = "") -> dict[str, Any]:
    """A pod of ``group`` requesting ``cpu`` and ``memory`` (on nodes of ``pool`` when given)."""
    extra: dict[str, Any] = {"nodeSelector": {"pool": pool}} if pool else {}
    doc = pod_manifest(name, ns, SCHEDULER_NAME, schedulingGroup={"podGroupName": group}, **extra)
    requests = {"cpu": cpu, "memory": memory}
    doc["spec"]["containers"][0] = {"name": "pause", "image": doc["spec"]["containers"][0]["image"],
                                    "resources": {"requests": requests}}
    return doc


def _tas_node(i: int) -> dict[str, Any]:
    """scheduler_perf's podgroup/tas/templates/node.yaml: 100 nodes to a zone and a rack."""
    return node_manifest(f"node-{i}", {ZONE: f"zone-{i // 100}", RACK: f"rack-{i // 100}"})


def perf_shape(kind: str, nodes: int, groups: int, per_group: int) -> GroupWorkload:
    """scheduler_perf's podgroup shape ``kind`` (``basic``, ``gang``, ``tas``) at these sizes."""
    ns = {"basic": "basic-ns-0", "gang": "gang-ns-0", "tas": "tas-ns-0"}[kind]
    group_name = "basic-group-{}" if kind == "basic" else "gang-{}"
    pod_name = {"basic": "test-basic-scheduling-{}", "gang": "test-gang-scheduling-{}",
                "tas": "test-tas-scheduling-{}"}[kind]
    node_docs = ([_tas_node(i) for i in range(nodes)] if kind == "tas"
                 else [node_manifest(f"scheduler-perf-{i:05d}") for i in range(nodes)])
    for doc in node_docs:
        doc["status"]["capacity"] = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        doc["status"]["allocatable"] = dict(doc["status"]["capacity"])
    objects = [pod_group(group_name.format(g), ns, min_count=0 if kind == "basic" else per_group,
                         topology=RACK if kind == "tas" else "") for g in range(groups)]
    pods = [member(pod_name.format(i), ns, group_name.format(i // per_group), "100m")
            for i in range(groups * per_group)]
    title = {"basic": "BasicScheduling", "gang": "GangScheduling", "tas": "TopologyAwareScheduling"}[kind]
    unit = "Groups" if kind == "basic" else "Gangs"
    return GroupWorkload(f"{title}/{nodes}Nodes_{groups}{unit}_{groups * per_group}Pods", f"{nodes} identical nodes, "
                         f"{groups} groups of {per_group}", ns, node_docs, objects, pods,
                         symmetric_labels=(ZONE, RACK) if kind == "tas" else ())


def _pool_node(name: str, pool: str, cpu: str, memory: str, zone: str = "z0") -> dict[str, Any]:
    doc = node_manifest(name, {"pool": pool, ZONE: zone})
    doc["status"]["capacity"] = {"cpu": cpu, "memory": memory, "pods": "110"}
    doc["status"]["allocatable"] = dict(doc["status"]["capacity"])
    return doc


def mix(seed: int = 7) -> GroupWorkload:
    """The seeded mix (module docstring): requests and sizes drawn from ``seed``, categories fixed."""
    rng = random.Random(seed)
    ns = "gang-mix"
    nodes = [_pool_node(f"main-{i}", "main", f"{4 + i}", f"{16 + (i * 5) % 6 * 2}Gi", f"z{i % 2}") for i in range(6)]
    nodes += [_pool_node("race-a", "race", "2", "8Gi"), _pool_node("race-b", "race", "2", "8Gi"),
              _pool_node("tight-0", "tight", "3", "8Gi"), _pool_node("spare-0", "spare", "3", "8Gi")]
    workers = rng.randint(3, 5)
    groups = {
        "train-workers": pod_group("train-workers", ns, min_count=workers, workload=("train", "workers")),
        "train-ps": pod_group("train-ps", ns, workload=("train", "ps")),
        "infer-replicas": pod_group("infer-replicas", ns, min_count=2, topology=ZONE, workload=("infer", "replicas")),
        "too-big": pod_group("too-big", ns, min_count=3),
        "elastic": pod_group("elastic", ns, min_count=2),
        "solo": pod_group("solo", ns),
        "race-red": pod_group("race-red", ns, min_count=3, workload=("race", "red")),
        "race-blue": pod_group("race-blue", ns, min_count=3, workload=("race", "blue")),
    }
    objects = [workload("train", ns, [groups["train-workers"], groups["train-ps"]]),
               workload("infer", ns, [groups["infer-replicas"]]),
               workload("race", ns, [groups["race-red"], groups["race-blue"]]), *groups.values()]

    def some(group: str, count: int, cpus: tuple[int, ...], pool: str = "main") -> list[dict[str, Any]]:
        return [member(f"{group}-{i}", ns, group, f"{rng.choice(cpus)}m", f"{rng.choice((256, 512, 1024, 2048))}Mi",
                       pool) for i in range(count)]

    train = [*some("train-workers", workers, (1000, 1250, 1500, 2000)), *some("train-ps", 2, (250, 500, 750))]
    # Drawn as 2048Mi, train-ps-1 scores the same on main-0 and main-1 under kube-scheduler (462), a tie it
    # breaks by the order its parallel Filter found them (Outrigger: at random); 1536Mi decides it.
    train[-1]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1536Mi"
    infer = some("infer-replicas", 3, (500, 1000, 1500))
    # 7.5 cpus: once train is placed only main-5 has them, so zone z0 holds two of the three and z1 all
    # three; PodGroupPodsCount scores z1 higher. (With every pod in either zone the placements tie, and
    # kube-scheduler picks one at random.)
    infer[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "7500m"
    pods = [*train, *infer,
            # 3 cpus: two of 1200m fit, the third does not (minCount 3: nothing bound; minCount 2: two).
            *some("too-big", 3, (1200,), "tight"), *some("elastic", 3, (1200,), "spare"),
            *some("solo", 1, (500,)), member("solo-1", ns, "solo", "64"),
            # 4 cpus in all, two gangs of three 1-cpu pods, created in turns: one takes 3, the other waits.
            *(member(f"race-{c}-{i}", ns, f"race-{c}", "1", pool="race") for i in range(3) for c in ("red", "blue"))]
    # train's two groups are two steps: in one, which group's cycle ran first (and so the nodes left to
    # the other) was a race of kube-scheduler's informers against the pods still being created.
    steps = (("train-workers",), ("train-ps",), ("infer-replicas",), ("too-big",), ("elastic",), ("solo",),
             ("race-red", "race-blue"))
    return GroupWorkload(f"Mix-{seed}", f"{len(nodes)} nodes of different sizes, {len(groups)} groups (fit, do not "
                         "fit, minCount below size, basic, one zone, two racing)", ns, nodes, objects, pods,
                         steps=steps)


#: scheduler_perf's workload_preemption priorities, as PriorityClasses (the API server's Priority admission
#: computes a pod's and a PodGroup's priority from its class; 0, the low pods', needs none).
PRIORITIES = (1000, 8888888, 9999999)
PREEMPT_NS = "gang-preempt-0"


def _priority_class(value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"perf-{value}"},
            "value": value}


def perf_pod(name: str, ns: str, cpu: str, memory: str = "100Mi", *, group: str = "", priority: int = 0,
             host_port: int = 0, labels: dict[str, str] | None = None,
             affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod of workload_preemption's templates: ``cpu`` and ``memory`` as requests and limits, deleted at
    once (terminationGracePeriodSeconds 0: a victim is gone when evicted, no kubelet needed)."""
    container: dict[str, Any] = {"name": "pause", "image": PAUSE_IMAGE, "resources": {
        "limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}}}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    spec: dict[str, Any] = {"schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
                            "containers": [container]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if priority:
        spec["priorityClassName"] = f"perf-{priority}"
    if affinity:
        spec["affinity"] = affinity
    meta: dict[str, Any] = {"name": name, "namespace": ns, **({"labels": dict(labels)} if labels else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


#: pod-low-priority.yaml's and pod-anchor-high-priority.yaml's labels, which the gangs' affinity selects.
BLUE = {"app": "blue", "label1": "value1", "label2": "value2", "label3": "value3", "label4": "value4"}
AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": BLUE}, "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}]}}


def _gangs(prefix: str, ns: str, count: int, size: int, priority: int, cpu: str, memory: str = "100Mi", *,
           host_port_base: int = 0, disrupt_all: bool = False,
           affinity: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """podgroup.yaml and gang-pod.yaml (pod-gang-affinity.yaml with ``affinity``): ``count`` gangs of
    ``size`` whose minCount is their size, their pods ``{prefix}pod-gang-<i>`` in order."""
    groups = []
    for g in range(count):
        pg = pod_group(f"{prefix}gang-{g}", ns, min_count=size)
        pg["spec"]["priorityClassName"] = f"perf-{priority}"
        if disrupt_all:
            pg["spec"]["disruptionMode"] = {"all": {}}
        groups.append(pg)
    pods = [perf_pod(f"{prefix}pod-gang-{i}", ns, cpu, memory, group=f"{prefix}gang-{i // size}", priority=priority,
                     host_port=host_port_base + i // size if host_port_base else 0, affinity=affinity)
            for i in range(count * size)]
    return groups, pods


def _low_pods(ns: str, count: int, nodes: int) -> list[dict[str, Any]]:
    """pod-low-priority.yaml: priority 0, 40m, a host port that spreads them evenly over the nodes."""
    per_node = max(count // nodes, 1)
    return [perf_pod(f"pod-low-priority-{i}", ns, "40m", host_port=8000 + i % per_node, labels=BLUE)
            for i in range(count)]


def _names(docs: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(d["metadata"]["name"] for d in docs)


def preemption_shape(kind: str, nodes: int, low: int, gangs: int, per_gang: int, *,
                     disrupt_all: bool = False) -> GroupWorkload:
    """scheduler_perf's workload_preemption shape ``kind`` at these sizes, in one namespace: ``basic``
    (GangPreemptionBasic: ``low`` pods of priority 0, then ``gangs`` gangs of 3970m pods), ``podgroups``
    (GangPreemptionPodGroups: ``low`` gangs of priority 1000 and 600m pods, a host port per gang, then
    gangs of 9999999 and 3500m; ``disrupt_all``: the low gangs say disruptionMode All) and ``affinity``
    (GangPreemptionAffinity: an anchor pod of 9999999 on every node, ``low`` pods, then gangs whose pods
    must share a node with the anchors' labels). Low-priority groups are ``low-gang-<i>``."""
    ns = PREEMPT_NS
    node_docs = [node_manifest(f"scheduler-perf-{i:05d}") for i in range(nodes)]
    waves: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    if kind == "podgroups":
        waves.append(_gangs("low-", ns, low, per_gang, 1000, "600m", host_port_base=8000, disrupt_all=disrupt_all))
        waves.append(_gangs("", ns, gangs, per_gang, 9999999, "3500m", host_port_base=9000))
        title, evicting = "GangPreemptionPodGroups", f"{low}LowPriorityGangs" + ("_All" if disrupt_all else "")
    elif kind in ("basic", "affinity"):
        if kind == "affinity":
            waves.append(([], [perf_pod(f"pod-anchor-{i}", ns, "10m", priority=9999999, host_port=7000, labels=BLUE)
                               for i in range(nodes)]))
        waves.append(([], _low_pods(ns, low, nodes)))
        if kind == "basic":
            waves.append(_gangs("", ns, gangs, per_gang, 8888888, "3970m"))
        else:
            waves.append(_gangs("", ns, gangs, per_gang, 8888888, "3970m", "500Mi", affinity=AFFINITY))
        title = "GangPreemptionBasic" if kind == "basic" else "GangPreemptionAffinity"
        evicting = f"{low}InitPods"
    else:
        raise ValueError(f"unknown workload_preemption shape {kind!r} (basic, podgroups, affinity)")
    objects = [_priority_class(v) for v in PRIORITIES] + [g for groups, _ in waves for g in groups]
    unit = "Gang" if gangs == 1 else "Gangs"
    return GroupWorkload(
        f"{title}/{nodes}Nodes_{gangs}Preemptor{unit}_{per_gang}Pods_Evicting_{evicting}",
        f"{nodes} identical nodes, {sum(len(p) for _, p in waves[:-1])} low-priority pods, {gangs} gangs of "
        f"{per_gang} preempting", ns, node_docs, objects, [p for _, pods in waves for p in pods], preemption=True,
        waves=tuple(Wave(_names(groups), _names(pods)) for groups, pods in waves))


def group_workloads(quick: bool = False) -> list[GroupWorkload]:
    """The mix and scheduler_perf's shapes: at their integration sizes with ``quick``, else scaled (above)."""
    if quick:
        return [mix(), perf_shape("gang", 10, 3, 3), perf_shape("tas", 10, 3, 3), *preemption_shapes(quick)]
    return [mix(), perf_shape("basic", 500, 100, 3), perf_shape("basic", 500, 3, 100), perf_shape("gang", 500, 100, 3),
            perf_shape("gang", 500, 3, 100), perf_shape("tas", 500, 75, 4), perf_shape("tas", 500, 3, 100),
            *preemption_shapes(quick)]


def preemption_shapes(quick: bool = False) -> list[GroupWorkload]:
    """workload_preemption's shapes: each at its integration size with ``quick`` (the PodGroups one with
    the low gangs' disruptionMode All too); else one workload of each at upstream's performance size
    (100 nodes)."""
    if quick:
        return [preemption_shape("basic", 2, 10, 1, 2), preemption_shape("podgroups", 2, 2, 1, 2),
                preemption_shape("podgroups", 2, 2, 1, 2, disrupt_all=True), preemption_shape("affinity", 2, 10, 1, 2)]
    return [preemption_shape("basic", 100, 1000, 1, 100),
            preemption_shape("podgroups", 100, 50, 10, 10, disrupt_all=True),
            preemption_shape("affinity", 100, 1000, 10, 10)]
