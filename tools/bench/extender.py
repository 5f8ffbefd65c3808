"""The extender scenarios: BenchTier's logic as a kube-scheduler HTTP/JSON extender in its own process
(:mod:`tools.bench.httpextender`), called by :class:`~tools.bench.httpextender.ExtenderPlugin` with full v1 Node
objects (``extender``) or in ``nodeCacheCapable`` mode with node names (``extender-names``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from framework.config import SchedulerConfig
from framework.plugins import Registry
from framework.profiles import build_registry

from ..workloads import scheduler_perf_node
from .inprocess import InProcessPlugin
from .runs import RunSpec
from .scenario import profile_with
from .servers import STARTUP_SECONDS, ServerProcess, call_metrics

if TYPE_CHECKING:
    from framework.scheduler import Scheduler

__all__ = ["ExtenderNamesScenario", "ExtenderScenario"]


class ExtenderScenario(InProcessPlugin):
    """``inprocess-plugin`` with BenchTier as a kube-scheduler HTTP extender in a separate process,
    called by :class:`~tools.bench.httpextender.ExtenderPlugin` with full v1 Node objects."""

    name = "extender"
    chunk = 20
    description = (
        "basic plus BenchTier as a kube-scheduler HTTP/JSON extender (separate process), "
        "ExtenderArgs with full v1 Node objects; 1000 measured pods"
    )
    node_cache_capable = False
    bind_init_pods = True

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
        argv = [sys.executable, "-m", "tools.bench.httpextender", "--listen", "127.0.0.1:0"]
        async with ServerProcess(argv, "extender") as server:
            self._url = f"http://{server.address}"
            try:
                if self.node_cache_capable:
                    # A nodeCacheCapable extender keeps its own node cache (an informer in a cluster):
                    # filled before the run, outside the clock.
                    items = [scheduler_perf_node(i, self.node_labels(i)) for i in range(spec.nodes)]
                    await asyncio.get_running_loop().run_in_executor(
                        None, _post_json, server.address, "/cache/nodes", {"kind": "NodeList", "items": items}
                    )
                yield
            finally:
                self._close()

    def registry(self) -> Registry:
        from .httpextender import ExtenderPlugin

        registry = build_registry()
        registry.register_class(ExtenderPlugin)
        return registry

    def config(self, registry: Registry) -> SchedulerConfig:
        from .httpextender import ExtenderPlugin

        return profile_with(registry, ExtenderPlugin.name, {
            "urlPrefix": self._url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "nodeCacheCapable": self.node_cache_capable, "timeout": 10,
        })

    async def attach(self, scheduler: Scheduler) -> None:
        from .httpextender import ExtenderPlugin

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
        return call_metrics(self._mark, self._final, measured_pods)


class ExtenderNamesScenario(ExtenderScenario):
    """The extender in ``nodeCacheCapable`` mode: ExtenderArgs carry node names."""

    name = "extender-names"
    description = (
        "extender in nodeCacheCapable mode (ExtenderArgs with NodeNames; the extender caches the nodes); "
        "1000 measured pods"
    )
    node_cache_capable = True


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

