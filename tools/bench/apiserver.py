"""The ``apiserver`` benchmark scenario: scheduler_perf's SchedulingBasic through a real kube-apiserver.

``python -m tools.bench --scenarios apiserver`` runs it (:mod:`tools.bench.scenarios` registers
it); each run is one child process that drives everything below and reports a
:class:`~tools.bench.runs.RunResult`:

1. a fresh :class:`~tools.localcluster.LocalCluster` (etcd and kube-apiserver on loopback, its own data);
2. the nodes, scheduler_perf's ``templates/node-default.yaml`` (4 CPU, 32Gi, 110 pods, Ready; the
   harness's :func:`~tools.workloads.node_manifest`), created through the API;
3. ``outrigger serve --kubeconfig`` in its own process: kube-scheduler's default profile, with
   ``clientConnection`` qps and burst both :data:`SCHEDULER_QPS` (5000, what scheduler_perf gives the
   scheduler's client; the comparison with kube-scheduler, tools/compare/, gives both the
   same) and no leader election (:func:`scheduler_config`);
4. the initial pods (``templates/pod-default.yaml``: 100m CPU, 500Mi, port 80) in ``namespace-1``,
   created and waited for (not measured);
5. the measured pods in ``namespace-2``, created by a separate process (``python -m tools.bench.apiserver
   create-pods``) over :data:`CREATE_CONNECTIONS` keep-alive connections, while a watch of the bound pods
   (``fieldSelector=spec.nodeName!=``, :class:`~tools.workloads.BoundWatch`) in this process
   notes when each one's binding arrives.

Throughput is measured pods / (the last binding seen on the watch - the first create request sent): the
API server admitting the pods, the framework decoding them, scheduling, binding and writing its events,
and the watch delivering the bindings are all inside the window; the scheduler's own counters are not
used. Each process's CPU over the window is read from ``/proc`` (the API server, etcd, the framework,
the pod creator, this watcher, and whatever else ran on the machine), as a share of all cores and in
milliseconds per measured pod, and the framework's scheduling-attempt histogram is read from its
``/metrics``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from framework.kube.client import ApiClient, ApiError, ApiUnreachable, KubeConfig
from framework.outcomes import num_feasible_nodes_to_find

from ..localcluster import LocalCluster
from ..workloads import BoundWatch, pod_name, scheduler_perf_node, scheduler_perf_pod
from .otlpcollector import Collector, Counts
from .procstat import Connections, CpuSample, children, peak_rss_mib
from .runs import RunResult, RunSpec
from .servers import stop_process

__all__ = [
    "CREATE_CONNECTIONS",
    "SCHEDULER_BURST",
    "SCHEDULER_QPS",
    "TRACE_ENV",
    "Connections",
    "CpuSample",
    "create_objects",
    "histogram_quantile",
    "measure",
    "scheduler_config",
]

#: scheduler_perf's client for the scheduler (mustSetupCluster: "client rate limit is set to 5000").
SCHEDULER_QPS = 5000
SCHEDULER_BURST = 5000
#: Concurrent create requests of the pod creator (and of the set-up's node and pod creation).
CREATE_CONNECTIONS = 16
INIT_NAMESPACE = "namespace-1"
#: The scheduler the run's pods name (kube-scheduler's default profile, which the framework runs).
SCHEDULER = "default-scheduler"
MEASURED_NAMESPACE = "namespace-2"
STARTUP_SECONDS = 120.0
STOP_SECONDS = 20.0
ROOT = Path(__file__).resolve().parents[2]
#: The framework and the pod creator get a parent-death signal, as the cluster's processes do: a benchmark
#: killed outright leaves nothing running.
DIE_WITH_PARENT = [setpriv, "--pdeathsig", "KILL", "--"] if (setpriv := shutil.which("setpriv")) else []
#: A folder: py-spy samples the framework during the measured window (see :func:`_profiler`).
PYSPY_ENV = "OUTRIGGER_BENCH_PYSPY"
#: ``outrigger serve``'s tracing in the ``apiserver-traced`` runs: every scheduling context kept (ratio 1,
#: the head sampler's ``always_on``), exported over OTLP/gRPC to the collector (its endpoint added).
TRACE_ENV = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "always_on"}
#: Seconds the collector is waited for after the window, for the last contexts' spans to arrive.
EXPORT_WAIT_SECONDS = 30.0
_HTTP = re.compile(r"HTTP \(metrics, debug\) on (\S+)")


def scheduler_config(scheduler_name: str = "default-scheduler") -> str:
    """The KubeSchedulerConfiguration of the run: kube-scheduler's default profile under
    ``scheduler_name``, the client at :data:`SCHEDULER_QPS` / :data:`SCHEDULER_BURST`, no leader
    election (one scheduler; what the comparison with kube-scheduler runs both with)."""
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{qps: {SCHEDULER_QPS}, burst: {SCHEDULER_BURST}}}\n"
        "leaderElection: {leaderElect: false}\n"
        "profiles:\n"
        f"- schedulerName: {scheduler_name}\n"
    )


# ---- creating objects ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Created:
    """What a batch of creates did: when the first request went out, when each object was created."""

    first_sent: float = 0.0
    last_done: float = 0.0
    done_at: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


async def create_objects(
    client: ApiClient, path: str, resource: str, bodies: Sequence[dict[str, Any]], connections: int
) -> Created:
    """POST every body to ``path`` with ``connections`` requests in flight; each object's creation time
    (``time.monotonic``, comparable across processes) by name. A refusal is recorded, not raised."""
    out = Created()
    todo: Iterator[dict[str, Any]] = iter(bodies)
    now = time.monotonic

    async def worker() -> None:
        for body in todo:
            if not out.first_sent:
                out.first_sent = now()
            name = body["metadata"]["name"]
            try:
                await client.request("POST", path, verb="create", resource=resource, body=body)
            except (ApiError, ApiUnreachable) as exc:
                out.errors.append(f"{name}: {exc}")
                continue
            out.done_at[name] = out.last_done = now()

    await asyncio.gather(*(worker() for _ in range(max(1, connections))))
    return out


def _admin_client(kubeconfig: Path, connections: int) -> ApiClient:
    return ApiClient(KubeConfig.from_file(kubeconfig), qps=-1, burst=0, max_connections=connections,
                     user_agent="outrigger-bench")


async def _create_pods_main(kubeconfig: Path, namespace: str, start: int, count: int, connections: int,
                            scheduler_name: str) -> dict[str, Any]:
    scheduler = scheduler_name or SCHEDULER
    bodies = [scheduler_perf_pod(namespace, i, scheduler=scheduler) for i in range(start, start + count)]
    client = _admin_client(kubeconfig, connections)
    # Started and ready before the clock: the benchmark says when to go (a line on stdin).
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    try:
        cpu0 = time.process_time()
        created = await create_objects(client, f"/api/v1/namespaces/{namespace}/pods", "pods", bodies, connections)
        cpu = time.process_time() - cpu0
    finally:
        await client.close()
    return {"first_sent": created.first_sent, "last_done": created.last_done, "done_at": created.done_at,
            "errors": created.errors[:20], "error_count": len(created.errors), "cpu_seconds": cpu}


# ---- the framework process ----------------------------------------------------------------------------


class Framework:
    """``outrigger serve --kubeconfig`` in its own process; its output kept, drained by a thread."""

    def __init__(self, kubeconfig: Path, config: Path, env: dict[str, str] | None = None) -> None:
        self.env = env or {}
        self.argv = [sys.executable, "-m", "framework.cli", "serve", "--kubeconfig", str(kubeconfig),
                     "--config", str(config), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.http = ""
        self._synced = threading.Event()

    def start(self) -> None:
        env = {**os.environ, **self.env, "OUTRIGGER_SECURE_PORT": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([*DIE_WITH_PARENT, *self.argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, cwd=ROOT, start_new_session=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))
            found = _HTTP.search(line)
            if found:
                self.http = found.group(1)
            if line.startswith("in sync with the cluster"):
                self._synced.set()

    async def wait_synced(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._synced.is_set():
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"outrigger serve exited before it was in sync: {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"outrigger serve was not in sync after {timeout:.0f}s: {self.tail()}")
            await asyncio.sleep(0.05)

    def tail(self, lines: int = 8) -> str:
        return " | ".join(self.lines[-lines:]) or "(no output)"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc, STOP_SECONDS)


async def scrape(address: str) -> dict[str, Any]:
    """The framework's scheduling-attempt histogram (every profile and result summed): buckets, sum, count."""
    buckets: dict[float, float] = {}
    total = count = 0.0
    if not address:
        return {"buckets": buckets, "sum": total, "count": count}
    async with aiohttp.ClientSession() as session, session.get(f"http://{address}/metrics",
                                                               timeout=aiohttp.ClientTimeout(total=30)) as resp:
        text = await resp.text()
    name = "scheduler_scheduling_attempt_duration_seconds"
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        metric, _, value = line.rpartition(" ")
        if metric.startswith(name + "_bucket"):
            le = re.search(r'le="([^"]+)"', metric)
            if le:
                bound = float(le.group(1))
                buckets[bound] = buckets.get(bound, 0.0) + float(value)
        elif metric.startswith(name + "_sum"):
            total += float(value)
        elif metric.startswith(name + "_count"):
            count += float(value)
    return {"buckets": buckets, "sum": total, "count": count}


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative ``buckets`` (upper bound -> count): linear within
    the bucket the quantile falls in; the highest finite bound when it falls in +Inf."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return 0.0
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        cumulative = buckets[bound]
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = bound, cumulative
    return lower


def _delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {"buckets": {b: c - before["buckets"].get(b, 0.0) for b, c in after["buckets"].items()},
            "sum": after["sum"] - before["sum"], "count": after["count"] - before["count"]}


# ---- one run --------------------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


@contextlib.asynccontextmanager
async def _cluster(workdir: Path) -> AsyncIterator[LocalCluster]:
    cluster = await asyncio.to_thread(LocalCluster.start, workdir)
    try:
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)


async def measure(spec: RunSpec, traced: bool = False) -> RunResult:
    """Run ``spec`` (nodes, initial and measured pods) through a fresh local API server and measure it;
    ``traced``: with the framework's tracing always on, exported to an OTLP collector process."""
    with tempfile.TemporaryDirectory(prefix="outrigger-bench-kube-") as tmp:
        if not traced:
            return await _measure(spec, Path(tmp), None)
        collector = await Collector(MEASURED_NAMESPACE, DIE_WITH_PARENT).start()
        try:
            return await _measure(spec, Path(tmp), collector)
        finally:
            await collector.stop()


async def _measure(spec: RunSpec, tmp: Path, collector: Collector | None) -> RunResult:
    load = os.getloadavg()[0]
    setup_started = time.monotonic()
    async with _cluster(tmp / "cluster") as cluster, _harness(cluster, tmp, collector) as run:
        await _set_up(run, spec)
        setup = time.monotonic() - setup_started
        setup_rss = peak_rss_mib(run.framework.pid)
        window = await _measured_window(run, spec, tmp)
    return _run_result(spec, window, setup, setup_rss, load)


@dataclass(slots=True)
class _Run:
    """One run's clients (``admin`` creates, ``watch_client`` watches), its framework process and the
    watches open on it; :func:`_harness` closes them all."""

    cluster: LocalCluster
    admin: ApiClient
    watch_client: ApiClient
    framework: Framework
    collector: Collector | None
    watches: list[BoundWatch] = field(default_factory=list)

    async def watch(self, namespace: str) -> BoundWatch:
        """A watch of the pods bound in ``namespace`` from now on."""
        watch = BoundWatch(self.watch_client, namespace)
        self.watches.append(watch)
        await watch.start()
        return watch

    async def unwatch(self, watch: BoundWatch) -> None:
        await watch.stop()
        self.watches.remove(watch)


@contextlib.asynccontextmanager
async def _harness(cluster: LocalCluster, tmp: Path, collector: Collector | None) -> AsyncIterator[_Run]:
    config = tmp / "scheduler.yaml"
    config.write_text(scheduler_config())
    env = {**TRACE_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint} if collector else {}
    run = _Run(cluster, _admin_client(cluster.admin_kubeconfig, CREATE_CONNECTIONS),
               _admin_client(cluster.admin_kubeconfig, 2), Framework(cluster.admin_kubeconfig, config, env),
               collector)
    try:
        yield run
    finally:
        for w in run.watches:
            await w.stop()
        await asyncio.to_thread(run.framework.stop)
        await run.admin.close()
        await run.watch_client.close()


async def _set_up(run: _Run, spec: RunSpec) -> None:
    """The namespaces and nodes, the framework in sync with them, the initial pods bound (not measured)."""
    for ns in (INIT_NAMESPACE, MEASURED_NAMESPACE):
        await run.admin.request("POST", "/api/v1/namespaces", verb="create", resource="namespaces",
                                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    nodes = await create_objects(run.admin, "/api/v1/nodes", "nodes",
                                 [scheduler_perf_node(i, api=True) for i in range(spec.nodes)], CREATE_CONNECTIONS)
    if nodes.errors:
        raise RuntimeError(f"creating nodes: {nodes.errors[0]}")
    run.framework.start()
    await run.framework.wait_synced(STARTUP_SECONDS)
    init_watch = await run.watch(INIT_NAMESPACE)
    init_pods = [scheduler_perf_pod(INIT_NAMESPACE, i, scheduler=SCHEDULER) for i in range(spec.init_pods)]
    init = await create_objects(run.admin, f"/api/v1/namespaces/{INIT_NAMESPACE}/pods", "pods", init_pods,
                                CREATE_CONNECTIONS)
    if init.errors:
        raise RuntimeError(f"creating the initial pods: {init.errors[0]}")
    if not await _all_bound(init_watch, spec.init_pods, time.monotonic() + spec.timeout):
        raise RuntimeError(f"only {len(init_watch.bound)} of {spec.init_pods} initial pods were bound "
                           f"within {spec.timeout:.0f}s: {run.framework.tail()}")
    await run.unwatch(init_watch)


async def _all_bound(watch: BoundWatch, count: int, deadline: float) -> bool:
    """Whether pods ``pod-000000`` up to ``count`` were all seen bound before the monotonic ``deadline``."""
    try:
        await watch.wait([pod_name(i) for i in range(count)], deadline - time.monotonic())
    except TimeoutError:
        return False
    return True


@dataclass(slots=True)
class _Window:
    """What the measured window saw."""

    bound_at: dict[str, float]  # measured pod -> when the watch saw it bound (monotonic)
    creator: dict[str, Any]  # the pod creator's report
    all_bound: bool
    unschedulable: int
    attempts: dict[str, Any]  # the framework's scheduling-attempt histogram over the window
    cpu: dict[str, float]  # each process's CPU share and milliseconds per pod
    connections: Connections
    peak_rss: float
    traces: dict[str, float] = field(default_factory=dict)  # what the OTLP collector got (traced runs)


async def _measured_window(run: _Run, spec: RunSpec, tmp: Path) -> _Window:
    """The measured pods created by the pod creator while the watch notes each one's binding, each
    process's CPU sampled at both ends, the framework's attempt histogram scraped at both ends."""
    cluster, framework = run.cluster, run.framework
    watch = await run.watch(MEASURED_NAMESPACE)
    before = await scrape(framework.http)
    pids = {"apiserver": _pid(cluster.apiserver.proc), "etcd": _pid(cluster.etcd.proc), "framework": framework.pid}
    pids.update(_tracing_pids(run))
    traces0 = await run.collector.counts() if run.collector else None
    report_file, log = tmp / "creator.json", tmp / "creator.log"
    creator = await _start_creator(cluster.admin_kubeconfig, spec.measure_pods, report_file, log)
    profiler = _profiler(framework.pid)
    cpu0 = CpuSample.take(pids)
    assert creator.stdin is not None
    creator.stdin.write(b"go\n")
    await creator.stdin.drain()
    deadline = time.monotonic() + spec.timeout
    connections = Connections(framework.pid, int(cluster.server.rsplit(":", 1)[1]))
    counting = asyncio.get_running_loop().create_task(connections.follow())
    all_bound = await _all_bound(watch, spec.measure_pods, deadline)
    cpu1 = CpuSample.take(pids)
    counting.cancel()
    await asyncio.gather(counting, return_exceptions=True)
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        await asyncio.to_thread(profiler.wait, 60)
    after = await scrape(framework.http)
    peak_rss = peak_rss_mib(framework.pid)
    report = await _creator_done(creator, deadline, report_file, log)
    unschedulable = 0 if all_bound else await _unschedulable(run.admin, MEASURED_NAMESPACE)
    traces = await _exported(run, traces0, len(watch.bound))
    return _Window({name: t for name, (t, _node) in watch.bound.items()}, report, all_bound, unschedulable,
                   _delta(before, after), cpu0.shares(cpu1, spec.measure_pods, {"creator": report["cpu_seconds"]}),
                   connections, peak_rss, traces)


def _tracing_pids(run: _Run) -> dict[str, int]:
    """The processes a traced run adds: the OTLP collector and, with ``OUTRIGGER_TRACE_EXPORT_PROCESS=1``,
    the framework's export process (a child of the framework, whose CPU ``/proc`` does not add to it)."""
    if run.collector is None:
        return {}
    found = {"collector": run.collector.pid}
    for n, child in enumerate(children(run.framework.pid)):
        found[f"export_process{n or ''}"] = child
    return found


async def _exported(run: _Run, before: Counts | None, bound: int) -> dict[str, float]:
    """What the collector received for the measured window: the scheduling contexts of the measured pods
    (waited for until there is one per pod bound, at most :data:`EXPORT_WAIT_SECONDS`: a batch leaves
    the framework after ``OTEL_BSP_SCHEDULE_DELAY``), spans and bytes; whether the framework said its
    export queue was full (traces dropped rather than the scheduling loop slowed: ``OTEL_BSP_MAX_QUEUE_SIZE``)."""
    collector = run.collector
    if collector is None or before is None:
        return {}
    after = await collector.wait_contexts(bound, EXPORT_WAIT_SECONDS)
    pods = max(bound, 1)
    return {"contexts_exported": float(after.contexts - before.contexts),
            "contexts_exported_bound": float(after.bound - before.bound),
            "spans_per_pod": round((after.spans - before.spans) / pods, 1),
            "otlp_bytes_per_pod": round((after.bytes - before.bytes) / pods),
            "otlp_requests": float(after.requests - before.requests),
            "export_queue_full": float(any("trace export queue full" in line for line in run.framework.lines))}


async def _start_creator(kubeconfig: Path, count: int, report: Path, log: Path) -> asyncio.subprocess.Process:
    """The pod creator (``create-pods``), started and ready: it creates the pods when told to go."""
    with log.open("wb") as creator_log:
        creator = await asyncio.create_subprocess_exec(
            *DIE_WITH_PARENT, sys.executable, "-m", "tools.bench.apiserver", "create-pods",
            "--kubeconfig", str(kubeconfig), "--namespace", MEASURED_NAMESPACE,
            "--count", str(count), "--connections", str(CREATE_CONNECTIONS), "--report", str(report),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=creator_log, cwd=ROOT,
        )
    assert creator.stdin is not None and creator.stdout is not None
    ready = await asyncio.wait_for(creator.stdout.readline(), STARTUP_SECONDS)
    if ready.strip() != b"ready":
        creator.kill()
        raise RuntimeError(f"the pod creator did not start: {ready!r}")
    return creator


async def _creator_done(creator: asyncio.subprocess.Process, deadline: float, report: Path,
                        log: Path) -> dict[str, Any]:
    """The pod creator's report once it has exited (killed when still running at the run's deadline,
    or 10 s from now if that is later)."""
    try:
        await asyncio.wait_for(creator.wait(), max(10.0, deadline - time.monotonic()))
    except TimeoutError:
        creator.kill()
        await creator.wait()
    return _creator_report(report, log, creator.returncode)


def _run_result(spec: RunSpec, w: _Window, setup: float, setup_rss: float, load: float) -> RunResult:
    """The run's figures: throughput from the first create request sent to the last binding seen."""
    report = w.creator
    measured = [t for name, t in w.bound_at.items() if name in report["done_at"]]
    first, last = report["first_sent"], max(measured, default=0.0)
    window = last - first if measured and first else 0.0
    bound = len(measured)
    error = ""
    if report["error_count"]:
        error = f"{report['error_count']} pods not created: {report['errors'][0]}"
    elif not w.all_bound:
        error = f"{bound} of {spec.measure_pods} measured pods bound within {spec.timeout:.0f}s"
    attempts = w.attempts
    return RunResult(
        scenario=spec.scenario, nodes=spec.nodes, init_pods=spec.init_pods, measure_pods=spec.measure_pods,
        nodes_scored=num_feasible_nodes_to_find(0, spec.nodes), bound=bound, unschedulable=w.unschedulable,
        errors=report["error_count"], all_scheduled=bound == spec.measure_pods and not error,
        seconds=round(window, 3), pods_per_second=round(bound / window, 1) if window > 0 else 0.0,
        cycle_pods_per_second=round(attempts["count"] / attempts["sum"], 1) if attempts["sum"] > 0 else 0.0,
        attempt_p50_ms=round(histogram_quantile(0.5, attempts["buckets"]) * 1000, 3),
        attempt_p99_ms=round(histogram_quantile(0.99, attempts["buckets"]) * 1000, 3),
        attempt_max_ms=0.0, setup_seconds=round(setup, 3), peak_rss_mib=round(w.peak_rss, 1),
        setup_rss_mib=round(setup_rss, 1), error=error, metrics=_window_metrics(w, measured, load),
    )


def _window_metrics(w: _Window, measured: list[float], load: float) -> dict[str, float]:
    """The apiserver scenario's own figures: creation, create-to-bound latency, backlog, connections,
    the machine, and each process's CPU."""
    report = w.creator
    first = report["first_sent"]
    latencies = [w.bound_at[n] - t for n, t in report["done_at"].items() if n in w.bound_at]
    metrics: dict[str, float] = {
        "create_pods_per_second": round(len(report["done_at"]) / (report["last_done"] - first), 1)
        if report["last_done"] > first else 0.0,
        "create_to_bound_p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "create_to_bound_p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
        "min_backlog": float(_min_backlog(report["done_at"].values(), measured)),
        # The framework's connections to the API server: at most at once, and in all (watches included).
        "framework_connections_most": float(w.connections.most),
        "framework_connections_seen": float(len(w.connections.seen)),
        "load_average_1m": round(load, 2),
        "nproc": float(os.cpu_count() or 1),
        "qps": float(SCHEDULER_QPS),
        "burst": float(SCHEDULER_BURST),
    }
    metrics.update(w.cpu)
    metrics.update(w.traces)
    return metrics


def _profiler(pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the framework over the window, when ``$OUTRIGGER_BENCH_PYSPY`` names a folder
    (collapsed stacks in ``framework-<pid>.txt``; py-spy is not a dependency: install it to profile, in
    this virtualenv or on ``PATH``)."""
    folder = os.environ.get(PYSPY_ENV)
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():  # installed elsewhere (a virtualenv of its own, on PATH)
        spy = Path(shutil.which("py-spy") or spy)
    if not folder or not spy.exists():
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = Path(folder) / f"framework-{pid}.txt"
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--rate", "200", "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _min_backlog(created: Iterable[float], bound: Iterable[float]) -> int:
    """The fewest pods created but not yet bound at any binding seen before the last pod was created:
    above 0, the scheduler never waited for the pod creator (creation was not the bound)."""
    created_at, bound_at = sorted(created), sorted(bound)
    if not created_at:
        return 0
    last = created_at[-1]
    fewest, made = len(created_at), 0
    for done, when in enumerate(bound_at, start=1):
        if when > last:
            break
        while made < len(created_at) and created_at[made] <= when:
            made += 1
        fewest = min(fewest, made - done)
    return fewest


def _pid(proc: subprocess.Popen[bytes] | None) -> int:
    if proc is None:
        raise RuntimeError("a cluster component is not running")
    return proc.pid


def _creator_report(report: Path, log: Path, code: int | None) -> dict[str, Any]:
    """What the pod creator wrote to ``report`` (JSON), or its failure with the end of its log."""
    with contextlib.suppress(OSError, orjson.JSONDecodeError):
        found: dict[str, Any] = orjson.loads(report.read_bytes())
        return found
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
    return {"first_sent": 0.0, "last_done": 0.0, "done_at": {}, "errors": [f"pod creator exited {code}: {tail}"],
            "error_count": 1, "cpu_seconds": 0.0}


async def _unschedulable(client: ApiClient, namespace: str) -> int:
    items, _ = await client.list(f"/api/v1/namespaces/{namespace}/pods", resource="pods")
    return sum(
        1 for pod in items
        if any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or ())
    )


# ---- the pod creator's process --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.apiserver",
                                description="the apiserver benchmark's pod creator (run by the benchmark)")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create-pods", help="create scheduler_perf's default pods; write a JSON report")
    c.add_argument("--kubeconfig", required=True, type=Path)
    c.add_argument("--namespace", required=True)
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--start", type=int, default=0, help="index of the first pod (pod-NNNNNN)")
    c.add_argument("--connections", type=int, default=CREATE_CONNECTIONS)
    c.add_argument("--scheduler-name", default="")
    c.add_argument("--report", required=True, type=Path, help="where the JSON report goes (written once done)")
    args = p.parse_args(argv)
    import uvloop  # the loop `outrigger serve` runs on

    report = uvloop.run(_create_pods_main(args.kubeconfig, args.namespace, args.start, args.count, args.connections,
                                   args.scheduler_name))
    partial = args.report.with_name(args.report.name + ".partial")
    partial.write_bytes(orjson.dumps(report))
    partial.replace(args.report)  # the reader never sees half a report
    return 0


if __name__ == "__main__":
    sys.exit(main())
