"""Groups: Workloads, PodGroups and their pods (:mod:`.group_workloads`) scheduled once by kube-scheduler and
once by Outrigger, each on a fresh API server, both with GenericWorkload and TopologyAwareWorkloadScheduling
on, and what each decided compared group by group.

Per group: its PodGroup's conditions (type, status, reason, message), which pods were bound, the shapes of
the nodes they went to (a node's capacity and labels without its name and the workload's interchangeable
domain labels: identical nodes are ties, nodes of different sizes are decided by scores), how many topology
domains they span (TAS keeps a gang to one; which rack is a tie upstream breaks at random), and each pod
left unbound's ``FailedScheduling`` note and ``PodScheduled`` message. Per workload: how many of its pods
each node shape ended with (the spreading the scores decide), and the pods/s of each scheduler, timed from
just before the first pod was created to the last one seen bound.

Both run the same profile: the default one without DefaultPreemption and DynamicResources (their
PodGroupPostFilter and claims are not what these workloads compare); a workload marked ``preemption``
runs with the default profile, in ``waves`` as scheduler_perf's steps, and its victims are compared too:
which pods of the earlier waves each scheduler evicted, each with the PodGroup its ``Preempted`` event names.

::

    report = run_groups(mix(), workdir, bin_dir)
    [g.group for g in report.groups if not g.agrees]
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..localcluster import LocalCluster
from ..workloads import Api, BoundWatch, create_pods
from .group_workloads import API, GroupWorkload
from .schedulers import KUBE, OUTRIGGER, SCHEDULERS, cluster_api, create_pod, fresh_cluster

__all__ = ["GATES", "GroupOutcome", "GroupReport", "GroupRun", "SameGroup", "run_groups"]

GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
#: The profile both run but for preemption workloads: the group cycle without preemption and claims.
PROFILES = ("profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint: {disabled: "
            "[{name: DefaultPreemption}, {name: DynamicResources}]}\n")
HOSTNAME = "kubernetes.io/hostname"
CONDITION = "PodGroupInitiallyScheduled"


@dataclass
class GroupOutcome:
    """What one scheduler decided for one group."""

    #: (type, status, reason, message) of each of the PodGroup's conditions, sorted.
    conditions: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: pod -> node, of its bound pods.
    bound: dict[str, str] = field(default_factory=dict)
    #: The shapes of the nodes of its bound pods, sorted (one per pod).
    shapes: list[str] = field(default_factory=list)
    #: How many values of its topology key its bound pods' nodes have (0 without a key).
    domains: int = 0
    #: pod -> (its last FailedScheduling note, its PodScheduled message), of its unbound pods.
    messages: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Its pods evicted (created in an earlier wave, gone or terminating at the end), sorted.
    evicted: list[str] = field(default_factory=list)

    def same(self, other: GroupOutcome) -> list[str]:
        """What differs from ``other``: ``conditions``, ``pods`` (bound), ``nodes``, ``domains``, ``messages``,
        ``victims`` (its pods evicted)."""
        out = []
        if self.conditions != other.conditions:
            out.append("conditions")
        if sorted(self.bound) != sorted(other.bound):
            out.append("pods")
        if self.shapes != other.shapes:
            out.append("nodes")
        if self.domains != other.domains:
            out.append("domains")
        if self.messages != other.messages:
            out.append("messages")
        if self.evicted != other.evicted:
            out.append("victims")
        return out


@dataclass
class SameGroup:
    """One group, as each scheduler left it."""

    group: str
    kube: GroupOutcome
    outrigger: GroupOutcome

    @property
    def differences(self) -> list[str]:
        """What differs (:meth:`GroupOutcome.same`), but for kube-scheduler's own race (:attr:`raced`)."""
        out = self.kube.same(self.outrigger)
        if self.raced:
            out.remove("conditions")
        return out

    @property
    def raced(self) -> bool:
        """The conditions differ only by kube-scheduler's race after a group was placed with pods left
        behind: both bound the same pods and left the others with the same messages; Outrigger says
        True/Scheduled, kube-scheduler False/Unschedulable ``pod group is unschedulable, ``. Its cycle for
        the pods left runs at once (their group's cycle succeeded), places nothing, and its condition
        never goes back from True, but kube-scheduler reads the True it wrote from its informer: when
        that cycle's snapshot comes before the watch event, it writes False over it (seen both ways
        with v1.37.2 on the same workload). Outrigger keeps the condition it decided."""
        return (bool(self.kube.bound) and bool(self.kube.messages) and "conditions" in self.kube.same(self.outrigger)
                and sorted(self.kube.bound) == sorted(self.outrigger.bound)
                and self.kube.messages == self.outrigger.messages
                and self.kube.conditions == [(CONDITION, "False", "Unschedulable", "pod group is unschedulable, ")]
                and self.outrigger.conditions == [(CONDITION, "True", "Scheduled", "")])

    @property
    def agrees(self) -> bool:
        return not self.differences


@dataclass
class GroupRun:
    """One scheduler on one copy of the workload."""

    scheduler: str
    pods: int = 0
    bound: int = 0
    #: From just before the first pod was created to the last seen bound (0 for pods made before the start).
    seconds: float = 0.0
    #: (node shape, the workload's pods on a node, how many such nodes), sorted.
    load: list[tuple[str, int, int]] = field(default_factory=list)
    #: (pod, the PodGroup its Preempted event names, "" without one) of every pod evicted, sorted.
    evicted: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0


@dataclass
class GroupReport:
    workload: str
    description: str
    timed: bool
    groups: list[SameGroup] = field(default_factory=list)
    runs: dict[str, GroupRun] = field(default_factory=dict)
    error: str = ""

    @property
    def same_load(self) -> bool:
        return KUBE in self.runs and OUTRIGGER in self.runs and self.runs[KUBE].load == self.runs[OUTRIGGER].load

    @property
    def same_victims(self) -> bool:
        """Both evicted the same pods. For which PodGroup each was evicted is not compared: among identical
        nodes which preemptor takes which node is a tie, and so is which victims are its own."""
        if KUBE not in self.runs or OUTRIGGER not in self.runs:
            return False
        return [v for v, _ in self.runs[KUBE].evicted] == [v for v, _ in self.runs[OUTRIGGER].evicted]

    @property
    def agrees(self) -> bool:
        return (not self.error and bool(self.groups) and all(g.agrees for g in self.groups) and self.same_load
                and self.same_victims)


def node_shapes(workload: GroupWorkload) -> dict[str, str]:
    """node -> its shape, named after the first node of that shape in the workload's order."""
    by_key: dict[str, str] = {}
    out = {}
    for node in workload.nodes:
        labels = {k: v for k, v in node["metadata"].get("labels", {}).items()
                  if k != HOSTNAME and k not in workload.symmetric_labels}
        key = json.dumps([node["status"].get("allocatable"), labels, node["spec"].get("taints")], sort_keys=True)
        out[node["metadata"]["name"]] = by_key.setdefault(key, node["metadata"]["name"])
    return out


def run_groups(workload: GroupWorkload, workdir: Path, bin_dir: Path, timeout: float = 120.0) -> GroupReport:
    """``workload`` under each scheduler on a fresh cluster, kube-scheduler first; compared group by group."""
    report = GroupReport(workload.name, workload.description, not workload.steps)
    got: dict[str, dict[str, GroupOutcome]] = {}
    profiles = "" if workload.preemption else PROFILES
    try:
        for name, cls in SCHEDULERS.items():
            run = report.runs[name] = GroupRun(name, len(workload.pods))
            with fresh_cluster(workdir / name, bin_dir) as cluster:
                asyncio.run(_setup(cluster, workload))
                with cls(cluster, workdir / name, gates=GATES, profiles=profiles):
                    got[name] = asyncio.run(_schedule(cluster, workload, timeout, run))
    except Exception as exc:  # reported; the other comparisons go on
        report.error = f"{type(exc).__name__}: {exc}"
    for obj in workload.objects:
        if obj["kind"] == "PodGroup":
            g = obj["metadata"]["name"]
            report.groups.append(SameGroup(g, got.get(KUBE, {}).get(g, GroupOutcome()),
                                           got.get(OUTRIGGER, {}).get(g, GroupOutcome())))
    return report


def _path(ns: str, kind: str) -> str:
    return f"/apis/{API}/namespaces/{ns}/{kind}"


async def _create(api: Api, obj: dict[str, Any]) -> None:
    if obj["kind"] == "PriorityClass":
        await api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", verb="create",
                          resource="priorityclasses", body=obj)
        return
    kind = {"Workload": "workloads", "PodGroup": "podgroups"}[obj["kind"]]
    await api.request("POST", _path(obj["metadata"]["namespace"], kind), verb="create", resource=kind, body=obj)


async def _setup(cluster: LocalCluster, workload: GroupWorkload) -> None:
    api = cluster_api(cluster)
    try:
        await api.request("POST", "/api/v1/namespaces", verb="create", resource="namespaces",
                          body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": workload.namespace}})
        for node in workload.nodes:
            await api.request("POST", "/api/v1/nodes", verb="create", resource="nodes", body=node)
        for obj in workload.objects:
            if obj["kind"] != "PodGroup" or not (workload.steps or workload.waves):
                await _create(api, obj)
    finally:
        await api.close()


async def _schedule(cluster: LocalCluster, workload: GroupWorkload, timeout: float,
                    run: GroupRun) -> dict[str, GroupOutcome]:
    api = cluster_api(cluster)
    watch = BoundWatch(api, workload.namespace, all_pods=True)
    try:
        deadline = time.monotonic() + timeout
        if workload.waves:
            await _waves(api, watch, workload, deadline, run)
        elif not workload.steps:  # timed: the watch sees each pod bound
            await watch.start()
            first = await create_pods(api, workload.pods)
            if not await watch.settle(len(workload.pods), deadline):
                raise TimeoutError(f"{len(workload.pods) - len(watch.bound) - len(watch.unschedulable)} pods "
                                   f"neither bound nor unschedulable after {timeout:.0f}s")
            if watch.bound:
                run.seconds = max(t for t, _ in watch.bound.values()) - first
        for step in workload.steps:
            await _step(api, workload, step)
            await _settled(api, workload, deadline, set(step))
        state = await _settled(api, workload, deadline)
    finally:
        await watch.stop()
        await api.close()
    run.bound = sum(bool(p["spec"].get("nodeName")) for p in state["pods"])
    if workload.waves:
        run.bound = sum(bool(p["spec"].get("nodeName")) for p in state["pods"]
                        if p["metadata"]["name"] in workload.waves[-1].pods)
        run.pods = len(workload.waves[-1].pods)
    return _outcomes(workload, state, run)


async def _step(api: Api, workload: GroupWorkload, step: tuple[str, ...]) -> None:
    """One of ``workload.steps``: a group on its own, its pods one at a time, then its PodGroup; the
    gangs of a step of several, their PodGroups first, then all their pods one at a time in order."""
    def podgroup(name: str) -> dict[str, Any]:
        return next(o for o in workload.objects if o["kind"] == "PodGroup" and o["metadata"]["name"] == name)

    def of(groups: tuple[str, ...]) -> list[dict[str, Any]]:
        return [p for p in workload.pods if p["spec"]["schedulingGroup"]["podGroupName"] in groups]

    if len(step) > 1:
        # Pods seen before their PodGroup wait for it; when it comes, kube-scheduler queues them one by
        # one and may pop the group after the first (a gang short of its pods, which fails). So the
        # PodGroups come first and are seen by a watch, as the scheduler's informer sees them, before
        # the first pod: each gang is then held at PreEnqueue until its last pod, and the one whose
        # first pod came first goes first (PrioritySort), on both schedulers.
        await _create_seen(api, workload.namespace, [podgroup(group) for group in step])
        for pod in of(step):
            await create_pod(api, pod)
        return
    for pod in of(step):
        await create_pod(api, pod)
    await _create(api, podgroup(step[0]))


async def _create_seen(api: Api, ns: str, podgroups: list[dict[str, Any]], timeout: float = 30.0) -> None:
    """Create ``podgroups`` and return once a watch has seen each of them added."""
    listed = await api.request("GET", _path(ns, "podgroups"), verb="list", resource="podgroups")
    events = api.watch(_path(ns, "podgroups"), listed["metadata"]["resourceVersion"], resource="podgroups",
                       timeout_seconds=int(timeout))
    waiting = {pg["metadata"]["name"] for pg in podgroups}
    first = asyncio.ensure_future(anext(events))  # from the list's version: no event is missed
    try:
        for pg in podgroups:
            await _create(api, pg)
        event = await asyncio.wait_for(first, timeout)
        while True:
            if event[0] == "ADDED":
                waiting.discard(event[1]["metadata"]["name"])
            if not waiting:
                return
            event = await asyncio.wait_for(anext(events), timeout)
    finally:
        if not first.done():
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
        await events.aclose()


async def _waves(api: Api, watch: BoundWatch, workload: GroupWorkload, deadline: float, run: GroupRun) -> None:
    """scheduler_perf's steps: each wave's PodGroups, then its pods at once, all of them waited for bound
    (scheduler_perf's own wait); the last wave timed from before its first pod to its last seen bound,
    and not required to bind whole (what each left unbound is compared)."""
    pods = {p["metadata"]["name"]: p for p in workload.pods}
    await watch.start()
    for i, wave in enumerate(workload.waves):
        for obj in workload.objects:
            if obj["kind"] == "PodGroup" and obj["metadata"]["name"] in wave.groups:
                await _create(api, obj)
        first = await create_pods(api, [pods[n] for n in wave.pods])
        last = i == len(workload.waves) - 1
        try:  # the last wave leaves time to read what was left unbound
            await watch.wait(wave.pods, max(deadline - time.monotonic() - (15.0 if last else 0.0), 0.0))
        except TimeoutError:
            if not last:
                raise
        seen = [watch.bound[n][0] for n in wave.pods if n in watch.bound]
        if seen and last:
            run.seconds = max(seen) - first


async def _read(api: Api, ns: str) -> dict[str, list[dict[str, Any]]]:
    pods = await api.request("GET", f"/api/v1/namespaces/{ns}/pods", verb="list", resource="pods")
    groups = await api.request("GET", _path(ns, "podgroups"), verb="list", resource="podgroups")
    events = await api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", verb="list",
                               resource="events")
    return {"pods": pods["items"], "podgroups": groups["items"], "events": events["items"]}


def _done(state: dict[str, list[dict[str, Any]]]) -> bool:
    """Every group has its condition, every pod is bound or unschedulable with its FailedScheduling event."""
    noted = {(e.get("regarding") or {}).get("name") for e in state["events"] if e.get("reason") == "FailedScheduling"}
    return (all((g.get("status") or {}).get("conditions") for g in state["podgroups"])
            and all(p["metadata"]["name"] in noted and any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (p.get("status") or {}).get("conditions") or ())
                for p in state["pods"] if not p["spec"].get("nodeName")))


async def _settled(api: Api, workload: GroupWorkload, deadline: float,
                   groups: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The namespace (its ``groups`` and their pods only, when given) once done (:func:`_done`) and the
    bound pods unchanged over two reads half a second apart (a pod that failed once may still be bound
    by a later cycle)."""
    last: set[str] | None = None
    while True:
        state = await _read(api, workload.namespace)
        if groups is not None:
            state = {"pods": [p for p in state["pods"] if p["spec"]["schedulingGroup"]["podGroupName"] in groups],
                     "podgroups": [g for g in state["podgroups"] if g["metadata"]["name"] in groups],
                     "events": state["events"]}
        bound = {p["metadata"]["name"] for p in state["pods"] if p["spec"].get("nodeName")}
        if _done(state) and bound == last:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workload.name}: groups without a condition, or pods neither bound nor "
                               "unschedulable with a FailedScheduling event, at the deadline")
        last = bound
        await asyncio.sleep(0.5)


def _outcomes(workload: GroupWorkload, state: dict[str, list[dict[str, Any]]],
              run: GroupRun) -> dict[str, GroupOutcome]:
    shapes = node_shapes(workload)
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in workload.nodes}
    latest: dict[str, tuple[str, str]] = {}
    for ev in state["events"]:
        name = str((ev.get("regarding") or {}).get("name") or "")
        stamp = str(ev.get("eventTime") or (ev.get("series") or {}).get("lastObservedTime") or "")
        if ev.get("reason") == "FailedScheduling" and stamp >= latest.get(name, ("", ""))[0]:
            latest[name] = (stamp, str(ev.get("note") or ""))
    out: dict[str, GroupOutcome] = {}
    keys: dict[str, str] = {}
    for g in state["podgroups"]:
        name = g["metadata"]["name"]
        out[name] = GroupOutcome(conditions=sorted(
            (c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in (g.get("status") or {}).get("conditions") or ()))
        topology = ((g["spec"].get("schedulingConstraints") or {}).get("topology") or [{}])[0]
        keys[name] = topology.get("key", "")
    load = dict.fromkeys(shapes, 0)
    for pod in state["pods"]:
        name, node = pod["metadata"]["name"], pod["spec"].get("nodeName") or ""
        if pod["metadata"].get("deletionTimestamp"):
            continue  # a victim on its way out
        named = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if node:
            load[node] += 1
        if named is None:
            continue  # a pod of no group (the victims of GangPreemptionBasic) counts in the load only
        group = out.setdefault(named, GroupOutcome())
        if node:
            group.bound[name] = node
            continue
        scheduled = next((c.get("message", "") for c in (pod.get("status") or {}).get("conditions") or ()
                          if c.get("type") == "PodScheduled"), "")
        group.messages[name] = (latest.get(name, ("", ""))[1], scheduled)
    for name, group in out.items():
        group.shapes = sorted(shapes[n] for n in group.bound.values())
        if keys.get(name):
            group.domains = len({labels[n].get(keys[name]) for n in group.bound.values()})
    _victims(workload, state, out, run)
    spread = Counter((shapes[n], count) for n, count in load.items())
    run.load = sorted((shape, count, nodes) for (shape, count), nodes in spread.items())
    return out


def _victims(workload: GroupWorkload, state: dict[str, list[dict[str, Any]]], out: dict[str, GroupOutcome],
             run: GroupRun) -> None:
    """The pods of the waves before the last one that are gone or terminating: per group, and each with
    the PodGroup its ``Preempted`` event names (``Preempted by podgroup <uid> on node cluster``)."""
    if not workload.waves:
        return
    present = {p["metadata"]["name"] for p in state["pods"] if not p["metadata"].get("deletionTimestamp")}
    earlier = [n for w in workload.waves[:-1] for n in w.pods]
    gone = [n for n in earlier if n not in present]
    names = {g["metadata"]["uid"]: g["metadata"]["name"] for g in state["podgroups"]}
    by: dict[str, str] = {}
    for ev in state["events"]:
        note = str(ev.get("note") or "")
        if ev.get("reason") == "Preempted" and note.startswith("Preempted by podgroup "):
            uid = note.removeprefix("Preempted by podgroup ").split(" ", 1)[0]
            by[str((ev.get("regarding") or {}).get("name") or "")] = names.get(uid, uid)
    run.evicted = sorted((n, by.get(n, "")) for n in gone)
    groups = {p["metadata"]["name"]: (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
              for p in workload.pods}
    for n in sorted(gone):
        group = groups[n]
        if group is not None:
            out.setdefault(str(group), GroupOutcome()).evicted.append(n)
