"""Pods held at Permit: :class:`WaitingPods` (shared by a scheduler's profiles) and the handle of each
(:class:`WaitingPodHandle`) that plugins allow or reject, and that times out."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pluginhost.model import Pod
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["MAX_PERMIT_TIMEOUT", "WaitingPodHandle", "WaitingPods", "go_duration"]

MAX_PERMIT_TIMEOUT = 15 * 60.0  # kube-scheduler caps a Permit wait at 15 minutes


def go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` writes it (``500ms``, ``1.5s``, ``1m30s``,
    ``1h0m0s``): kube-scheduler's Permit timeout message prints the plugin's timeout that way."""
    ns = round(seconds * 1e9)
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)

    def frac(value: int, unit: int) -> str:
        whole, rest = divmod(value, unit)
        if not rest:
            return str(whole)
        return f"{whole}." + f"{rest:0{len(str(unit)) - 1}d}".rstrip("0")

    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{frac(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{frac(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    out = frac(rest, 10**9) + "s"
    if hours or minutes:
        out = f"{minutes}m{out}"
    if hours:
        out = f"{hours}h{out}"
    return sign + out


class WaitingPodHandle:
    """A pod held at Permit until every waiting plugin allows it, one rejects it, or a wait times out."""

    def __init__(self, pod: Pod, node_name: str, waits: Mapping[str, float]) -> None:
        loop = asyncio.get_running_loop()
        self._pod = pod
        self._node_name = node_name
        self._pending = dict(waits)
        self.deadline = loop.time() + max(waits.values(), default=0.0)
        self.result: asyncio.Future[Status] = loop.create_future()
        self._timers = [
            loop.call_later(timeout, self._timeout, plugin, timeout) for plugin, timeout in waits.items()
        ]

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        self._pending.pop(plugin, None)
        if not self._pending:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.Unschedulable, (message,), plugin))

    def _timeout(self, plugin: str, waited: float) -> None:
        self.reject(plugin, f"rejected due to timeout after waiting {go_duration(waited)} at plugin {plugin}")

    def _finish(self, status: Status) -> None:
        if self.result.done():
            return
        for t in self._timers:
            t.cancel()
        self.result.set_result(status)


class WaitingPods:
    """The pods waiting at Permit, by pod UID (shared by the profiles of one scheduler)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPodHandle] = {}

    def add(self, pod: Pod, node_name: str, waits: Mapping[str, float]) -> WaitingPodHandle:
        wp = WaitingPodHandle(pod, node_name, waits)
        self._pods[pod.uid] = wp
        return wp

    def get(self, uid: str) -> WaitingPodHandle | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __iter__(self) -> Any:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
