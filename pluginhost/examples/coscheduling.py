"""Coscheduling: gang scheduling of pod groups, all or nothing.

A pod joins a group with a label, and the group's size comes with it (the convention of the
scheduler-plugins Coscheduling plugin, reduced to labels and annotations instead of a PodGroup
object)::

    metadata:
      labels:
        pod-group.scheduling.sigs.k8s.io/name: training
      annotations:
        pod-group.scheduling.sigs.k8s.io/min-available: "4"     # minMember
        pod-group.scheduling.sigs.k8s.io/timeout-seconds: "30"   # optional; default: the plugin's args

- **PreFilter** rejects a member whose group cannot fit: the members still missing (``minMember``
  minus those already placed) must find room in the cluster's free resources.
- **Permit** holds each member (``Wait``) until ``minMember`` members are reserved; the member that
  completes the group allows every waiting sibling through the framework's Handle and passes itself.
- **Unreserve** (a member timed out at Permit or failed later) rejects the waiting siblings, so the
  whole group is unreserved together and nothing stays reserved for a group that cannot complete.

- **Controller** (background work while the framework is active): with ``groupTimeoutSeconds`` set,
  every ``controllerIntervalSeconds`` it looks at the framework's waiting pods and rejects all waiting
  members of a group that has had members waiting longer than that, however recently its last member
  arrived: a group never holds reserved resources longer than ``groupTimeoutSeconds`` in one go.

Args (``pluginConfig``): ``permitWaitingTimeSeconds`` (default 10), ``groupTimeoutSeconds`` (default 0:
no group-level timeout), ``controllerIntervalSeconds`` (default 1). Pods without the label are not
concerned. The plugin keeps no state of its own beyond when its controller first saw a group waiting:
what it needs is in the snapshot and in the framework's waiting pods, so it works the same
in-process, in one host, or behind replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from pluginhost.model import PODS, Pod
from pluginhost.plugin import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Controller,
    CycleState,
    EnqueueExtensions,
    Handle,
    PermitPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    check_args,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status

__all__ = ["GROUP_LABEL", "MIN_AVAILABLE", "TIMEOUT", "Coscheduling", "group_of"]

log = logging.getLogger("outrigger.examples.coscheduling")

GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
TIMEOUT = "pod-group.scheduling.sigs.k8s.io/timeout-seconds"


def group_of(pod: Pod) -> tuple[str, str] | None:
    """The pod's (namespace, group), or None for a pod outside any group."""
    name = pod.labels.get(GROUP_LABEL)
    return (pod.namespace, name) if name else None


def _placed_by_group(snap: Snapshot) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for pods in snap.pods:
        for p in pods:
            g = group_of(p)
            if g is not None:
                out.setdefault(g, set()).add(p.uid)
    return out


class Coscheduling(PreFilterPlugin, ReservePlugin, PermitPlugin, EnqueueExtensions, Controller):
    """Gang scheduling (see the module docstring)."""

    name = "Coscheduling"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = check_args(
            args, self.name, "permitWaitingTimeSeconds", "groupTimeoutSeconds", "controllerIntervalSeconds"
        )
        self.handle = handle
        self.default_timeout = float(args.get("permitWaitingTimeSeconds", 10))
        if self.default_timeout <= 0:
            raise ValueError(f"permitWaitingTimeSeconds must be positive, got {self.default_timeout}")
        self.group_timeout = float(args.get("groupTimeoutSeconds", 0))
        self.interval = float(args.get("controllerIntervalSeconds", 1))
        if self.group_timeout < 0 or self.interval <= 0:
            raise ValueError("groupTimeoutSeconds must be >= 0 and controllerIntervalSeconds positive, got "
                             f"{self.group_timeout} and {self.interval}")
        self._first_waiting: dict[tuple[str, str], float] = {}
        self._timing_out: dict[tuple[str, str], str] = {}  # groups the controller is rejecting -> reason
        self._controller: asyncio.Task[None] | None = None

    # ---- helpers -------------------------------------------------------------------------------

    def _min_member(self, pod: Pod) -> int | Status:
        raw = pod.annotations.get(MIN_AVAILABLE) or pod.labels.get(MIN_AVAILABLE) or "1"
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            return Status.unresolvable(f"pod group annotation {MIN_AVAILABLE}={raw!r} is not a positive integer")
        return value

    def _snapshot(self, state: CycleState) -> Snapshot:
        if state.snapshot is not None:
            return state.snapshot
        assert self.handle is not None, "Coscheduling needs the framework handle"
        return self.handle.snapshot()

    def _placed(self, state: CycleState, group: tuple[str, str]) -> set[str]:
        return set(self._snapshot(state).memo("coscheduling.placed", _placed_by_group).get(group, ()))

    def _waiting(self, group: tuple[str, str]) -> list[Any]:
        assert self.handle is not None, "Coscheduling needs the framework handle"
        return [wp for wp in self.handle.waiting_pods() if group_of(wp.pod) == group]

    # ---- PreFilter -----------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        group = group_of(pod)
        if group is None:
            return None, SUCCESS
        need = self._min_member(pod)
        if isinstance(need, Status):
            return None, need
        missing = need - len(self._placed(state, group) - {pod.uid})
        if missing <= 0:
            return None, SUCCESS
        room = self._room_for(self._snapshot(state), pod)
        if room < missing:
            return None, Status.unschedulable(
                f"pod group {group[1]!r} needs {missing} more member(s) like {pod.name!r} but the cluster "
                f"has room for {room}"
            )
        return None, SUCCESS

    def _room_for(self, snap: Snapshot, pod: Pod) -> int:
        """How many copies of ``pod`` the schedulable nodes' free resources hold (summed per node)."""
        if len(snap) == 0:
            return 0
        fits = np.full(len(snap), np.iinfo(np.int64).max, dtype=np.int64)
        for resource, amount in (*pod.requests.items(), (PODS, 1)):
            if amount <= 0 or (resource == PODS and amount != 1):
                continue
            col = snap.col(resource)
            if col is None:
                return 0
            free = np.maximum(snap.allocatable[:, col] - snap.requested[:, col], 0)
            fits = np.minimum(fits, free // amount)
        return int(fits[~snap.table.unschedulable].sum())

    # ---- Reserve / Unreserve ---------------------------------------------------------------------

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """One member failed (timed out at Permit, or later): the group fails together."""
        group = group_of(pod)
        if group is None:
            return
        assert self.handle is not None
        # While the controller times the group out, siblings get its reason, not "a member failed".
        message = self._timing_out.get(group) or f"pod group {group[1]!r} was rejected: member {pod.name!r} failed"
        for wp in self._waiting(group):
            if wp.pod.uid != pod.uid:
                self.handle.reject_waiting_pod(wp.pod.uid, self.name, message)

    # ---- Permit --------------------------------------------------------------------------------

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        group = group_of(pod)
        if group is None:
            return SUCCESS, 0.0
        need = self._min_member(pod)
        if isinstance(need, Status):
            return need, 0.0
        waiting = self._waiting(group)
        members = {pod.uid} | {wp.pod.uid for wp in waiting} | self._placed(state, group)
        if len(members) >= need:
            for wp in waiting:
                wp.allow(self.name)
            return SUCCESS, 0.0
        timeout = float(pod.annotations.get(TIMEOUT) or self.default_timeout)
        return Status.wait(f"waiting for {need - len(members)} more member(s) of pod group {group[1]!r}"), timeout

    # ---- controller: pod groups that waited too long --------------------------------------------

    async def start(self) -> None:
        if self.group_timeout > 0 and self._controller is None:
            self._controller = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._controller = self._controller, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:  # until stop() cancels it
            await asyncio.sleep(self.interval)
            try:
                await self.clean_up(time.monotonic())
            except Exception as exc:  # the framework may be away for a moment: try again next tick
                log.warning("pod group clean-up failed: %s", exc)

    async def clean_up(self, now: float) -> list[str]:
        """Reject every waiting member of the groups that have had members waiting for
        ``groupTimeoutSeconds`` or more (since this controller first saw them waiting); their names."""
        assert self.handle is not None, "Coscheduling needs the framework handle"
        get = getattr(self.handle, "waiting_pods_async", None)
        waiting = await get() if get is not None else self.handle.waiting_pods()
        groups: dict[tuple[str, str], list[Any]] = {}
        for wp in waiting:
            g = group_of(wp.pod)
            if g is not None:
                groups.setdefault(g, []).append(wp)
        for g in list(self._first_waiting):
            if g not in groups:
                del self._first_waiting[g]
        done = []
        for g, members in sorted(groups.items()):
            since = self._first_waiting.setdefault(g, now)
            if now - since < self.group_timeout:
                continue
            message = f"pod group {g[1]!r} timed out: its members waited more than {self.group_timeout:g}s"
            reject = getattr(self.handle, "reject_waiting_pod_async", None)
            self._timing_out[g] = message
            try:
                for wp in members:
                    if reject is not None:
                        await reject(wp.pod.uid, self.name, message)
                    else:
                        self.handle.reject_waiting_pod(wp.pod.uid, self.name, message)
            finally:
                del self._timing_out[g]
            del self._first_waiting[g]
            done.append(g[1])
        return done
    # ---- debugging -----------------------------------------------------------------------------

    def debug_endpoints(self) -> dict[str, Callable[[], Awaitable[dict[str, Any]]]]:
        return {"podgroups": self.pod_groups}

    async def pod_groups(self) -> dict[str, Any]:
        """The pod groups the plugin sees: members waiting at Permit, and members placed (bound or
        binding, as the snapshot has them) that no longer wait."""
        assert self.handle is not None, "Coscheduling needs the framework handle"
        get = getattr(self.handle, "waiting_pods_async", None)
        waiting_pods = await get() if get is not None else self.handle.waiting_pods()
        groups: dict[tuple[str, str], dict[str, Any]] = {}

        def entry(group: tuple[str, str], member: Pod) -> dict[str, Any]:
            e = groups.setdefault(group, {"namespace": group[0], "name": group[1], "minMember": None,
                                          "placed": [], "waiting": []})
            if e["minMember"] is None:
                need = self._min_member(member)
                e["minMember"] = None if isinstance(need, Status) else need
            return e

        waiting = set()
        for wp in waiting_pods:
            g = group_of(wp.pod)
            if g is not None:
                waiting.add(wp.pod.uid)
                entry(g, wp.pod)["waiting"].append(wp.pod.name)
        for pods in self.handle.snapshot().pods:
            for p in pods:
                g = group_of(p)
                if g is not None and p.uid not in waiting:
                    entry(g, p)["placed"].append(p.name)
        out = []
        for _, e in sorted(groups.items()):
            e["placed"].sort()
            e["waiting"].sort()
            out.append(e)
        return {"groups": out}

    # ---- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A rejected group can only complete when a new member arrives.
        return [ClusterEventWithHint(ClusterEvent("UnscheduledPod", ActionType.Add))]
