"""What a new configuration changes for the pods a scheduler holds (``Scheduler.reconfigure``, the live
configuration of :mod:`framework.liveconfig`): which profiles changed, and the queue that follows.

- a changed profile's pods in the unschedulable pool are moved to activeQ or backoffQ, as a cluster
  event that every plugin registered would move them: the plugins that rejected them may be gone, or
  judge otherwise now (kube-scheduler has no such event; moving them all is the simple choice that
  loses no pod);
- a changed profile's pods gated by PreEnqueue go through PreEnqueue again: a gate whose plugin was
  removed is released;
- a new profile's pending pods (recorded until now as for an unknown ``schedulerName``) are queued;
- a removed profile's queued pods leave the queue and are left alone, as a pod for an unknown
  ``schedulerName`` is (those in a binding cycle finish it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from pluginhost.status import Code, Status

from ..config import SchedulerConfig
from ..queue import ACTIVE, GATED, IN_FLIGHT
from ..runtime import Framework
from .base import SchedulerBase
from .records import PENDING

__all__ = ["Reconfigured", "Reconfiguring", "changed_profiles"]

log = logging.getLogger("outrigger.scheduler")


@dataclass
class Reconfigured:
    """What :meth:`Scheduler.reconfigure` replaced: the old Frameworks, the binding cycles that started
    under them (still running, or done), and the profiles that changed."""

    old: dict[str, Framework]
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    #: How long scheduling paused for the switch (seconds): from the end of the cycle under way to
    #: the queue having followed.
    pause: float = 0.0

    async def finished(self) -> None:
        """Wait until no binding cycle of the old configuration runs (each ends: Permit waits time out)."""
        if self.in_flight:
            await asyncio.gather(*self.in_flight, return_exceptions=True)


def changed_profiles(old: SchedulerConfig, new: SchedulerConfig, old_fwks: dict[str, Framework],
                     new_fwks: dict[str, Framework], plugins: Collection[str] = ()) -> set[str]:
    """The profiles in both ``old`` and ``new`` whose meaning changed (plugins, order, weights, args,
    percentageOfNodesToScore), or that run one of ``plugins`` (remote plugins whose host changed)."""
    out: set[str] = set()
    for prof in new.profiles:
        name = prof.scheduler_name
        before = old.profile(name)
        if before is None or name not in old_fwks or name not in new_fwks:
            continue
        global_pct = old.percentage_of_nodes_to_score != new.percentage_of_nodes_to_score
        if (before != prof or (global_pct and prof.percentage_of_nodes_to_score is None)
                or any(p in new_fwks[name].plugins for p in plugins)):
            out.add(name)
    return out


class Reconfiguring(SchedulerBase):
    """The queue's side of a new configuration (see the module docstring)."""

    async def requeue_reconfigured(self, changed: Collection[str], *, added: Collection[str] = (),
                                   removed: Collection[str] = ()) -> None:
        for info in self.queue.move_profiles(changed):
            self._pending(info.pod.uid)
        for info in await self.queue.recheck_gates(changed):
            self._pending(info.pod.uid)
        if added:
            await self._queue_new_profiles(added)
        if removed:
            self._leave_removed_profiles(removed)

    def _pending(self, uid: str) -> None:
        rec = self.pods.get(uid)
        if rec is not None:
            rec.phase = PENDING

    async def _queue_new_profiles(self, added: Collection[str]) -> None:
        recs = [r for r in self.pods.values() if not r.pod.node_name and r.pod.scheduler_name in added
                and self.queue.where(r.pod.uid) is None and self.cache.node_of(r.pod.uid) is None]
        for rec in recs:
            pod = rec.pod
            if pod.nominated_node_name:
                self.nominated[pod.uid] = pod.nominated_node_name
            where = await self.queue.add(pod, pod.scheduler_name)
            rec.last_status = None
            if where == GATED:
                info = self.queue.info(pod.uid)
                rec.last_status = info.last_status if info else None
            if where in (GATED, ACTIVE):
                rec.phase = PENDING
        if recs:
            log.info("new profile(s) %s: %d pending pod(s) queued", ", ".join(sorted(added)), len(recs))

    def _leave_removed_profiles(self, removed: Collection[str]) -> None:
        left = 0
        for info in self.queue.pending():
            pod = info.pod
            if pod.scheduler_name not in removed or self.queue.where(pod.uid) == IN_FLIGHT:
                continue
            self.queue.delete(pod.uid)
            self.nominated.pop(pod.uid, None)
            rec = self.pods.get(pod.uid)
            if rec is not None:
                rec.last_status = Status(Code.UnschedulableAndUnresolvable,
                                         (f"no profile for schedulerName {pod.scheduler_name!r}",))
            left += 1
        log.warning("profile(s) %s removed: %d pending pod(s) left alone, as for an unknown schedulerName",
                    ", ".join(sorted(removed)), left)
