"""The :class:`Scheduler`: built from a configuration, it runs the loop that pops a pod and schedules it,
starts and stops the plugins' controllers, and answers what-if questions. Its parts are mixed in from
the package's modules (see :mod:`framework.scheduler`)."""

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
from collections.abc import Callable, Collection, Sequence
from typing import Any

from pluginhost.model import Node, Pod, PodDisruptionBudget
from pluginhost.plugin import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Controller,
    CycleState,
    EnqueueExtensions,
    Plugin,
    QueuedPodInfo,
    QueueSortPlugin,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view

from .. import features
from ..batching import OpportunisticBatch
from ..cache import Cache
from ..canary import Canary, canary_profile, with_variants
from ..config import ProfileConfig, SchedulerConfig
from ..dra.store import MemoryClaimWriter
from ..plugins import Registry
from ..podgroup_queue import GroupSchedulingQueue
from ..queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE
from ..reservations import Reservations, is_reserve_pod
from ..runtime import Framework
from ..waiting import WaitingPods
from ..whatif import hypothetical_nodes
from .explain import explain_pod
from .handle import SchedulerHandle
from .podgroup import PodGroupCycle
from .reconfigure import Reconfigured, Reconfiguring, changed_profiles
from .records import CycleStats, Event, PodRecord
from .source import ClusterSource
from .store import EmbeddedSource, ObjectStore

__all__ = ["Scheduler", "tune_gc"]

log = logging.getLogger("outrigger.scheduler")

# What requeues a pod a plugin without EnqueueExtensions rejected: any event (kube-scheduler's
# defaultEnqueueExtension).
_ALL_EVENTS = [ClusterEventWithHint(ClusterEvent("*", ActionType.All))]


def tune_gc() -> None:
    """Collect garbage less often than Python's default (700 allocations): a scheduler holds hundreds
    of thousands of long-lived objects (pods, nodes, their manifests), and young-generation collections
    that walk them took a quarter of the scheduling time at 5000 nodes. Process-wide: called by the
    command line (serve, demo) and the benchmark, not by the library."""
    gc.set_threshold(10_000, 50, 100)


class Scheduler(PodGroupCycle, ObjectStore, Reconfiguring):
    """Owns the cluster objects and runs the scheduling and binding cycles."""

    def __init__(self, config: SchedulerConfig, registry: Registry, *, seed: int | None = None) -> None:
        self.config = config
        self.registry = registry
        self.cache = Cache()
        # A claim, volume, class or CSINode that changes may make pods the volume plugins rejected schedulable.
        self.cache.volumes.add_listener(self._volume_object_changed)
        # So does a ResourceClaim, DeviceClass or ResourceSlice for pods DynamicResources rejected: each
        # change is a cluster event named by its kind, whichever source applied it.
        self.cache.dra.add_listener(self.custom_resource_changed)
        if isinstance(self.cache.dra.writer, MemoryClaimWriter):  # a live source sets its own writer
            self.cache.dra.writer.on_pod_status = self.write_pod_status
        # A PodGroup added, changed or deleted is the cluster event "PodGroup" (GangScheduling registers it).
        self.cache.podgroups.add_listener(self._pod_group_changed)
        self.reservations = Reservations(self.cache)
        self.reservations.on_release = self._reservation_released
        # How often expired reservations are looked for while the scheduler runs.
        self.reservation_check_seconds = 1.0
        self.waiting_pods = WaitingPods()
        self.handle = SchedulerHandle(self)
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
        self.batches = {name: OpportunisticBatch(fwk) for name, fwk in self.profiles.items()
                        if features.enabled("OpportunisticBatching")}
        self.popped = 0
        first = next(iter(self.profiles.values()))
        self._plugin_events = self._collect_events()
        sort_plugin = first.queue_sort_plugin
        # A plugin that overrides sort_key gives one key per enqueue instead of a less() per comparison.
        has_key = type(sort_plugin).sort_key is not QueueSortPlugin.sort_key
        # Pods of a PodGroup are queued as their group while GenericWorkload is on.
        workloads = features.enabled("GenericWorkload")
        self.queue = GroupSchedulingQueue(
            first.less,
            sort_plugin.sort_key if has_key else None,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            pre_enqueue=self._pre_enqueue,
            plugin_events=lambda name: self._plugin_events.get(name, _ALL_EVENTS),
            group_of=lambda pod: (pod.namespace, pod.scheduling_group) if workloads and pod.scheduling_group else None,
            podgroup=self.cache.podgroups.get,
            pop_from_backoff=features.enabled("SchedulerPopFromBackoffQ"),
        )
        self._running = False
        self._controllers: list[Controller] = []
        #: Called with each Framework :meth:`rebuild_profiles` builds (instrumentation wraps it).
        self.profile_listeners: list[Callable[[Framework], None]] = []
        #: Told what each scheduling cycle decided (shadow plugins, :mod:`framework.remote.shadow`).
        self.cycle_observers: list[Callable[[Any], None]] = []
        # Held for each scheduling cycle: a new configuration is installed between two cycles.
        self._cycle_lock = asyncio.Lock()
        #: The live configuration serving this scheduler when its files are watched (/configz reads it).
        self.live: Any = None

    # ---- construction --------------------------------------------------------------------------

    def _build_framework(self, profile: ProfileConfig, registry: Registry | None = None) -> Framework:
        registry = registry or self.registry
        fwk = self._build_plain(profile, registry)
        source = registry.canary
        if source is not None and source.config.plugin in fwk.plugins:
            # The variant: the same profile, with the canary endpoint's plugin in the stable one's place.
            with_canary = registry.copy()
            with_canary.replace(source.config.plugin, source.factory, source.points)
            fwk.canary = Canary(source, self._build_plain(canary_profile(profile, source.config), with_canary))
        return fwk

    def _build_plain(self, profile: ProfileConfig, registry: Registry) -> Framework:
        instances: dict[str, Plugin] = {}
        lists: dict[str, list[Plugin]] = {}
        for point, refs in [*profile.plugins.items(), *profile.pod_group_plugins.items()]:
            for ref in refs:
                if ref.name not in instances:
                    args = dict(profile.plugin_args.get(ref.name, {}))
                    where = profile.args_location(ref.name)  # a PluginArgsError names file, profile and plugin
                    instances[ref.name] = registry.build(ref.name, args, self.handle, where)
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
            placement_score_weights={
                ref.name: ref.weight for ref in profile.pod_group_plugins.get("placementScore", ())
            },
        )

    def rebuild_profiles(self, config: SchedulerConfig) -> dict[str, Framework]:
        """Build every profile of ``config`` anew (fresh plugin instances from the registry, which may
        have changed: a remote plugin whose host now declares other points) and use them for the
        cycles that start from now on; cycles under way finish with the Frameworks they started with.
        Synchronous, so the switch happens between two cycles. Returns the Frameworks replaced."""
        profiles = {p.scheduler_name: self._build_framework(p) for p in config.profiles}
        for fwk in with_variants(profiles):
            for listener in self.profile_listeners:
                listener(fwk)
        old, self.profiles, self.config = self.profiles, profiles, config
        if self.batches:
            self.batches = {name: OpportunisticBatch(fwk) for name, fwk in profiles.items()}
        self._plugin_events = self._collect_events()
        return old

    def build_profiles(self, config: SchedulerConfig, registry: Registry) -> dict[str, Framework]:
        """The Frameworks of ``config``'s profiles with ``registry``'s plugins, built beside the ones
        serving: nothing the scheduler holds changes (a :class:`PluginArgsError` names bad args)."""
        return {p.scheduler_name: self._build_framework(p, registry) for p in config.profiles}

    async def reconfigure(self, config: SchedulerConfig, registry: Registry, profiles: dict[str, Framework],
                          plugins: Collection[str] = ()) -> Reconfigured:
        """Serve ``config`` with ``profiles`` (from :meth:`build_profiles`) from the next scheduling cycle
        on: the switch waits for the cycle under way. Binding cycles already started finish with the
        Frameworks they started with; they are returned, with what changed for the queue, which
        follows (:meth:`requeue_reconfigured`); ``plugins`` (remote plugins whose host changed) make
        the profiles running them count as changed."""
        async with self._cycle_lock:
            started = time.perf_counter()
            for fwk in with_variants(profiles):
                for listener in self.profile_listeners:
                    listener(fwk)
            old_config, old = self.config, self.profiles
            self.config, self.registry, self.profiles = config, registry, profiles
            if features.enabled("OpportunisticBatching"):
                self.batches = {name: OpportunisticBatch(fwk) for name, fwk in profiles.items()}
            self._plugin_events = self._collect_events()
            self.queue.initial_backoff = config.pod_initial_backoff_seconds
            self.queue.max_backoff = config.pod_max_backoff_seconds
            in_flight = set(self._binding_tasks)
            done = Reconfigured(old, in_flight, changed_profiles(old_config, config, old, profiles, plugins))
            await self._restart_controllers()
            await self.requeue_reconfigured(done.changed, added=profiles.keys() - old.keys(),
                                            removed=old.keys() - profiles.keys())
            done.pause = time.perf_counter() - started
        return done

    async def _restart_controllers(self) -> None:
        """Stop the controllers of plugins no profile runs any more; start those of new ones."""
        live = {id(p) for fwk in self.profiles.values() for p in fwk.plugins.values()}
        for plugin in [c for c in self._controllers if id(c) not in live]:
            self._controllers.remove(plugin)
            try:
                await plugin.stop()
            except Exception:
                log.exception("stopping the controller of plugin %r failed", getattr(plugin, "name", plugin))
        if self._running:
            await self.start_controllers()

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
                async with self._cycle_lock:
                    await self.schedule_one(info)
                # Let the rest of the event loop run between cycles: binding cycles (otherwise they pile
                # up, each holding its cycle's snapshot), and the gRPC server, the informers and the
                # status writes, which a run of cycles that never wait (in-process plugins, pods or
                # groups that do not fit) would otherwise starve until the queue is empty.
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

    def queue_of(self, uid: str) -> str:
        return self.queue.where(uid) or ""

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
