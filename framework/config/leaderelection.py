"""KubeSchedulerConfiguration's ``leaderElection``: component-base's LeaderElectionConfiguration with
kube-scheduler's defaults, validated as kube-scheduler and client-go do, and the Go durations it is
written in (:func:`parse_duration`, :func:`format_duration`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JITTER_FACTOR",
    "LeaderElectionConfig",
    "format_duration",
    "leader_election_config",
    "parse_duration",
]


@dataclass(frozen=True)
class LeaderElectionConfig:
    """KubeSchedulerConfiguration's ``leaderElection`` with kube-scheduler's v1 defaults: on, a Lease
    ``kube-system/kube-scheduler`` held 15 s, renewed within 10 s, tried every 2 s. Durations in seconds.

    Beside kube-scheduler, name a Lease of Outrigger's own (``resourceNamespace``, ``resourceName``):
    two schedulers contending for one Lease would take turns scheduling."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_namespace: str = "kube-system"
    resource_name: str = "kube-scheduler"


# JitterFactor of client-go's leaderelection: a standby tries again after retryPeriod to 2.2 x retryPeriod.
JITTER_FACTOR = 1.2
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                   "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration (``"15s"``, ``"1m30s"``, ``"500ms"``, ``"0"``) in seconds; ValueError otherwise."""
    rest, sign = text, 1.0
    if rest[:1] in ("+", "-"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(text)
    total, pos = 0.0, 0
    while pos < len(rest):
        m = _DURATION_PART.match(rest, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(text)
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """``seconds`` as Go prints a duration: ``15s``, ``1m30s``, ``500ms``, ``0s``."""
    if seconds == 0:
        return "0s"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 1:
        for unit, size in (("ms", 1e-3), ("\u00b5s", 1e-6), ("ns", 1e-9)):
            if s >= size:
                return f"{sign}{round(s / size, 6):g}{unit}"
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    out = (f"{int(hours)}h" if hours else "") + (f"{int(minutes)}m" if hours or minutes else "")
    return f"{sign}{out}{round(secs, 9):g}s"


def leader_election_config(raw: Mapping[str, Any] | None) -> tuple[LeaderElectionConfig, list[tuple[str, str]]]:
    """``leaderElection`` defaulted (SetDefaults_KubeSchedulerConfiguration) and validated
    (component-base's ValidateLeaderElectionConfiguration, client-go's NewLeaderElector, kube-scheduler's
    resourceLock check): the configuration and the problems, ``(path, message)`` each."""
    raw = raw or {}
    base = "leaderElection"
    problems: list[tuple[str, str]] = []
    defaults = LeaderElectionConfig()

    def flag(name: str, default: bool) -> bool:
        value = raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            problems.append((f"{base}.{name}", f"must be true or false, got {value!r}"))
            return default
        return value

    def duration(name: str, default: float) -> float:
        value = raw.get(name)
        if value is None:
            return default
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            seconds = parse_duration(value)
        except ValueError:
            problems.append((f"{base}.{name}", f'invalid duration {value!r}: write it as Go does, e.g. "15s", "1m30s"'))
            return default
        return seconds or default  # a zero duration is unset: defaulted, as in kube-scheduler

    def text(name: str, default: str) -> str:
        value = raw.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            problems.append((f"{base}.{name}", f"must be a string, got {value!r}"))
            return default
        return value or default

    cfg = LeaderElectionConfig(
        leader_elect=flag("leaderElect", defaults.leader_elect),
        lease_duration=duration("leaseDuration", defaults.lease_duration),
        renew_deadline=duration("renewDeadline", defaults.renew_deadline),
        retry_period=duration("retryPeriod", defaults.retry_period),
        resource_lock=text("resourceLock", defaults.resource_lock),
        resource_namespace=text("resourceNamespace", defaults.resource_namespace),
        resource_name=text("resourceName", defaults.resource_name),
    )
    if problems or not cfg.leader_elect:
        return cfg, problems
    for name, value in (("leaseDuration", cfg.lease_duration), ("renewDeadline", cfg.renew_deadline),
                        ("retryPeriod", cfg.retry_period)):
        if value <= 0:
            problems.append((f"{base}.{name}", f"Invalid value: {format_duration(value)}: must be greater than zero"))
    if cfg.lease_duration <= cfg.renew_deadline:
        problems.append((f"{base}.leaseDuration", f"Invalid value: {format_duration(cfg.renew_deadline)}: "
                                                  "LeaseDuration must be greater than RenewDeadline"))
    elif cfg.retry_period > 0 and cfg.renew_deadline <= JITTER_FACTOR * cfg.retry_period:
        problems.append((f"{base}.renewDeadline", f"Invalid value: {format_duration(cfg.renew_deadline)}: "
                                                  "renewDeadline must be greater than retryPeriod*JitterFactor "
                                                  f"({format_duration(cfg.retry_period)} x {JITTER_FACTOR:g})"))
    if cfg.resource_lock != "leases":
        problems.append((f"{base}.resourceLock", f'Invalid value: "{cfg.resource_lock}": resourceLock value must be '
                                                 '"leases"'))
    return cfg, problems
