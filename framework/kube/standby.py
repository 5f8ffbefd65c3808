"""A replica that does not lead, and the moments of leader election that :func:`framework.kube.serve.serve_cluster`
waits for: the standby's ports (health and metrics only), waiting to lead or to lose, and the exit on a
lost lease.

::

    standby = await Standby.start(observability, checks, elector, metrics)   # ports of a standby
    await first(stop, leading, task=election)                                # SIGTERM, or the lease won
    await standby.stop()                                                     # the leader's service opens them
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from ..config import format_duration
from ..observe.health import ENDPOINTS as HEALTH_ENDPOINTS
from ..observe.health import HealthChecks
from ..observe.httpserver import HttpServer
from ..observe.metrics import SchedulerMetrics
from .leader import LeaderElector

if TYPE_CHECKING:
    from ..observe.observability import ObservabilityConfig

__all__ = ["Standby", "StandbyHttp", "exit_lost", "first"]

log = logging.getLogger("outrigger.kube")


class StandbyHttp(HttpServer):
    """A standby's secure (or plain) port: the health endpoints and /metrics (``leader_election_master_status``
    0); anything else is 503 naming the leader, since only the leader has a scheduler to show."""

    def __init__(self, elector: LeaderElector, **kwargs: Any) -> None:
        super().__init__(None, **kwargs)
        self.elector = elector

    async def route(self, method: str, path: str, query: Mapping[str, str], body: bytes,
                    multi: Mapping[str, list[str]] | None = None) -> tuple[int, str, bytes]:
        endpoint = path.strip("/").partition("/")[0]
        if method in ("GET", "HEAD") and (endpoint in HEALTH_ENDPOINTS or path == "/metrics"):
            return await super().route(method, path, query, body, multi)
        leader = self.elector.leader or "not known yet"
        message = f"{path}: this replica is a standby (the leader is {leader}); ask the leader"
        return 503, "application/json", orjson.dumps({"error": message})


@dataclass
class Standby:
    """The ports a standby serves, closed when it takes over (the leader's service opens them again)."""

    servers: list[HttpServer] = field(default_factory=list)
    built: list[Any] = field(default_factory=list)

    @classmethod
    async def start(cls, obs: ObservabilityConfig | None, checks: HealthChecks, elector: LeaderElector,
                    metrics: SchedulerMetrics | None) -> Standby:
        out = cls()
        if obs is None:
            return out
        try:
            if obs.secure is not None:
                built = obs.secure.build()
                out.built.append(built)
                out.servers.append(await StandbyHttp(elector, metrics=metrics, checks=checks, tls=built.tls,
                                                      gate=built.gate).start(obs.secure.listen))
            if obs.http:
                out.servers.append(await StandbyHttp(elector, metrics=metrics, checks=checks).start(obs.http))
        except BaseException:
            await out.stop()
            raise
        for server in out.servers:
            print(f"outrigger framework standby {server.scheme.upper()} (health, metrics) on {server.address}",
                  flush=True)
        return out

    async def stop(self) -> None:
        for server in self.servers:
            await server.stop()
        for built in self.built:
            await built.close()
        self.servers, self.built = [], []


async def first(*events: asyncio.Event, task: asyncio.Task[None] | None = None) -> None:
    """Wait until one of ``events`` is set; re-raise what ended ``task`` if it ends first."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait([*waits, *([task] if task is not None else [])], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    if task is not None and task.done() and not any(e.is_set() for e in events):
        task.result()  # the elector failed (a bug): say so rather than wait forever
        raise RuntimeError("leader election ended without leading or losing")


def exit_lost(elector: LeaderElector) -> NoReturn:
    """kube-scheduler on a lost lease: say so and exit 1 at once, without any cleanup that would talk to
    the cluster or the plugin hosts (the new leader already may); a supervisor starts the process again
    and it comes back as a standby."""
    message = (f"leader election lost: lease {elector.lock.describe()} not renewed within renewDeadline "
               f"({format_duration(elector.config.renew_deadline)}); exiting")
    log.error("%s", message)
    print(message, flush=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(1)
