"""The console's state: who is looking, what it keeps while they look, and the one-second tick.

Nothing is recorded while nobody looks. "Looking" is a live stream (``/ui/api/stream``) connected, or a
console API request in the last :data:`LINGER` seconds (so a page opened, then a workload applied, has
its attempts). While someone looks, each scheduling attempt's Filter verdicts and best scores are kept
(:mod:`.attempts`), its spans are traced and kept (:mod:`.spans`), and while a stream is connected a
sample of the counters is taken every :data:`TICK` seconds into :data:`HISTORY` samples and sent to
each stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any

import numpy as np

from .attempts import Attempt, AttemptLog, filter_groups, top_scores
from .spans import SpanRing, WatchSampler

__all__ = ["HISTORY", "LINGER", "MAX_STREAMS", "TICK", "Console"]

log = logging.getLogger("outrigger.console")

#: Seconds between two samples of the counters while a stream is connected.
TICK = 1.0
#: Samples kept (10 minutes at one a second).
HISTORY = 600
#: Seconds attempts are still recorded after the last console request (with no stream connected).
LINGER = 300.0
#: Live streams served at once (more are answered 503).
MAX_STREAMS = 32
#: Samples queued for one stream before it is dropped as too slow.
STREAM_BACKLOG = 30
#: Samples whose attempts the latency percentiles cover (a minute).
LATENCY_WINDOW = 60
#: The most recent attempts the percentiles are computed over at most (a tick stays a few milliseconds).
LATENCY_ATTEMPTS = 20_000


class Console:
    """One framework's console (see the module docstring). ``scheduler``, ``metrics``
    (:class:`~framework.observe.metrics.SchedulerMetrics`) and ``remote`` (the remote plugins, or None)
    are read when asked, never on the scheduling path."""

    def __init__(self, scheduler: Any, metrics: Any = None, remote: Any = None, *, linger: float = LINGER) -> None:
        self.scheduler = scheduler
        self.metrics = metrics
        self.remote = remote
        self.linger = linger
        self.attempts = AttemptLog()
        self.spans = SpanRing(self.watching)
        self.sampler = WatchSampler(self.watching)
        self.history: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY)
        self.streams: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._seen = -linger - 1.0
        self._ticker: asyncio.Task[None] | None = None
        self._last: dict[str, Any] | None = None
        self._marks: collections.deque[int] = collections.deque(maxlen=LATENCY_WINDOW)  # attempts seen per sample

    # ---- who looks -------------------------------------------------------------------------------

    def watching(self) -> bool:
        return bool(self.streams) or time.monotonic() - self._seen < self.linger

    def touch(self) -> None:
        """A console request: record attempts for the next :data:`LINGER` seconds."""
        self._seen = time.monotonic()

    # ---- what the scheduling cycle tells (instrument.py) ------------------------------------------

    def begin(self, pod: str, profile: str, attempt: int) -> Attempt | None:
        """A new attempt to fill in, or None while nobody looks."""
        return Attempt(pod, profile, attempt) if self.watching() else None

    @staticmethod
    def filtered(rec: Attempt, nodes: int, feasible: int, statuses: dict[str, Any]) -> None:
        rec.nodes = nodes
        rec.feasible = feasible
        rec.filter = filter_groups(statuses)

    @staticmethod
    def scored(rec: Attempt, batch: Any, outcome: Any) -> None:
        rec.scores = top_scores(batch.snapshot.table.names, batch.rows, outcome)
        rec.scored = int(outcome.totals.shape[0])

    def finish(self, rec: Attempt, result: str, status: Any, seconds: float, selected: str, trace_id: int) -> None:
        rec.result = result
        rec.duration = seconds
        rec.selected = selected
        if status is not None:
            rec.status = {"code": status.code.name, "plugin": status.plugin or None, "reasons": list(status.reasons)}
        rec.trace_id = f"{trace_id:032x}" if trace_id else ""
        self.attempts.add(rec)

    # ---- the tick --------------------------------------------------------------------------------

    def sample(self) -> dict[str, Any]:
        """The counters now, with rates since the previous sample and attempt latency percentiles over the
    attempts of the last :data:`LATENCY_WINDOW` samples."""
        s = self.scheduler
        stats = s.stats
        now = time.time()
        seconds = stats.attempt_seconds
        q = s.pending_count()
        cur: dict[str, Any] = {
            "t": now, "attempts": stats.attempts, "scheduled": stats.scheduled, "bound": stats.bound,
            "unschedulable": stats.unschedulable, "errors": stats.errors,
            "queues": {"active": q.get("active", 0), "backoff": q.get("backoff", 0),
                       "unschedulable": q.get("unschedulable", 0), "gated": q.get("gated", 0)},
        }
        prev = self._last
        if self._marks and self._marks[0] > len(seconds):  # the list was reset
            self._marks.clear()
        start = max(self._marks[0] if self._marks else 0, len(seconds) - LATENCY_ATTEMPTS)
        self._marks.append(len(seconds))
        window = seconds[start:]
        cur["p50Ms"] = round(float(np.percentile(window, 50)) * 1000, 3) if window else None
        cur["p99Ms"] = round(float(np.percentile(window, 99)) * 1000, 3) if window else None
        dt = now - prev["t"] if prev is not None else 0.0
        cur["podsPerSec"] = round((stats.scheduled - prev["scheduled"]) / dt, 2) if prev is not None and dt > 0 else 0.0
        cur["attemptsPerSec"] = (round((stats.attempts - prev["attempts"]) / dt, 2)
                                 if prev is not None and dt > 0 else 0.0)
        self._last = cur
        return {k: v for k, v in cur.items() if not k.startswith("_")}

    async def _tick(self) -> None:
        while self.streams:
            point = self.sample()
            self.history.append(point)
            for q in list(self.streams):
                if q.qsize() >= STREAM_BACKLOG:
                    self.streams.discard(q)  # too slow a reader: its stream ends
                    q.put_nowait(None)
                else:
                    q.put_nowait(point)
            await asyncio.sleep(TICK)

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        """A stream's queue of samples (None: the stream ends); starts the tick with the first one."""
        if len(self.streams) >= MAX_STREAMS:
            raise OverflowError(f"{MAX_STREAMS} console streams are open already")
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.streams.add(q)
        if self._ticker is None or self._ticker.done():
            self._last = None
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return q

    def unsubscribe(self, q: asyncio.Queue[dict[str, Any] | None]) -> None:
        self.streams.discard(q)
        self.touch()  # attempts of the last minutes stay recorded for a page reloaded

    async def close(self) -> None:
        for q in list(self.streams):
            q.put_nowait(None)
        self.streams.clear()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
