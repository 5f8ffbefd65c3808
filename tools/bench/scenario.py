"""What a benchmark scenario is: :class:`Scenario`, the hooks a run calls, and :func:`profile_with`,
the configuration most scenarios run with.

A new scenario (a remote plugin, an extender, replicas, tracing) is a :class:`Scenario` subclass: it
lists its runs (:meth:`~Scenario.runs`), may start what it needs around a run (plugin host processes,
collectors) in :meth:`~Scenario.environment`, builds its registry and configuration in
:meth:`~Scenario.prepare` (async: remote endpoints are handshaken there), and may finish wiring once the
scheduler exists in :meth:`~Scenario.attach` (``RemotePlugins.attach``). Register it in
:data:`tools.bench.scenarios.SCENARIOS`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from framework.config import SchedulerConfig, load_config
from framework.plugins import Registry
from framework.profiles import build_registry, default_scheduler_config, unavailable_plugins

from .runs import WINDOW_SECONDS, RunResult, RunSpec

if TYPE_CHECKING:
    from framework.scheduler import Scheduler

__all__ = ["Scenario", "profile_with"]


class Scenario:
    """A named benchmark: the runs it makes and how the framework is set up for them."""

    name = ""
    description = ""
    #: Whether a run that names no scenarios includes it (``apiserver`` is asked for by name: it needs the
    #: built Kubernetes binaries and minutes of its own).
    default = True
    #: Whether the initial pods are applied already bound (round-robin over the nodes, as the store takes
    #: a pod whose ``spec.nodeName`` is set) rather than scheduled: for a scenario whose plugin is slow on
    #: purpose, scheduling the set-up would take most of the run and measure nothing the scenario names.
    bind_init_pods = False
    #: Measured pods per apply in the full runs. At most two chunks wait at a time, and what waits when
    #: the budget runs out is still scheduled and timed, so a slow scenario's chunk is small: about a
    #: second of its work on a slow host keeps its window near :data:`~tools.bench.runs.WINDOW_SECONDS`.
    chunk = 500

    def full(self, spec: RunSpec) -> RunSpec:
        """``spec`` as a full run makes it: the time budget and this scenario's chunk."""
        return dataclasses.replace(spec, budget=spec.budget or WINDOW_SECONDS, chunk=min(spec.chunk, self.chunk))

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
        """A run measured its own way (through an API server, say); None: the in-process run of
        :func:`~tools.bench.runner.run_one`."""
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
