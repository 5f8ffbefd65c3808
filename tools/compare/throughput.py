"""Throughput: a scheduler_perf workload on a fresh cluster with one scheduler, the measured pods timed from
outside (from just before the first is created to a watch showing the last one bound, the same
instrument for both schedulers), with the CPU per measured pod of the scheduler, the API server, etcd
and the harness (:class:`tools.bench.apiserver.CpuSample`), and the API server's count of the requests made
on ResourceClaims in that window by verb and answer (the conflicts of claim writes show there).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..bench.apiserver import CpuSample
from ..localcluster import LocalCluster
from ..workloads import Workload, create_and_wait, create_cluster
from .schedulers import SCHEDULER_NAME, SCHEDULERS, Scheduler, cluster_api, fresh_cluster

__all__ = ["ThroughputRun", "run_throughput"]


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
    #: Requests on ResourceClaims while the measured pods were created and scheduled, as the API server
    #: counted them (``apiserver_request_total``), by ``"VERB subresource code"`` (``"PUT status 409"``).
    claim_requests: dict[str, int] = field(default_factory=dict)
    error: str = ""


def run_throughput(workload: Workload, scheduler: str, round_: int, workdir: Path, bin_dir: Path,
                   timeout: float = 600.0) -> ThroughputRun:
    """``workload`` on a fresh cluster with ``scheduler``: the measured pods timed from outside."""
    out = ThroughputRun(workload.name, scheduler, round_, workload.measure.count)
    try:
        with fresh_cluster(workdir, bin_dir) as cluster:
            if workload.controllers:  # e.g. the claims of pods' templates, made for both schedulers alike
                cluster.start_controller_manager(workload.controllers)
            asyncio.run(_setup(cluster, workload))
            with SCHEDULERS[scheduler](cluster, workdir) as sched:
                asyncio.run(_timed(cluster, sched, workload, timeout, out))
    except Exception as exc:  # a failed run is reported, the others go on
        out.error = f"{type(exc).__name__}: {exc}"
    return out


async def _setup(cluster: LocalCluster, workload: Workload) -> None:
    api = cluster_api(cluster)
    try:
        await create_cluster(api, workload)
    finally:
        await api.close()


async def _timed(cluster: LocalCluster, sched: Scheduler, workload: Workload, timeout: float,
                 out: ThroughputRun) -> None:
    api = cluster_api(cluster)
    try:
        if workload.init.count:
            await create_and_wait(api, workload.init, SCHEDULER_NAME, timeout)
        pids = {"scheduler": sched.pid,
                "apiserver": cluster.apiserver.proc.pid if cluster.apiserver.proc else 0,
                "etcd": cluster.etcd.proc.pid if cluster.etcd.proc else 0}
        requests_before = claim_requests(cluster)
        before = CpuSample.take(pids)
        timing = await create_and_wait(api, workload.measure, SCHEDULER_NAME, timeout)
        cpu = before.shares(CpuSample.take(pids), timing.pods)
        out.claim_requests = {k: v for k, v in sorted((claim_requests(cluster) - requests_before).items()) if v}
    finally:
        await api.close()
    out.seconds, out.pods_per_second, out.create_seconds = timing.seconds, timing.pods_per_second, timing.create_seconds
    out.scheduler_cpu_ms_per_pod = cpu["cpu_ms_per_pod_scheduler"]
    out.apiserver_cpu_ms_per_pod = cpu["cpu_ms_per_pod_apiserver"]
    out.etcd_cpu_ms_per_pod = cpu["cpu_ms_per_pod_etcd"]
    out.harness_cpu_ms_per_pod = cpu["cpu_ms_per_pod_watcher"]
    out.other_cpu_share, out.idle_cpu_share = cpu["cpu_share_other"], cpu["cpu_share_idle"]


_SAMPLE_LABEL = re.compile(r'(\w+)="([^"]*)"')


def claim_requests(cluster: LocalCluster) -> Counter[str]:
    """The API server's ``apiserver_request_total`` for ResourceClaims so far, by ``"VERB subresource
    code"`` (its /metrics, read as admin)."""
    request = urllib.request.Request(f"{cluster.server}/metrics",
                                     headers={"Authorization": f"Bearer {cluster.admin_token}"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        text = resp.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(_SAMPLE_LABEL.findall(line[:line.rindex("}")]))
        if labels.get("resource") == "resourceclaims":
            parts = (labels.get("verb", ""), labels.get("subresource", ""), labels.get("code", ""))
            key = " ".join(x for x in parts if x)
            counts[key] += int(float(line.rsplit(" ", 1)[1]))
    return counts
