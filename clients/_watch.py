"""What the blocking and the asyncio watches share: the resume point of an event stream, the
bookkeeping of a stream that breaks and reconnects, and kubectl's list-then-watch of pods or nodes.

A stream (:class:`WatchStream`) hands out events in order and remembers the last one
(:class:`WatchState`); when the connection breaks or the framework restarts it reopens the stream after
that event, so no event comes twice and none is missed. :class:`ObjectTracker` turns events into the
ADDED, MODIFIED and DELETED changes of the objects a list found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import grpc

from pluginhost import pb

from ._common import RESUMABLE, ClientError, rpc_error, unreachable
from .selector import Selector, parse_selector
from .types import Event, EventType, NodeSummary, ObjectChange, PodState, WatchCursor

__all__ = ["ObjectTracker", "ObjectWatchBase", "WatchState", "WatchStream"]


class WatchState:
    """The resume point of a watch and the request that continues from it."""

    def __init__(self, cursor: WatchCursor, types: Iterable[EventType | int], replay: bool,
                 objects: bool = False) -> None:
        self.cursor = cursor
        self.types: list[Any] = [int(EventType(t)) for t in types]
        self.replay = replay
        self.objects = objects

    @classmethod
    def start(cls, since: int, types: Iterable[EventType | int], replay: bool, resume: WatchCursor | None,
              objects: bool) -> WatchState:
        """A watch's first state: after ``resume`` (replaying what the framework retained after it), or
        after sequence ``since``."""
        return cls(resume or WatchCursor("", since), types, replay or resume is not None, objects)

    def request(self) -> Any:
        return pb.scheduler.WatchRequest(since_sequence=self.cursor.sequence, run_id=self.cursor.run_id,
                                         types=self.types, replay=self.replay, objects=self.objects)

    def accept(self, msg: Any) -> Event | None:
        """The event to hand out, or None for one already seen (or of a type this client does not know)."""
        if msg.run_id == self.cursor.run_id and msg.sequence <= self.cursor.sequence:
            return None
        # Whatever happens next, a reopened stream continues after this event: replay it all.
        self.replay = True
        self.cursor = WatchCursor(msg.run_id, msg.sequence)
        try:
            return Event.from_proto(msg)
        except ValueError:  # an event type newer than this client
            return None


class WatchStream:
    """The events of a watch, in order; ``cursor`` is where it stands; ``close()`` ends it.

    The blocking and the asyncio stream read, pause and wait for the framework their own way; this is
    the rest: the deadline (``timeout`` seconds on ``clock``), the open call, and what a broken stream
    means. ``reconnects`` counts the times it was reopened.
    """

    def __init__(self, stub: Any, address: str, state: WatchState, timeout: float | None, reconnect: bool,
                 reconnect_timeout: float, clock: Callable[[], float]) -> None:
        self._stub = stub
        self._address = address
        self._state = state
        self._clock = clock
        self._deadline = None if timeout is None else clock() + timeout
        self._reconnect = reconnect
        self._reconnect_timeout = reconnect_timeout
        self._call: Any = None
        self._closed = False
        self.reconnects = 0

    @property
    def cursor(self) -> WatchCursor:
        return self._state.cursor

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - self._clock()

    def _open(self) -> bool:
        """Open the stream if it is not open; False when the watch is closed or its time is up."""
        if self._closed:
            return False
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            self.close()
            return False
        if self._call is None:
            self._call = self._stub.Watch(self._state.request(), timeout=remaining)
        return True

    def _broken(self, err: grpc.StatusCode, exc: grpc.RpcError | None) -> bool:
        """The stream ended with ``err`` (``exc``, when it failed rather than ended): True to reopen it,
        False to end quietly (the watch was closed or its own time is up); :class:`ClientError` when it
        cannot be resumed."""
        self._call = None
        if self._closed or (err == grpc.StatusCode.DEADLINE_EXCEEDED and self._deadline is not None):
            return False
        if not self._reconnect or err not in RESUMABLE:
            self.close()
            raise rpc_error(exc, self._address, "Watch", None) if exc is not None else \
                ClientError(f"cannot reach the framework at {self._address}", err)
        return True

    @staticmethod
    def _pause(attempts: int) -> float:
        """How long to wait before reconnect attempt ``attempts`` (from 1; the first goes at once): the
        framework answers yet the stream breaks, so do not spin."""
        pause: float = min(0.05 * 2**attempts, 1.0)
        return pause

    def _ready_wait(self, budget: float) -> tuple[float, float | None]:
        """How long to wait for the framework to answer, out of ``budget`` and the watch's own time,
        and that time (None: no deadline)."""
        remaining = self._remaining()
        wait = budget if remaining is None else min(budget, remaining)
        return max(wait, 0.0), remaining

    def _not_ready(self, remaining: float | None, budget: float) -> None:
        """The framework did not answer in time: the loop ends the watch quietly when its own time is up,
        else :class:`ClientError`."""
        if remaining is not None and remaining <= budget:
            return
        self.close()
        raise unreachable(self._address) from None


Stream = TypeVar("Stream", bound=WatchStream)


class ObjectWatchBase(Generic[Stream]):
    """A list (``items``) and the changes after it, read from ``stream`` (kubectl's ``get -w``)."""

    def __init__(self, items: list[PodState | NodeSummary], tracker: ObjectTracker, stream: Stream) -> None:
        self.items = items
        self._tracker = tracker
        self._stream = stream
        tracker.start(items)

    def close(self) -> None:
        self._stream.close()


class ObjectTracker:
    """kubectl's list-then-watch: the pods (``kind`` "Pod") or nodes ("Node") a list found, kept up to
    date from a watch's events (asked with objects), each change as an :class:`ObjectChange`."""

    def __init__(self, kind: str, namespace: str = "", label_selector: str = "") -> None:
        if kind not in ("Pod", "Node"):
            raise ValueError(f"watch_objects watches Pod or Node, not {kind!r}")
        self.kind = kind
        self.namespace = namespace if kind == "Pod" else ""
        try:
            self.selector: Selector = parse_selector(label_selector)
        except ValueError as exc:
            raise ClientError(str(exc), grpc.StatusCode.INVALID_ARGUMENT) from None
        self.known: dict[str, PodState | NodeSummary] = {}

    def start(self, items: Iterable[PodState | NodeSummary]) -> None:
        self.known = {_key(o): o for o in items}

    def _matches(self, obj: PodState | NodeSummary) -> bool:
        if isinstance(obj, NodeSummary):
            return self.selector.matches(obj.labels)
        labels = obj.manifest.get("metadata", {}).get("labels") or {}
        return self.selector.matches(labels)

    def change(self, ev: Event) -> ObjectChange | None:
        """What ``ev`` changes among the tracked objects (None: nothing they show)."""
        if ev.object.kind != self.kind or (self.namespace and ev.object.namespace != self.namespace):
            return None
        key = ev.object.key
        now: PodState | NodeSummary | None = ev.pod if self.kind == "Pod" else ev.node
        old = self.known.get(key)
        if now is None or not self._matches(now):
            if old is None or (now is None and _uid(old) not in ("", ev.object.uid)):
                return None  # never shown, or an older incarnation's event
            del self.known[key]
            return ObjectChange("DELETED", old)
        self.known[key] = now
        return ObjectChange("ADDED" if old is None else "MODIFIED", now)


def _key(obj: PodState | NodeSummary) -> str:
    return obj.ref.key if isinstance(obj, PodState) else obj.name


def _uid(obj: PodState | NodeSummary) -> str:
    if isinstance(obj, PodState):
        return obj.ref.uid
    uid = obj.manifest.get("metadata", {}).get("uid", "")
    return uid if isinstance(uid, str) else ""
