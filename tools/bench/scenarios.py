"""The benchmark's scenarios by name (:data:`SCENARIOS`), and ``apiserver``: ``basic`` through a real
kube-apiserver, measured by :mod:`tools.bench.apiserver` (``apiserver-traced``: with tracing always on).

That module is imported only when an ``apiserver`` run starts: an in-process run's peak RSS is the
framework's, without the API-server harness's client libraries.
"""

from __future__ import annotations

from .extender import ExtenderNamesScenario, ExtenderScenario
from .gohost import RemoteGoAheadScenario, RemoteGoScenario, RemoteUpstreamFitScenario
from .inprocess import Basic, InProcessPlugin, Scale
from .remote import (
    RemotePluginScenario,
    RemoteStreamsScenario,
    ReplicasScenario,
    ShadowScenario,
    TracedRemoteScenario,
)
from .runs import RunResult, RunSpec
from .scenario import Scenario

__all__ = ["SCENARIOS", "ApiServerScenario", "ApiServerTracedScenario"]


class ApiServerScenario(Scenario):
    """``basic`` through a real kube-apiserver and etcd, Outrigger as ``outrigger serve --kubeconfig``
    (:mod:`tools.bench.apiserver`: how it is set up and measured)."""

    name = "apiserver"
    description = "scheduler_perf SchedulingBasic 5000Nodes_10000Pods through kube-apiserver + etcd on loopback"
    default = False

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=50, init_pods=20, measure_pods=200, timeout=120.0)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=10000, timeout=600.0)]

    async def measure(self, spec: RunSpec) -> RunResult | None:
        from .apiserver import measure

        return await measure(spec)


class ApiServerTracedScenario(ApiServerScenario):
    """``apiserver`` with ``outrigger serve``'s tracing always on (every scheduling context kept), its
    spans exported over OTLP/gRPC to a collector process on 127.0.0.1
    (:mod:`tools.bench.otlpcollector`). Compared with ``apiserver``."""

    name = "apiserver-traced"
    description = "apiserver with tracing always on, exported over OTLP/gRPC to a collector process on loopback"

    async def measure(self, spec: RunSpec) -> RunResult | None:
        from .apiserver import measure

        return await measure(spec, traced=True)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Basic(), Scale(), InProcessPlugin(), RemotePluginScenario(), RemoteStreamsScenario(), ExtenderScenario(),
        ExtenderNamesScenario(), TracedRemoteScenario(), ShadowScenario(), ReplicasScenario(1), ReplicasScenario(2),
        RemoteGoScenario(), RemoteGoAheadScenario(), RemoteUpstreamFitScenario(), ApiServerScenario(),
        ApiServerTracedScenario(),
    )
}

