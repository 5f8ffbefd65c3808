"""Named health checks, answered the way kube's ``/healthz``, ``/livez`` and ``/readyz`` answer.

A :class:`HealthChecks` registry holds, for each of the three endpoints, an ordered list of named checks.
Every endpoint starts with ``ping`` (always passes); ``/readyz`` also has ``shutdown`` (fails once the
framework is stopping). Other parts of the framework register their own::

    checks = HealthChecks()
    checks.add("informer-sync", lambda: None if synced() else "waiting for informers to sync", readyz=True)
    checks.add("leaderElection", elector.check, healthz=True, readyz=True)

A check is a function of no arguments (or a coroutine function) that returns ``None`` when healthy and a
reason otherwise; raising counts as failing with the exception as the reason, and so does taking longer
than :data:`CHECK_TIMEOUT`. What the endpoints answer (:meth:`HealthChecks.render`):

- all checks pass: 200 ``ok``; with ``?verbose``, one ``[+]name ok`` line per check and ``healthz check
  passed`` (``livez``, ``readyz``);
- a check fails: 500 with every line, ``[-]name failed: reason withheld`` for the failing ones (the
  endpoints are open to anyone, so reasons go to the log, not to the caller) and ``readyz check failed``;
- ``?exclude=name`` (repeatable) skips a check (``[+]name excluded: ok``);
- ``/readyz/<name>`` runs one check: 200 ``ok`` or 500 ``internal server error: <reason>`` (authorized
  callers only: the reason is shown).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CHECK_TIMEOUT", "ENDPOINTS", "Check", "HealthChecks"]

log = logging.getLogger("outrigger.health")

#: The three endpoints, as path names.
ENDPOINTS = ("healthz", "livez", "readyz")
#: Seconds a check may take before it counts as failed (a probe's own timeout is usually 1 s to 10 s).
CHECK_TIMEOUT = 5.0

Check = Callable[[], "str | Awaitable[str | None] | None"]

# kube's own names: DNS labels (informer-sync) and camelCase (leaderElection, client-go's watchdog).
_NAME = re.compile(r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?")


@dataclass(frozen=True)
class _Named:
    name: str
    check: Check


def _ping() -> None:
    return None


class HealthChecks:
    """The named checks of ``/healthz``, ``/livez`` and ``/readyz`` (see the module docstring)."""

    def __init__(self) -> None:
        self._checks: dict[str, list[_Named]] = {e: [_Named("ping", _ping)] for e in ENDPOINTS}
        self._stopping = False
        self._failing: dict[tuple[str, str], str] = {}  # (endpoint, check) -> the reason last logged
        self.add("shutdown", self._shutdown, readyz=True)

    def _shutdown(self) -> str | None:
        return "process is shutting down" if self._stopping else None

    def shutting_down(self) -> None:
        """Fail ``/readyz`` from now on (``shutdown``): the framework is stopping."""
        self._stopping = True

    def add(self, name: str, check: Check, *, healthz: bool = False, livez: bool = False,
            readyz: bool = False) -> None:
        """Register ``check`` as ``name`` on the endpoints given (at least one); ``ValueError`` for a
        name that is not a DNS label or is already registered there."""
        wanted = [e for e, on in zip(ENDPOINTS, (healthz, livez, readyz), strict=True) if on]
        if not wanted:
            raise ValueError(f"health check {name!r}: name at least one of healthz, livez, readyz")
        if not _NAME.fullmatch(name):
            raise ValueError(f"health check name {name!r}: use letters, digits and '-'")
        for endpoint in wanted:
            if name in self.names(endpoint):
                raise ValueError(f"health check {name!r} is already registered on /{endpoint}")
        for endpoint in wanted:
            self._checks[endpoint].append(_Named(name, check))

    def names(self, endpoint: str) -> list[str]:
        """The checks of ``endpoint`` (``healthz``, ``livez`` or ``readyz``), in order."""
        return [c.name for c in self._checks[endpoint]]

    async def run(self, endpoint: str, name: str) -> str | None:
        """Run one check: None when it passes, else the reason. ``KeyError`` if there is no such check."""
        for c in self._checks[endpoint]:
            if c.name == name:
                return await self._run(endpoint, c)
        raise KeyError(name)

    async def _run(self, endpoint: str, c: _Named) -> str | None:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                value = c.check()
                if inspect.isawaitable(value):
                    value = await value
            reason = None if value is None else str(value) or "failed"
        except TimeoutError:
            reason = f"no answer within {CHECK_TIMEOUT:g}s"
        except Exception as exc:  # a broken check is a failing check, never a broken endpoint
            reason = f"{type(exc).__name__}: {exc}"
        key = (endpoint, c.name)
        if reason is not None and self._failing.get(key) != reason:
            log.info("/%s check %s failed: %s", endpoint, c.name, reason)
            self._failing[key] = reason
        elif reason is None and self._failing.pop(key, None) is not None:
            log.info("/%s check %s passes again", endpoint, c.name)
        return reason

    async def render(self, endpoint: str, query: Mapping[str, Sequence[str]]) -> tuple[int, str]:
        """The status and plain-text body of ``/<endpoint>`` for a request with ``query``."""
        excluded = set(query.get("exclude", ()))
        lines: list[str] = []
        failed = False
        for c in self._checks[endpoint]:
            if c.name in excluded:
                excluded.discard(c.name)
                lines.append(f"[+]{c.name} excluded: ok")
                continue
            if await self._run(endpoint, c) is None:
                lines.append(f"[+]{c.name} ok")
            else:
                failed = True
                lines.append(f"[-]{c.name} failed: reason withheld")
        if excluded:
            quoted = ",".join(f'"{n}"' for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            return 500, "\n".join([*lines, f"{endpoint} check failed"]) + "\n"
        if "verbose" not in query:
            return 200, "ok"
        return 200, "\n".join([*lines, f"{endpoint} check passed"]) + "\n"

    async def render_one(self, endpoint: str, name: str) -> tuple[int, str] | None:
        """``/<endpoint>/<name>``: the status and body, or None when there is no such check."""
        if name not in self.names(endpoint):
            return None
        reason = await self.run(endpoint, name)
        return (200, "ok") if reason is None else (500, f"internal server error: {reason}\n")
