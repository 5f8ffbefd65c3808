"""The scenarios with remote plugins in plugin host processes (``outrigger plugin serve``): ``remote``
(BenchTier with lookahead), ``remote-streams`` (without), ``remote-traced`` (``remote`` with tracing on),
``remote-shadow`` (``remote`` plus a shadow BenchTier) and ``replicas-1`` / ``replicas-2``
(:class:`~tools.bench.plugins.HeavyScore` on one and two hosts).
Each reports the adapter's bytes on the wire and calls per measured pod."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from framework.config import SchedulerConfig
from framework.plugins import Registry

from .inprocess import InProcessPlugin
from .plugins import HeavyScore
from .procstat import process_cpu
from .runs import RunSpec
from .scenario import profile_with
from .servers import STARTUP_SECONDS, ServerProcess, call_metrics

if TYPE_CHECKING:
    from framework.scheduler import Scheduler

__all__ = ["RemotePluginScenario", "RemoteStreamsScenario", "ReplicasScenario", "ShadowScenario",
           "TracedRemoteScenario"]


class RemotePluginScenario(InProcessPlugin):
    """``inprocess-plugin`` with BenchTier in a plugin host process (``outrigger plugin serve``)."""

    name = "remote"
    description = (
        "basic plus BenchTier as a remote Filter+Score plugin (filter_and_score, lookahead) in a separate plugin "
        "host process"
    )
    TARGET = "tools.bench.plugins:RemoteBenchTier"
    HOST = "plugin host"  # what its processes are called when one does not start
    ENDPOINT = "bench"  # the RemotePlugins endpoint's name
    DEADLINE = 10.0  # seconds, every point
    replicas = 1  # plugin host processes behind the endpoint
    # remote-traced inherits it, so the pair it is compared with queue the same batches; 200 is about a
    # second of the traced run's work on a slow host (the window's budget, Scenario.chunk).
    chunk = 200

    def __init__(self) -> None:
        self._addresses: list[str] = []
        self._services: Any = None
        self._remote: Any = None
        self._mark: tuple[float, ...] = (0, 0, 0, 0.0, 0)
        self._final: tuple[float, ...] = (0, 0, 0, 0.0, 0)
        # The plugin host processes' pids and their CPU seconds at mark() and detach(): the run's
        # cpu_ms_per_pod is the framework process's alone, and the hosts work for every pod too.
        self._host_pids: list[int] = []
        self._host_cpu = (0.0, 0.0)

    def host_argv(self) -> list[str]:
        """The command line of one plugin host process (run in a thread: it may build the host first)."""
        return [sys.executable, "-m", "framework.cli", "plugin", "serve", self.TARGET, "--listen", "127.0.0.1:0"]

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        argv = await asyncio.get_running_loop().run_in_executor(None, self.host_argv)
        async with contextlib.AsyncExitStack() as stack:
            hosts = [await stack.enter_async_context(ServerProcess(argv, self.HOST)) for _ in range(self.replicas)]
            self._addresses = [h.address for h in hosts]
            self._host_pids.extend(h.proc.pid for h in hosts if h.proc is not None)
            try:
                yield
            finally:
                await self._close()
                self._host_pids.clear()

    async def prepare(self, spec: RunSpec) -> tuple[Registry, SchedulerConfig]:
        from framework.profiles import build_registry_with_remote
        from framework.remote import EndpointConfig
        from framework.service import start_plugin_services

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

    def _hosts_cpu(self) -> float:
        return sum(process_cpu(pid) for pid in self._host_pids)

    def mark(self) -> None:
        self._mark = self._totals()
        self._host_cpu = (self._hosts_cpu(), 0.0)

    async def detach(self) -> None:
        self._final = self._totals()
        self._host_cpu = (self._host_cpu[0], self._hosts_cpu())
        await self._close()

    async def _close(self) -> None:
        remote, services = self._remote, self._services
        self._remote = self._services = None
        if remote is not None:
            await remote.close()
        if services is not None:
            await services.stop(0.2)

    def metrics(self, measured_pods: int) -> dict[str, float]:
        out = call_metrics(self._mark, self._final, measured_pods)
        before, after = self._host_cpu
        # Whole clock ticks (10 ms) of /proc: a window's total, so a few ms of resolution a pod at most.
        out["host_cpu_ms_per_pod"] = round(max(after - before, 0.0) * 1000 / max(measured_pods, 1), 3)
        return out


class TracedRemoteScenario(RemotePluginScenario):
    """``remote`` with tracing on: every scheduling context sampled (always-on), whole traces batched for
    an in-process sink that writes their OTLP requests and drops them (the cost a production setup pays,
    without a backend); the plugin host gets the trace context with every request. Compared with
    ``remote``."""

    name = "remote-traced"
    description = "remote with tracing on (always-on sampler, traces batched and encoded as OTLP into a sink)"

    def __init__(self) -> None:
        super().__init__()
        self._tracing: Any = None
        self._sink: Any = None
        self._spans_at_mark = 0
        self._bytes_at_mark = 0

    async def attach(self, scheduler: Scheduler) -> None:
        from framework.observe.instrument import instrument
        from framework.observe.tracing import benchmark_tracing

        await super().attach(scheduler)
        self._tracing, self._sink = benchmark_tracing()
        instrument(scheduler, tracing=self._tracing)

    def mark(self) -> None:
        super().mark()
        if self._tracing is not None:  # the setup's spans counted before the window opens
            self._tracing.force_flush()
        self._spans_at_mark = self._span_count()
        self._bytes_at_mark = self._otlp_bytes()

    def _span_count(self) -> int:
        return int(self._sink.spans) if self._sink is not None else 0  # SinkExporter counts what it got

    def _otlp_bytes(self) -> int:
        return int(self._sink.bytes) if self._sink is not None else 0  # the OTLP requests it wrote

    async def detach(self) -> None:
        await super().detach()
        if self._tracing is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._tracing.shutdown)

    def metrics(self, measured_pods: int) -> dict[str, float]:
        out = super().metrics(measured_pods)
        out["spans_per_pod"] = round((self._span_count() - self._spans_at_mark) / max(measured_pods, 1), 1)
        out["otlp_bytes_per_pod"] = round((self._otlp_bytes() - self._bytes_at_mark) / max(measured_pods, 1))
        return out


class RemoteStreamsScenario(RemotePluginScenario):
    """``remote`` with the plugin not declaring lookahead: each cycle exchanges Filter (with scores)."""

    name = "remote-streams"
    chunk = 100
    description = (
        "remote without lookahead: one Filter exchange (scores included) on a kept-open stream per cycle; "
        "5000 measured pods"
    )
    TARGET = "tools.bench.plugins:RemoteStreamsBenchTier"

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=500)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=5000)]  # bounds `make bench`


class ReplicasScenario(RemotePluginScenario):
    """``basic`` plus :class:`HeavyScore` served by ``replicas`` plugin host processes; the framework
    splits each pod's Score batch over the replicas (``replicas-1`` vs ``replicas-2``)."""

    TARGET = "tools.bench.plugins:HeavyScore"
    ENDPOINT = "heavy"
    DEADLINE = 30.0
    bind_init_pods = True
    chunk = 20

    def __init__(self, replicas: int) -> None:
        super().__init__()
        self.replicas = replicas
        self.name = f"replicas-{replicas}"
        self.description = (
            f"basic plus a CPU-heavy remote Score plugin (fixed work per node) on {replicas} plugin host "
            f"replica(s); up to 1000 measured pods"
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



class ShadowScenario(RemotePluginScenario):
    """``remote`` plus a second BenchTier host as a shadow plugin (``framework.remote.shadow``): each
    decided cycle is evaluated again by the shadow off the critical path (its Filter over every node,
    its Score over the scored ones), in one background task on the framework's event loop, dropped
    when its queue is full. Compared with ``remote``: what a shadow costs live scheduling."""

    name = "remote-shadow"
    description = (
        "remote plus BenchTier again as a shadow plugin on its own plugin host (every decided cycle offered "
        "to it off the critical path; a full queue drops)"
    )
    SHADOW_TARGET = "tools.bench.plugins:RemoteStreamsBenchTier"

    def __init__(self) -> None:
        super().__init__()
        self._shadow_address = ""
        self._report: dict[str, Any] = {}
        self._observed_at_mark = 0

    @contextlib.asynccontextmanager
    async def environment(self, spec: RunSpec) -> AsyncIterator[None]:
        argv = [sys.executable, "-m", "framework.cli", "plugin", "serve", self.SHADOW_TARGET, "--listen",
                "127.0.0.1:0"]
        async with contextlib.AsyncExitStack() as stack:
            shadow = await stack.enter_async_context(ServerProcess(argv, "shadow plugin host"))
            self._shadow_address = shadow.address
            if shadow.proc is not None:
                self._host_pids.append(shadow.proc.pid)
            async with super().environment(spec):
                yield

    async def prepare(self, spec: RunSpec) -> tuple[Registry, SchedulerConfig]:
        from framework.profiles import build_registry_with_remote
        from framework.remote import EndpointConfig
        from framework.remote.config import ShadowConfig
        from framework.service import start_plugin_services

        self._services = await start_plugin_services()
        endpoints = [
            EndpointConfig(self.ENDPOINT, tuple(self._addresses), {"default": self.DEADLINE},
                           connect_timeout=STARTUP_SECONDS),
            EndpointConfig(f"{self.ENDPOINT}-v2", (self._shadow_address,), {"default": self.DEADLINE},
                           connect_timeout=STARTUP_SECONDS, shadow=ShadowConfig(budget=1.0)),
        ]
        registry, self._remote = await build_registry_with_remote(
            endpoints, self._services.address, self._services.services
        )
        return registry, self.config(registry)

    async def attach(self, scheduler: Scheduler) -> None:
        await super().attach(scheduler)
        assert self._remote is not None
        await self._remote.start_shadows(scheduler)

    def mark(self) -> None:
        super().mark()
        report = self._remote.shadows.report() if self._remote is not None else []
        self._observed_at_mark = report[0]["observed"] if report else 0

    async def detach(self) -> None:
        report = self._remote.shadows.report() if self._remote is not None else []
        self._report = report[0] if report else {}
        await super().detach()

    def metrics(self, measured_pods: int) -> dict[str, float]:
        out = super().metrics(measured_pods)
        r = self._report
        if r:
            observed = max(r["observed"] - self._observed_at_mark, 1)
            out["shadow_evaluated_share"] = round(r["evaluated"] / max(r["observed"], 1), 3)
            out["shadow_dropped_share"] = round(r["dropped"] / max(r["observed"], 1), 3)
            out["shadow_failed_share"] = round((r["errors"] + r["timeouts"]) / max(r["observed"], 1), 3)
            out["shadow_observed_per_pod"] = round(observed / max(measured_pods, 1), 2)
            out["shadow_p50_ms"] = float(r["latencyMs"]["p50"])
        return out
