"""Pods held at Permit: :class:`WaitingPods` (shared by a scheduler's profiles) and the handle of each
(:class:`WaitingPodHandle`) that plugins allow, reject or preempt, and that times out; and the pods in
PreBind (:class:`PodsInPreBind`), whose binding cycle a preemption may still cancel (kube-scheduler
1.37's ``waitingPodsMap`` and ``podsInPreBindMap``)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from pluginhost.model import Pod
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["MAX_PERMIT_TIMEOUT", "PodInPreBind", "PodsInPreBind", "WaitingPodHandle", "WaitingPods", "go_duration"]

T = TypeVar("T")

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
    """A pod held at Permit until every waiting plugin allows it, one rejects or preempts it, or a wait
    times out."""

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

    def reject(self, plugin: str, message: str) -> bool:
        """Declare the pod unschedulable (it goes back to the queue as rejected by ``plugin``). False
        if its wait had already ended (allowed, rejected or preempted before)."""
        return self._finish(Status(Code.Unschedulable, (message,), plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """Stop the wait because a preemption chose the pod as a victim: an Error rather than a
        rejection, so the pod is retried after the error backoff and not marked unschedulable. False
        if its wait had already ended; the preemption then deletes the pod instead."""
        return self._finish(Status(Code.Error, (message,), plugin))

    def _timeout(self, plugin: str, waited: float) -> None:
        self.reject(plugin, f"rejected due to timeout after waiting {go_duration(waited)} at plugin {plugin}")

    def _finish(self, status: Status) -> bool:
        if self.result.done():
            return False
        for t in self._timers:
            t.cancel()
        self.result.set_result(status)
        return True


class WaitingPods:
    """The pods waiting at Permit, by pod UID (shared by the profiles of one scheduler)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPodHandle] = {}
        #: The pods past Permit whose PreBind plugins are running (kept with the waiting pods: both are
        #: pods a preemption stops in memory rather than deletes).
        self.in_pre_bind = PodsInPreBind()

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


class PodInPreBind:
    """A pod whose binding cycle runs its PreBind plugins: a preemption may cancel it until it is marked
    prebound (kube-scheduler's ``PodInPreBind``)."""

    __slots__ = ("_finished", "cancelled")

    def __init__(self) -> None:
        self._finished = False
        #: Set (with the reason, e.g. "preempted by DefaultPreemption") once the pod is cancelled.
        self.cancelled: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def cancel_pod(self, message: str) -> bool:
        """Cancel the pod's binding cycle with ``message`` as the cause. False once PreBind finished (the
        binding is on its way: the pod must be deleted instead); true again for a pod already cancelled."""
        if self._finished:
            return False
        if not self.cancelled.done():
            self.cancelled.set_result(message)
        return True

    async def run(self, call: Awaitable[T]) -> T | str:
        """Await ``call`` (a PreBind plugin's), stopping it if the pod is cancelled meanwhile: its result,
        or the cancellation's cause (the plugin saw its context cancelled, as a Go plugin would)."""
        if self.cancelled.done():
            if inspect.iscoroutine(call):
                call.close()
            return self.cancelled.result()
        task = asyncio.ensure_future(call)
        await asyncio.wait((task, self.cancelled), return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        task.cancel()
        return self.cancelled.result()

    def mark_prebound(self) -> bool:
        """PreBind is over: from now on the pod cannot be cancelled. False if it was cancelled before."""
        if self.cancelled.done():
            return False
        self._finished = True
        return True


class PodsInPreBind:
    """The pods in PreBind, by pod UID (shared by the profiles of one scheduler)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodInPreBind] = {}

    def add(self, uid: str) -> PodInPreBind:
        entry = self._pods[uid] = PodInPreBind()
        return entry

    def get(self, uid: str) -> PodInPreBind | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)
