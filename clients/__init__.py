"""Clients of the framework's Scheduler API.

- :class:`SchedulerClient` (blocking) and :class:`AsyncSchedulerClient` (asyncio): apply and delete
  pods and nodes, get and list them, list pods waiting in Permit, explain a placement, watch events
  with resume across broken streams and framework restarts.
- :mod:`clients.types`: the frozen dataclasses they answer with.
- :mod:`clients.selector`: kubectl's label selectors (``-l``), parsed and matched.
- :mod:`clients.printers` and :mod:`clients.describe`: kubectl's table, ``describe`` and age layouts
  (what the ``outrigger`` CLI prints).
- :class:`ClientError`: the one exception, with a message meant for users (``code`` is the gRPC code).
"""

from ._common import ClientError
from .aio import AsyncEventStream, AsyncObjectWatch, AsyncSchedulerClient
from .client import EventStream, ObjectWatch, SchedulerClient
from .selector import SelectorError, parse_selector
from .types import (
    Applied,
    DebugScores,
    Event,
    EventType,
    Explanation,
    NodeScores,
    NodeSummary,
    NodeVerdict,
    ObjectChange,
    ObjectRef,
    PluginScore,
    PodGroupSummary,
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
    "AsyncObjectWatch",
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
    "ObjectChange",
    "ObjectRef",
    "ObjectWatch",
    "PluginScore",
    "PodGroupSummary",
    "PodState",
    "ReservationState",
    "SchedulerClient",
    "SelectorError",
    "Status",
    "TraceSpan",
    "WaitingPod",
    "WatchCursor",
    "parse_selector",
]
