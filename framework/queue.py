"""The scheduling queue: activeQ, backoffQ and the unschedulable pool, as in kube-scheduler.

- **activeQ** is a heap ordered by the profile's QueueSort plugin; ``pop`` waits on it.
- **backoffQ** holds pods that failed and wait out an exponential backoff
  (``initial * 2**(attempts-1)``, capped at ``max``); they move to activeQ when it expires. With
  ``pop_from_backoff`` (kube-scheduler's SchedulerPopFromBackoffQ, on by default) a pod a plugin
  rejected is taken from backoffQ early whenever activeQ is empty: the scheduler would otherwise sit
  idle while it waits. Pods backing off after an error wait their backoff out.
- **unschedulable** holds pods rejected by plugins, and pods gated by PreEnqueue. A cluster event
  moves a rejected pod back when one of the plugins that rejected it registered that event (or
  when no plugin is on record, on any event); pods left there longer than
  ``max_unschedulable_seconds`` are flushed back too.
- **activate** moves pods to activeQ at once, out of the unschedulable pool or backoffQ, when a plugin
  asks (kube-scheduler's ``Activate``, fed by a cycle's PodsToActivate); a pod in flight then goes to
  activeQ if its attempt fails.

A pod is always in exactly one place: one of the three queues, or "in flight" (popped and being
scheduled) until :meth:`done`/:meth:`requeue` returns it. That is what lets the scheduler promise
that a pod is never lost.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import ClusterEvent, ClusterEventWithHint, QueuedPodInfo, QueueingHint
from pluginhost.status import Status

__all__ = ["ACTIVE", "BACKOFF", "GATED", "IN_FLIGHT", "UNSCHEDULABLE", "QueueStats", "SchedulingQueue"]

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in-flight"
# The in-flight events log drops what no pod in flight can still read once it holds this many.
_LOG_TRIM = 4096

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
KeyFn = Callable[[QueuedPodInfo], Any]
PreEnqueueFn = Callable[[Pod], Awaitable[Status]]
EventsFn = Callable[[str], list[ClusterEventWithHint]]


class _Entry:
    """A heap entry: ordered by the QueueSort key when one exists, else by ``less``."""

    __slots__ = ("info", "key", "less", "seq", "valid")

    def __init__(self, info: QueuedPodInfo, key: Any, seq: int, less: Less | None) -> None:
        self.info = info
        self.key = key
        self.seq = seq
        self.less = less
        self.valid = True

    def __lt__(self, other: _Entry) -> bool:
        if self.less is None:
            return bool((self.key, self.seq) < (other.key, other.seq))
        if self.less(self.info, other.info):
            return True
        if self.less(other.info, self.info):
            return False
        return self.seq < other.seq


@dataclass(slots=True)
class QueueStats:
    active: int
    backoff: int
    unschedulable: int
    gated: int
    in_flight: int


class SchedulingQueue:
    """Pods waiting to be scheduled. All methods run on the framework's event loop."""

    def __init__(
        self,
        less: Less,
        sort_key: KeyFn | None = None,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_seconds: float = 300.0,
        pre_enqueue: PreEnqueueFn | None = None,
        plugin_events: EventsFn | None = None,
        clock: Callable[[], float] = time.monotonic,
        pop_from_backoff: bool = False,
    ) -> None:
        self._less = less
        self._sort_key = sort_key
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._pre_enqueue = pre_enqueue
        self._plugin_events = plugin_events
        self._clock = clock
        self._seq = itertools.count()
        self._active: list[_Entry] = []
        # backoffQ, split as kube-scheduler splits it: pods a plugin rejected (which pop() may take
        # early when activeQ is empty) and pods that wait their backoff out (_waits_backoff_out).
        self._backoff: list[tuple[float, int, QueuedPodInfo]] = []
        self._error_backoff: list[tuple[float, int, QueuedPodInfo]] = []
        self.pop_from_backoff = pop_from_backoff
        self._where: dict[str, str] = {}  # uid -> ACTIVE/BACKOFF/UNSCHEDULABLE/GATED/IN_FLIGHT
        self._entries: dict[str, _Entry] = {}  # uid -> live activeQ entry
        self._infos: dict[str, QueuedPodInfo] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._wakeup = asyncio.Event()
        self._closed = False
        # Events seen while a pod was in flight: a pod that fails after a relevant event goes to
        # backoff instead of waiting in the unschedulable pool for an event that already happened.
        # One log for every pod in flight, each pod knowing where it joined (kube-scheduler's
        # inFlightEvents list): an event costs one append however many binding cycles are in flight.
        self._events_log: list[tuple[ClusterEvent, str]] = []  # (event, the uid it must not move)
        self._log_base = 0  # the position of _events_log[0] since the queue began
        self._in_flight_since: dict[str, int] = {}  # uid -> the log position when it was popped
        # Pods activated while in flight: activeQ when their attempt fails (kube-scheduler's ForceActivate).
        self._force_active: set[str] = set()
        # uid -> the sequence of its live backoffQ entry; an entry left behind by activate() is skipped.
        self._backoff_seq: dict[str, int] = {}

    # ---- adding --------------------------------------------------------------------------------

    async def add(self, pod: Pod, profile: str = "") -> str:
        """A new pending pod: runs PreEnqueue and queues it. Returns where it went."""
        info = QueuedPodInfo(pod=pod, timestamp=self._clock(), profile=profile)
        return await self._enqueue_new(info)

    async def update(self, pod: Pod) -> str | None:
        """A pending pod changed (e.g. its scheduling gates were removed)."""
        info = self._infos.get(pod.uid)
        if info is None:
            return None
        info.pod = pod
        where = self._where[pod.uid]
        if where in (GATED, UNSCHEDULABLE):
            self._unschedulable.pop(pod.uid, None)
            return await self._enqueue_new(info, keep_attempts=True)
        if where == ACTIVE:
            self._push_active(info)  # re-key: the sort key may depend on the pod
        return where

    async def _enqueue_new(self, info: QueuedPodInfo, keep_attempts: bool = False) -> str:
        pod = info.pod
        if self._pre_enqueue is not None:
            status = await self._pre_enqueue(pod)
            if not status.ok:
                info.gated = True
                info.last_status = status
                info.pending_plugins = {status.plugin} if status.plugin else set()
                self._infos[pod.uid] = info
                self._unschedulable[pod.uid] = info
                self._where[pod.uid] = GATED
                return GATED
        info.gated = False
        info.pending_plugins = set()
        self._infos[pod.uid] = info
        if keep_attempts and info.attempts and self._backoff_remaining(info) > 0:
            self._push_backoff(info)
            return BACKOFF
        info.timestamp = self._clock()
        self._push_active(info)
        return ACTIVE

    def _push_active(self, info: QueuedPodInfo) -> None:
        uid = info.pod.uid
        old = self._entries.get(uid)
        if old is not None:
            old.valid = False
        key = self._sort_key(info) if self._sort_key is not None else None
        entry = _Entry(info, key, next(self._seq), None if key is not None else self._less)
        self._entries[uid] = entry
        self._where[uid] = ACTIVE
        heapq.heappush(self._active, entry)
        self._wakeup.set()

    def _push_backoff(self, info: QueuedPodInfo) -> None:
        uid = info.pod.uid
        self._where[uid] = BACKOFF
        seq = next(self._seq)
        self._backoff_seq[uid] = seq
        heap = self._error_backoff if self._waits_backoff_out(info) else self._backoff
        heapq.heappush(heap, (self._backoff_expiry(info), seq, info))
        self._wakeup.set()

    def _waits_backoff_out(self, info: QueuedPodInfo) -> bool:
        """Whether ``info`` is never taken from backoffQ early: it backs off after an error (not a
        plugin's rejection)."""
        return info.last_status is not None and not info.last_status.ok and not info.last_status.is_rejected

    # ---- popping -------------------------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule (waits for one); None once the queue is closed."""
        while True:
            if self._closed:
                return None
            self._flush_backoff()
            while self._active:
                entry = heapq.heappop(self._active)
                if not entry.valid:
                    continue
                info = entry.info
                uid = info.pod.uid
                del self._entries[uid]
                self._where[uid] = IN_FLIGHT
                info.attempts += 1
                if info.initial_attempt_timestamp is None:
                    info.initial_attempt_timestamp = self._clock()
                self._in_flight_since[uid] = self._log_base + len(self._events_log)
                return info
            if self.pop_from_backoff and self._pop_backoff_early():
                continue
            self._wakeup.clear()
            timeout = None
            heads = [heap[0][0] for heap in (self._backoff, self._error_backoff) if heap]
            if heads:
                timeout = max(0.0, min(heads) - self._clock())
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass

    def peek(self, k: int) -> list[QueuedPodInfo]:
        """The next ``k`` pods :meth:`pop` would return if nothing changed (active pods only), without
        taking them: the heap's smallest entries, found by walking it from the root (a heap's
        children are never smaller than their parent), so the cost follows ``k``, not the queue."""
        heap = self._active
        out: list[QueuedPodInfo] = []
        if not heap or k <= 0:
            return out
        frontier: list[tuple[_Entry, int]] = [(heap[0], 0)]
        budget = 4 * k + 64  # stale entries (lazily deleted) are walked through, within bounds
        while frontier and len(out) < k and budget > 0:
            budget -= 1
            entry, i = heapq.heappop(frontier)
            if entry.valid:
                out.append(entry.info)
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap):
                    heapq.heappush(frontier, (heap[child], child))
        return out

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def _flush_backoff(self) -> None:
        now = self._clock()
        for heap in (self._backoff, self._error_backoff):
            while heap and heap[0][0] <= now:
                self._leave_backoff(heapq.heappop(heap))

    def _leave_backoff(self, item: tuple[float, int, QueuedPodInfo]) -> bool:
        """Move a backoffQ entry to activeQ; False for an entry left behind (the pod moved or went)."""
        _, seq, info = item
        uid = info.pod.uid
        if self._backoff_seq.get(uid) != seq:
            return False
        del self._backoff_seq[uid]
        if self._where.get(uid) != BACKOFF or self._infos.get(uid) is not info:
            return False
        self._push_active(info)
        return True

    def _pop_backoff_early(self) -> bool:
        """activeQ is empty: move the rejected pod whose backoff ends first to it (kube-scheduler's
        popBackoff). False when there is none."""
        while self._backoff:
            if self._leave_backoff(heapq.heappop(self._backoff)):
                return True
        return False

    def flush_unschedulable_leftover(self) -> int:
        """Move pods that waited longer than ``max_unschedulable_seconds`` (kube-scheduler's
        periodic flush). Returns how many moved."""
        now = self._clock()
        stale = [
            info
            for info in self._unschedulable.values()
            if not info.gated and now - info.timestamp >= self.max_unschedulable_seconds
        ]
        for info in stale:
            self._move(info)
        return len(stale)

    # ---- after a cycle -------------------------------------------------------------------------

    def _leave_flight(self, uid: str) -> list[ClusterEvent]:
        """Stop tracking ``uid`` in flight; the events it saw meanwhile (those not excluded for it)."""
        since = self._in_flight_since.pop(uid, None)
        events = [] if since is None else [ev for ev, ex in self._events_log[since - self._log_base :] if ex != uid]
        if not self._in_flight_since:
            self._log_base += len(self._events_log)
            self._events_log.clear()
        elif len(self._events_log) > _LOG_TRIM:
            oldest = min(self._in_flight_since.values())
            del self._events_log[: oldest - self._log_base]
            self._log_base = oldest
        return events

    def done(self, uid: str) -> None:
        """The in-flight pod left the queue for good (bound, or deleted)."""
        self._leave_flight(uid)
        self._force_active.discard(uid)
        if self._where.get(uid) == IN_FLIGHT:
            del self._where[uid]
            self._infos.pop(uid, None)

    def requeue(self, info: QueuedPodInfo, status: Status, rejectors: Iterable[str] = ()) -> str:
        """Return a pod whose attempt failed, with its reason.

        Errors go to backoff; rejections go to the unschedulable pool unless an event that one of
        the rejecting plugins cares about happened while the pod was in flight.
        """
        uid = info.pod.uid
        events = self._leave_flight(uid)
        if self._where.get(uid) != IN_FLIGHT:
            return ""  # deleted while in flight
        info.last_status = status
        info.timestamp = self._clock()
        info.unschedulable_plugins = set(rejectors)
        forced = uid in self._force_active
        self._force_active.discard(uid)
        if not status.is_rejected:
            self._push_backoff(info)
            return BACKOFF
        if forced:
            self._push_active(info)
            return ACTIVE
        if any(self._worth_moving(info, ev, None, None) for ev in events):
            self._push_backoff(info)
            return BACKOFF
        self._where[uid] = UNSCHEDULABLE
        self._unschedulable[uid] = info
        return UNSCHEDULABLE

    def delete(self, uid: str) -> bool:
        """Forget a pod (it was deleted). True if it was queued or in flight."""
        where = self._where.pop(uid, None)
        if where is None:
            return False
        self._infos.pop(uid, None)
        self._unschedulable.pop(uid, None)
        self._backoff_seq.pop(uid, None)
        self._force_active.discard(uid)
        self._leave_flight(uid)
        entry = self._entries.pop(uid, None)
        if entry is not None:
            entry.valid = False
        return True

    # ---- cluster events ------------------------------------------------------------------------

    def on_event(
        self, event: ClusterEvent, old: Any = None, new: Any = None, exclude: str = ""
    ) -> list[QueuedPodInfo]:
        """A cluster event: move the unschedulable pods it may help. Returns the pods moved.

        ``exclude`` is the uid of a pod the event must not move: the pod whose own failure caused it."""
        if self._in_flight_since:
            self._events_log.append((event, exclude))
        moved: list[QueuedPodInfo] = []
        for info in list(self._unschedulable.values()):
            if info.gated or info.pod.uid == exclude:
                continue
            if self._worth_moving(info, event, old, new):
                self._move(info)
                moved.append(info)
        return moved

    def _worth_moving(self, info: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if not info.unschedulable_plugins or self._plugin_events is None:
            return True
        for plugin in info.unschedulable_plugins:
            for reg in self._plugin_events(plugin):
                if not reg.event.matches(event):
                    continue
                if reg.hint is None or reg.hint(info.pod, old, new) is QueueingHint.Queue:
                    return True
        return False

    def activate(self, uids: Iterable[str]) -> list[QueuedPodInfo]:
        """Move these pods to activeQ now, whatever their backoff (kube-scheduler's ``Activate``, for
        the pods a plugin put in a cycle's PodsToActivate). Returns the pods moved.

        A pod in the unschedulable pool or backoffQ moves; a pod in flight is marked, and goes to activeQ
        if its attempt is rejected; a pod gated by PreEnqueue stays gated (PreEnqueue decides), and a
        pod the queue does not hold is ignored."""
        moved: list[QueuedPodInfo] = []
        for uid in uids:
            where, info = self._where.get(uid), self._infos.get(uid)
            if info is None:
                continue
            if where == IN_FLIGHT:
                self._force_active.add(uid)
            elif where in (UNSCHEDULABLE, BACKOFF):
                self._unschedulable.pop(uid, None)
                self._backoff_seq.pop(uid, None)  # its backoffQ entry is left behind, and skipped
                self._push_active(info)
                moved.append(info)
        return moved

    def move_profiles(self, profiles: Collection[str]) -> list[QueuedPodInfo]:
        """Move every pod of these profiles (by ``schedulerName``) out of the unschedulable pool, gated
        pods excepted: their profile's configuration changed. Returns the pods moved."""
        moved = [i for i in self._unschedulable.values() if not i.gated and i.pod.scheduler_name in profiles]
        for info in moved:
            self._move(info)
        return moved

    async def recheck_gates(self, profiles: Collection[str]) -> list[QueuedPodInfo]:
        """Run PreEnqueue again for the gated pods of these profiles (a gate whose plugin is gone is
        released). Returns the pods that left the gate."""
        released: list[QueuedPodInfo] = []
        for info in [i for i in self._unschedulable.values() if i.gated and i.pod.scheduler_name in profiles]:
            uid = info.pod.uid
            if self._where.get(uid) != GATED or self._infos.get(uid) is not info:
                continue  # deleted or updated while an earlier pod's PreEnqueue ran
            self._unschedulable.pop(uid, None)
            if await self._enqueue_new(info, keep_attempts=True) != GATED:
                released.append(info)
        return released

    def _move(self, info: QueuedPodInfo) -> None:
        uid = info.pod.uid
        self._unschedulable.pop(uid, None)
        if self._backoff_remaining(info) > 0:
            self._push_backoff(info)
        else:
            self._push_active(info)

    # ---- backoff -------------------------------------------------------------------------------

    def backoff_duration(self, attempts: int) -> float:
        """``initial * 2**(attempts-1)``, capped at ``max`` (kube-scheduler's calculateBackoffDuration)."""
        duration = self.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration > self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    def _backoff_expiry(self, info: QueuedPodInfo) -> float:
        return info.timestamp + self.backoff_duration(info.attempts)

    def _backoff_remaining(self, info: QueuedPodInfo) -> float:
        if info.attempts == 0:
            return 0.0
        return self._backoff_expiry(info) - self._clock()

    # ---- reading -------------------------------------------------------------------------------

    def where(self, uid: str) -> str | None:
        return self._where.get(uid)

    def info(self, uid: str) -> QueuedPodInfo | None:
        return self._infos.get(uid)

    def stats(self) -> QueueStats:
        counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
        for where in self._where.values():
            counts[where] += 1
        return QueueStats(
            counts[ACTIVE], counts[BACKOFF], counts[UNSCHEDULABLE], counts[GATED], counts[IN_FLIGHT]
        )

    def __len__(self) -> int:
        return len(self._where)

    def pending(self) -> list[QueuedPodInfo]:
        return list(self._infos.values())
