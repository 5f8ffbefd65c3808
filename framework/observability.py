"""Observability of a framework service in one place: tracing, metrics, debug scores and the HTTP port.

``outrigger serve`` builds an :class:`ObservabilityConfig` from its flags and the ``OTEL_*`` variables;
:func:`framework.service.start_service` starts it (:meth:`Observability.start`) once the scheduler and its
remote plugins exist, and stops it after the last binding cycle, so every trace is complete::

    cfg = ObservabilityConfig(tracing=TracingConfig.from_env(store=1000), http="127.0.0.1:10251", debug_scores=5)
    srv = await start_service(config_for, endpoints, observability=cfg)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .debugscores import DebugScores
from .httpserver import HttpServer
from .instrument import Instrumentation, instrument
from .metrics import SchedulerMetrics
from .tracing import Tracing, TracingConfig

__all__ = ["Observability", "ObservabilityConfig"]


@dataclass(frozen=True)
class ObservabilityConfig:
    """What to turn on. ``tracing``: a configuration (or a ready :class:`Tracing`, for tests and the
    benchmark); ``http``: the HTTP port's address (metrics and debug endpoints are served there);
    ``debug_scores``: the debug scores' top N at startup (switchable at runtime over HTTP)."""

    tracing: TracingConfig | Tracing | None = None
    http: str | None = None
    debug_scores: int = 0
    plugin_sample_percent: int = 10


@dataclass
class Observability:
    """The running pieces (see :class:`ObservabilityConfig`)."""

    instrumentation: Instrumentation
    tracing: Tracing | None = None
    metrics: SchedulerMetrics | None = None
    scores: DebugScores | None = None
    http: HttpServer | None = None

    @classmethod
    async def start(cls, config: ObservabilityConfig, scheduler: Any, remote: Any = None) -> Observability:
        tracing = config.tracing.build() if isinstance(config.tracing, TracingConfig) else config.tracing
        metrics: SchedulerMetrics | None = None
        scores: DebugScores | None = None
        if config.http:
            metrics = SchedulerMetrics(config.plugin_sample_percent)
            metrics.attach(scheduler, remote)
        if config.http or config.debug_scores:
            scores = DebugScores(config.debug_scores)
        inst = instrument(scheduler, tracing=tracing, metrics=metrics, scores=scores)
        http = None
        if config.http:
            try:
                http = await HttpServer(scheduler, metrics=metrics, scores=scores).start(config.http)
            except OSError:
                if tracing is not None:
                    tracing.shutdown()
                raise
        return cls(inst, tracing, metrics, scores, http)

    async def stop_http(self) -> None:
        if self.http is not None:
            await self.http.stop()

    def shutdown(self) -> None:
        """Flush the spans (call after the last binding cycle)."""
        if self.tracing is not None:
            self.tracing.shutdown()
