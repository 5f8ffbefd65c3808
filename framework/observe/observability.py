"""Observability of a framework service in one place: tracing, metrics, debug scores, health checks,
the secure port and the plain HTTP port.

``outrigger serve`` builds an :class:`ObservabilityConfig` from its flags and the ``OTEL_*`` variables;
:func:`framework.service.start_service` starts it (:meth:`Observability.start`) once the scheduler and its
remote plugins exist, and stops it after the last binding cycle, so every trace is complete::

    cfg = ObservabilityConfig(tracing=TracingConfig.from_env(store=1000), secure=SecureServing(),
                              http="127.0.0.1:10251", debug_scores=5)
    srv = await start_service(config_for, endpoints, observability=cfg)
    srv.observability.checks.add("informer-sync", informers_synced, readyz=True)

``checks`` (:class:`~framework.observe.health.HealthChecks`) is where other parts register the named
checks of ``/healthz``, ``/livez`` and ``/readyz``; pass one in the configuration to register before the
ports open.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from .debugscores import DebugScores
from .health import HealthChecks
from .httpserver import HttpServer
from .instrument import Instrumentation, instrument
from .metrics import SchedulerMetrics
from .serving import Built, SecureServing, is_loopback
from .tracing import Tracing, TracingConfig

log = logging.getLogger("outrigger.observability")

__all__ = ["Observability", "ObservabilityConfig"]


@dataclass(frozen=True)
class ObservabilityConfig:
    """What to turn on. ``tracing``: a configuration (or a ready :class:`Tracing`, for tests and the
    benchmark); ``secure``: the secure port (HTTPS with authentication: health, metrics, configz and
    debug endpoints); ``http``: the plain HTTP port's address (the same endpoints, no authentication:
    for local use); ``debug_scores``: the debug scores' top N at startup (switchable at runtime over
    HTTP); ``checks``: the health checks registry to serve (a new one if None)."""

    tracing: TracingConfig | Tracing | None = None
    http: str | None = None
    debug_scores: int = 0
    plugin_sample_percent: int = 10
    secure: SecureServing | None = None
    checks: HealthChecks | None = None
    #: The web console under /ui/ on both ports (docs/console.md), and where it receives plugin hosts'
    #: spans over OTLP/gRPC (``HOST:PORT``; None: no receiver).
    console: bool = True
    console_otlp: str | None = None


@dataclass
class Observability:
    """The running pieces (see :class:`ObservabilityConfig`)."""

    instrumentation: Instrumentation
    tracing: Tracing | None = None
    metrics: SchedulerMetrics | None = None
    scores: DebugScores | None = None
    http: HttpServer | None = None
    secure: HttpServer | None = None
    checks: HealthChecks = field(default_factory=HealthChecks)
    serving: Built | None = None
    console: Any = None
    otlp: Any = None

    @classmethod
    async def start(cls, config: ObservabilityConfig, scheduler: Any, remote: Any = None) -> Observability:
        built = config.secure.build() if config.secure is not None else None  # ServingConfigError
        tracing = config.tracing.build() if isinstance(config.tracing, TracingConfig) else config.tracing
        ports = bool(config.http or config.secure)
        metrics: SchedulerMetrics | None = None
        scores: DebugScores | None = None
        if ports:
            metrics = SchedulerMetrics(config.plugin_sample_percent)
            metrics.attach(scheduler, remote)
        if ports or config.debug_scores:
            scores = DebugScores(config.debug_scores)
        checks = config.checks if config.checks is not None else HealthChecks()
        console = None
        if ports and config.console:
            from ..console import Console

            console = Console(scheduler, metrics, remote)
            if tracing is None:  # the console's own: a context is traced only while someone looks
                tracing = Tracing([], sampler=console.sampler)
            tracing.processors.append(console.spans)
        inst = instrument(scheduler, tracing=tracing, metrics=metrics, scores=scores, console=console)
        obs = cls(inst, tracing, metrics, scores, checks=checks, serving=built, console=console)
        try:
            if console is not None and config.console_otlp:
                from ..console.otlp import OtlpReceiver

                obs.otlp = await OtlpReceiver(console.spans).start(config.console_otlp)
            if config.secure is not None and built is not None:
                obs.secure = await HttpServer(scheduler, metrics=metrics, scores=scores, checks=checks,
                                              tls=built.tls, gate=built.gate, console=console
                                              ).start(config.secure.listen)
                log.info("secure port on https://%s (%s certificate, SHA-256 %s); callers: %s",
                         obs.secure.address, built.tls.source, built.tls.fingerprint, built.mode)
            if config.http:
                obs.http = await HttpServer(scheduler, metrics=metrics, scores=scores, checks=checks,
                                            console=console).start(config.http)
                if not is_loopback(obs.http.host):
                    log.warning("the plain HTTP port %s serves every caller without TLS or authentication: keep "
                                "it for local use, and serve others on the secure port", obs.http.address)
        except BaseException:
            await obs.stop_http()
            obs.shutdown()
            raise
        return obs

    async def stop_http(self) -> None:
        """Fail /readyz (shutting down), then close the ports."""
        self.checks.shutting_down()
        if self.console is not None:
            await self.console.close()  # ends the live streams, so the ports close at once
        for server in (self.http, self.secure):
            if server is not None:
                await server.stop()
        if self.otlp is not None:
            await self.otlp.stop()
            self.otlp = None
        if self.serving is not None:
            await self.serving.close()
            self.serving = None

    def shutdown(self) -> None:
        """Flush the spans (call after the last binding cycle)."""
        if self.tracing is not None:
            self.tracing.shutdown()

