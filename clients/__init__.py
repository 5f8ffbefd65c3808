"""Clients of the framework's Scheduler API.

- :class:`SchedulerClient` (blocking) and :class:`AsyncSchedulerClient` (asyncio): apply and delete
  pods and nodes, get and list them, list pods waiting in Permit, explain a placement, watch events
  with resume across broken streams and framework restarts.
- :mod:`clients.types`: the frozen dataclasses they answer with.
- :class:`ClientError`: the one exception, with a message meant for users (``code`` is the gRPC code).
"""

from ._common import ClientError
from .aio import AsyncEventStream, AsyncSchedulerClient
from .client import EventStream, SchedulerClient
from .types import (
    Applied,
    DebugScores,
    Event,
    EventType,
    Explanation,
    NodeScores,
    NodeSummary,
    NodeVerdict,
    ObjectRef,
    PluginScore,
    PodState,
    ReservationState,
    Status,
    TraceSpan,
    WaitingPod,
    WatchCursor,
)

__all__ = [
    "Applied",
    "AsyncEventStream",
    "AsyncSchedulerClient",
    "ClientError",
    "DebugScores",
    "Event",
    "EventStream",
    "EventType",
    "Explanation",
    "NodeScores",
    "NodeSummary",
    "NodeVerdict",
    "ObjectRef",
    "PluginScore",
    "PodState",
    "ReservationState",
    "SchedulerClient",
    "Status",
    "TraceSpan",
    "WaitingPod",
    "WatchCursor",
]
