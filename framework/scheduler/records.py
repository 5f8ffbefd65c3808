"""What the scheduler tells about pods and objects: the phases of a :class:`PodRecord`, the
:class:`Event` types, what an apply answers (:class:`ApplyResult`, :class:`ApplyError`) and the
:class:`CycleStats` the demo and benchmarks read."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from pluginhost.errors import OutriggerError
from pluginhost.model import Pod
from pluginhost.status import Status

__all__ = [
    "BINDING",
    "BOUND",
    "EV_APPLIED",
    "EV_BOUND",
    "EV_DELETED",
    "EV_ERROR",
    "EV_NOMINATED",
    "EV_PREEMPTED",
    "EV_UNSCHEDULABLE",
    "PENDING",
    "UNSCHEDULABLE_PHASE",
    "WAITING",
    "ApplyError",
    "ApplyResult",
    "CycleStats",
    "Event",
    "PodRecord",
]

PENDING = "Pending"
UNSCHEDULABLE_PHASE = "Unschedulable"
WAITING = "Waiting"
BINDING = "Binding"
BOUND = "Bound"

EV_BOUND = "Bound"
EV_UNSCHEDULABLE = "Unschedulable"
EV_PREEMPTED = "Preempted"
EV_APPLIED = "Applied"
EV_DELETED = "Deleted"
EV_ERROR = "Error"
EV_NOMINATED = "Nominated"


class ApplyError(OutriggerError, ValueError):
    """An apply or delete request that was refused as a whole; nothing was changed."""


@dataclass(slots=True)
class PodRecord:
    """What the scheduler knows about a pod, as the API reports it."""

    pod: Pod
    phase: str = PENDING
    last_status: Status | None = None
    attempts: int = 0
    profile: str = ""
    #: The variant of its profile its last scheduling cycle ran (framework.canary: ``stable`` or
    #: ``canary``; empty when the profile has no canary).
    variant: str = ""

    @property
    def nominated_node(self) -> str:
        return self.pod.nominated_node_name


@dataclass(frozen=True, slots=True)
class Event:
    sequence: int
    type: str
    kind: str
    namespace: str
    name: str
    uid: str
    node_name: str = ""
    status: Status | None = None
    timestamp: float = 0.0
    attempts: int = 0


@dataclass(slots=True)
class ApplyResult:
    kind: str
    namespace: str
    name: str
    uid: str
    action: str  # created | configured | unchanged


@dataclass(slots=True)
class CycleStats:
    """Counters the demo and benchmarks read."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bound: int = 0
    attempt_seconds: list[float] = field(default_factory=list)
    #: PodGroup cycles by (result, profile): kube-scheduler's scheduler_podgroup_schedule_attempts_total
    #: (``scheduled``, ``unschedulable``, ``waiting_on_preemption``, ``error``).
    podgroup_attempts: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    #: Scheduling cycles of profiles with a canary, by (plugin, variant, result): ``scheduled``,
    #: ``unschedulable`` or ``error`` (outrigger_canary_pods_total).
    canary: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
