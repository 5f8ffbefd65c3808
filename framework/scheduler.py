"""The scheduler: the cluster's objects, the queue, the cache, and the scheduling/binding cycles.

Scheduling cycles run one at a time (``run`` pops a pod, schedules it, and loops); each successful
cycle ends by starting the pod's binding cycle as its own task, so binding (Permit waits, PreBind,
Bind) overlaps with the next pods' scheduling. Every path out of a cycle either binds the pod or
returns it to the queue with the status that explains why, so a pod is never dropped.

Where the cluster comes from and where decisions go is the scheduler's :class:`ClusterSource`. The
default, :class:`EmbeddedSource`, makes the scheduler itself the source of truth for pods and nodes
(what an API server is to kube-scheduler): :meth:`Scheduler.apply` and :meth:`Scheduler.delete_pod`
change objects, :meth:`Scheduler.bind` sets ``nodeName``, and :meth:`Scheduler.events` streams what
happened to them. A live cluster's source (``framework.kube``) feeds the same cache and queue through
the ``observe_*`` methods (kube-scheduler's informer handlers) and takes the bindings, failures,
nominations and preemptions through the same interface; nothing above it knows which source runs.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import gc
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pluginhost.errors import OutriggerError
from pluginhost.manifest import ManifestObject
from pluginhost.model import (
    RESERVATION_NAMESPACE,
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Reservation,
)
from pluginhost.plugin import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Controller,
    CycleState,
    EnqueueExtensions,
    NodeBatch,
    Plugin,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
)
from pluginhost.snapshot import Snapshot, StorageObject, storage_kind
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view

from .cache import Cache
from .config import ProfileConfig, SchedulerConfig
from .disruption import embedded_status
from .outcomes import Diagnosis, num_feasible_nodes_to_find
from .plugins import Registry
from .queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue
from .reservations import EXPIRED, ReservationRecord, Reservations, is_reserve_pod
from .runtime import Framework
from .waiting import WaitingPodHandle, WaitingPods
from .whatif import hypothetical_nodes

__all__ = [
    "ApplyError",
    "ApplyResult",
    "ClusterSource",
    "CycleStats",
    "EmbeddedSource",
    "Event",
    "PodRecord",
    "Scheduler",
    "explain_pod",
    "fit_error_message",
    "tune_gc",
]

log = logging.getLogger("outrigger.scheduler")

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

NO_NODES_MSG = "no nodes available to schedule pods"
# CycleState key of the pod as the cycle's transformers made it look (absent: no PreFilter transformer).
POD_VIEW_KEY = "outrigger.io/pod-view"
IntArray = npt.NDArray[np.int64]
_ALL_EVENTS = [ClusterEventWithHint(ClusterEvent("*", ActionType.All))]


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


def tune_gc() -> None:
    """Collect garbage less often than Python's default (700 allocations): a scheduler holds hundreds
    of thousands of long-lived objects (pods, nodes, their manifests), and young-generation collections
    that walk them took a quarter of the scheduling time at 5000 nodes. Process-wide: called by the
    command line (serve, demo) and the benchmark, not by the library."""
    gc.set_threshold(10_000, 50, 100)


def fit_error_message(num_nodes: int, diagnosis: Diagnosis) -> str:
    """kube-scheduler's FitError text: "0/3 nodes are available: 1 Insufficient cpu, 2 ..."."""
    msg = f"0/{num_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        counts: collections.Counter[str] = collections.Counter()
        for status in diagnosis.node_to_status.statuses.values():
            counts.update(status.reasons)
        if diagnosis.absent_nodes:
            counts.update({reason: diagnosis.absent_nodes for reason in diagnosis.node_to_status.absent.reasons})
        if counts:
            msg += " " + ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items())) + "."
    if diagnosis.post_filter_msg:
        # Appended as it is: preemption's own message already ends its sentence.
        msg += f" {diagnosis.post_filter_msg}"
    return msg


class ClusterSource(Protocol):
    """Where the scheduler's decisions go: binding a pod, deleting a victim, and telling the cluster
    why a pod failed, where it is nominated, that it was scheduled or preempted. The embedded store
    and a live Kubernetes API server implement it; the scheduler, the runtime and plugins call only this."""

    #: Whether the Scheduler API may create and change objects (False when a real API server owns them).
    accepts_apply: bool

    async def bind(self, pod: Pod, node_name: str) -> Status:
        """Bind ``pod`` to ``node_name`` (what DefaultBinder asks for)."""
        ...

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        """Delete ``pod`` (a preemption victim, or a plugin's request)."""
        ...

    def already_bound(self, pod: Pod) -> bool:
        """True if ``pod`` is known to be bound already (by anyone): its failed attempt is not requeued."""
        ...

    def scheduled(self, pod: Pod, node_name: str) -> None:
        """``pod``'s binding cycle bound it to ``node_name``."""
        ...

    def failed(self, pod: Pod, status: Status) -> None:
        """An attempt for ``pod`` failed with ``status`` (its nomination, if any, is ``pod.nominated_node_name``)."""
        ...

    def nominated(self, pod: Pod, node_name: str) -> None:
        """``pod`` is nominated to ``node_name`` (``""``: its nomination is cleared)."""
        ...

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str) -> None:
        """``victim`` was preempted to make room for ``preemptor`` on ``node_name``."""
        ...

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        """The cluster's PodDisruptionBudgets, with the status preemption reads (``disruptionsAllowed``)."""
        ...

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """The labels of a Namespace as the cluster has them ({} for one it does not have); None when
        the source has no Namespace objects (the embedded store)."""
        ...


class EmbeddedSource:
    """The scheduler's own in-memory store (the default): objects come from :meth:`Scheduler.apply`,
    a binding sets ``nodeName`` at once, and what happened is told through :meth:`Scheduler.events`."""

    accepts_apply = True

    def __init__(self, scheduler: Scheduler) -> None:
        self._s = scheduler

    async def bind(self, pod: Pod, node_name: str) -> Status:
        return self._s.bind(pod, node_name)

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        if self._s.delete_pod(pod.namespace, pod.name, reason=reason) is None:
            return Status.failure(f"pod {pod.key} not found")
        return SUCCESS

    def already_bound(self, pod: Pod) -> bool:
        return False

    def scheduled(self, pod: Pod, node_name: str) -> None:
        pass  # Scheduler.bind recorded it

    def failed(self, pod: Pod, status: Status) -> None:
        pass

    def nominated(self, pod: Pod, node_name: str) -> None:
        pass

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str) -> None:
        pass

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        # No disruption controller keeps their status here: it is worked out from the store's pods.
        pods = [rec.pod for rec in self._s.pods.values()]
        return [embedded_status(pdb, pods) for pdb in self._s.pdbs.values()]

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        return None


class _Handle:
    """The framework handle given to plugins (kube-scheduler's ``framework.Handle``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._s = scheduler

    def snapshot(self) -> Snapshot:
        return self._s.current_snapshot or self._s.cache.snapshot()

    def waiting_pods(self) -> list[WaitingPodHandle]:
        return list(self._s.waiting_pods)

    def waiting_pod(self, uid: str) -> WaitingPodHandle | None:
        return self._s.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        wp = self._s.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    async def bind_pod(self, pod: Pod, node_name: str) -> Status:
        return await self._s.source.bind(pod, node_name)

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        return await self._s.source.delete_pod(pod, reason)

    def reservations(self) -> Reservations:
        return self._s.reservations

    def framework_for(self, pod: Pod) -> Framework | None:
        return self._s.profiles.get(pod.scheduler_name)

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        return self._s.source.pod_disruption_budgets()

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """A Namespace's labels from the cluster source (None: it has no Namespace objects)."""
        return self._s.source.namespace_labels_of(namespace)

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str) -> None:
        reason = Status(Code.Unschedulable, (f"preempted by {preemptor.key} on node {node_name}",))
        self._s._emit(EV_PREEMPTED, "Pod", victim, node=node_name, status=reason)
        self._s.source.preempted(victim, preemptor, node_name)


class Scheduler:
    """Owns the cluster objects and runs the scheduling and binding cycles."""

    def __init__(self, config: SchedulerConfig, registry: Registry, *, seed: int | None = None) -> None:
        self.config = config
        self.registry = registry
        self.cache = Cache()
        # A claim, volume, class or CSINode that changes may make pods the volume plugins rejected schedulable.
        self.cache.volumes.add_listener(self._volume_object_changed)
        self.reservations = Reservations(self.cache)
        self.reservations.on_release = self._reservation_released
        # How often expired reservations are looked for while the scheduler runs.
        self.reservation_check_seconds = 1.0
        self.waiting_pods = WaitingPods()
        self.handle = _Handle(self)
        #: Where the cluster comes from and decisions go (the embedded store unless a source attaches).
        self.source: ClusterSource = EmbeddedSource(self)
        self.current_snapshot: Snapshot | None = None
        self.pods: dict[str, PodRecord] = {}
        self._uid_by_key: dict[str, str] = {}
        self.nodes: dict[str, Node] = {}
        #: PodDisruptionBudgets applied to the embedded store, by namespace/name.
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.cycle_states: dict[str, CycleState] = {}
        # The nominator: pending pods a preemption made room for, by uid -> node name.
        self.nominated: dict[str, str] = {}
        self.stats = CycleStats()
        self._rng = random.Random(seed)
        self._cycle_ids = itertools.count(1)
        self._next_start = 0
        self._binding_tasks: set[asyncio.Task[None]] = set()
        self._events: collections.deque[Event] = collections.deque(maxlen=100_000)
        self._seq = itertools.count(1)
        self._watchers: set[asyncio.Queue[Event]] = set()
        self._idle = asyncio.Event()
        self.profiles: dict[str, Framework] = {
            p.scheduler_name: self._build_framework(p) for p in config.profiles
        }
        first = next(iter(self.profiles.values()))
        self._plugin_events = self._collect_events()
        sort_plugin = first.queue_sort_plugin
        # A plugin that overrides sort_key gives one key per enqueue instead of a less() per comparison.
        has_key = type(sort_plugin).sort_key is not QueueSortPlugin.sort_key
        self.queue = SchedulingQueue(
            first.less,
            sort_plugin.sort_key if has_key else None,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            pre_enqueue=self._pre_enqueue,
            plugin_events=lambda name: self._plugin_events.get(name, _ALL_EVENTS),
        )
        self._running = False
        self._controllers: list[Controller] = []

    # ---- construction --------------------------------------------------------------------------

    def _build_framework(self, profile: ProfileConfig) -> Framework:
        instances: dict[str, Plugin] = {}
        lists: dict[str, list[Plugin]] = {}
        for point, refs in profile.plugins.items():
            for ref in refs:
                if ref.name not in instances:
                    args = dict(profile.plugin_args.get(ref.name, {}))
                    where = profile.args_location(ref.name)  # a PluginArgsError names file, profile and plugin
                    instances[ref.name] = self.registry.build(ref.name, args, self.handle, where)
                lists.setdefault(point, []).append(instances[ref.name])
        return Framework(
            profile.scheduler_name,
            lists,
            profile.score_weights,
            percentage_of_nodes_to_score=(
                profile.percentage_of_nodes_to_score
                if profile.percentage_of_nodes_to_score is not None
                else self.config.percentage_of_nodes_to_score
            ),
            waiting_pods=self.waiting_pods,
            handle=self.handle,
            rng=self._rng,
        )

    def _collect_events(self) -> dict[str, list[ClusterEventWithHint]]:
        out: dict[str, list[ClusterEventWithHint]] = {}
        for fwk in self.profiles.values():
            for name, plugin in fwk.plugins.items():
                if isinstance(plugin, EnqueueExtensions):
                    out[name] = plugin.events_to_register()
        return out

    async def _pre_enqueue(self, pod: Pod) -> Status:
        fwk = self.profiles.get(pod.scheduler_name)
        return SUCCESS if fwk is None else await fwk.run_pre_enqueue(pod)

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

    # ---- objects -------------------------------------------------------------------------------

    async def apply(self, objects: Iterable[ManifestObject], *, dry_run: bool = False) -> list[ApplyResult]:
        """Create or update pods, nodes, reservations, PodDisruptionBudgets and the volume plugins' objects
        (claims, volumes, classes, CSINodes: right after nodes, so pods of the same request find them).
        Checked as a whole first: one bad object changes nothing. Reservations are applied after nodes
        and pods, PDBs last."""
        if not self.source.accepts_apply:
            raise ApplyError(
                "this framework schedules a Kubernetes cluster: create and change pods and nodes through its "
                "API server (kubectl apply)"
            )
        everything = list(objects)
        reservations = [o for o in everything if isinstance(o, Reservation)]
        self._check_reservations(reservations)
        pdbs = [o for o in everything if isinstance(o, PodDisruptionBudget)]
        self._check_pdbs(pdbs)
        storage = [o for o in everything if isinstance(o, StorageObject)]
        self._check_storage(storage)
        plain: list[Pod | Node] = [o for o in everything if isinstance(o, Pod | Node)]
        self._check_apply(plain)
        results: list[ApplyResult] = []
        for obj in plain:
            if isinstance(obj, Node):
                action = self._check_node_action(obj)
                if not dry_run:
                    self._apply_node(obj)
                results.append(ApplyResult("Node", "", obj.name, obj.uid, action))
        for item in storage:
            action = self.cache.volumes.apply(item, dry_run=dry_run)
            namespace = item.namespace if isinstance(item, PersistentVolumeClaim) else ""
            results.append(ApplyResult(storage_kind(item), namespace, item.name, item.uid, action))
        for obj in plain:
            if isinstance(obj, Pod):
                uid = self._uid_by_key.get(obj.key)
                action = "created" if uid is None else "configured"
                if uid is not None:
                    obj.uid = uid
                    old = self.pods[uid].pod
                    if old.node_name and not obj.node_name:
                        obj = dataclasses.replace(obj, node_name=old.node_name)  # the binding stays
                    if obj.raw and obj.raw == old.raw:
                        results.append(ApplyResult("Pod", obj.namespace, obj.name, obj.uid, "unchanged"))
                        continue
                if not dry_run:
                    await self._apply_pod(obj)
                results.append(ApplyResult("Pod", obj.namespace, obj.name, obj.uid, action))
        for res in reservations:
            action = "configured" if res.name in self.reservations.records else "created"
            if not dry_run:
                await self._apply_reservation(res)
            results.append(ApplyResult("Reservation", "", res.name, res.uid, action))
        for pdb in pdbs:
            results.append(self._apply_pdb(pdb, dry_run))
        return results

    @staticmethod
    def _check_storage(objects: list[StorageObject]) -> None:
        seen: set[str] = set()
        for obj in objects:
            ident = f"{storage_kind(obj)} {obj.key}"
            if ident in seen:
                raise ApplyError(f"{ident} appears twice in one request")
            seen.add(ident)

    def delete_storage(self, kind: str, namespace: str, name: str) -> StorageObject | None:
        """Remove a claim, volume, class or CSINode from the embedded store (None when there is none);
        pods the volume plugins rejected may be tried again."""
        return self.cache.volumes.remove(kind, f"{namespace}/{name}" if kind == "PersistentVolumeClaim" else name)

    def _check_pdbs(self, pdbs: list[PodDisruptionBudget]) -> None:
        seen: set[str] = set()
        for pdb in pdbs:
            if pdb.key in seen:
                raise ApplyError(f"PodDisruptionBudget {pdb.key} appears twice in one request")
            seen.add(pdb.key)

    def _apply_pdb(self, pdb: PodDisruptionBudget, dry_run: bool) -> ApplyResult:
        # Only the spec is the user's: the status is worked out when preemption reads it, as the API
        # server ignores a status sent with the object.
        old = self.pdbs.get(pdb.key)
        action = "created"
        if old is not None:
            pdb.uid = old.uid
            same = (old.selector, old.min_available, old.max_unavailable, old.labels) == (
                pdb.selector, pdb.min_available, pdb.max_unavailable, pdb.labels)
            action = "unchanged" if same else "configured"
        if not dry_run and action != "unchanged":
            self.pdbs[pdb.key] = pdb
        return ApplyResult("PodDisruptionBudget", pdb.namespace, pdb.name, pdb.uid, action)

    def delete_pdb(self, namespace: str, name: str) -> PodDisruptionBudget | None:
        """Remove a PodDisruptionBudget from the embedded store (None when there is none)."""
        return self.pdbs.pop(f"{namespace}/{name}", None)

    def _check_reservations(self, reservations: list[Reservation]) -> None:
        seen: set[str] = set()
        for res in reservations:
            if res.name in seen:
                raise ApplyError(f"Reservation {res.name} appears twice in one request")
            seen.add(res.name)
            old = self.reservations.get(res.name)
            if old is not None and old.reservation.requests != res.requests:
                raise ApplyError(
                    f"Reservation {res.name}: spec.template is immutable (delete the reservation and apply it again)"
                )
            if old is None and res.uid in self.pods:
                other = self.pods[res.uid].pod.key
                raise ApplyError(f"Reservation {res.name}: uid {res.uid!r} is already used by {other}")

    async def _apply_reservation(self, res: Reservation) -> None:
        """A new reservation is queued as its reserve pod; an existing one gets its new owners/TTL."""
        if res.name in self.reservations.records:
            self.reservations.update(res)
            return
        rec = self.reservations.add(res)
        await self._apply_pod(self.reservations.reserve_pod(rec))

    def _reservation_released(self, reserve_pod: Pod) -> None:
        # What a reservation held (and its owner did not take) is free: pods waiting for room may fit.
        self._cluster_event(ClusterEvent("Pod", ActionType.Delete), reserve_pod, None)

    def delete_reservation(self, name: str, *, reason: str = "deleted") -> ReservationRecord | None:
        """Forget a reservation; what its reserve pod held is free again (pending pods are requeued)."""
        rec = self.reservations.remove(name)
        if rec is not None:
            self.delete_pod(RESERVATION_NAMESPACE, name, reason=reason)
        return rec

    def expire_reservations(self) -> list[str]:
        """Release the reservations whose TTL or expiry has passed (phase Expired); their names."""
        out = []
        for rec in self.reservations.due():
            rec.phase = EXPIRED
            rec.last_status = Status(Code.Unschedulable, (f"reservation {rec.name} expired",))
            self.delete_pod(RESERVATION_NAMESPACE, rec.name, reason="expired")
            out.append(rec.name)
        return out

    async def _reservation_loop(self) -> None:
        for _ in itertools.count():  # until the scheduler stops (the task is cancelled)
            await asyncio.sleep(self.reservation_check_seconds)
            if self.reservations.records:
                self.expire_reservations()

    def _check_apply(self, objects: list[Pod | Node]) -> None:
        seen: dict[str, str] = {}  # uid -> ident
        idents: set[str] = set()
        for obj in objects:
            kind = "Node" if isinstance(obj, Node) else "Pod"
            ident = f"{kind} {obj.key if isinstance(obj, Pod) else obj.name}"
            if ident in idents:
                raise ApplyError(f"{ident} appears twice in one request")
            idents.add(ident)
            owner = seen.get(obj.uid) if obj.uid else None
            if owner is not None:
                raise ApplyError(f"{ident} has the same uid {obj.uid!r} as {owner}")
            if obj.uid:
                seen[obj.uid] = ident
            if isinstance(obj, Pod):
                uid = self._uid_by_key.get(obj.key)
                explicit = bool(obj.raw.get("metadata", {}).get("uid")) if obj.raw else False
                if uid is not None and explicit and obj.uid != uid:
                    raise ApplyError(f"{ident}: uid {obj.uid!r} does not match the existing pod's uid {uid!r}")
                if uid is None and obj.uid in self.pods:
                    other = self.pods[obj.uid].pod.key
                    raise ApplyError(f"{ident}: uid {obj.uid!r} is already used by pod {other}")
                if uid is not None:
                    rec = self.pods[uid]
                    # A manifest without nodeName leaves the binding alone (as kubectl apply leaves a
                    # field it never set); one naming another node would move a bound pod.
                    if rec.pod.node_name and obj.node_name and obj.node_name != rec.pod.node_name:
                        raise ApplyError(
                            f"{ident}: spec.nodeName is immutable once bound (bound to {rec.pod.node_name!r})"
                        )
                    if rec.pod.node_name and obj.requests != rec.pod.requests:
                        raise ApplyError(f"{ident}: resource requests of a bound pod are immutable")

    def _check_node_action(self, node: Node) -> str:
        return "created" if node.name not in self.nodes else "configured"

    def _apply_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old is not None:
            node.uid = old.uid or node.uid
        self.nodes[node.name] = node
        self.cache.add_node(node)
        self._emit(EV_APPLIED, "Node", node)
        if old is None:
            self._cluster_event(ClusterEvent("Node", ActionType.Add), None, node)
        else:
            action = ActionType(0)
            if old.labels != node.labels:
                action |= ActionType.UpdateNodeLabel
            if old.taints != node.taints or old.unschedulable != node.unschedulable:
                action |= ActionType.UpdateNodeTaint
            if old.allocatable != node.allocatable:
                action |= ActionType.UpdateNodeAllocatable
            if old.annotations != node.annotations:
                action |= ActionType.UpdateNodeAnnotation
            if action:
                self._cluster_event(ClusterEvent("Node", action), old, node)

    async def _apply_pod(self, pod: Pod) -> None:
        rec = self.pods.get(pod.uid)
        if rec is None:
            self.pods[pod.uid] = rec = PodRecord(pod, profile=pod.scheduler_name)
            self._uid_by_key[pod.key] = pod.uid
            self._emit(EV_APPLIED, "Pod", pod)
            if pod.node_name:
                rec.phase = BOUND
                self.cache.add_pod(pod)
                self._cluster_event(ClusterEvent("Pod", ActionType.Add), None, pod)
            elif pod.scheduler_name in self.profiles:
                if pod.nominated_node_name:
                    self.nominated[pod.uid] = pod.nominated_node_name
                where = await self.queue.add(pod, pod.scheduler_name)
                self._after_enqueue(rec, where)
            else:
                rec.last_status = Status(
                    Code.UnschedulableAndUnresolvable,
                    (f"no profile for schedulerName {pod.scheduler_name!r}",),
                )
            return
        old = rec.pod
        rec.pod = pod
        self._emit(EV_APPLIED, "Pod", pod)
        if old.node_name:
            self.cache.update_pod(pod)
            if old.labels != pod.labels:
                self._cluster_event(ClusterEvent("Pod", ActionType.UpdatePodLabel), old, pod)
            return
        requeued = await self.queue.update(pod)
        if requeued is not None:
            self._after_enqueue(rec, requeued)

    def _after_enqueue(self, rec: PodRecord, where: str) -> None:
        if where == GATED:
            info = self.queue.info(rec.pod.uid)
            rec.phase = PENDING
            rec.last_status = info.last_status if info else None
        elif where == ACTIVE:
            rec.phase = PENDING

    def delete_pod(self, namespace: str, name: str, *, reason: str = "deleted") -> Pod | None:
        uid = self._uid_by_key.pop(f"{namespace}/{name}", None)
        if uid is None:
            return None
        rec = self.pods.pop(uid)
        self.nominated.pop(uid, None)
        self.queue.delete(uid)
        wp = self.waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", f"pod {rec.pod.key} was deleted")
        was_placed = self.cache.remove_pod(uid) is not None
        if self.reservations.records:
            if is_reserve_pod(rec.pod):
                self.reservations.reserve_pod_deleted(rec.pod, reason)
            else:
                self.reservations.owner_deleted(rec.pod)
        self._emit(EV_DELETED, "Pod", rec.pod, node=rec.pod.node_name)
        if was_placed or rec.pod.node_name:
            self._cluster_event(ClusterEvent("Pod", ActionType.Delete), rec.pod, None)
        return rec.pod

    def delete_node(self, name: str) -> Node | None:
        node = self.nodes.pop(name, None)
        if node is None:
            return None
        self.cache.remove_node(name)
        self._emit(EV_DELETED, "Node", node)
        self._cluster_event(ClusterEvent("Node", ActionType.Delete), node, None)
        return node

    def _cluster_event(self, event: ClusterEvent, old: Any, new: Any, exclude: str = "") -> None:
        for info in self.queue.on_event(event, old, new, exclude):
            rec = self.pods.get(info.pod.uid)
            if rec is not None:
                rec.phase = PENDING

    def _volume_object_changed(self, kind: str, old: Any, new: Any) -> None:
        # kind is the ClusterEvent resource (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode).
        action = ActionType.Add if old is None else ActionType.Delete if new is None else ActionType.Update
        self._cluster_event(ClusterEvent(kind, action), old, new)

    # ---- a source's informers (kube-scheduler's eventhandlers.go) ---------------------------------

    async def observe_pod(self, pod: Pod, *, spec_changed: bool = True) -> None:
        """A pod as the cluster's API now has it (added or changed). A pending pod of one of the
        profiles is queued, any bound pod is in the cache whoever bound it (confirming a pod this
        scheduler assumed), a pending pod for another scheduler is only recorded. ``spec_changed``
        False (only the status moved, e.g. this scheduler's own condition) keeps a queued pod where it is."""
        rec = self.pods.get(pod.uid)
        if rec is None:
            if self._uid_by_key.get(pod.key) is not None:
                self.delete_pod(pod.namespace, pod.name)  # the same name, a new pod: the old one is gone
            await self._apply_pod(pod)
            return
        old = rec.pod
        if pod.node_name and not old.node_name:
            self._observe_bound(rec, pod)
            return
        if not pod.node_name and not spec_changed:
            # Only the status moved: the nomination stays the scheduler's own (it may be ahead of the API).
            rec.pod = dataclasses.replace(pod, nominated_node_name=self.nominated.get(pod.uid, ""))
            info = self.queue.info(pod.uid)
            if info is not None:
                info.pod = rec.pod
            return
        await self._apply_pod(pod)

    def _observe_bound(self, rec: PodRecord, pod: Pod) -> None:
        uid = pod.uid
        self.nominated.pop(uid, None)
        self.queue.delete(uid)  # pending, or in flight: its cycle finds it bound
        wp = self.waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", f"pod {pod.key} was bound to {pod.node_name!r} meanwhile")
        rec.pod = pod
        rec.phase = BOUND
        self.cache.add_pod(pod)  # confirms the pod this scheduler assumed, or places another's
        self._emit(EV_BOUND, "Pod", pod, node=pod.node_name, attempts=rec.attempts)
        self._cluster_event(ClusterEvent("Pod", ActionType.Add), None, pod)

    def observe_pod_deleted(self, pod: Pod) -> None:
        """A pod deleted from the cluster's API (nothing happens if another pod took its name)."""
        if self._uid_by_key.get(pod.key) == pod.uid:
            self.delete_pod(pod.namespace, pod.name)

    def observe_node(self, node: Node) -> None:
        """A node as the cluster's API now has it (added or changed)."""
        self._apply_node(node)

    def observe_node_deleted(self, name: str) -> None:
        self.delete_node(name)

    def get_pod(self, namespace: str, name: str) -> PodRecord | None:
        uid = self._uid_by_key.get(f"{namespace}/{name}")
        return None if uid is None else self.pods[uid]

    def queue_of(self, uid: str) -> str:
        return self.queue.where(uid) or ""

    # ---- binding through the "API" -------------------------------------------------------------

    def bind(self, pod: Pod, node_name: str) -> Status:
        """Set ``spec.nodeName`` (what DefaultBinder asks the API server to do)."""
        rec = self.pods.get(pod.uid)
        if rec is None:
            return Status.failure(f"pod {pod.key} not found (deleted while binding)")
        if rec.pod.node_name:
            return Status.failure(f"pod {pod.key} is already bound to {rec.pod.node_name!r}")
        if node_name not in self.nodes:
            return Status.failure(f"node {node_name!r} not found")
        self.nominated.pop(pod.uid, None)
        bound = dataclasses.replace(rec.pod, node_name=node_name, nominated_node_name="")
        rec.pod = bound
        rec.phase = BOUND
        self.cache.add_pod(bound)
        self.queue.done(pod.uid)
        self.stats.bound += 1
        if is_reserve_pod(bound):
            self.reservations.bound(bound, node_name)
        self._emit(EV_BOUND, "Pod", bound, node=node_name, attempts=rec.attempts)
        self._cluster_event(ClusterEvent("Pod", ActionType.Add), None, bound)
        return SUCCESS

    # ---- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule pods until :meth:`stop` (scheduling cycles are serial)."""
        self._running = True
        flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        expirer = asyncio.get_running_loop().create_task(self._reservation_loop())
        await self.start_controllers()
        try:
            while True:
                info = await self.queue.pop()
                if info is None:
                    break
                await self.schedule_one(info)
                if self._binding_tasks:
                    # Let binding cycles run between pods: otherwise they pile up (each holding its
                    # cycle's snapshot) while the queue stays non-empty.
                    await asyncio.sleep(0)
        finally:
            flusher.cancel()
            expirer.cancel()
            self._running = False
            await self.stop_controllers()

    async def start_controllers(self) -> None:
        """Start the in-process plugins' controllers (once each; the scheduler is now active). A
        controller that fails to start is logged and left stopped: scheduling goes on without it."""
        for fwk in self.profiles.values():
            for plugin in fwk.plugins.values():
                if isinstance(plugin, Controller) and all(c is not plugin for c in self._controllers):
                    try:
                        await plugin.start()
                    except Exception:
                        log.exception("starting the controller of plugin %r failed", plugin.name)
                        continue
                    self._controllers.append(plugin)

    async def stop_controllers(self) -> None:
        """Stop the running controllers, last started first."""
        while self._controllers:
            plugin = self._controllers.pop()
            try:
                await plugin.stop()
            except Exception:
                log.exception("stopping the controller of plugin %r failed", getattr(plugin, "name", plugin))

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(30)
            self.queue.flush_unschedulable_leftover()

    async def stop(self) -> None:
        """Stop popping pods, finish the binding cycles in flight."""
        self.queue.close()
        if self._binding_tasks:
            await asyncio.gather(*list(self._binding_tasks), return_exceptions=True)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no binding cycle is in flight (for tests and the demo)."""
        if self._binding_tasks:
            await asyncio.wait_for(asyncio.gather(*list(self._binding_tasks), return_exceptions=True), timeout)

    # ---- one pod -------------------------------------------------------------------------------

    async def schedule_one(self, info: QueuedPodInfo) -> None:
        pod = info.pod
        rec = self.pods.get(pod.uid)
        fwk = self.profiles.get(pod.scheduler_name)
        if rec is None or fwk is None or rec.pod.node_name:
            self.queue.done(pod.uid)
            return
        started = time.perf_counter()
        rec.attempts = info.attempts
        self.stats.attempts += 1
        snapshot = self.cache.snapshot()
        self.current_snapshot = snapshot
        cycle_id = f"{pod.uid}:{info.attempts}:{next(self._cycle_ids)}"
        state = CycleState(cycle_id, snapshot, info.attempts)
        self.cycle_states[cycle_id] = state
        if fwk.before_cycle_plugins:
            await self._look_ahead(fwk, pod, snapshot)
        diagnosis = Diagnosis()
        host: str | None
        try:
            host, status = await self._schedule_pod(fwk, state, pod, snapshot, diagnosis)
        except Exception as exc:
            log.exception("scheduling cycle of %s failed", pod.key)
            host, status = None, Status.failure(f"scheduling cycle failed: {exc}", error=exc)
        if host is None:
            nominating: str | None = ""  # kube-scheduler's clearNominatedNode, unless PostFilter says otherwise
            # PostFilter (preemption) runs for a pod that fits no node, not when there are no nodes.
            if status.is_rejected and fwk.post_filter_plugins and status.reasons != (NO_NODES_MSG,):
                result, pf = await self._post_filter(fwk, state, pod, snapshot, diagnosis)
                nominating = None if result is None else result.nominated_node_name
                if not pf.ok and pf.reasons:
                    diagnosis.post_filter_msg = pf.message()
                if status.reasons and status.reasons[0].startswith("0/"):
                    status = Status(status.code, (fit_error_message(len(snapshot), diagnosis),), status.plugin)
            self._free_state(cycle_id)
            self._fail(info, status, diagnosis.unschedulable_plugins | diagnosis.pending_plugins, nominating)
            self.stats.attempt_seconds.append(time.perf_counter() - started)
            return
        if self.cache.node_of(pod.uid) is not None:
            # Bound by another scheduler while its cycle ran (a source's informer placed it).
            self._free_state(cycle_id)
            self.queue.done(pod.uid)
            return
        assumed = dataclasses.replace(pod, node_name=host)
        self.cache.assume_pod(assumed, host)
        status = await fwk.run_reserve(state, assumed, host)
        if status.ok:
            status = await fwk.run_permit(state, assumed, host)
        if not status.ok and status.code is not Code.Wait:
            await fwk.run_unreserve(state, assumed, host)
            self.cache.forget_pod(pod.uid)
            self._free_state(cycle_id)
            self._fail(info, status, {status.plugin} if status.plugin else set())
            self.stats.attempt_seconds.append(time.perf_counter() - started)
            return
        self.stats.scheduled += 1
        rec.phase = WAITING if status.code is Code.Wait else BINDING
        self.stats.attempt_seconds.append(time.perf_counter() - started)
        task = asyncio.get_running_loop().create_task(self._binding_cycle(fwk, state, info, assumed, host))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    async def _look_ahead(self, fwk: Framework, pod: Pod, snapshot: Snapshot) -> None:
        """Tell the profile's before-cycle plugins (framework.hooks) that this pod's cycle starts, with
        the pods queued behind it: remote plugins with lookahead ask their hosts for those pods'
        answers, so hosts work on them while earlier pods are scheduled."""
        fwk.run_before_cycle(snapshot, pod, lambda n: [
            i.pod for i in self.queue.peek(n) if i.pod.scheduler_name == pod.scheduler_name
        ])

    async def _post_filter(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """PostFilter for the pod as the cycle saw it, on the PostFilter transformers' view."""
        view_pod: Pod = state.get(POD_VIEW_KEY, pod)
        if not fwk.post_filter_transformers:
            return await fwk.run_post_filter(state, view_pod, diagnosis.node_to_status)
        base_view = state.get(VIEW_STATE_KEY)
        _, status = await fwk.run_node_transformers("postFilter", state, view_pod, snapshot)
        try:
            if not status.ok:
                return None, status
            return await fwk.run_post_filter(state, view_pod, diagnosis.node_to_status)
        finally:
            fwk.end_view(state, snapshot, base_view)

    async def _schedule_pod(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[str | None, Status]:
        """Find the node for ``pod``: (node, Success) or (None, why not)."""
        n_all = len(snapshot)
        if n_all == 0:
            return None, Status(Code.UnschedulableAndUnresolvable, (NO_NODES_MSG,))
        if fwk.pre_filter_transformers:
            pod, status = await fwk.run_pre_filter_transformers(state, pod)
            state.write(POD_VIEW_KEY, pod)
            if not status.ok:
                return None, status
        pre, status = await fwk.run_pre_filter(state, pod, diagnosis)
        if not status.ok:
            if status.code is Code.Error:
                return None, status
            diagnosis.node_to_status.absent = status
            diagnosis.pre_filter_msg = status.message()
            return None, Status(status.code, (fit_error_message(n_all, diagnosis),), status.plugin)
        base, base_view = snapshot, state.get(VIEW_STATE_KEY)
        if fwk.filter_transformers:
            snapshot, status = await fwk.run_node_transformers("filter", state, pod, base)
            if not status.ok:
                return None, status
        try:
            host, feasible, status = await self._filter(fwk, state, pod, snapshot, diagnosis, pre)
        finally:
            if fwk.filter_transformers:
                fwk.end_view(state, base, base_view)
        if feasible is None:
            return host, status
        if fwk.score_transformers:
            view, status = await fwk.run_node_transformers("score", state, pod, base, feasible)
            if not status.ok:
                return None, status
            try:
                return await self._score(fwk, state, pod, view, feasible)
            finally:
                fwk.end_view(state, base, base_view)
        return await self._score(fwk, state, pod, base, feasible)

    async def _filter(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis,
        pre: PreFilterResult | None,
    ) -> tuple[str | None, IntArray | None, Status]:
        """Filter on ``snapshot`` (the Filter view): the feasible rows to score, or the outcome
        itself (a node, or why none) when there is nothing to score."""
        n_all = len(snapshot)
        candidates = filter_candidates(snapshot, pre, diagnosis)
        n_cand = int(candidates.shape[0])
        if n_cand == 0:
            return None, None, Status(Code.UnschedulableAndUnresolvable, (fit_error_message(n_all, diagnosis),))
        if pod.nominated_node_name:
            # The node a preemption made room on is most likely the one: try it first (evaluateNominatedNode).
            row = snapshot.row(pod.nominated_node_name)
            if row is not None and bool(np.any(candidates == row)):
                tried = Diagnosis()
                fits = await fwk.run_filter(state, pod, snapshot, np.asarray([row], dtype=np.int64), 1, tried)
                if fits.error is not None:
                    return None, None, fits.error
                nominated = await self._filter_with_nominated(fwk, state, pod, snapshot, fits.feasible, tried)
                if nominated.shape[0]:
                    return pod.nominated_node_name, None, SUCCESS
        start = self._next_start % n_cand
        walk = np.concatenate((candidates[start:], candidates[:start])) if start else candidates
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n_cand)
        outcome = await fwk.run_filter(state, pod, snapshot, walk, to_find, diagnosis)
        self._next_start = (self._next_start + outcome.processed) % max(n_all, 1)
        if outcome.error is not None:
            return None, None, outcome.error
        feasible = await self._filter_with_nominated(fwk, state, pod, snapshot, outcome.feasible, diagnosis)
        if feasible.shape[0] == 0:
            return None, None, Status(Code.Unschedulable, (fit_error_message(n_all, diagnosis),))
        if feasible.shape[0] == 1:
            return snapshot.table.names[int(feasible[0])], None, SUCCESS
        return None, feasible, SUCCESS

    async def _score(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray
    ) -> tuple[str | None, Status]:
        batch = NodeBatch(snapshot, feasible)
        status = await fwk.run_pre_score(state, pod, batch)
        if not status.ok:
            return None, status
        scores = await fwk.run_score(state, pod, batch)
        if scores.error is not None:
            return None, scores.error
        return snapshot.table.names[fwk.select_host(feasible, scores.totals)], SUCCESS

    async def _binding_cycle(
        self, fwk: Framework, state: CycleState, info: QueuedPodInfo, assumed: Pod, host: str
    ) -> None:
        pod = assumed
        try:
            # Which PreBind plugins have work for the pod: those answering Skip are not called at PreBind.
            status = await fwk.run_pre_bind_pre_flights(state, pod, host)
            if status.is_skip or status.ok:
                status = await fwk.wait_on_permit(pod)
            else:
                self._drop_waiting(pod, status)
            # Only a Permit rejection names the plugins that may requeue the pod (kube-scheduler's
            # FitError in bindingCycle); PreBind/Bind failures have no rejector and retry after backoff.
            rejectors = {status.plugin} if status.is_rejected and status.plugin else set()
            rec = self.pods.get(pod.uid)
            if rec is not None and status.ok:
                rec.phase = BINDING
            if status.ok:
                status = await fwk.run_pre_bind(state, pod, host)
            if status.ok:
                status = await fwk.run_bind(state, pod, host)
            if status.ok:
                self.cache.finish_binding(pod.uid)
                self.queue.done(pod.uid)
                self.source.scheduled(pod, host)
                await fwk.run_post_bind(state, pod, host)
                return
            await fwk.run_unreserve(state, pod, host)
            self.cache.forget_pod(pod.uid)
            self._fail(info, status, rejectors)
            # The pod's resources are free again: other pods waiting for room may fit now.
            self._cluster_event(ClusterEvent("Pod", ActionType.Delete), pod, None, exclude=pod.uid)
        except Exception as exc:
            log.exception("binding cycle of %s failed", pod.key)
            await fwk.run_unreserve(state, pod, host)
            self.cache.forget_pod(pod.uid)
            self._fail(info, Status.failure(f"binding cycle failed: {exc}", error=exc), set())
        finally:
            self._free_state(state.cycle_id)

    def _drop_waiting(self, pod: Pod, status: Status) -> None:
        """A binding cycle that fails before it waits at Permit stops the pod's wait (its timers too)."""
        waiting = self.waiting_pods.get(pod.uid)
        if waiting is not None:
            waiting.reject(status.plugin, status.message())
            self.waiting_pods.remove(pod.uid)

    def _fail(self, info: QueuedPodInfo, status: Status, rejectors: set[str], nominating: str | None = "") -> None:
        """Requeue a pod whose attempt failed (kube-scheduler's handleSchedulingFailure). ``nominating``
        is its nomination from now on: a node, "" to clear it (what every failure but PostFilter's
        does), or None to leave it as it is (PostFilter returned no result)."""
        pod = info.pod
        rec = self.pods.get(pod.uid)
        if rec is None or self.source.already_bound(pod):  # deleted or bound meanwhile: nothing to requeue
            self.queue.done(pod.uid)
            return
        if nominating:
            info.pod = self._nominate(rec, nominating)
            self._emit(EV_NOMINATED, "Pod", info.pod, node=nominating)
        elif nominating == "" and (rec.pod.nominated_node_name or pod.uid in self.nominated):
            info.pod = self._set_nomination(rec, "")
        where = self.queue.requeue(info, status, rejectors)
        rec.last_status = status
        rec.phase = UNSCHEDULABLE_PHASE if where == UNSCHEDULABLE else PENDING
        if status.code is Code.Error:
            self.stats.errors += 1
            self._emit(EV_ERROR, "Pod", pod, status=status, attempts=info.attempts)
        else:
            self.stats.unschedulable += 1
            self._emit(EV_UNSCHEDULABLE, "Pod", pod, status=status, attempts=info.attempts)
        self.source.failed(rec.pod, status)

    def _nominate(self, rec: PodRecord, node: str) -> Pod:
        """Record that ``rec``'s pod will go to ``node`` once its victims are gone; pods of lower
        priority nominated to the same node lose their nomination (it was their room)."""
        pod = rec.pod
        for uid, other_node in list(self.nominated.items()):
            other = self.pods.get(uid)
            if other_node == node and other is not None and other.pod.priority < pod.priority:
                self._set_nomination(other, "")
        return self._set_nomination(rec, node)

    def _set_nomination(self, rec: PodRecord, node: str) -> Pod:
        rec.pod = dataclasses.replace(rec.pod, nominated_node_name=node)
        info = self.queue.info(rec.pod.uid)
        if info is not None:
            info.pod = rec.pod
        if node:
            self.nominated[rec.pod.uid] = node
        else:
            self.nominated.pop(rec.pod.uid, None)
        self.source.nominated(rec.pod, node)
        return rec.pod

    def _nominated_pods_by_row(self, snapshot: Snapshot, pod: Pod) -> dict[int, list[Pod]]:
        """Pods nominated to a node that outrank (or equal) ``pod``: Filter counts them as present."""
        out: dict[int, list[Pod]] = {}
        for uid, node in self.nominated.items():
            rec = self.pods.get(uid)
            row = snapshot.row(node)
            if uid == pod.uid or rec is None or row is None or rec.pod.priority < pod.priority:
                continue
            out.setdefault(row, []).append(rec.pod)
        return out

    async def _filter_with_nominated(
        self, fwk: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray,
        diagnosis: Diagnosis,
    ) -> IntArray:
        """kube-scheduler's RunFilterPluginsWithNominatedPods for the feasible nodes that have
        nominated pods: the pod must also fit with those pods added (so it does not take the room a
        preemption freed for a more important pod)."""
        nominated = self._nominated_pods_by_row(snapshot, pod)
        if not nominated:
            return feasible
        keep = np.ones(feasible.shape[0], dtype=np.bool_)
        for i, row in enumerate(feasible.tolist()):
            extra = nominated.get(row)
            if not extra:
                continue
            what_if_state = state.clone()
            status = SUCCESS
            for other in extra:
                status = await fwk.run_pre_filter_extension_add_pod(what_if_state, pod, other, row)
                if not status.ok:
                    break
            if status.ok:
                status = await fwk.run_filter_with_node_pods(
                    what_if_state, pod, snapshot, row, (*snapshot.pods[row], *extra)
                )
            if not status.ok:
                keep[i] = False
                diagnosis.node_to_status.statuses[snapshot.table.names[row]] = status
                diagnosis.add_plugin_status(status)
        return feasible[keep]

    def _free_state(self, cycle_id: str) -> None:
        self.cycle_states.pop(cycle_id, None)

    # ---- what-if (autoscalers) -----------------------------------------------------------------

    def pending_pods(self) -> list[Pod]:
        """Pods waiting in the queue (not gated, not reserve pods), in the order they would be tried."""
        fwk = next(iter(self.profiles.values()))
        infos = [
            i for i in self.queue.pending()
            if self.queue.where(i.pod.uid) not in (GATED, IN_FLIGHT) and not is_reserve_pod(i.pod)
        ]

        def cmp(a: QueuedPodInfo, b: QueuedPodInfo) -> int:
            return -1 if fwk.less(a, b) else (1 if fwk.less(b, a) else 0)

        infos.sort(key=lambda i: i.timestamp)
        infos.sort(key=functools.cmp_to_key(cmp))
        return [i.pod for i in infos]

    async def what_if(self, template: Node, count: int, pods: Sequence[Pod] | None = None) -> dict[str, Any]:
        """Which of ``pods`` (by default every pending pod, in queue order) would be scheduled if
        ``count`` nodes like ``template`` were added: each pod goes through a full cycle (real plugins,
        remote ones included: the nodes travel as the cycle's view) on the cluster plus those nodes
        plus the pods placed before it. Nothing is reserved, bound or cached."""
        base = self.cache.snapshot()
        view = hypothetical_nodes(base, template, count)
        new_nodes = [n.name for _, n in view.added_nodes]
        out: list[dict[str, Any]] = []
        for pod in self.pending_pods() if pods is None else pods:
            fwk = self.profiles.get(pod.scheduler_name)
            if fwk is None:
                out.append({"pod": pod.key, "fits": False, "node": None, "newNode": False,
                            "reasons": [f"no profile for schedulerName {pod.scheduler_name!r}"]})
                continue
            snapshot = apply_view(base, view)
            state = CycleState(f"what-if:{pod.uid}:{next(self._cycle_ids)}", snapshot, 1)
            state.write(VIEW_STATE_KEY, view)
            result = await explain_pod(fwk, snapshot, pod, state)
            node = result["selected"]
            out.append({"pod": pod.key, "fits": node is not None, "node": node, "newNode": node in new_nodes,
                        "reasons": result["status"]["reasons"]})
            if node is not None:
                view = view.then(NodeView(added_pods=(dataclasses.replace(pod, node_name=node),)))
        return {
            "whatIf": {"template": template.name, "count": count, "nodes": new_nodes},
            "admitted": [p["pod"] for p in out if p["newNode"]],
            "pods": out,
        }

    # ---- reading -------------------------------------------------------------------------------

    def pending_count(self) -> dict[str, int]:
        s = self.queue.stats()
        return {ACTIVE: s.active, BACKOFF: s.backoff, UNSCHEDULABLE: s.unschedulable, GATED: s.gated,
                IN_FLIGHT: s.in_flight}

    def leaks(self) -> dict[str, int]:
        """What must be empty when the scheduler is idle: cycle states, waiting pods, assumed pods."""
        return {
            "cycle_states": len(self.cycle_states),
            "waiting_pods": len(self.waiting_pods),
            "assumed_pods": len(self.cache.assumed()),
            "binding_cycles": len(self._binding_tasks),
        }


def filter_candidates(snapshot: Snapshot, pre: PreFilterResult | None, diagnosis: Diagnosis) -> IntArray:
    """The rows Filter walks, in node-tree order: all nodes, or those a PreFilter result kept (the
    others take kube-scheduler's "node(s) didn't satisfy plugin(s) [...]" status, naming the plugins
    that narrowed the nodes)."""
    order = snapshot.table.order
    if pre is None or pre.node_names is None:
        return order
    keep = np.zeros(len(snapshot), dtype=np.bool_)
    for name in pre.node_names:
        row = snapshot.row(name)
        if row is not None:
            keep[row] = True
    candidates = order[keep[order]]
    diagnosis.absent_nodes = len(snapshot) - int(candidates.shape[0])
    narrowed = " ".join(sorted(diagnosis.unschedulable_plugins))
    diagnosis.node_to_status.absent = Status(
        Code.UnschedulableAndUnresolvable, (f"node(s) didn't satisfy plugin(s) [{narrowed}]",)
    )
    return candidates


async def explain_pod(fwk: Framework, snapshot: Snapshot, pod: Pod, state: CycleState | None = None) -> dict[str, Any]:
    """One scheduling cycle for ``pod`` on ``snapshot`` with every node evaluated and nothing
    reserved or bound; per-node statuses and per-plugin scores, as the explain JSON. ``state`` may
    bring a view (a what-if's nodes) under ``VIEW_STATE_KEY``; transformers run as in a real cycle."""
    if state is None:
        state = CycleState(f"explain:{pod.uid}", snapshot)
    state.record = True
    base, base_view = snapshot, state.get(VIEW_STATE_KEY)
    diagnosis = Diagnosis()
    names = snapshot.table.names
    nodes: dict[str, dict[str, Any]] = {n: {"filter": None, "scores": {}, "total": None} for n in names}
    out: dict[str, Any] = {"pod": pod.key, "selected": None, "status": None, "nodes": nodes}

    def filter_json(st: Status) -> dict[str, Any]:
        return {"code": st.code.name, "plugin": st.plugin or None, "reasons": list(st.reasons)}

    def finish(status: Status) -> dict[str, Any]:
        out["status"] = {"code": status.code.name, "reasons": list(status.reasons)}
        return out

    if not names:
        return finish(Status(Code.Unschedulable, (NO_NODES_MSG,)))
    if fwk.pre_filter_transformers:
        pod, status = await fwk.run_pre_filter_transformers(state, pod)
        if not status.ok:
            return finish(status)
    pre, status = await fwk.run_pre_filter(state, pod, diagnosis)
    if not status.ok:
        for n in names:
            nodes[n]["filter"] = filter_json(status)
        if status.code is Code.Error:
            return finish(status)
        diagnosis.pre_filter_msg = status.message()
        return finish(Status(status.code, (fit_error_message(len(names), diagnosis),)))
    candidates = filter_candidates(snapshot, pre, diagnosis)
    if diagnosis.absent_nodes:
        kept = set(candidates.tolist())
        for row, n in enumerate(names):
            if row not in kept:
                nodes[n]["filter"] = filter_json(diagnosis.node_to_status.absent)
    if fwk.filter_transformers:
        snapshot, status = await fwk.run_node_transformers("filter", state, pod, base)
        if not status.ok:
            return finish(status)
    try:
        outcome = await fwk.run_filter(state, pod, snapshot, candidates, int(candidates.shape[0]), diagnosis)
    finally:
        fwk.end_view(state, base, base_view)
    if outcome.error is not None:
        return finish(outcome.error)
    for n, st in diagnosis.node_to_status.statuses.items():
        nodes[n]["filter"] = filter_json(st)
    feasible = outcome.feasible
    for r in feasible.tolist():
        nodes[names[r]]["filter"] = {"code": "Success", "plugin": None, "reasons": []}
    if feasible.shape[0] == 0:
        return finish(Status(Code.Unschedulable, (fit_error_message(len(names), diagnosis),)))
    snapshot = base
    if fwk.score_transformers:
        snapshot, status = await fwk.run_node_transformers("score", state, pod, base, feasible)
        if not status.ok:
            return finish(status)
    batch = NodeBatch(snapshot, feasible)
    try:
        status = await fwk.run_pre_score(state, pod, batch)
        if not status.ok:
            return finish(status)
        scores = await fwk.run_score(state, pod, batch, record=True)
    finally:
        fwk.end_view(state, base, base_view)
    if scores.error is not None:
        return finish(scores.error)
    for i, r in enumerate(feasible.tolist()):
        entry = nodes[names[r]]
        entry["total"] = int(scores.totals[i])
        entry["scores"] = {
            name: {"raw": int(ps.raw[i]), "normalized": int(ps.normalized[i]), "weighted": int(ps.weighted[i])}
            for name, ps in scores.by_plugin.items()
        }
    out["selected"] = names[fwk.select_host(feasible, scores.totals)]
    return finish(SUCCESS)
