"""``python -m framework.bench``: scheduling throughput, latency and memory of the framework.

Each scenario is a list of *runs*; every run executes in a fresh child process (so its peak RSS is its
own) and drives a :class:`~framework.scheduler.Scheduler` in-process, without gRPC, the way
kube-scheduler's ``scheduler_perf`` drives kube-scheduler:

1. create the nodes (scheduler_perf's ``node-default.yaml``: 4 CPU, 32 GiB, 110 pods);
2. create the initial pods and wait until they are bound (not measured);
3. start the clock, create the measured pods in chunks while the scheduling loop runs, and stop the
   clock when the last one is bound. Throughput is measured pods / that window, so it includes the
   framework ingesting the pods (queueing, PreEnqueue), scheduling them and binding them.

Pods are scheduler_perf's ``pod-default.yaml`` (100m CPU, 500Mi memory, container port 80). The
latency figures are the scheduling-attempt durations the scheduler records
(``Scheduler.stats.attempt_seconds``) for the measured pods.

Scenarios:

- ``basic``: SchedulingBasic 5000Nodes_10000Pods (5000 nodes, 1000 initial pods, 10000 measured),
  kube-scheduler's default plugin set.
- ``scale``: ``basic`` at 500, 1000, 5000 and 15000 nodes.
- ``inprocess-plugin``: ``basic`` plus :class:`BenchTier`, a cheap Filter+Score plugin written
  against the batch API, enabled through an ordinary KubeSchedulerConfiguration; the in-process
  baseline a remote plugin is compared with.
- ``remote``: ``inprocess-plugin`` with BenchTier served by a plugin host process
  (``outrigger plugin serve framework.bench:RemoteBenchTier``, ``filter_and_score``); reports bytes on
  the wire per pod from the adapter's counters.
- ``extender`` / ``extender-names``: the same logic as a kube-scheduler HTTP/JSON extender in its own
  process (:mod:`framework.extender`), called by :class:`~framework.extender.ExtenderPlugin` with full
  v1 Node objects / in ``nodeCacheCapable`` mode with node names; 1000 measured pods.
- ``remote-traced``: ``remote`` with tracing on (always-on sampler, a batch span processor into an
  in-process sink); reports spans per pod.
- ``remote-go``: ``remote-streams`` with BenchTier written with the Go SDK (clients/go, built with
  ``go build`` on first use); ``remote-go-ahead``: ``remote`` (lookahead) with that Go host;
  ``remote-go-fit``: ``basic`` with kube-scheduler's own NodeResourcesFit served remotely by the Go
  adapter in place of the in-process one.
- ``replicas-1`` / ``replicas-2``: ``basic`` plus :class:`HeavyScore`, a remote Score plugin with a
  fixed amount of CPU work per node, on one and on two plugin host processes (each pod's Score batch
  is split over the replicas); 1000 measured pods.

A new scenario (a remote plugin, an extender, replicas, tracing) is a :class:`Scenario` subclass:
it lists its runs (:meth:`~Scenario.runs`), may start what it needs around a run (plugin host
processes, collectors) in :meth:`~Scenario.environment`, builds its registry and configuration in
:meth:`~Scenario.prepare` (async: remote endpoints are handshaken there), and may finish wiring once
the scheduler exists in :meth:`~Scenario.attach` (``RemotePlugins.attach``). Register it in
:data:`SCENARIOS`.

``make bench`` runs every scenario and writes ``bench-results.json``; ``--quick`` runs tiny sizes in a
few seconds (what the tests run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch, ScorePlugin
from pluginhost.status import Code

from .config import SchedulerConfig, load_config
from .outcomes import num_feasible_nodes_to_find
from .plugins import Registry
from .profiles import build_registry, default_scheduler_config, unavailable_plugins
from .scheduler import Scheduler, tune_gc

__all__ = [
    "SCENARIOS",
    "BenchTier",
    "RunResult",
    "RunSpec",
    "Scenario",
    "evaluate_targets",
    "machine_info",
    "main",
    "run_one",
]

IntArray = npt.NDArray[np.int64]

DEFAULT_OUT = "bench-results.json"
RESULT_PREFIX = "BENCH-RESULT "
MIB = 1024 * 1024

# kube-scheduler's scheduler_perf thresholds and the benchmark issue's targets.
TARGET_BASIC_PODS_PER_SECOND = 680.0  # SchedulingBasic 5000Nodes_10000Pods
TARGET_PEAK_RSS_MIB_15000 = 1024.0

# ---- the cluster (scheduler_perf's templates) ------------------------------------------------------


def node_manifest(i: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """scheduler_perf's ``templates/node-default.yaml``: capacity only (allocatable = capacity)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"scheduler-perf-{i:05d}", "labels": dict(labels or {})},
        "spec": {},
        "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"}},
    }


def pod_manifest(namespace: str, i: int) -> dict[str, Any]:
    """scheduler_perf's ``templates/pod-default.yaml``."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "image": "registry.k8s.io/pause:3.10.1",
                    "name": "pause",
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": dict(resources), "requests": dict(resources)},
                }
            ]
        },
    }


# ---- an in-process Filter+Score plugin -------------------------------------------------------------

TIER_LABEL = "bench.outrigger.dev/tier"
TIER_SCORES = {"gold": 100, "silver": 50, "bronze": 0}


class BenchTier(FilterPlugin, ScorePlugin):
    """Keeps pods off nodes without the tier label and prefers gold over silver over bronze nodes.

    Written as any in-process plugin would be: the label's per-node codes come from the node table
    (built once per node set), so Filter and Score are a gather over the batch's rows.
    """

    name = "BenchTier"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.key = str((args or {}).get("label", TIER_LABEL))

    def _score_by_code(self, vocab: dict[str, int]) -> IntArray:
        by_code = np.zeros(len(vocab) + 1, dtype=np.int64)  # the last slot: no label
        for value, code in vocab.items():
            by_code[code] = TIER_SCORES.get(value, 0)
        return by_code

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        codes, _ = batch.snapshot.table.label_codes(self.key)
        return FilterResult.from_mask(
            codes[batch.rows] < 0, Code.UnschedulableAndUnresolvable, f"node(s) didn't have label {self.key}"
        )

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        table = batch.snapshot.table
        codes, vocab = table.label_codes(self.key)
        by_code: IntArray = table.memo(f"BenchTier/scores:{self.key}", lambda _t: self._score_by_code(vocab))
        picked: IntArray = by_code[codes[batch.rows]]  # code -1 (no label) takes the last slot
        return picked


# ---- runs and scenarios ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One measured run; JSON-serializable, so it can be handed to a child process."""

    scenario: str
    nodes: int
    init_pods: int
    measure_pods: int
    chunk: int = 500  # pods per apply while measuring (the demo's request size)
    timeout: float = 300.0  # seconds for the measured part

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))


@dataclass(slots=True)
class RunResult:
    scenario: str
    nodes: int
    init_pods: int
    measure_pods: int
    nodes_scored: int  # kube-scheduler's adaptive numFeasibleNodesToFind for this cluster
    bound: int  # measured pods bound
    unschedulable: int
    errors: int
    all_scheduled: bool
    seconds: float  # the measurement window
    pods_per_second: float
    cycle_pods_per_second: float  # measured pods / time spent inside scheduling cycles
    attempt_p50_ms: float
    attempt_p99_ms: float
    attempt_max_ms: float
    setup_seconds: float  # nodes + initial pods (not measured)
    peak_rss_mib: float
    setup_rss_mib: float  # peak RSS when the measurement started (the cluster, the initial pods)
    leaks: dict[str, int] = field(default_factory=dict)
    error: str = ""
    # Scenario-specific figures (remote: bytes on the wire per pod; extender: HTTP calls and bytes).
    metrics: dict[str, float] = field(default_factory=dict)
    # With repeats, the run with the median pods/s is reported; these are every repeat's pods/s,
    # and peak_rss_mib is the highest of them.
    pods_per_second_samples: list[float] = field(default_factory=list)


class Scenario:
    """A named benchmark: the runs it makes and how the framework is set up for them."""

    name = ""
    description = ""
    #: Whether a run that names no scenarios includes it (``apiserver`` is asked for by name: it needs the
    #: built Kubernetes binaries and minutes of its own).
    default = True

    def runs(self, quick: bool) -> list[RunSpec]:
        raise NotImplementedError

    def node_labels(self, i: int) -> dict[str, str]:
        """Labels of node ``i`` (scheduler_perf's nodes have none)."""
        return {}

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        """Whatever must run around a run (remote plugin hosts, collectors); nothing by default."""
        yield

    async def prepare(self, spec: RunSpec) -> tuple[Registry, SchedulerConfig]:
        """The registry and configuration of a run (inside :meth:`environment`)."""
        registry = self.registry()
        return registry, self.config(registry)

    async def attach(self, scheduler: Scheduler) -> None:
        """Called once the scheduler exists, before any object is applied."""

    async def detach(self) -> None:
        """Called after the run, before :meth:`environment` ends (close connections)."""

    def metrics(self, measured_pods: int) -> dict[str, float]:
        """Scenario-specific figures of the measured window (called after :meth:`detach`)."""
        return {}

    def mark(self) -> None:
        """Called when the clock starts: counters the metrics are taken from start here."""

    def registry(self) -> Registry:
        return build_registry()

    def config(self, registry: Registry) -> SchedulerConfig:
        return default_scheduler_config(registry)

    async def measure(self, spec: RunSpec) -> RunResult | None:
        """A run measured its own way (through an API server, say); None: :func:`run_one`'s in-process run."""
        return None


def profile_with(registry: Registry, name: str, args: dict[str, Any] | None = None) -> SchedulerConfig:
    """kube-scheduler's default profile plus plugin ``name`` (weight 1) at every point it implements,
    through an ordinary KubeSchedulerConfiguration (``multiPoint``), with ``args`` as its pluginConfig."""
    profile: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": name, "weight": 1}]}},
    }
    if args is not None:
        profile["pluginConfig"] = [{"name": name, "args": args}]
    text = json.dumps(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}
    )
    return load_config(text, registry.points(), "<bench>", unavailable=unavailable_plugins(registry))


class Basic(Scenario):
    name = "basic"
    description = "scheduler_perf SchedulingBasic 5000Nodes_10000Pods, default plugins, in-process"

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=500)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=10000)]


class Scale(Scenario):
    name = "scale"
    description = "basic at 500, 1000, 5000 and 15000 nodes (each size in its own process)"
    # (nodes, initial pods, measured pods): measured pods sized for a few seconds per run.
    SIZES = ((500, 500, 3000), (1000, 1000, 3000), (5000, 1000, 5000), (15000, 1000, 5000))
    QUICK_SIZES = ((100, 50, 300), (200, 100, 300), (400, 100, 300))

    def runs(self, quick: bool) -> list[RunSpec]:
        return [RunSpec(self.name, n, i, m) for n, i, m in (self.QUICK_SIZES if quick else self.SIZES)]


class InProcessPlugin(Basic):
    name = "inprocess-plugin"
    description = "basic plus BenchTier (a label Filter + Score plugin) in-process; 1 node in 10 unlabelled"

    def node_labels(self, i: int) -> dict[str, str]:
        if i % 10 == 9:
            return {}
        return {TIER_LABEL: ("gold", "silver", "bronze")[i % 3]}

    def registry(self) -> Registry:
        registry = build_registry()
        registry.register_class(BenchTier)
        return registry

    def config(self, registry: Registry) -> SchedulerConfig:
        return profile_with(registry, BenchTier.name)


# ---- scenarios with a separate process (a plugin host, an extender) --------------------------------

STARTUP_SECONDS = 20.0
STOP_SECONDS = 10.0
_LISTENING = re.compile(r"listening on (\S+)")


class ServerProcess:
    """A server subprocess on 127.0.0.1 whose first line of output says ``listening on ADDR``.

    Start-up is bounded (:data:`STARTUP_SECONDS`); its output is drained so it never blocks on a full
    pipe; :meth:`stop` sends SIGTERM and SIGKILL after :data:`STOP_SECONDS`. Used as an async context
    manager by the scenarios' :meth:`Scenario.environment`, so the process is stopped on errors too.
    """

    def __init__(self, argv: Sequence[str], what: str) -> None:
        self.argv = list(argv)
        self.what = what
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> str:
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        box: list[str] = []
        stdout = self.proc.stdout
        reader = threading.Thread(target=lambda: box.append(stdout.readline() if stdout else ""), daemon=True)
        reader.start()
        reader.join(STARTUP_SECONDS)
        m = _LISTENING.search(box[0]) if box else None
        if m is None:
            self.stop()
            err = self.proc.stderr.read()[-2000:] if self.proc.stderr else ""
            raise RuntimeError(f"{self.what} did not start within {STARTUP_SECONDS:g}s: {box[:1]!r} {err}")
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        self.address = m.group(1)
        return self.address

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)

    async def __aenter__(self) -> ServerProcess:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.start)
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


def _drain(stream: Any) -> None:
    if stream is None:
        return
    with contextlib.suppress(ValueError, OSError):
        for _ in stream:
            pass


def _call_metrics(mark: Sequence[float], final: Sequence[float], measured_pods: int) -> dict[str, float]:
    """Per measured pod: bytes each way, calls, and the time inside them (the adapter's view)."""
    sent, received, calls, seconds, *rest = (a - b for a, b in zip(final, mark, strict=True))
    n = max(measured_pods, 1)
    out = {
        "bytes_sent_per_pod": round(sent / n, 1),
        "bytes_received_per_pod": round(received / n, 1),
        "bytes_per_pod": round((sent + received) / n, 1),
        "calls_per_pod": round(calls / n, 2),
        "call_ms_per_pod": round(seconds * 1000 / n, 3),
    }
    if rest:
        out["answered_ahead_per_pod"] = round(rest[0] / n, 3)
    return out


class RemoteBenchTier(BenchTier):
    """:class:`BenchTier` as served by a plugin host. It reads only node labels, so it declares
    ``lookahead``: the framework asks for its answers before the pods' cycles, several pods per message."""

    filter_and_score = True
    lookahead = True


class RemoteStreamsBenchTier(BenchTier):
    """:class:`BenchTier` without lookahead: Filter and Score answered in one exchange in each cycle."""

    filter_and_score = True


class RemotePluginScenario(InProcessPlugin):
    """``inprocess-plugin`` with BenchTier in a plugin host process (``outrigger plugin serve``)."""

    name = "remote"
    description = (
        "basic plus BenchTier as a remote Filter+Score plugin (filter_and_score, lookahead) in a separate plugin "
        "host process"
    )
    TARGET = "framework.bench:RemoteBenchTier"
    ENDPOINT = "bench"  # the RemotePlugins endpoint's name
    DEADLINE = 10.0  # seconds, every point
    replicas = 1  # plugin host processes behind the endpoint

    def __init__(self) -> None:
        self._addresses: list[str] = []
        self._services: Any = None
        self._remote: Any = None
        self._mark: tuple[float, ...] = (0, 0, 0, 0.0, 0)
        self._final: tuple[float, ...] = (0, 0, 0, 0.0, 0)

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        argv = [sys.executable, "-m", "framework.cli", "plugin", "serve", self.TARGET, "--listen", "127.0.0.1:0"]
        async with contextlib.AsyncExitStack() as stack:
            hosts = [await stack.enter_async_context(ServerProcess(argv, "plugin host")) for _ in range(self.replicas)]
            self._addresses = [h.address for h in hosts]
            try:
                yield
            finally:
                await self._close()

    async def prepare(self, spec: RunSpec) -> tuple[Registry, SchedulerConfig]:
        from .profiles import build_registry_with_remote
        from .remote import EndpointConfig
        from .service import start_plugin_services

        self._services = await start_plugin_services()
        endpoint = EndpointConfig(
            self.ENDPOINT, tuple(self._addresses), {"default": self.DEADLINE}, connect_timeout=STARTUP_SECONDS
        )
        registry, self._remote = await build_registry_with_remote(
            [endpoint], self._services.address, self._services.services
        )
        return registry, self.config(registry)

    async def attach(self, scheduler: Scheduler) -> None:
        assert self._remote is not None
        await self._remote.attach(scheduler)

    def _totals(self) -> tuple[float, ...]:
        """Bytes each way, exchanges (Filter/Score answered from a Filter reply or a lookahead answer
        are not exchanges), seconds inside them, and cycles answered from a lookahead answer."""
        if self._remote is None:
            return (0, 0, 0, 0.0, 0)
        sent = received = calls = ahead = 0
        seconds = 0.0
        for points in self._remote.stats().values():
            for point, st in points.items():
                sent += st.bytes_sent
                received += st.bytes_received
                seconds += st.seconds
                if point == "Filter (lookahead)":
                    ahead += st.calls
                elif " (" not in point:
                    calls += st.calls
        return sent, received, calls, seconds, ahead

    def mark(self) -> None:
        self._mark = self._totals()

    async def detach(self) -> None:
        self._final = self._totals()
        await self._close()

    async def _close(self) -> None:
        remote, services = self._remote, self._services
        self._remote = self._services = None
        if remote is not None:
            await remote.close()
        if services is not None:
            await services.stop(0.2)

    def metrics(self, measured_pods: int) -> dict[str, float]:
        return _call_metrics(self._mark, self._final, measured_pods)


class ExtenderScenario(InProcessPlugin):
    """``inprocess-plugin`` with BenchTier as a kube-scheduler HTTP extender in a separate process,
    called by :class:`~framework.extender.ExtenderPlugin` with full v1 Node objects."""

    name = "extender"
    description = (
        "basic plus BenchTier as a kube-scheduler HTTP/JSON extender (separate process), "
        "ExtenderArgs with full v1 Node objects; 1000 measured pods"
    )
    node_cache_capable = False

    def __init__(self) -> None:
        self._url = ""
        self._plugins: list[Any] = []
        self._mark: tuple[float, ...] = (0, 0, 0, 0.0)
        self._final: tuple[float, ...] = (0, 0, 0, 0.0)

    def runs(self, quick: bool) -> list[RunSpec]:
        # Bounded so the full `make bench` stays under 10 minutes: an extender call carries JSON.
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=200)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=1000)]

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        argv = [sys.executable, "-m", "framework.extender", "--listen", "127.0.0.1:0"]
        async with ServerProcess(argv, "extender") as server:
            self._url = f"http://{server.address}"
            try:
                if self.node_cache_capable:
                    # A nodeCacheCapable extender keeps its own node cache (an informer in a cluster):
                    # filled before the run, outside the clock.
                    items = [node_manifest(i, self.node_labels(i)) for i in range(spec.nodes)]
                    await asyncio.get_running_loop().run_in_executor(
                        None, _post_json, server.address, "/cache/nodes", {"kind": "NodeList", "items": items}
                    )
                yield
            finally:
                self._close()

    def registry(self) -> Registry:
        from .extender import ExtenderPlugin

        registry = build_registry()
        registry.register_class(ExtenderPlugin)
        return registry

    def config(self, registry: Registry) -> SchedulerConfig:
        from .extender import ExtenderPlugin

        return profile_with(registry, ExtenderPlugin.name, {
            "urlPrefix": self._url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "nodeCacheCapable": self.node_cache_capable, "timeout": 10,
        })

    async def attach(self, scheduler: Scheduler) -> None:
        from .extender import ExtenderPlugin

        self._plugins = [
            p for fwk in scheduler.profiles.values() for p in fwk.plugins.values() if isinstance(p, ExtenderPlugin)
        ]

    def _totals(self) -> tuple[float, ...]:
        return (
            sum(p.bytes_sent for p in self._plugins),
            sum(p.bytes_received for p in self._plugins),
            sum(p.calls for p in self._plugins),
            sum(p.seconds for p in self._plugins),
        )

    def mark(self) -> None:
        self._mark = self._totals()

    async def detach(self) -> None:
        self._final = self._totals()
        self._close()

    def _close(self) -> None:
        for p in self._plugins:
            p.close()
        self._plugins = []

    def metrics(self, measured_pods: int) -> dict[str, float]:
        return _call_metrics(self._mark, self._final, measured_pods)


class ExtenderNamesScenario(ExtenderScenario):
    """The extender in ``nodeCacheCapable`` mode: ExtenderArgs carry node names."""

    name = "extender-names"
    description = (
        "extender in nodeCacheCapable mode (ExtenderArgs with NodeNames; the extender caches the nodes); "
        "1000 measured pods"
    )
    node_cache_capable = True


class TracedRemoteScenario(RemotePluginScenario):
    """``remote`` with tracing on: every scheduling context sampled (always-on), spans through a batch
    span processor into an in-process sink (the cost a production setup pays, without a backend); the
    plugin host gets the trace context with every request. Compared with ``remote``."""

    name = "remote-traced"
    description = "remote with tracing on (always-on sampler, batch span processor into an in-process sink)"

    def __init__(self) -> None:
        super().__init__()
        self._tracing: Any = None
        self._sink: Any = None
        self._spans_at_mark = 0

    async def attach(self, scheduler: Scheduler) -> None:
        from .instrument import instrument
        from .tracing import benchmark_tracing

        await super().attach(scheduler)
        self._tracing, self._sink = benchmark_tracing()
        instrument(scheduler, tracing=self._tracing)

    def mark(self) -> None:
        super().mark()
        self._spans_at_mark = self._span_count()

    def _span_count(self) -> int:
        return int(self._sink.spans) if self._sink is not None else 0  # SinkExporter counts what it got

    async def detach(self) -> None:
        await super().detach()
        if self._tracing is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._tracing.shutdown)

    def metrics(self, measured_pods: int) -> dict[str, float]:
        out = super().metrics(measured_pods)
        out["spans_per_pod"] = round((self._span_count() - self._spans_at_mark) / max(measured_pods, 1), 1)
        return out


class RemoteStreamsScenario(RemotePluginScenario):
    """``remote`` with the plugin not declaring lookahead: each cycle exchanges Filter (with scores)."""

    name = "remote-streams"
    description = (
        "remote without lookahead: one Filter exchange (scores included) on a kept-open stream per cycle; "
        "5000 measured pods"
    )
    TARGET = "framework.bench:RemoteStreamsBenchTier"

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=500)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=5000)]  # bounds `make bench`


class HeavyScore(ScorePlugin):
    """A CPU-heavy Score plugin: a fixed amount of pure-Python work per node (``rounds`` multiply-xor
    steps on the node's name), the kind of plugin that is worth more replicas. Deterministic."""

    name = "HeavyScore"
    nodes_only = True  # a node's score depends on the node alone: its hosts follow the mirror nodes-only

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.rounds = int((args or {}).get("rounds", HEAVY_ROUNDS))

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        out = np.empty(len(batch), dtype=np.int64)
        for i, name in enumerate(batch.names):
            h = 2166136261
            for j in range(self.rounds):
                h = ((h ^ (ord(name[j % len(name)]) + j)) * 16777619) & 0xFFFFFFFF
            out[i] = h % 101
        return out


HEAVY_ROUNDS = 300  # ~20 us of one core per node on the development machine


class ReplicasScenario(RemotePluginScenario):
    """``basic`` plus :class:`HeavyScore` served by ``replicas`` plugin host processes; the framework
    splits each pod's Score batch over the replicas (``replicas-1`` vs ``replicas-2``)."""

    TARGET = "framework.bench:HeavyScore"
    ENDPOINT = "heavy"
    DEADLINE = 30.0

    def __init__(self, replicas: int) -> None:
        super().__init__()
        self.replicas = replicas
        self.name = f"replicas-{replicas}"
        self.description = (
            f"basic plus a CPU-heavy remote Score plugin (fixed work per node) on {replicas} plugin host "
            f"replica(s); 1000 measured pods"
        )
        self._used = 0

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=100)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=1000)]

    def node_labels(self, i: int) -> dict[str, str]:
        return {}

    async def detach(self) -> None:
        if self._remote is not None:
            self._used = sum(1 for ep in self._remote.endpoints for r in ep.replicas if r.picked)
        await super().detach()

    def metrics(self, measured_pods: int) -> dict[str, float]:
        return {**super().metrics(measured_pods), "replicas_used": float(self._used)}

    def config(self, registry: Registry) -> SchedulerConfig:
        return profile_with(registry, HeavyScore.name)


def _post_json(address: str, path: str, body: Any) -> Any:
    import http.client

    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=STARTUP_SECONDS)
    try:
        conn.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)
    finally:
        conn.close()


# ---- scenarios with a Go plugin host (clients/go) ---------------------------------------------------

GO_MODULE = Path(__file__).resolve().parent.parent / "clients" / "go"
GO_BUILD_SECONDS = 900


def go_binary(cmd: str) -> str:
    """``clients/go/.bin/<cmd>``, built from ``clients/go/cmd/<cmd>`` (the Go build cache makes a
    rebuild of unchanged code a link only)."""
    out = GO_MODULE / ".bin" / cmd
    try:
        subprocess.run(
            ["go", "build", "-trimpath", "-o", str(out), f"./cmd/{cmd}"], cwd=GO_MODULE, check=True,
            capture_output=True, text=True, timeout=GO_BUILD_SECONDS, env={**os.environ, "CGO_ENABLED": "0"},
        )
    except FileNotFoundError:
        raise RuntimeError(f"building {cmd} needs `go` on PATH (clients/go, docs/plugin-go.md)") from None
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"go build ./cmd/{cmd} failed: {exc.stderr.strip()[-2000:]}") from None
    return str(out)


class RemoteGoScenario(RemoteStreamsScenario):
    """``remote-streams`` with BenchTier written with the Go SDK (``outrigger-benchtier``): the same
    logic, the same exchanges (Filter with scores in one exchange per cycle), a Go host."""

    name = "remote-go"
    description = (
        "remote-streams with BenchTier written with the Go SDK (clients/go/cmd/outrigger-benchtier): one Filter "
        "exchange (scores included) per cycle to a Go plugin host; 5000 measured pods"
    )

    def host_argv(self) -> list[str]:
        return [go_binary("outrigger-benchtier"), "--listen", "127.0.0.1:0"]

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        argv = await asyncio.get_running_loop().run_in_executor(None, self.host_argv)
        async with contextlib.AsyncExitStack() as stack:
            hosts = [await stack.enter_async_context(ServerProcess(argv, "Go plugin host"))
                     for _ in range(self.replicas)]
            self._addresses = [h.address for h in hosts]
            try:
                yield
            finally:
                await self._close()


class RemoteGoAheadScenario(RemoteGoScenario):
    """``remote`` with BenchTier written with the Go SDK: the Go host declares lookahead too, so the
    framework asks for its answers ahead of the pods' cycles, several pods per message."""

    name = "remote-go-ahead"
    description = (
        "remote with BenchTier written with the Go SDK (outrigger-benchtier --lookahead): answers asked for "
        "ahead of the pods' cycles from a Go plugin host"
    )

    def runs(self, quick: bool) -> list[RunSpec]:
        return RemotePluginScenario.runs(self, quick)

    def host_argv(self) -> list[str]:
        return [*super().host_argv(), "--lookahead"]


UPSTREAM_FIT = "UpstreamNodeResourcesFit"


class RemoteUpstreamFitScenario(RemoteGoScenario):
    """``basic`` with kube-scheduler's own NodeResourcesFit (k8s.io/kubernetes at the pinned release,
    unmodified) served out of process by the Go adapter in place of Outrigger's in-process one."""

    name = "remote-go-fit"
    description = (
        "basic with kube-scheduler's own NodeResourcesFit served remotely by the Go adapter "
        "(outrigger-kube-plugins) in place of the in-process one; 2000 measured pods"
    )

    def node_labels(self, i: int) -> dict[str, str]:
        return {}

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=300)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=2000)]  # four exchanges per pod

    def host_argv(self) -> list[str]:
        return [go_binary("outrigger-kube-plugins"), "--listen", "127.0.0.1:0", "--prefix", "Upstream"]

    def config(self, registry: Registry) -> SchedulerConfig:
        profile = {
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": UPSTREAM_FIT, "weight": 1}],
                                       "disabled": [{"name": "NodeResourcesFit"}]}},
        }
        text = json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [profile]})
        return load_config(text, registry.points(), "<bench>", unavailable=unavailable_plugins(registry))


class ApiServerScenario(Scenario):
    """``basic`` through a real kube-apiserver and etcd, Outrigger as ``outrigger serve --kubeconfig``
    (framework/kube/bench.py: how it is set up and measured)."""

    name = "apiserver"
    description = "scheduler_perf SchedulingBasic 5000Nodes_10000Pods through kube-apiserver + etcd on loopback"
    default = False

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=50, init_pods=20, measure_pods=200, timeout=120.0)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=10000, timeout=600.0)]

    async def measure(self, spec: RunSpec) -> RunResult | None:
        from .kube.bench import measure

        return await measure(spec)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Basic(), Scale(), InProcessPlugin(), RemotePluginScenario(), RemoteStreamsScenario(), ExtenderScenario(),
        ExtenderNamesScenario(), TracedRemoteScenario(), ReplicasScenario(1), ReplicasScenario(2),
        RemoteGoScenario(), RemoteGoAheadScenario(), RemoteUpstreamFitScenario(), ApiServerScenario(),
    )
}


# ---- one run (in the child process) ----------------------------------------------------------------


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / MIB if sys.platform == "darwin" else rss / 1024


async def _settle(s: Scheduler, target: int, deadline: float) -> None:
    """Until ``target`` pods are bound, or nothing is left that could bind one, or the deadline.

    Polls the bound counter every 2 ms (the window's resolution); the costlier "is anything still
    queued or binding?" check (it walks the queue and the cache) only every 100 ms.
    """
    checked = time.perf_counter()
    while s.stats.bound < target:
        now = time.perf_counter()
        if now >= deadline:
            break
        if now - checked >= 0.1:
            checked = now
            pending = s.pending_count()
            busy = pending["active"] + pending["backoff"] + pending["in-flight"] + s.leaks()["binding_cycles"]
            if not busy:
                break
        await asyncio.sleep(0.002)


async def run_one(spec: RunSpec) -> RunResult:
    """Run ``spec`` in this process and measure it."""
    scenario = SCENARIOS[spec.scenario]
    custom = await scenario.measure(spec)
    if custom is not None:
        return custom
    nodes: list[Node] = [node_from_dict(node_manifest(i, scenario.node_labels(i))) for i in range(spec.nodes)]
    init_pods: list[Pod] = [pod_from_dict(pod_manifest("init", i)) for i in range(spec.init_pods)]
    measured: list[Pod] = [pod_from_dict(pod_manifest("measured", i)) for i in range(spec.measure_pods)]
    async with scenario.environment(spec):
        registry, config = await scenario.prepare(spec)
        s = Scheduler(config, registry, seed=1)
        await scenario.attach(s)
        loop_task = asyncio.get_running_loop().create_task(s.run())
        try:
            setup_started = time.perf_counter()
            for i in range(0, len(nodes), 1000):
                await s.apply(nodes[i : i + 1000])
            for i in range(0, len(init_pods), spec.chunk):
                await s.apply(init_pods[i : i + spec.chunk])
                await asyncio.sleep(0)
            await _settle(s, spec.init_pods, time.perf_counter() + spec.timeout)
            setup = time.perf_counter() - setup_started
            setup_rss = peak_rss_mib()
            base_bound, base_unsched, base_errors = s.stats.bound, s.stats.unschedulable, s.stats.errors
            first_attempt = len(s.stats.attempt_seconds)
            scenario.mark()

            started = time.perf_counter()
            for i in range(0, len(measured), spec.chunk):
                await s.apply(measured[i : i + spec.chunk])
                await asyncio.sleep(0)  # let the scheduling loop run between requests
            await _settle(s, base_bound + spec.measure_pods, started + spec.timeout)
            window = time.perf_counter() - started
        finally:
            await s.stop()
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
            await scenario.detach()
    attempts = sorted(s.stats.attempt_seconds[first_attempt:])
    bound = s.stats.bound - base_bound
    unschedulable = s.stats.unschedulable - base_unsched
    errors = s.stats.errors - base_errors
    in_cycles = sum(attempts)
    return RunResult(
        scenario=spec.scenario,
        nodes=spec.nodes,
        init_pods=spec.init_pods,
        measure_pods=spec.measure_pods,
        nodes_scored=num_feasible_nodes_to_find(config.percentage_of_nodes_to_score, spec.nodes),
        bound=bound,
        unschedulable=unschedulable,
        errors=errors,
        all_scheduled=bound == spec.measure_pods and unschedulable == 0 and errors == 0,
        seconds=round(window, 3),
        pods_per_second=round(bound / window, 1) if window > 0 else 0.0,
        cycle_pods_per_second=round(bound / in_cycles, 1) if in_cycles > 0 else 0.0,
        attempt_p50_ms=round(_percentile(attempts, 0.50) * 1000, 3),
        attempt_p99_ms=round(_percentile(attempts, 0.99) * 1000, 3),
        attempt_max_ms=round((attempts[-1] if attempts else 0.0) * 1000, 3),
        setup_seconds=round(setup, 3),
        peak_rss_mib=round(peak_rss_mib(), 1),
        setup_rss_mib=round(setup_rss, 1),
        leaks={k: v for k, v in s.leaks().items() if v},
        metrics=scenario.metrics(spec.measure_pods),
    )


def _run_loop(coro: Coroutine[Any, Any, RunResult]) -> RunResult:
    """The event loop ``outrigger serve`` uses (uvloop when installed)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(coro)
    result: RunResult = uvloop.run(coro)
    return result


def _child_main(spec_json: str) -> int:
    tune_gc()  # as `outrigger serve` does
    result = _run_loop(run_one(RunSpec.from_json(spec_json)))
    print(RESULT_PREFIX + json.dumps(dataclasses.asdict(result)), flush=True)
    return 0


# ---- the driver (parent process) -------------------------------------------------------------------


def _failed_result(spec: RunSpec, message: str) -> RunResult:
    return RunResult(
        scenario=spec.scenario, nodes=spec.nodes, init_pods=spec.init_pods, measure_pods=spec.measure_pods,
        nodes_scored=0, bound=0, unschedulable=0, errors=0, all_scheduled=False, seconds=0.0,
        pods_per_second=0.0, cycle_pods_per_second=0.0, attempt_p50_ms=0.0, attempt_p99_ms=0.0,
        attempt_max_ms=0.0, setup_seconds=0.0, peak_rss_mib=0.0, setup_rss_mib=0.0, error=message,
    )


def run_in_child(spec: RunSpec) -> RunResult:
    """Run ``spec`` in a fresh interpreter (so peak RSS is this run's alone)."""
    cmd = [sys.executable, "-m", "framework.bench", "--child", spec.to_json()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=spec.timeout + 300)
    except subprocess.TimeoutExpired:
        return _failed_result(spec, "timed out")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return RunResult(**json.loads(line[len(RESULT_PREFIX) :]))
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return _failed_result(spec, f"exit {proc.returncode}: " + " | ".join(tail))


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    mem_mib = 0.0
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_mib = int(line.split()[1]) / 1024
                break
    try:
        import uvloop

        loop = f"uvloop {getattr(uvloop, '__version__', '')}".strip()
    except ImportError:  # pragma: no cover
        loop = "asyncio"
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_mib / 1024, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "event_loop": loop,
        "platform": platform.platform(),
    }


def evaluate_targets(results: dict[str, list[RunResult]]) -> list[dict[str, Any]]:
    """The benchmark issue's targets, met or not, with the measured value."""
    out: list[dict[str, Any]] = []
    basic = [r for r in results.get("basic", []) if r.nodes == 5000]
    if basic:
        r = basic[0]
        out.append({
            "target": "basic: >= 680 pods/s at 5000 nodes (scheduler_perf SchedulingBasic 5000Nodes_10000Pods)",
            "measured": f"{r.pods_per_second:.0f} pods/s",
            "met": r.all_scheduled and r.pods_per_second >= TARGET_BASIC_PODS_PER_SECOND,
            "gap": round(r.pods_per_second - TARGET_BASIC_PODS_PER_SECOND, 1),
        })
    scale = sorted((r for r in results.get("scale", []) if not r.error), key=lambda r: r.nodes)
    biggest = [r for r in scale if r.nodes == 15000]
    if biggest:
        r = biggest[0]
        out.append({
            "target": "scale: peak RSS < 1 GiB at 15000 nodes",
            "measured": f"{r.peak_rss_mib:.0f} MiB",
            "met": r.peak_rss_mib < TARGET_PEAK_RSS_MIB_15000,
            "gap": round(TARGET_PEAK_RSS_MIB_15000 - r.peak_rss_mib, 1),
        })
    if len(scale) >= 2:
        # pods/s may fall at most in proportion to the nodes each cycle scores (numFeasibleNodesToFind):
        # pods/s x nodes scored must not drop from any size to any larger one.
        work = [r.pods_per_second * r.nodes_scored for r in scale]
        pairs = [
            (work[j] / (work[i] or 1.0), scale[i].nodes, scale[j].nodes)
            for i in range(len(scale))
            for j in range(i + 1, len(scale))
        ]
        worst, lo, hi = min(pairs)
        relative = ", ".join(f"{r.nodes}: {w / (work[0] or 1.0):.2f}" for r, w in zip(scale, work, strict=True))
        out.append({
            "target": "scale: pods/s falls no more than linearly with nodes scored "
            "(pods/s x nodes scored never drops as nodes grow)",
            "measured": f"relative to {scale[0].nodes} nodes: {relative}; worst pair {lo} -> {hi} nodes: {worst:.2f}",
            "met": worst >= 1.0,
            "gap": round(worst - 1.0, 2),
        })
    out.extend(_ratio_targets(results))
    return out


# (scenario, baseline, minimum ratio scenario/baseline pods/s, label); remote-plugin and extender targets.
RATIO_TARGETS = (
    ("remote", "basic", 0.6, "remote >= 0.6 x basic"),
    ("remote", "inprocess-plugin", 0.8, "remote >= 0.8 x inprocess-plugin (stretch)"),
    ("extender", "remote", 0.1, "remote >= 10 x extender (full v1 Node objects)"),
    ("extender-names", "remote", 1 / 3, "remote >= 3 x extender (nodeCacheCapable, node names)"),
    ("replicas-2", "replicas-1", 1.6, "2 replicas >= 1.6 x 1 replica (CPU-heavy remote Score)"),
    ("remote-traced", "remote", 0.85, "tracing on >= 0.85 x tracing off (remote)"),
    ("remote-go", "remote-streams", 1.0, "Go plugin host >= Python plugin host (the same logic)"),
    ("remote-go-ahead", "remote", 1.0, "Go plugin host >= Python plugin host, both answering ahead (lookahead)"),
)


def _ratio_targets(results: dict[str, list[RunResult]]) -> list[dict[str, Any]]:
    """The ratio targets whose two scenarios both ran (at 5000 nodes)."""
    out: list[dict[str, Any]] = []

    def at_5000(name: str) -> RunResult | None:
        return next((r for r in results.get(name, []) if r.nodes == 5000 and not r.error), None)

    for name, base_name, minimum, label in RATIO_TARGETS:
        r, base = at_5000(name), at_5000(base_name)
        if r is None or base is None or base.pods_per_second <= 0 or r.pods_per_second <= 0:
            continue
        ratio = r.pods_per_second / base.pods_per_second
        if base_name == "remote" and name.startswith("extender"):  # "remote >= k x extender": remote / extender
            inverse = base.pods_per_second / r.pods_per_second
            shown = f"remote / {name} = {inverse:.2f} ({base.pods_per_second:.0f} vs {r.pods_per_second:.0f} pods/s)"
            met = r.all_scheduled and base.all_scheduled and inverse >= 1 / minimum
            gap = round(inverse - 1 / minimum, 2)
        else:
            shown = f"{name} / {base_name} = {ratio:.2f} ({r.pods_per_second:.0f} vs {base.pods_per_second:.0f} pods/s)"
            bytes_per_pod = r.metrics.get("bytes_per_pod")
            if bytes_per_pod is not None:
                shown += f"; {bytes_per_pod:.0f} bytes on the wire per pod"
            met = r.all_scheduled and base.all_scheduled and ratio >= minimum
            gap = round(ratio - minimum, 2)
        out.append({"target": label, "measured": shown, "met": met, "gap": gap})
    return out


_COLUMNS = (
    ("scenario", "{:<17}"), ("nodes", "{:>6}"), ("init", "{:>5}"), ("pods", "{:>6}"), ("scored", "{:>6}"),
    ("pods/s", "{:>7}"), ("cycle/s", "{:>7}"), ("p50 ms", "{:>7}"), ("p99 ms", "{:>7}"), ("RSS MiB", "{:>8}"),
    ("ok", "{:<4}"),
)


def format_table(results: Sequence[RunResult]) -> str:
    lines = [" ".join(fmt.format(name) for name, fmt in _COLUMNS)]
    for r in results:
        ok = "yes" if r.all_scheduled else ("ERR" if r.error else "NO")
        cells = (
            r.scenario, r.nodes, r.init_pods, r.measure_pods, r.nodes_scored, f"{r.pods_per_second:.0f}",
            f"{r.cycle_pods_per_second:.0f}", f"{r.attempt_p50_ms:.2f}", f"{r.attempt_p99_ms:.2f}",
            f"{r.peak_rss_mib:.0f}", ok,
        )
        lines.append(" ".join(fmt.format(c) for (_, fmt), c in zip(_COLUMNS, cells, strict=True)))
        if r.error:
            lines.append(f"  error: {r.error}")
    return "\n".join(lines)


def median_run(runs: Sequence[RunResult]) -> RunResult:
    """The repeat with the median pods/s, with every repeat's pods/s and the highest peak RSS."""
    ordered = sorted(runs, key=lambda r: r.pods_per_second)
    mid = ordered[(len(ordered) - 1) // 2]
    failed = next((r for r in runs if r.error or not r.all_scheduled), None)
    return dataclasses.replace(
        failed if failed is not None else mid,
        pods_per_second_samples=[r.pods_per_second for r in runs],
        peak_rss_mib=max(r.peak_rss_mib for r in runs),
    )


def run_benchmarks(
    names: Sequence[str], quick: bool, repeat: int = 1, progress: Callable[[str], None] = lambda _m: None
) -> dict[str, Any]:
    started = time.time()
    results: dict[str, list[RunResult]] = {}
    specs = [(name, spec) for name in names for spec in SCENARIOS[name].runs(quick)]
    runs: dict[int, list[RunResult]] = {i: [] for i in range(len(specs))}
    # Rounds over every scenario rather than each scenario's repeats back to back: the machine's speed
    # drifts (a VM's neighbours), and the ratio targets compare scenarios, so each round measures them
    # all under the same conditions and the medians are taken over rounds.
    for round_ in range(max(repeat, 1)):
        for i, (name, spec) in enumerate(specs):
            if runs[i] and runs[i][-1].error:
                continue
            progress(f"{name}: {spec.nodes} nodes, {spec.init_pods} initial + {spec.measure_pods} measured pods "
                     f"(round {round_ + 1}) ...")
            runs[i].append(run_in_child(spec))
            last = runs[i][-1]
            progress(f"  {last.pods_per_second:.0f} pods/s, peak RSS {last.peak_rss_mib:.0f} MiB"
                     + (f", error: {last.error}" if last.error else ""))
    for i, (name, _spec) in enumerate(specs):
        results.setdefault(name, []).append(median_run(runs[i]))
    return {
        "version": 1,
        "quick": quick,
        "repeat": max(repeat, 1),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_seconds": round(time.time() - started, 1),
        "machine": machine_info(),
        "scenarios": {
            name: {
                "description": SCENARIOS[name].description,
                "runs": [dataclasses.asdict(r) for r in results.get(name, [])],
            }
            for name in names
        },
        "targets": [] if quick else evaluate_targets(results),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m framework.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (smoke test)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"JSON results file (default {DEFAULT_OUT})")
    p.add_argument("--scenarios", default="", help=f"comma-separated subset of: {', '.join(SCENARIOS)} (default: "
                   "all but apiserver)")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs per size, the median reported (default 3, 1 with --quick)")
    p.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return _child_main(args.child)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    names = names or [name for name, scenario in SCENARIOS.items() if scenario.default]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    report = run_benchmarks(names, args.quick, repeat, progress=lambda m: print(m, file=sys.stderr, flush=True))
    runs = [RunResult(**r) for s in report["scenarios"].values() for r in s["runs"]]
    m = report["machine"]
    print(f"\n{m['nproc']} x {m['cpu']}, {m['memory_gib']} GiB, Python {m['python']}, {m['event_loop']}")
    print(format_table(runs))
    for t in report["targets"]:
        print(f"{'MET    ' if t['met'] else 'NOT MET'} {t['target']}: {t['measured']}")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"results written to {args.out}")
    return 0 if all(r.all_scheduled for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
