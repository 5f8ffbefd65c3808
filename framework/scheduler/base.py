"""What every part of the scheduler shares: :class:`SchedulerBase` declares the scheduler's state, keeps
its event log, and tells the queue of cluster events (custom resources' too) and of the pods plugins
ask to activate (:data:`PODS_TO_ACTIVATE_KEY`). The parts are mixed into
:class:`~framework.scheduler.scheduler.Scheduler` on top of it, as kube-scheduler's ``Scheduler`` methods
live in several files: :mod:`~framework.scheduler.store` (the objects), :mod:`~framework.scheduler.failure`
(failed attempts), :mod:`~framework.scheduler.binding` (binding cycles) and :mod:`~framework.scheduler.cycle`
(scheduling cycles)."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from pluginhost.model import Node, Pod, PodDisruptionBudget
from pluginhost.plugin import ActionType, ClusterEvent, ClusterEventWithHint, CycleState
from pluginhost.snapshot import Snapshot
from pluginhost.state import StateValue
from pluginhost.status import Status

from ..batching import OpportunisticBatch
from ..cache import Cache
from ..config import SchedulerConfig
from ..queue import SchedulingQueue
from ..reservations import Reservations, is_reserve_pod
from ..runtime import Framework
from ..waiting import WaitingPods
from .records import PENDING, CycleStats, Event, PodRecord
from .source import ClusterSource

__all__ = ["PODS_TO_ACTIVATE_KEY", "SchedulerBase"]

log = logging.getLogger("outrigger.scheduler")

#: The CycleState key under which plugins name pods to move to activeQ at the end of a successful
#: scheduling cycle (kube-scheduler's ``framework.PodsToActivateKey``; Coscheduling puts a gang's
#: siblings there): a :class:`~pluginhost.state.StateValue` holding a JSON list of ``namespace/name``
#: (what the Go adapter sends), or, from an in-process plugin, any collection of those keys.
PODS_TO_ACTIVATE_KEY = "kubernetes.io/pods-to-activate"


class SchedulerBase:
    """The state every part of the scheduler shares (set by ``Scheduler.__init__``), the event log,
    and the cluster events every part sends to the queue."""

    config: SchedulerConfig
    cache: Cache
    reservations: Reservations
    waiting_pods: WaitingPods
    #: How often expired reservations are looked for while the scheduler runs.
    reservation_check_seconds: float
    #: Where the cluster comes from and decisions go (the embedded store unless a source attaches).
    source: ClusterSource
    #: The snapshot of the scheduling cycle under way (the one the handle gives plugins).
    current_snapshot: Snapshot | None
    pods: dict[str, PodRecord]
    _uid_by_key: dict[str, str]
    nodes: dict[str, Node]
    #: PodDisruptionBudgets applied to the embedded store, by namespace/name.
    pdbs: dict[str, PodDisruptionBudget]
    cycle_states: dict[str, CycleState]
    #: The nominator: pending pods a preemption made room for, by uid -> node name.
    nominated: dict[str, str]
    stats: CycleStats
    profiles: dict[str, Framework]
    #: Each profile's opportunistic batch (none when the OpportunisticBatching gate is off).
    batches: dict[str, OpportunisticBatch]
    #: How many pods were popped to be scheduled (kube-scheduler's scheduling cycle count).
    popped: int
    queue: SchedulingQueue
    #: The cluster events each plugin registered (EnqueueExtensions), by plugin name.
    _plugin_events: dict[str, list[ClusterEventWithHint]]
    #: Told what each scheduling cycle decided (a ``CycleOutcome`` of :mod:`.cycle`); must not block.
    cycle_observers: list[Callable[[Any], None]]
    #: The shadow plugins' report (set by ``framework.remote.shadow.Shadows``; None: there are none).
    shadow_report: Callable[[], list[dict[str, Any]]] | None = None
    _cycle_ids: Iterator[int]
    _next_start: int
    _binding_tasks: set[asyncio.Task[None]]
    _events: collections.deque[Event]
    _seq: Iterator[int]
    _watchers: set[asyncio.Queue[Event]]

    # ---- events --------------------------------------------------------------------------------

    def _emit(self, type_: str, kind: str, obj: Pod | Node, *, node: str = "", status: Status | None = None,
              attempts: int = 0) -> Event:
        ns = obj.namespace if isinstance(obj, Pod) else ""
        if kind == "Pod" and isinstance(obj, Pod) and is_reserve_pod(obj):
            kind = "Reservation"  # a reservation's reserve pod: events name the reservation
        ev = Event(next(self._seq), type_, kind, ns, obj.name, obj.uid, node, status, time.time(), attempts)
        self._events.append(ev)
        for q in self._watchers:
            q.put_nowait(ev)
        return ev

    async def events(self, since: int = 0, replay: bool = True) -> AsyncIterator[Event]:
        """Events with a sequence above ``since`` (retained ones first when ``replay``), then live."""
        q: asyncio.Queue[Event] = asyncio.Queue()
        self._watchers.add(q)
        try:
            last = since
            if replay:
                for ev in list(self._events):
                    if ev.sequence > since:
                        last = ev.sequence
                        yield ev
            while True:
                ev = await q.get()
                if ev.sequence > last:
                    last = ev.sequence
                    yield ev
        finally:
            self._watchers.discard(q)

    def recent_events(self, since: int = 0) -> list[Event]:
        return [ev for ev in self._events if ev.sequence > since]

    @property
    def last_sequence(self) -> int:
        """The sequence number of the newest event (0 before the first): a list taken now is
        consistent with it, and a watch from it sees every later change."""
        return self._events[-1].sequence if self._events else 0

    # ---- what the queue is told ----------------------------------------------------------------

    def _cluster_event(self, event: ClusterEvent, old: Any, new: Any, exclude: str = "") -> None:
        for info in self.queue.on_event(event, old, new, exclude):
            rec = self.pods.get(info.pod.uid)
            if rec is not None:
                rec.phase = PENDING

    def custom_resources(self) -> list[str]:
        """The custom resources plugins registered events for, sorted: kube-scheduler's GVK strings
        (``plural.version.group``, e.g. ``podgroups.v1alpha1.scheduling.x-k8s.io``; at least two dots,
        which no built-in resource's name has). A live cluster's source watches each and reports its
        changes to :meth:`custom_resource_changed`, as kube-scheduler's dynamic informers do."""
        return sorted({reg.event.resource for regs in self._plugin_events.values() for reg in regs
                       if reg.event.resource.count(".") >= 2})

    def custom_resource_changed(self, resource: str, old: Any, new: Any) -> None:
        """An object of a custom resource was added (``old`` None), changed, or deleted (``new`` None):
        the queue moves the pods whose rejecting plugins registered that event."""
        action = ActionType.Add if old is None else ActionType.Delete if new is None else ActionType.Update
        self._cluster_event(ClusterEvent(resource, action), old, new)

    def _activate_pods(self, state: CycleState) -> None:
        """Move the pods plugins put under :data:`PODS_TO_ACTIVATE_KEY` to activeQ (kube-scheduler does
        at the end of a successful scheduling cycle), and clear the key."""
        value = state.get(PODS_TO_ACTIVATE_KEY)
        if value is None:
            return
        state.delete(PODS_TO_ACTIVATE_KEY)
        try:
            keys = value.as_json() if isinstance(value, StateValue) else value
            uids = [uid for key in keys if isinstance(key, str) and (uid := self._uid_by_key.get(key)) is not None]
        except (TypeError, ValueError) as exc:
            log.warning("cycle state %s is not a list of namespace/name (%s): no pod activated",
                        PODS_TO_ACTIVATE_KEY, exc)
            return
        for info in self.queue.activate(uids):
            rec = self.pods.get(info.pod.uid)
            if rec is not None:
                rec.phase = PENDING

    def _free_state(self, cycle_id: str) -> None:
        self.cycle_states.pop(cycle_id, None)
