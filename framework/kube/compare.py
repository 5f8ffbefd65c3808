"""``python -m framework.kube.compare`` (``make compare``): Outrigger side by side with the real
kube-scheduler on the same API server — speed, placements and reasons.

Both schedulers are the ones a user runs: kube-scheduler v1.35.4 (``tests/k8s/build.sh`` builds it with
the API server, same pin) and ``outrigger serve --kubeconfig``, each with a KubeSchedulerConfiguration that
names the same ``clientConnection`` (qps and burst 5000, scheduler_perf's) and no leader election,
kube-scheduler's default profile on both sides. They run **one after the other, each on a fresh etcd and
API server** (:class:`framework.kube.local.LocalCluster`) holding an identical copy of the workload, so
neither sees the other's pods, events or load; rounds alternate which one goes first.

Three comparisons:

- **Throughput** of scheduler_perf workloads (:mod:`framework.kube.workloads`): nodes and the initial
  pods first (not timed), then the measured pods; pods/s from just before the first measured pod is
  created to the moment a watch shows the last one bound, the same instrument for both. Per workload,
  several rounds; the report gives the medians and the median of the per-round ratios Outrigger /
  kube-scheduler, with the CPU per measured pod of the scheduler, the API server, etcd and the harness,
  and the share of the machine other processes took meanwhile (:class:`framework.kube.bench.CpuSample`,
  the ``apiserver`` benchmark's accounting).
- **Placements**, pod by pod, on identical cluster states. kube-scheduler runs first with
  ``--vmodule=schedule_one=10``, which logs every Score plugin's weighted score on every node and each
  node's total, for every pod (parsed here). Outrigger then gets the same pods one at a time on a fresh
  copy, with ``--debug-scores`` on; after each pod is bound, a pod Outrigger placed elsewhere than
  kube-scheduler did is moved to kube-scheduler's node (deleted and created again, bound) before the
  next one is created, so every decision of both is taken on the same cluster. A pod whose best total
  in kube-scheduler's log is on one node only must land on that node; a pod with tied best nodes must
  land on one of them. Every plugin's score on every node is compared too: the per-plugin agreement
  table lists each disagreement with the pod, the node and both scores. Workloads: a deterministic
  one built to have one best node per pod and to exercise every Score plugin (:data:`MIXED`), and the
  scheduler_perf shapes at 50 nodes (identical nodes: ties everywhere).
- **Reasons**: a set of pods that fit nowhere (:data:`REASONS`), and the ``FailedScheduling`` event
  of each pod from both, compared verbatim (with the ``PodScheduled`` condition's message).

The report is a Markdown file and a JSON file (``--out``, default ``compare-results``). ``--quick`` runs
small sizes (what the tests run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp

from .bench import CpuSample
from .client import ApiError
from .local import LocalCluster, _spawner, find_bin_dir, free_ports
from .workloads import (
    WORKLOADS,
    Api,
    BoundWatch,
    Workload,
    create_and_wait,
    create_cluster,
    node_manifest,
    pod_manifest,
)

__all__ = [
    "KUBE",
    "MIXED",
    "OUTRIGGER",
    "REASONS",
    "PlacementReport",
    "PlacementWorkload",
    "ReasonsReport",
    "ThroughputRun",
    "main",
    "parse_kube_scores",
    "run_compare",
    "run_placements",
    "run_reasons",
    "run_throughput",
]

ROOT = Path(__file__).resolve().parents[2]
KUBE = "kube-scheduler"
OUTRIGGER = "outrigger"
SCHEDULER_NAME = "default-scheduler"
#: scheduler_perf's client settings for the scheduler under test (util.go: QPS 5000, Burst 5000), for both.
QPS, BURST = 5000, 5000
STARTUP_SECONDS = 90.0
STOP_SECONDS = 15.0
DEFAULT_OUT = "compare-results"
#: The issue's targets (docs/benchmarks.md).
TARGET_BASIC_RATIO = 1.0
TARGET_BASIC_PODS_PER_SECOND = 680.0
TARGET_OTHER_RATIO = 0.8
TARGET_TIE_AGREEMENT = 0.99


# ---- the schedulers -------------------------------------------------------------------------------


def scheduler_config(kubeconfig: Path, extra: str = "") -> str:
    """The KubeSchedulerConfiguration both schedulers run with: the default profile, the same client
    connection, no leader election."""
    return (f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {kubeconfig}, qps: {QPS}, burst: {BURST}}}\n"
            f"leaderElection: {{leaderElect: false}}\n{extra}")


class Scheduler:
    """One scheduler process on a cluster; its output goes to ``log``."""

    name = ""

    def __init__(self, cluster: LocalCluster, workdir: Path, *, scores: int = 0) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.scores = scores  # nodes per pod to record scores for (0: off)
        self.log = workdir / f"{self.name}.log"
        self.config = workdir / f"{self.name}.yaml"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.config.write_text(scheduler_config(self.cluster.admin_kubeconfig))
        self._log_file = self.log.open("ab")
        self.proc = _spawner.popen(self.argv(), self._log_file)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self) -> None:
        pass

    def _wait_for_line(self, text: str) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"{self.name} did not start (no {text!r} in {self.log}):\n{tail}")

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_SECONDS)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KubeScheduler(Scheduler):
    """The real kube-scheduler (``--config``, a free secure port on loopback)."""

    name = KUBE

    def argv(self) -> list[str]:
        (port,) = free_ports(1)
        argv = [str(self.cluster.bin_dir / "kube-scheduler"), "--config", str(self.config),
                "--bind-address", "127.0.0.1", "--secure-port", str(port)]
        if self.scores:
            # schedule_one.go logs each plugin's weighted score per node, and each total, at level 10.
            argv += ["-v", "2", "--vmodule", "schedule_one=10"]
        return argv

    def wait_ready(self) -> None:
        self._wait_for_line("Starting Kubernetes Scheduler")


class OutriggerScheduler(Scheduler):
    """``outrigger serve --kubeconfig`` (no secure port; ``--http`` on loopback when scores are kept)."""

    name = OUTRIGGER

    def __init__(self, cluster: LocalCluster, workdir: Path, *, scores: int = 0) -> None:
        super().__init__(cluster, workdir, scores=scores)
        self.http = f"127.0.0.1:{free_ports(1)[0]}" if scores else ""

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "framework.cli", "serve", "--kubeconfig", str(self.cluster.admin_kubeconfig),
                "--config", str(self.config), "--listen", "127.0.0.1:0", "--secure-port", "0"]
        if self.scores:
            argv += ["--http", self.http, "--debug-scores", str(self.scores)]
        return argv

    def wait_ready(self) -> None:
        self._wait_for_line("in sync with the cluster")


SCHEDULERS: dict[str, type[Scheduler]] = {KUBE: KubeScheduler, OUTRIGGER: OutriggerScheduler}


@contextlib.contextmanager
def fresh_cluster(workdir: Path, bin_dir: Path) -> Iterator[LocalCluster]:
    """A new etcd and API server in ``workdir`` (removed afterwards: 5000 nodes of etcd data add up)."""
    cluster = LocalCluster.start(workdir, bin_dir=bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(workdir / "etcd-data", ignore_errors=True)


def _api(cluster: LocalCluster) -> Api:
    return Api.from_kubeconfig(str(cluster.admin_kubeconfig))


# ---- throughput -----------------------------------------------------------------------------------


@dataclass
class ThroughputRun:
    """One scheduler on one copy of a workload."""

    workload: str
    scheduler: str
    round: int
    pods: int
    seconds: float = 0.0
    pods_per_second: float = 0.0
    #: Seconds creating the measured pods took (the API server's pace: a floor under ``seconds``).
    create_seconds: float = 0.0
    #: CPU seconds spent while the measured pods were created and scheduled, per measured pod (ms).
    scheduler_cpu_ms_per_pod: float = 0.0
    apiserver_cpu_ms_per_pod: float = 0.0
    etcd_cpu_ms_per_pod: float = 0.0
    #: This process: creating the pods and reading the watch.
    harness_cpu_ms_per_pod: float = 0.0
    #: Shares of the machine's CPU over the window: everything else that ran (other users), and idle.
    other_cpu_share: float = 0.0
    idle_cpu_share: float = 0.0
    error: str = ""


def run_throughput(workload: Workload, scheduler: str, round_: int, workdir: Path, bin_dir: Path,
                   timeout: float = 600.0) -> ThroughputRun:
    """``workload`` on a fresh cluster with ``scheduler``: the measured pods timed from outside."""
    out = ThroughputRun(workload.name, scheduler, round_, workload.measure.count)
    try:
        with fresh_cluster(workdir, bin_dir) as cluster:
            asyncio.run(_setup(cluster, workload))
            with SCHEDULERS[scheduler](cluster, workdir) as sched:
                asyncio.run(_timed(cluster, sched, workload, timeout, out))
    except Exception as exc:  # a failed run is reported, the others go on
        out.error = f"{type(exc).__name__}: {exc}"
    return out


async def _setup(cluster: LocalCluster, workload: Workload) -> None:
    api = _api(cluster)
    try:
        await create_cluster(api, workload)
    finally:
        await api.close()


async def _timed(cluster: LocalCluster, sched: Scheduler, workload: Workload, timeout: float,
                 out: ThroughputRun) -> None:
    api = _api(cluster)
    try:
        if workload.init.count:
            await create_and_wait(api, workload.init, SCHEDULER_NAME, timeout)
        pids = {"scheduler": sched.pid,
                "apiserver": cluster.apiserver.proc.pid if cluster.apiserver.proc else 0,
                "etcd": cluster.etcd.proc.pid if cluster.etcd.proc else 0}
        before = CpuSample.take(pids)
        timing = await create_and_wait(api, workload.measure, SCHEDULER_NAME, timeout)
        cpu = before.shares(CpuSample.take(pids), timing.pods)
    finally:
        await api.close()
    out.seconds, out.pods_per_second, out.create_seconds = timing.seconds, timing.pods_per_second, timing.create_seconds
    out.scheduler_cpu_ms_per_pod = cpu["cpu_ms_per_pod_scheduler"]
    out.apiserver_cpu_ms_per_pod = cpu["cpu_ms_per_pod_apiserver"]
    out.etcd_cpu_ms_per_pod = cpu["cpu_ms_per_pod_etcd"]
    out.harness_cpu_ms_per_pod = cpu["cpu_ms_per_pod_watcher"]
    out.other_cpu_share, out.idle_cpu_share = cpu["cpu_share_other"], cpu["cpu_share_idle"]


# ---- placements: kube-scheduler's scores ------------------------------------------------------------

_SCORED = re.compile(r'"Plugin scored node for pod".*? pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')
_TOTAL = re.compile(r'"Calculated node\'s final score for pod".*? pod="([^"]+)" node="([^"]+)" score=(-?\d+)')


@dataclass
class PodScores:
    """One pod's last scoring: node -> plugin -> weighted score, and node -> total."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    def best(self) -> set[str]:
        if not self.totals:
            return set()
        top = max(self.totals.values())
        return {n for n, t in self.totals.items() if t == top}


def parse_kube_scores(text: str) -> dict[str, PodScores]:
    """``namespace/name`` -> the pod's scores from a kube-scheduler log at ``schedule_one=10``.

    A pod scored again (a later attempt) starts over: the first plugin line for a node it already
    has a score of that plugin for begins a new table.
    """
    out: dict[str, PodScores] = {}
    for line in text.splitlines():
        m = _SCORED.search(line)
        if m is not None:
            pod, plugin, node, score = m.group(1), m.group(2), m.group(3), int(m.group(4))
            entry = out.setdefault(pod, PodScores())
            if plugin in entry.plugins.get(node, {}) and entry.totals:
                entry = out[pod] = PodScores()
            entry.plugins.setdefault(node, {})[plugin] = score
            continue
        m = _TOTAL.search(line)
        if m is not None:
            entry = out.setdefault(m.group(1), PodScores())
            entry.totals[m.group(2)] = int(m.group(3))
    return out


# ---- placements: the workloads ----------------------------------------------------------------------


@dataclass(frozen=True)
class PlacementWorkload:
    """Nodes, pods already bound (``spec.nodeName`` set) and pods to schedule, in order."""

    name: str
    description: str
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    #: Built so that every pod has one best node (every pod must land where kube-scheduler put it).
    deterministic: bool = False
    namespaces: tuple[str, ...] = ("default",)
    #: Pods created already bound, before any is scheduled.
    bound: list[dict[str, Any]] = field(default_factory=list)

    def with_scheduler(self, pods: list[dict[str, Any]], scheduler: str) -> list[dict[str, Any]]:
        return [{**p, "spec": {**p["spec"], "schedulerName": scheduler}} for p in pods]


def _mixed(nodes: int = 12, pods: int = 36, seed: int = 19) -> PlacementWorkload:
    """Nodes of different sizes, already used to different degrees (a bound filler pod each), zones,
    disks, images and PreferNoSchedule taints; pods of different requests with preferred node affinity,
    preferred pod (anti-)affinity, soft spread constraints, tolerations and images: every Score plugin
    of the default profile has something to say, and the totals differ from node to node."""
    rng = random.Random(seed)
    app_image = {"names": ["registry.example/app:v1"], "sizeBytes": 300 * 1024 * 1024}
    db_image = {"names": ["registry.example/db:v2"], "sizeBytes": 800 * 1024 * 1024}
    node_docs: list[dict[str, Any]] = []
    fillers: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"mixed-{i:02d}"
        labels = {"topology.kubernetes.io/zone": f"z{i % 3}", "disk": "ssd" if i % 2 else "hdd"}
        doc = node_manifest(name, labels)
        cpu = f"{2000 + 500 * i}m"
        memory = f"{6 + (i * 7) % nodes}Gi"  # 7 is prime to the node counts used: every node differs
        doc["status"]["capacity"] = {"pods": "110", "cpu": cpu, "memory": memory}
        doc["status"]["allocatable"] = dict(doc["status"]["capacity"])
        if i % 5 == 0:
            doc["spec"]["taints"] = [{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}]
        images = ([app_image] if i % 4 == 0 else []) + ([db_image] if i % 6 == 1 else [])
        if images:
            doc["status"]["images"] = images
        node_docs.append(doc)
        # Spread what is left free (so NodeResourcesFit and BalancedAllocation spread over 0..100): up to
        # 70% of the cpu and of the memory in use, in different orders.
        used_cpu = (2000 + 500 * i) * 7 * ((i * 11) % nodes) // (10 * nodes)
        used_memory = (6 + (i * 7) % nodes) * 1024 * 7 * ((i * 5) % nodes) // (10 * nodes)
        filler = pod_manifest(f"filler-{i:02d}", "default", SCHEDULER_NAME, labels={"app": "filler"},
                              nodeName=name)
        requests = {"cpu": f"{used_cpu}m", "memory": f"{used_memory}Mi"}
        filler["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": dict(requests)}
        fillers.append(filler)
    pod_docs = []
    for j in range(pods):
        kind = ("web", "db", "batch")[j % 3]
        spec: dict[str, Any] = {}
        pref: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            pref.append({"weight": rng.choice((10, 30, 60)), "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": [rng.choice(("ssd", "hdd"))]}]}})
        if rng.random() < 0.3:
            pref.append({"weight": rng.choice((5, 20)), "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [f"z{rng.randrange(3)}"]}]}})
        affinity: dict[str, Any] = {}
        if pref:
            affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": pref}
        if kind == "web" and rng.random() < 0.6:
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 40, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                                   "topologyKey": "topology.kubernetes.io/zone"}}]}
        if kind == "db":
            affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                                   "topologyKey": "kubernetes.io/hostname"}}]}
        if affinity:
            spec["affinity"] = affinity
        if kind == "batch" and rng.random() < 0.7:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "batch"}}}]
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "maintenance", "operator": "Exists", "effect": "PreferNoSchedule"}]
        doc = pod_manifest(f"{kind}-{j:03d}", "default", SCHEDULER_NAME, labels={"app": kind}, **spec)
        container = doc["spec"]["containers"][0]
        container["image"] = {"web": "registry.example/app:v1", "db": "registry.example/db:v2"}.get(kind,
                                                                                                   container["image"])
        cpu = f"{rng.choice((100, 250, 500, 750, 1000, 1500))}m"
        memory = f"{rng.choice((128, 256, 512, 1024, 2048))}Mi"
        container["resources"] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
        pod_docs.append(doc)
    return PlacementWorkload(f"Mixed-{seed}", f"{nodes} nodes of different sizes, {pods} pods exercising every "
                             "Score plugin", node_docs, pod_docs, deterministic=True, bound=fillers)


def _from_perf(workload: Workload, nodes: int, init: int, measure: int) -> PlacementWorkload:
    wl = workload.sized(nodes=nodes, init_pods=init, measure_pods=measure)
    pods = [*wl.init.manifests(SCHEDULER_NAME), *wl.measure.manifests(SCHEDULER_NAME)]
    return PlacementWorkload(wl.name, f"{wl.describe()} (identical nodes: tied scores)", wl.node_manifests(), pods,
                             namespaces=wl.namespaces)


#: The deterministic placement workloads: one best node for every pod in kube-scheduler's log (checked:
#: these seeds and sizes have no tie; larger ones do, by coincidences of integer sums).
MIXED = [_mixed(seed=seed) for seed in (19, 1, 3)]


def placement_workloads(quick: bool = False) -> list[PlacementWorkload]:
    if quick:
        return [_mixed(12, 24, 19)]
    return [
        *MIXED,
        _from_perf(WORKLOADS["SchedulingBasic"], 50, 50, 100),
        _from_perf(WORKLOADS["SchedulingPodAntiAffinity"], 50, 10, 30),
        _from_perf(WORKLOADS["SchedulingPodAffinity"], 50, 40, 60),
        _from_perf(WORKLOADS["TopologySpreading"], 51, 60, 90),
    ]


# ---- placements: running both -----------------------------------------------------------------------


@dataclass
class PodPlacement:
    pod: str
    kube_node: str
    outrigger_node: str
    kube_best: list[str]
    #: "deterministic" (one best node), "tie" (several), "single" (one feasible node: not scored).
    kind: str
    agrees: bool
    kube_total: int | None = None
    outrigger_total_on_kube_node: int | None = None
    outrigger_total: int | None = None


@dataclass
class PluginAgreement:
    plugin: str
    compared: int = 0
    equal: int = 0
    only_kube: int = 0
    only_outrigger: int = 0


@dataclass
class ScoreDisagreement:
    pod: str
    node: str
    plugin: str
    kube: int | None
    outrigger: int | None


@dataclass
class PlacementReport:
    workload: str
    description: str
    deterministic: bool
    pods: list[PodPlacement] = field(default_factory=list)
    plugins: dict[str, PluginAgreement] = field(default_factory=dict)
    score_disagreements: list[ScoreDisagreement] = field(default_factory=list)
    #: Pods Outrigger placed elsewhere and that were moved to kube-scheduler's node.
    moved: int = 0
    error: str = ""

    def count(self, kind: str) -> tuple[int, int]:
        """(pods of this kind, of which agree)."""
        pods = [p for p in self.pods if p.kind == kind]
        return len(pods), sum(p.agrees for p in pods)


def run_placements(workload: PlacementWorkload, workdir: Path, bin_dir: Path) -> PlacementReport:
    """kube-scheduler on the workload, then Outrigger pod by pod on kube-scheduler's states."""
    report = PlacementReport(workload.name, workload.description, workload.deterministic)
    try:
        with fresh_cluster(workdir / KUBE, bin_dir) as cluster:
            asyncio.run(_place_nodes(cluster, workload))
            with KubeScheduler(cluster, workdir / KUBE, scores=len(workload.nodes)) as kube:
                kube_nodes = asyncio.run(_kube_places(cluster, workload))
            scores = parse_kube_scores(kube.log.read_text(errors="replace"))
        with fresh_cluster(workdir / OUTRIGGER, bin_dir) as cluster:
            asyncio.run(_place_nodes(cluster, workload))
            ours = OutriggerScheduler(cluster, workdir / OUTRIGGER, scores=len(workload.nodes))
            with ours:
                asyncio.run(_lockstep(cluster, ours, workload, kube_nodes, scores, report))
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    return report


async def _place_nodes(cluster: LocalCluster, workload: PlacementWorkload) -> None:
    api = _api(cluster)
    try:
        for ns in workload.namespaces:
            if ns != "default":
                await api.request("POST", "/api/v1/namespaces", verb="create", resource="namespaces",
                                  body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for node in workload.nodes:
            await api.request("POST", "/api/v1/nodes", verb="create", resource="nodes", body=node)
        for pod in workload.bound:
            await _create_pod(api, pod)
    finally:
        await api.close()


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


async def _create_pod(api: Api, pod: dict[str, Any]) -> None:
    await api.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", verb="create",
                      resource="pods", body=pod)


async def _kube_places(cluster: LocalCluster, workload: PlacementWorkload) -> dict[str, str]:
    """Create the pods one by one (kube-scheduler queues them in that order); pod key -> node."""
    api = _api(cluster)
    watches = {ns: BoundWatch(api, ns) for ns in workload.namespaces}
    try:
        for w in watches.values():
            await w.start()
        for pod in workload.with_scheduler(workload.pods, SCHEDULER_NAME):
            await _create_pod(api, pod)
        out = {}
        for ns, w in watches.items():
            names = [p["metadata"]["name"] for p in workload.pods if p["metadata"]["namespace"] == ns]
            await w.wait(names, 120)
            out.update({f"{ns}/{n}": w.bound[n][1] for n in names})
        return out
    finally:
        for w in watches.values():
            await w.stop()
        await api.close()


async def _debug_scores(session: aiohttp.ClientSession, http: str, key: str) -> dict[str, Any] | None:
    for _ in range(50):  # the table is kept when the pod is scored, before it is bound: seen at once
        async with session.get(f"http://{http}/debug/scores/{key}") as resp:
            if resp.status == 200:
                data: dict[str, Any] = await resp.json()
                return data
            if resp.status != 404:
                raise RuntimeError(f"GET /debug/scores/{key}: {resp.status} {await resp.text()}")
        await asyncio.sleep(0.02)
    return None


async def _lockstep(cluster: LocalCluster, ours: OutriggerScheduler, workload: PlacementWorkload,
                    kube_nodes: dict[str, str], kube_scores: dict[str, PodScores], report: PlacementReport) -> None:
    api = _api(cluster)
    watches = {ns: BoundWatch(api, ns) for ns in workload.namespaces}
    async with aiohttp.ClientSession() as session:
        try:
            for w in watches.values():
                await w.start()
            for pod in workload.with_scheduler(workload.pods, SCHEDULER_NAME):
                key, ns, name = _key(pod), pod["metadata"]["namespace"], pod["metadata"]["name"]
                await _create_pod(api, pod)
                await watches[ns].wait([name], 60)
                node = watches[ns].bound[name][1]
                table = await _debug_scores(session, ours.http, key) if key in kube_scores else None
                _compare_pod(report, key, kube_nodes[key], node, kube_scores.get(key), table)
                if node != kube_nodes[key]:
                    # Give Outrigger kube-scheduler's state for the next pod: this one where kube put it.
                    report.moved += 1
                    path = f"/api/v1/namespaces/{ns}/pods/{name}"
                    await api.request("DELETE", path, verb="delete", resource="pods",
                                      body={"gracePeriodSeconds": 0})
                    del watches[ns].bound[name]
                    for _ in range(100):
                        try:
                            await api.request("GET", path, verb="get", resource="pods")
                        except ApiError as exc:
                            if exc.code == 404:
                                break
                            raise
                        await asyncio.sleep(0.05)
                    moved = {**pod, "spec": {**pod["spec"], "nodeName": kube_nodes[key]}}
                    await _create_pod(api, moved)
                    await watches[ns].wait([name], 60)
        finally:
            for w in watches.values():
                await w.stop()
            await api.close()


def _compare_pod(report: PlacementReport, key: str, kube_node: str, node: str, kube: PodScores | None,
                 table: dict[str, Any] | None) -> None:
    if kube is None or not kube.totals:
        report.pods.append(PodPlacement(key, kube_node, node, [kube_node], "single", node == kube_node))
        return
    best = kube.best()
    ours: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    for row in (table or {}).get("nodes") or ():
        ours[row["node"]] = {p: int(s["weighted"]) for p, s in row["scores"].items()}
        totals[row["node"]] = int(row["total"])
    kind = "deterministic" if len(best) == 1 else "tie"
    report.pods.append(PodPlacement(key, kube_node, node, sorted(best), kind, node in best,
                                    kube.totals.get(kube_node), totals.get(kube_node), totals.get(node)))
    for n, plugins in kube.plugins.items():
        mine = ours.get(n)
        if mine is None:
            for plugin, score in plugins.items():
                agreement = report.plugins.setdefault(plugin, PluginAgreement(plugin))
                agreement.compared += 1
                agreement.only_kube += 1
                report.score_disagreements.append(ScoreDisagreement(key, n, plugin, score, None))
            continue
        for plugin in sorted(plugins.keys() | mine.keys()):
            agreement = report.plugins.setdefault(plugin, PluginAgreement(plugin))
            k, o = plugins.get(plugin), mine.get(plugin)
            agreement.compared += 1
            agreement.only_kube += o is None and k is not None
            agreement.only_outrigger += k is None and o is not None
            # A plugin one side did not run scores 0 there (PreScore's Skip): equal if the other says 0.
            if (k or 0) == (o or 0):
                agreement.equal += 1
            else:
                report.score_disagreements.append(ScoreDisagreement(key, n, plugin, k, o))


# ---- reasons --------------------------------------------------------------------------------------

_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "20"}


def _reasons_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cluster objects, pods that fit nowhere): tests/test_plugin_messages.py's cluster, as API objects."""
    def node(name: str, labels: dict[str, str] | None = None, alloc: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
        doc = node_manifest(name, labels)
        doc["spec"] = spec
        doc["status"]["capacity"] = dict(alloc or _CAPACITY)
        doc["status"]["allocatable"] = dict(alloc or _CAPACITY)
        return doc

    def pod(name: str, labels: dict[str, str] | None = None, cpu: str = "", **spec: Any) -> dict[str, Any]:
        doc = pod_manifest(name, "default", SCHEDULER_NAME, labels=labels, **spec)
        container = doc["spec"]["containers"][0]
        del container["ports"]
        container["resources"] = {"requests": {"cpu": cpu}} if cpu else {}
        return doc

    by_name = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]}]}]}}}
    conflict = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]},
                         {"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
    on_big = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
    filler = pod("filler", {"app": "filler"}, "7", nodeName="big", affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "intruder"}}, "topologyKey": "zone"}]}})
    filler["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    objects = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high-never"},
         "value": 100, "preemptionPolicy": "Never"},
        node("taint-a", taints=[{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]),
        node("taint-b", taints=[{"key": "gpu", "value": "true", "effect": "NoExecute"}]),
        node("cordon", unschedulable=True),
        node("small", {"zone": "z1"}, {"cpu": "1", "memory": "16Gi", "pods": "20"}),
        node("big", {"zone": "z2"}, {"cpu": "8", "memory": "16Gi", "pods": "20"}),
        node("tiny", None, {"cpu": "1", "memory": "16Gi", "pods": "1"}),
        filler,
        pod("tiny-filler", nodeName="tiny"),
    ]
    ports_big = pod("ports-big", cpu="100m", affinity=on_big)
    ports_big["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    memory = pod("memory")
    memory["spec"]["containers"][0]["resources"] = {"requests": {"memory": "20Gi"}}
    extended = pod("extended")
    extended["spec"]["containers"][0]["resources"] = {"requests": {"example.com/foo": "1"},
                                                      "limits": {"example.com/foo": "1"}}
    pods = [
        pod("cpu6", cpu="6"),
        pod("cpu6-never", cpu="6", priorityClassName="high-never"),
        pod("selector", nodeSelector={"zone": "z3"}),
        pod("name-small", cpu="6", affinity=by_name),
        pod("conflict", affinity=conflict),
        ports_big,
        pod("spread", {"app": "spread"}, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]),
        pod("affinity", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "nothing"}}, "topologyKey": "zone"}]}}),
        pod("anti", nodeSelector={"zone": "z2"}, affinity={"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "filler"}}, "topologyKey": "zone"}]}}),
        pod("intruder", {"app": "intruder"}, nodeSelector={"zone": "z2"}),
        extended,
        pod("tolerate-all", cpu="20", tolerations=[{"operator": "Exists"}]),
        memory,
    ]
    return objects, pods


#: (cluster objects, pods that fit nowhere) of the reasons comparison.
REASONS = _reasons_cluster()


@dataclass
class PodReason:
    pod: str
    kube: str
    outrigger: str
    kube_condition: str
    outrigger_condition: str

    @property
    def identical(self) -> bool:
        return bool(self.kube) and self.kube == self.outrigger and self.kube_condition == self.outrigger_condition


@dataclass
class ReasonsReport:
    pods: list[PodReason] = field(default_factory=list)
    error: str = ""


_PATHS = {"Node": "/api/v1/nodes", "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses"}


async def _failed_scheduling(cluster: LocalCluster, pods: list[dict[str, Any]],
                             objects: list[dict[str, Any]], timeout: float) -> dict[str, tuple[str, str]]:
    """Create the objects and the pods; pod -> (its last FailedScheduling note, PodScheduled message)."""
    api = _api(cluster)
    try:
        for obj in objects:
            path = _PATHS.get(obj["kind"], f"/api/v1/namespaces/{obj.get('metadata', {}).get('namespace')}/pods")
            await api.request("POST", path, verb="create", resource=obj["kind"].lower(), body=obj)
        for pod in pods:
            await _create_pod(api, pod)
        names = {p["metadata"]["name"] for p in pods}
        deadline = time.monotonic() + timeout
        notes: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            events = await api.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events", verb="list",
                                       resource="events")
            latest: dict[str, tuple[str, str]] = {}
            for ev in events.get("items") or ():
                name = str((ev.get("regarding") or {}).get("name") or "")
                if ev.get("reason") == "FailedScheduling" and name in names:
                    stamp = str(ev.get("eventTime") or (ev.get("series") or {}).get("lastObservedTime") or "")
                    if name not in latest or stamp >= latest[name][0]:
                        latest[name] = (stamp, str(ev.get("note") or ""))
            if latest.keys() == names:
                listed = await api.request("GET", "/api/v1/namespaces/default/pods", verb="list", resource="pods")
                conditions = {}
                for item in listed.get("items") or ():
                    for cond in (item.get("status") or {}).get("conditions") or ():
                        if cond.get("type") == "PodScheduled":
                            conditions[item["metadata"]["name"]] = str(cond.get("message") or "")
                if conditions.keys() >= names:
                    notes = {n: (latest[n][1], conditions[n]) for n in names}
                    break
            await asyncio.sleep(0.5)
        return notes
    finally:
        await api.close()


def run_reasons(workdir: Path, bin_dir: Path, timeout: float = 60.0) -> ReasonsReport:
    """Each scheduler on a fresh copy of :data:`REASONS`; their FailedScheduling events, pod by pod."""
    report = ReasonsReport()
    objects, pods = REASONS
    got: dict[str, dict[str, tuple[str, str]]] = {}
    try:
        for name, cls in SCHEDULERS.items():
            with fresh_cluster(workdir / name, bin_dir) as cluster, cls(cluster, workdir / name):
                got[name] = asyncio.run(_failed_scheduling(cluster, pods, objects, timeout))
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    for pod in pods:
        name = pod["metadata"]["name"]
        k = got.get(KUBE, {}).get(name, ("", ""))
        o = got.get(OUTRIGGER, {}).get(name, ("", ""))
        report.pods.append(PodReason(name, k[0], o[0], k[1], o[1]))
    return report


# ---- the whole comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What ``make compare`` runs: throughput workloads with their rounds, placements, reasons."""

    throughput: list[tuple[Workload, int]]
    placements: list[PlacementWorkload]
    reasons: bool = True


def default_plan(quick: bool = False, rounds: int | None = None) -> Plan:
    """The sizes that fit ``make compare``'s 15 minutes on two cores: SchedulingBasic at its
    performance size (5000 nodes, 1000 + 10000 pods), the others at scheduler_perf's own 500-node
    sizes (``500Nodes``)."""
    if quick:
        small = [WORKLOADS["SchedulingBasic"].sized(nodes=50, init_pods=20, measure_pods=100)]
        return Plan([(w, rounds or 1) for w in small], placement_workloads(quick=True))
    return Plan([
        (WORKLOADS["SchedulingBasic"], rounds or 2),
        (WORKLOADS["SchedulingPodAntiAffinity"].sized(nodes=500, init_pods=100, measure_pods=400), rounds or 3),
        (WORKLOADS["SchedulingPodAffinity"].sized(nodes=500, init_pods=500, measure_pods=1000), rounds or 3),
        (WORKLOADS["TopologySpreading"].sized(nodes=500, init_pods=1000, measure_pods=1000), rounds or 3),
    ], placement_workloads())


@dataclass
class CompareResults:
    throughput: list[ThroughputRun] = field(default_factory=list)
    placements: list[PlacementReport] = field(default_factory=list)
    reasons: ReasonsReport | None = None
    sizes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def run_compare(plan: Plan, workdir: Path, bin_dir: Path,
                progress: Callable[[str], None] = lambda _: None) -> CompareResults:
    results = CompareResults()
    started = time.monotonic()
    for workload, rounds in plan.throughput:
        results.sizes[workload.name] = workload.describe()
        for r in range(rounds):
            order = (KUBE, OUTRIGGER) if r % 2 == 0 else (OUTRIGGER, KUBE)
            for sched in order:
                run = run_throughput(workload, sched, r + 1, workdir / f"{workload.name}-{sched}-{r + 1}", bin_dir)
                results.throughput.append(run)
                progress(f"throughput {workload.name} round {r + 1} {sched}: "
                         + (run.error or f"{run.pods_per_second:.0f} pods/s"))
    for pw in plan.placements:
        report = run_placements(pw, workdir / f"placements-{pw.name}", bin_dir)
        results.placements.append(report)
        progress(f"placements {pw.name}: " + (report.error or f"{len(report.pods)} pods, {report.moved} moved"))
    if plan.reasons:
        results.reasons = run_reasons(workdir / "reasons", bin_dir)
        same = sum(p.identical for p in results.reasons.pods)
        progress(f"reasons: {same}/{len(results.reasons.pods)} identical" + (
            f" ({results.reasons.error})" if results.reasons.error else ""))
    results.seconds = time.monotonic() - started
    return results


# ---- the report ----------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def throughput_summary(runs: Sequence[ThroughputRun]) -> list[dict[str, Any]]:
    """Per workload: both schedulers' medians, the median of the per-round ratios, and the target."""
    out = []
    for name in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == name and not r.error]
        by: dict[str, list[ThroughputRun]] = {s: [r for r in mine if r.scheduler == s] for s in SCHEDULERS}
        rounds = sorted({r.round for r in mine})
        ratios = []
        for rnd in rounds:
            k = [r for r in by[KUBE] if r.round == rnd]
            o = [r for r in by[OUTRIGGER] if r.round == rnd]
            if k and o and k[0].pods_per_second > 0:
                ratios.append(o[0].pods_per_second / k[0].pods_per_second)
        ratio = _median(ratios)
        basic = name == "SchedulingBasic"
        target = TARGET_BASIC_RATIO if basic else TARGET_OTHER_RATIO
        row: dict[str, Any] = {
            "workload": name, "rounds": len(rounds), "ratio": round(ratio, 3), "ratios": [round(x, 3) for x in ratios],
            "target_ratio": target, "ratio_met": bool(ratios) and ratio >= target,
            "errors": [f"{r.scheduler} round {r.round}: {r.error}" for r in runs if r.workload == name and r.error],
        }
        for s, rs in by.items():
            row[s] = {
                "pods_per_second": round(_median([r.pods_per_second for r in rs]), 1),
                "runs": [round(r.pods_per_second, 1) for r in rs],
                "create_seconds": round(_median([r.create_seconds for r in rs]), 2),
                "cpu_ms_per_pod": round(_median([r.scheduler_cpu_ms_per_pod for r in rs]), 3),
                "apiserver_cpu_ms_per_pod": round(_median([r.apiserver_cpu_ms_per_pod for r in rs]), 3),
                "etcd_cpu_ms_per_pod": round(_median([r.etcd_cpu_ms_per_pod for r in rs]), 3),
                "harness_cpu_ms_per_pod": round(_median([r.harness_cpu_ms_per_pod for r in rs]), 3),
                "other_cpu_share": round(_median([r.other_cpu_share for r in rs]), 3),
            }
        if basic:
            row["target_pods_per_second"] = TARGET_BASIC_PODS_PER_SECOND
            row["pods_per_second_met"] = row[OUTRIGGER]["pods_per_second"] >= TARGET_BASIC_PODS_PER_SECOND
        out.append(row)
    return out


def placement_summary(report: PlacementReport) -> dict[str, Any]:
    det, det_ok = report.count("deterministic")
    tie, tie_ok = report.count("tie")
    single, single_ok = report.count("single")
    return {
        "workload": report.workload, "description": report.description, "deterministic_workload": report.deterministic,
        "pods": len(report.pods), "one_best_node": det, "same_node": det_ok, "tied": tie, "within_best": tie_ok,
        "single_feasible_node": single, "single_same": single_ok, "moved": report.moved,
        "all_agree": det == det_ok and tie == tie_ok and single == single_ok and not report.error,
        # The targets: every pod with one best node on it, and 99% of tied pods within the best.
        "target_met": (not report.error and det == det_ok and single == single_ok
                       and (tie == 0 or tie_ok >= TARGET_TIE_AGREEMENT * tie)),
        "score_disagreements": len(report.score_disagreements), "error": report.error,
    }


def to_json(results: CompareResults, commit: str = "") -> dict[str, Any]:
    plugins: dict[str, PluginAgreement] = {}
    for rep in results.placements:
        for name, a in rep.plugins.items():
            total = plugins.setdefault(name, PluginAgreement(name))
            total.compared += a.compared
            total.equal += a.equal
            total.only_kube += a.only_kube
            total.only_outrigger += a.only_outrigger
    reasons = results.reasons
    return {
        "commit": commit, "machine": machine_info(), "seconds": round(results.seconds, 1), "sizes": results.sizes,
        "throughput": {"summary": throughput_summary(results.throughput),
                       "runs": [dataclasses.asdict(r) for r in results.throughput]},
        "placements": {
            "summary": [placement_summary(r) for r in results.placements],
            "plugins": [dataclasses.asdict(a) for a in sorted(plugins.values(), key=lambda a: a.plugin)],
            "disagreements": {r.workload: [dataclasses.asdict(p) for p in r.pods if not p.agrees]
                              for r in results.placements},
            "score_disagreements": {r.workload: [dataclasses.asdict(d) for d in r.score_disagreements]
                                    for r in results.placements},
        },
        "reasons": None if reasons is None else {
            "identical": sum(p.identical for p in reasons.pods), "pods": len(reasons.pods), "error": reasons.error,
            "by_pod": [{**dataclasses.asdict(p), "identical": p.identical} for p in reasons.pods],
        },
    }


def machine_info() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _cpu(row: dict[str, Any]) -> str:
    ms = " / ".join(f"{row.get(k, 0.0):.2f}" for k in ("cpu_ms_per_pod", "apiserver_cpu_ms_per_pod",
                                                        "etcd_cpu_ms_per_pod", "harness_cpu_ms_per_pod"))
    return f"{ms} (others: {100 * row.get('other_cpu_share', 0.0):.0f}%)"


def to_markdown(doc: dict[str, Any], *, details: int = 30) -> str:
    lines = [f"Commit `{doc['commit'] or 'unknown'}`, {doc['machine']['cpus']} CPUs, "
             f"{doc['seconds']:.0f} s in all.", "", "Throughput (pods/s, medians over rounds; CPU ms per measured pod: "
             "scheduler / API server / etcd / the harness creating and watching, and the share of the machine's "
             "CPU taken by other processes meanwhile):", "",
             f"| workload | size | rounds | {KUBE} | {OUTRIGGER} | ratio (per round) | target | CPU {KUBE} | "
             f"CPU {OUTRIGGER} |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in doc["throughput"]["summary"]:
        k, o = row[KUBE], row[OUTRIGGER]
        target = f"≥ {row['target_ratio']}x" + (f", ≥ {row['target_pods_per_second']:.0f} pods/s"
                                               if "target_pods_per_second" in row else "")
        met = "met" if row["ratio_met"] and row.get("pods_per_second_met", True) else "not met"
        lines.append(f"| {row['workload']} | {doc['sizes'].get(row['workload'], '')} | {row['rounds']} | "
                     f"{k['pods_per_second']:.0f} | {o['pods_per_second']:.0f} | {row['ratio']:.2f} "
                     f"({', '.join(f'{x:.2f}' for x in row['ratios'])}) | {target}: {met} | "
                     f"{_cpu(k)} | {_cpu(o)} |")
        lines.extend(f"| | failed: {e} | | | | | | | |" for e in row["errors"])
    lines += ["", "Placements (Outrigger on kube-scheduler's cluster state, pod by pod):", "",
              "| workload | pods | one best node: same node | tied best: within kube-scheduler's best | "
              "one feasible node: same | moved | score disagreements |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in doc["placements"]["summary"]:
        lines.append(f"| {s['workload']} ({s['description']}) | {s['pods']} | {s['same_node']}/{s['one_best_node']} "
                     f"| {s['within_best']}/{s['tied']} | {s['single_same']}/{s['single_feasible_node']} "
                     f"| {s['moved']} | {s['score_disagreements']} |"
                     + (f" failed: {s['error']}" if s["error"] else ""))
    lines += ["", "Per-plugin agreement (every Score plugin's weighted score on every node of every scored pod):", "",
              "| plugin | scores compared | equal | only kube-scheduler ran it | only Outrigger ran it |",
              "| --- | --- | --- | --- | --- |"]
    for a in doc["placements"]["plugins"]:
        lines.append(f"| {a['plugin']} | {a['compared']} | {a['equal']} | {a['only_kube']} | {a['only_outrigger']} |")
    wrong = [(w, p) for w, ps in doc["placements"]["disagreements"].items() for p in ps]
    lines += ["", f"Placement disagreements: {len(wrong)}."]
    if wrong:
        lines += ["", "| workload | pod | kube-scheduler's node (best set) | Outrigger's node | totals: kube on its "
                  "node / Outrigger on that node / Outrigger on its node |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {w} | {p['pod']} | {p['kube_node']} ({', '.join(p['kube_best'])}) | {p['outrigger_node']} | "
                  f"{p['kube_total']} / {p['outrigger_total_on_kube_node']} / {p['outrigger_total']} |"
                  for w, p in wrong[:details]]
    scores = [(w, d) for w, ds in doc["placements"]["score_disagreements"].items() for d in ds]
    lines += ["", f"Score disagreements: {len(scores)}" + (f" (the first {details}; all in the JSON)."
                                                           if len(scores) > details else ".")]
    if scores:
        lines += ["", "| workload | pod | node | plugin | kube-scheduler | Outrigger |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {w} | {d['pod']} | {d['node']} | {d['plugin']} | {d['kube']} | {d['outrigger']} |"
                  for w, d in scores[:details]]
    reasons = doc["reasons"]
    if reasons is not None:
        lines += ["", f"FailedScheduling messages: {reasons['identical']}/{reasons['pods']} identical"
                  + (f" (failed: {reasons['error']})" if reasons["error"] else "") + ".", ""]
        lines += ["| pod | identical | message (kube-scheduler's; Outrigger's when it differs) |",
                  "| --- | --- | --- |"]
        for p in reasons["by_pod"]:
            msg = p["kube"] if p["identical"] else f"{p['kube']}<br>Outrigger: {p['outrigger']}"
            lines.append(f"| {p['pod']} | {'yes' if p['identical'] else 'no'} | {msg} |")
    return "\n".join(lines) + "\n"


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False)
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m framework.kube.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help=f"report files OUT.md and OUT.json (default {DEFAULT_OUT})")
    p.add_argument("--rounds", type=int, help="rounds per throughput workload (default: 2 for SchedulingBasic, "
                                              "3 for the others)")
    p.add_argument("--workloads", help="throughput workloads to run, comma-separated (default: all four; "
                                       "'none' for placements and reasons only)")
    p.add_argument("--no-placements", action="store_true", help="skip the placement comparison")
    p.add_argument("--no-reasons", action="store_true", help="skip the FailedScheduling comparison")
    p.add_argument("--quick", action="store_true", help="small sizes, one round (a minute or two)")
    p.add_argument("--workdir", help="where the clusters live (default: a temporary folder, removed after)")
    p.add_argument("--commit", help="the commit the report names (default: git rev-parse --short HEAD)")
    args = p.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    plan = default_plan(args.quick, args.rounds)
    if args.workloads:
        wanted = [] if args.workloads == "none" else args.workloads.split(",")
        unknown = [w for w in wanted if w not in WORKLOADS]
        if unknown:
            p.error(f"unknown workload(s) {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
        plan = dataclasses.replace(plan, throughput=[(w, r) for w, r in plan.throughput if w.name in wanted])
    if args.no_placements:
        plan = dataclasses.replace(plan, placements=[])
    if args.no_reasons:
        plan = dataclasses.replace(plan, reasons=False)
    bin_dir = find_bin_dir()
    missing = [b for b in ("etcd", "kube-apiserver", "kube-scheduler") if not (bin_dir / b).exists()]
    if missing:
        print(f"error: {', '.join(missing)} not found in {bin_dir}: build them with `make k8s`", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir = Path(args.workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="outrigger-compare-")))
        results = run_compare(plan, workdir, bin_dir, progress=lambda line: print(line, flush=True))
    doc = to_json(results, args.commit or _commit())
    Path(f"{args.out}.json").write_text(json.dumps(doc, indent=2) + "\n")
    Path(f"{args.out}.md").write_text(to_markdown(doc))
    print(to_markdown(doc))
    print(f"wrote {args.out}.md and {args.out}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
