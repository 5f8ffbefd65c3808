"""The in-process scenarios: ``basic`` (scheduler_perf's SchedulingBasic), ``scale`` (``basic`` at
several cluster sizes) and ``inprocess-plugin`` (``basic`` plus :class:`~tools.bench.plugins.BenchTier`,
the baseline a remote plugin is compared with)."""

from __future__ import annotations

from framework.config import SchedulerConfig
from framework.plugins import Registry
from framework.profiles import build_registry

from .plugins import TIER_LABEL, BenchTier
from .runs import RunSpec
from .scenario import Scenario, profile_with

__all__ = ["Basic", "InProcessPlugin", "Scale"]


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
