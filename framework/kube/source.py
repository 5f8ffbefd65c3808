"""The Kubernetes API as the scheduler's cluster source: informers feed the cache and the queue, and
bindings, failures, nominations and preemptions are written back, as kube-scheduler does.

::

    source = KubeSource(scheduler, ApiClient(KubeConfig.from_file(path), qps=50, burst=100))
    await source.start()               # the scheduler now binds through the API server
    await source.wait_synced(30)       # nodes, namespaces and pods listed
    ...
    await source.stop()

What comes in (kube-scheduler's eventhandlers.go):

- **Nodes** and **Namespaces** are listed and watched first; **Pods** once the nodes are in, bound pods
  of a list before pending ones, so a pending pod is never scheduled against a node whose pods are not
  counted yet.
- A pending pod whose ``schedulerName`` names a profile is queued; every bound pod is in the cache,
  whoever bound it (a pod this scheduler assumed is confirmed when its binding is seen on the watch);
  a pending pod for another scheduler is recorded and left alone; a pending pod being deleted is not
  scheduled.
- A change to a pending pod's status only (the scheduler's own condition, say) does not requeue it.
- **PodDisruptionBudgets** are listed and watched into a store that preemption reads when it runs, their
  status as the cluster's disruption controller keeps it (``disruptionsAllowed``, ``disruptedPods``),
  only when some profile runs DefaultPreemption, their one reader (kube-scheduler's informer factory
  starts only the informers its plugins asked for).
- **PersistentVolumeClaims**, **PersistentVolumes**, **StorageClasses** and **CSINodes** are listed and
  watched into the cache's volume store (what the volume plugins read); each change may requeue pods
  the volume plugins rejected. Pods are listed once these and the nodes are in.
- **ResourceSlices**, **DeviceClasses** and **ResourceClaims** (``resource.k8s.io/v1``) are listed and
  watched into the cache's DRA store when some profile runs DynamicResources, their one reader
  (:mod:`framework.kube.dra`); each change is a cluster event named by its kind, and pods are listed once
  they are in. **PodGroups** likewise into the PodGroup store with GenericWorkload on
  (:mod:`framework.kube.podgroups`). A pod's ``status.resourceClaimStatuses`` (the claims the resourceclaim
  controller made from its templates) changing is a change of the pod, as kube-scheduler's isPodUpdated has it.
- **Custom resources** the plugins register events for (kube-scheduler's ``plural.version.group``, e.g.
  Coscheduling's PodGroups) are listed and watched once the source has a scheduler, and each change is
  a cluster event under that name (:mod:`framework.kube.customresources`); they are not waited for.
- A pod of a profile that Outrigger cannot model (it does not convert) is not queued: it gets a
  ``FailedScheduling`` event and ``PodScheduled=False`` (``SchedulerError``) naming the reason, once per
  reason.

What goes out (schedule_one.go, the preemption executor):

- **Binding** through ``pods/binding`` (with the pod's uid, so a replaced pod is not bound), from the
  binding cycle; the scheduler's binding cycles run concurrently. A refusal because the pod is already
  bound (409) is handled: the pod is not requeued, the watch brings its binding. A binding to a node
  the informer no longer has fails before any request. A binding without an answer (the connection
  broke, a 5xx) may have been applied: the pod stays assumed while the API is asked how it ended.
- **Events** (``Scheduled``, ``FailedScheduling``, ``Preempted``) and **pod status** (``PodScheduled``,
  ``nominatedNodeName``) in the background (:mod:`framework.kube.events`): one binding and one event
  per scheduled pod.
- **Victims** get the ``DisruptionTarget`` condition (``PreemptionByScheduler``), then are deleted.
- **Volume bindings** (VolumeBinding's PreBind, :mod:`framework.kube.volumewriter`): a PersistentVolume's
  ``claimRef``, a claim's ``volumeName`` and annotations, with ``PUT`` and the resourceVersion read (a
  conflict fails the binding cycle, which is retried); the phases through the ``status`` subresources,
  best effort (a real cluster's PV controller sets them too).
- **PodGroup conditions** (the group cycle's ``PodGroupInitiallyScheduled``): a strategic-merge PATCH of
  the ``status`` subresource, in the background (:class:`framework.kube.podgroups.ApiPodGroupStatusWriter`).
- **Claim allocations** (DynamicResources' PreBind and Unreserve, :class:`framework.kube.dra.ApiClaimWriter`):
  a claim's ``status`` (allocation, reservedFor) with ``PUT`` and the resourceVersion read, fenced like
  bindings; a conflict fails the binding cycle, which is retried.

API objects are converted once as they arrive (:mod:`framework.kube.convert`). With leader election
(:func:`framework.kube.serve.serve_cluster`, :mod:`framework.kube.leader`) a source built without a
scheduler is a standby's: its informers fill their stores and nothing is written; :meth:`KubeSource.attach`
hands the stores to the scheduler when the replica takes over, and ``fence`` keeps every write inside
the lease.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pluginhost.model import Node, PersistentVolumeClaim, Pod, PodDisruptionBudget
from pluginhost.snapshot import StorageObject
from pluginhost.status import SUCCESS, Status
from pluginhost.workload import PodGroup

from .bindings import OUTCOME_SECONDS, assigned_node, binding_body, binding_outcome
from .client import REQUEST_TIMEOUT, STRATEGIC_MERGE_PATCH, ApiClient, ApiError, ApiUnreachable
from .convert import (
    PodItem,
    convert_namespace,
    convert_node,
    convert_pdb,
    convert_pod,
    csinode_from_api,
    pv_from_api,
    pvc_from_api,
    reconvert_pod,
    spec_changed,
    storage_class_from_api,
    storage_converter,
)
from .customresources import custom_resource_informers
from .dra import ApiClaimWriter, ClaimWaiters, dra_informers
from .events import EventRecorder, StatusWriter, Writer, rfc3339
from .informer import Informer
from .podgroups import PodGroupWatch
from .volumewriter import ApiVolumeWriter

if TYPE_CHECKING:
    from ..dra.store import DraObject
    from ..scheduler import Scheduler

__all__ = ["KubeSource", "uses_default_preemption", "uses_dynamic_resources"]

log = logging.getLogger("outrigger.kube")

DEFAULT_PREEMPTION = "DefaultPreemption"
DYNAMIC_RESOURCES = "DynamicResources"


# ---- informer handlers: what each watch event does to the scheduler -------------------------------


class _Nodes:
    def __init__(self, source: KubeSource) -> None:
        self.s = source

    async def on_add(self, node: Node) -> None:
        if self.s.attached:
            self.s.scheduler.observe_node(node)

    async def on_update(self, old: Node, new: Node) -> None:
        if self.s.attached:
            self.s.scheduler.observe_node(new)

    async def on_delete(self, node: Node) -> None:
        if self.s.attached:
            self.s.scheduler.observe_node_deleted(node.name)


class _Namespaces:
    def __init__(self, source: KubeSource) -> None:
        self.s = source

    async def on_add(self, ns: tuple[str, dict[str, str]]) -> None:
        self.s.namespace_labels[ns[0]] = ns[1]

    async def on_update(self, old: tuple[str, dict[str, str]], new: tuple[str, dict[str, str]]) -> None:
        self.s.namespace_labels[new[0]] = new[1]

    async def on_delete(self, ns: tuple[str, dict[str, str]]) -> None:
        self.s.namespace_labels.pop(ns[0], None)


class _Pods:
    def __init__(self, source: KubeSource) -> None:
        self.s = source

    async def on_add(self, item: PodItem) -> None:
        if self.s.attached:
            await self.s._pod_changed(None, item)

    async def on_update(self, old: PodItem, new: PodItem) -> None:
        if self.s.attached:
            await self.s._pod_changed(old, new)

    async def on_delete(self, item: PodItem) -> None:
        if self.s.attached:
            self.s._pod_deleted(item)


class _StoreOnly:
    """Objects read from the informer's store when needed (PodDisruptionBudgets: by preemption)."""

    async def on_add(self, obj: object) -> None:
        pass

    async def on_update(self, old: object, new: object) -> None:
        pass

    async def on_delete(self, obj: object) -> None:
        pass


class _Storage:
    """Claims, volumes, classes and CSINodes into the scheduler's volume store (whose listener tells
    the queue, so the pods the volume plugins rejected may be tried again)."""

    def __init__(self, source: KubeSource, kind: str) -> None:
        self.s = source
        self.kind = kind

    async def on_add(self, obj: StorageObject | None) -> None:
        if obj is not None and self.s.attached:
            self.s.scheduler.cache.volumes.upsert(obj)

    async def on_update(self, old: StorageObject | None, new: StorageObject | None) -> None:
        if new is not None and self.s.attached:
            self.s.scheduler.cache.volumes.upsert(new)

    async def on_delete(self, obj: StorageObject | None) -> None:
        if obj is not None and self.s.attached:
            key = obj.key if not isinstance(obj, PersistentVolumeClaim) else f"{obj.namespace}/{obj.name}"
            self.s.scheduler.cache.volumes.remove(self.kind, key)


class KubeSource:
    """A live cluster behind ``scheduler`` (a :class:`framework.scheduler.ClusterSource`).

    Built without a scheduler (a standby replica), its informers only keep their stores current;
    :meth:`attach` hands everything they hold to a scheduler at once when the replica takes over.
    ``fence``, when set, says how long a write sent now may take (0: this replica may not write; see
    :meth:`framework.kube.leader.LeaderElector.bind_window`)."""

    accepts_apply = False

    def __init__(self, scheduler: Scheduler | None, client: ApiClient, *, hostname: str | None = None,
                 writers: int = 8, pdbs: bool | None = None, dra: bool | None = None) -> None:
        self._scheduler = scheduler
        #: Whether to list and watch PodDisruptionBudgets before a scheduler is attached (a standby's
        #: reading of its configuration file; None: yes). With a scheduler, its profiles decide.
        self._standby_pdbs = pdbs
        self._pdb_task: asyncio.Task[None] | None = None
        #: The same for ResourceSlices, DeviceClasses and ResourceClaims (DynamicResources' objects).
        self._standby_dra = dra
        self._dra_tasks: list[asyncio.Task[None]] = []
        #: Seconds a write sent now may take before another replica could hold the lease (None: no
        #: leader election, no limit).
        self.fence: Callable[[], float] | None = None
        self.client = client
        self.writer = Writer(writers)
        self.events = EventRecorder(client, self.writer, hostname=hostname or socket.gethostname())
        self.status = StatusWriter(client, self.writer, self._pod_status)
        self.nodes: Informer[Node] = Informer(client, "/api/v1/nodes", "nodes", convert_node, _Nodes(self))
        self.namespaces: Informer[tuple[str, dict[str, str]]] = Informer(
            client, "/api/v1/namespaces", "namespaces", convert_namespace, _Namespaces(self)
        )
        self.pods: Informer[PodItem] = Informer(
            client, "/api/v1/pods", "pods", convert_pod, _Pods(self), reconvert=reconvert_pod,
            order=lambda i: 0 if i.node_name else 1,
        )
        self.pdbs: Informer[PodDisruptionBudget] = Informer(
            client, "/apis/policy/v1/poddisruptionbudgets", "poddisruptionbudgets", convert_pdb, _StoreOnly()
        )
        # The volume plugins' objects, into the scheduler's volume store.
        self.claims: Informer[StorageObject | None] = Informer(
            client, "/api/v1/persistentvolumeclaims", "persistentvolumeclaims",
            storage_converter(pvc_from_api, "PersistentVolumeClaim"), _Storage(self, "PersistentVolumeClaim"))
        self.volumes: Informer[StorageObject | None] = Informer(
            client, "/api/v1/persistentvolumes", "persistentvolumes",
            storage_converter(pv_from_api, "PersistentVolume"), _Storage(self, "PersistentVolume"))
        self.storage_classes: Informer[StorageObject | None] = Informer(
            client, "/apis/storage.k8s.io/v1/storageclasses", "storageclasses",
            storage_converter(storage_class_from_api, "StorageClass"), _Storage(self, "StorageClass"))
        self.csinodes: Informer[StorageObject | None] = Informer(
            client, "/apis/storage.k8s.io/v1/csinodes", "csinodes",
            storage_converter(csinode_from_api, "CSINode"), _Storage(self, "CSINode"))
        #: DynamicResources' objects, into the scheduler's DRA store (started when a profile runs it).
        self.dra: list[Informer[DraObject | None]] = dra_informers(self)
        #: PodGroups into the scheduler's PodGroup store, and its condition writes (with GenericWorkload on).
        self.podgroups = PodGroupWatch(self)
        #: Pods gated for want of a claim, tried again when it arrives.
        self.claim_waiters = ClaimWaiters()
        #: The custom resources the scheduler's plugins registered events for (once it has one).
        self.custom: list[Informer[dict[str, Any]]] = []
        #: Namespace name -> labels, as the API has them.
        self.namespace_labels: dict[str, dict[str, str]] = {}
        # Pods whose binding the API refused as already bound (the watch brings where).
        self._bound_elsewhere: set[str] = set()
        # uid -> the reason already reported for a pod Outrigger cannot model.
        self._reported: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def scheduler(self) -> Scheduler:
        if self._scheduler is None:
            raise RuntimeError("no scheduler attached to this source (a standby)")
        return self._scheduler

    @property
    def attached(self) -> bool:
        return self._scheduler is not None

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Take over the scheduler's source and start the informers (pods once nodes and the volume
        plugins' objects are listed)."""
        if self._scheduler is not None:
            self._scheduler.source = self
            self._scheduler.cache.volumes.writer = ApiVolumeWriter(self)
            self._scheduler.cache.dra.writer = ApiClaimWriter(self)
            self._scheduler.cache.podgroups.writer = self.podgroups.writer
        self.writer.start()
        self.events.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.nodes.run()), loop.create_task(self.namespaces.run()),
                       *(loop.create_task(i.run()) for i in self.storage_informers()),
                       *self.podgroups.start(), loop.create_task(self._start_pods())]
        self._watch_pdbs(self.wants_pdbs())
        self._watch_dra(self.wants_dra())
        if self._scheduler is not None:
            self._watch_custom_resources(self._scheduler)

    def wants_pdbs(self) -> bool:
        """Whether PodDisruptionBudgets are needed: some profile of the scheduler runs DefaultPreemption
        (without a scheduler, what the source was built with says)."""
        if self._scheduler is None:
            return self._standby_pdbs is not False
        return uses_default_preemption(self._scheduler)

    def _watch_pdbs(self, wanted: bool) -> None:
        """Start the PodDisruptionBudget informer when wanted and not running; stop it when running and
        not wanted (a standby that read its file otherwise than the scheduler it attaches)."""
        if wanted and self._pdb_task is None:
            self._pdb_task = asyncio.get_running_loop().create_task(self.pdbs.run())
            self._tasks.append(self._pdb_task)
        elif not wanted and self._pdb_task is not None:
            self._pdb_task.cancel()
            self._tasks.remove(self._pdb_task)
            self._pdb_task = None
            self.pdbs.store.clear()

    def wants_dra(self) -> bool:
        """Whether ResourceSlices, DeviceClasses and ResourceClaims are needed: some profile runs
        DynamicResources (without a scheduler, what the source was built with says)."""
        if self._scheduler is None:
            return self._standby_dra is not False
        return uses_dynamic_resources(self._scheduler)

    def _watch_dra(self, wanted: bool) -> None:
        """Start DynamicResources' informers when wanted and not running; stop them (and forget what they
        held) when running and not wanted."""
        if wanted and not self._dra_tasks:
            loop = asyncio.get_running_loop()
            self._dra_tasks = [loop.create_task(i.run()) for i in self.dra]
            self._tasks.extend(self._dra_tasks)
        elif not wanted and self._dra_tasks:
            for task in self._dra_tasks:
                task.cancel()
                self._tasks.remove(task)
            self._dra_tasks = []
            for informer in self.dra:
                informer.store.clear()

    def reconfigured(self) -> None:
        """The scheduler serves a new configuration (a live change): PodDisruptionBudgets and the DRA
        objects are watched if its profiles now need them, and no longer if they do not."""
        if self._tasks:
            self._watch_pdbs(self.wants_pdbs())
            self._watch_dra(self.wants_dra())

    def informers(self) -> list[Informer[Any]]:
        """The informers that run (or will once their turn comes), in the order they are listed."""
        pdbs = [self.pdbs] if self._pdb_task is not None else []
        dra = self.dra if self._dra_tasks else []
        return [self.nodes, self.namespaces, *pdbs, *self.storage_informers(), *dra, *self.podgroups.running(),
                self.pods]

    def storage_informers(self) -> tuple[Informer[StorageObject | None], ...]:
        """The informers of the volume plugins' objects: claims, volumes, classes, CSINodes."""
        return self.claims, self.volumes, self.storage_classes, self.csinodes

    def _watch_custom_resources(self, scheduler: Scheduler) -> None:
        """Start the informers of the custom resources ``scheduler``'s plugins registered events for
        (once: a standby's source starts them when it attaches)."""
        if self.custom:
            return
        self.custom = custom_resource_informers(scheduler, self.client)
        loop = asyncio.get_running_loop()
        self._tasks.extend(loop.create_task(i.run()) for i in self.custom)

    async def _start_pods(self) -> None:
        await self.nodes.synced.wait()
        for informer in (*self.storage_informers(), *(self.dra if self._dra_tasks else ()), *self.podgroups.running()):
            await informer.synced.wait()
        await self.pods.run()

    async def attach(self, scheduler: Scheduler) -> None:
        """Become ``scheduler``'s source and hand it what the informers hold: nodes, namespaces, then
        bound pods before pending ones (no relist: a standby's stores are current). Informer events from
        now on go to the scheduler; one that overtakes the hand-over is applied twice, harmlessly, since
        each object is read from the store as it is handed over."""
        self._scheduler = scheduler
        scheduler.source = self
        scheduler.cache.volumes.writer = ApiVolumeWriter(self)
        scheduler.cache.dra.writer = ApiClaimWriter(self)
        scheduler.cache.podgroups.writer = self.podgroups.writer
        if self._tasks:  # the informers run: the scheduler's profiles decide now whether PDBs are watched
            self._watch_pdbs(self.wants_pdbs())
            self._watch_dra(self.wants_dra())
        self._watch_custom_resources(scheduler)
        for informer in self.storage_informers():
            for obj in list(informer.store.values()):
                if obj is not None:
                    scheduler.cache.volumes.upsert(obj)
        for dra in self.dra:
            for held in list(dra.store.values()):
                if held is not None:
                    scheduler.cache.dra.put(held)
        self.podgroups.hand_over(scheduler)
        nodes = self.nodes.store
        for key in list(nodes):
            node = nodes.get(key)
            if node is not None:
                scheduler.observe_node(node)
        self.namespace_labels.update(dict(self.namespaces.store.values()))
        pods = self.pods.store
        keys = sorted(pods, key=lambda k: 0 if pods[k].node_name else 1)
        for key in keys:
            item = pods.get(key)
            if item is not None:
                await self._pod_changed(None, item)

    def may_write(self) -> bool:
        """Whether this replica may write to the cluster now (always, without leader election)."""
        return self.fence is None or self.fence() > 0

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until nodes, namespaces, PodDisruptionBudgets (when watched), the volume plugins' objects
        and pods have been listed once."""
        waits = [i.synced.wait() for i in self.informers()]
        await asyncio.wait_for(asyncio.gather(*waits), timeout)

    async def stop(self, flush: float = 5.0) -> None:
        """Stop the informers, send the pending events and status writes (within ``flush`` s), close."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._pdb_task = None
        self._dra_tasks = []
        await self.events.stop()
        await self.writer.stop(flush)
        await self.client.close()

    # ---- informer events -----------------------------------------------------------------------

    async def _pod_changed(self, old: PodItem | None, new: PodItem) -> None:
        sched = self.scheduler
        pod = new.pod
        if pod is None or (new.problem and not new.node_name):
            if old is not None and old.pod is not None:
                sched.observe_pod_deleted(old.pod)
            if not new.node_name and new.scheduler_name in sched.profiles:
                self._report_unmodelled(new)
            elif pod is None and self._reported.get(new.uid) != new.problem:
                self._reported[new.uid] = new.problem
                log.warning("pod %s cannot be modelled, its resources are not counted: %s", new.key, new.problem)
            return
        if not pod.node_name and pod.deletion_timestamp is not None:
            sched.observe_pod_deleted(pod)  # a pending pod being deleted is not scheduled
            return
        changed = old is None or old.pod is None or spec_changed(old.raw, new.raw) or (
            _claim_statuses(old.raw) != _claim_statuses(new.raw))
        await sched.observe_pod(pod, spec_changed=changed)
        if pod.resource_claims:
            self.claim_waiters.note(sched, pod)

    def _pod_deleted(self, item: PodItem) -> None:
        self._bound_elsewhere.discard(item.uid)
        self._reported.pop(item.uid, None)
        self.claim_waiters.forget(item.uid)
        self.status.forget(item.uid)
        if item.pod is not None:
            self.scheduler.observe_pod_deleted(item.pod)

    def _report_unmodelled(self, item: PodItem) -> None:
        if self._reported.get(item.uid) == item.problem:
            return
        self._reported[item.uid] = item.problem
        name, namespace = item.key.split("/", 1)[1], item.key.split("/", 1)[0]
        pod = item.pod or Pod(name=name, namespace=namespace, uid=item.uid, scheduler_name=item.scheduler_name,
                              raw=item.raw)
        message = f"Outrigger cannot schedule this pod: {item.problem}"
        log.warning("pod %s: %s", item.key, message)
        self.events.record(pod, type_="Warning", reason="FailedScheduling", action="Scheduling", note=message,
                           controller=item.scheduler_name)
        self.status.unschedulable(pod, "SchedulerError", message)

    def _pod_status(self, key: str, uid: str) -> dict[str, Any] | None:
        item = self.pods.store.get(key)
        if item is None or item.uid != uid:
            return None
        status = item.raw.get("status")
        return status if isinstance(status, dict) else {}

    # ---- ClusterSource -------------------------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str) -> Status:
        if node_name not in self.nodes.store:
            return Status.failure(f'node "{node_name}" not found (deleted while binding)')
        timeout = REQUEST_TIMEOUT
        if self.fence is not None:
            window = self.fence()
            if window <= 0:
                return Status.failure("not bound: this replica no longer holds the leader lease")
            timeout = min(timeout, window)  # given up before another replica could lead
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        deadline = time.monotonic() + OUTCOME_SECONDS
        try:
            await self.client.request("POST", path, verb="create", resource="pods/binding",
                                      body=binding_body(pod, node_name), timeout=timeout)
        except ApiError as exc:
            if exc.code == 409 and "already assigned" in exc.message:
                if assigned_node(exc.message) == node_name:
                    # On the node this cycle chose: an earlier send of this binding landed (the client sends
                    # a binding again after a 5xx with Retry-After), or another binder agreed. The pod is
                    # bound where it is assumed, so it keeps its room until the watch confirms it.
                    log.info("pod %s: %s; bound as chosen", pod.key, exc.message)
                    self.scheduler.stats.bound += 1
                    return SUCCESS
                # Bound elsewhere (by this scheduler before a restart, or by another): handled, not retried.
                self._bound_elsewhere.add(pod.uid)
                log.info("pod %s: %s", pod.key, exc.message)
            elif exc.code >= 500:
                return await self._binding_outcome(pod, node_name, str(exc), deadline)
            # The API server's own words, as client-go's error reads in kube-scheduler's DefaultBinder: the
            # FailedScheduling note says what kube-scheduler's would.
            return Status.failure(exc.message)
        except ApiUnreachable as exc:
            # Even "connection refused" may follow an attempt on a kept-alive connection that the server
            # applied before it died: the answer is unknown, never taken as "not bound".
            return await self._binding_outcome(pod, node_name, str(exc), deadline)
        self.scheduler.stats.bound += 1
        return SUCCESS

    async def _binding_outcome(self, pod: Pod, node_name: str, why: str, deadline: float) -> Status:
        """A binding without an answer may have been applied: the pod stays assumed, its room held, until
        the API says how it ended (:func:`framework.kube.bindings.binding_outcome`)."""
        status, bound_to = await binding_outcome(self.client, pod, node_name, why, deadline, self.fence)
        if status.ok:
            self.scheduler.stats.bound += 1
        elif bound_to:
            self._bound_elsewhere.add(pod.uid)
        return status

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        if not self.may_write():
            return Status.failure(f"pod {pod.key} not deleted: this replica no longer holds the leader lease")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            if reason.startswith("preempted by "):
                await self._mark_disruption(pod, reason)
            # The uid precondition makes a second copy harmless (the client sends one after a 5xx with
            # Retry-After): it finds the pod gone, or another pod of the name, which it leaves alone.
            await self.client.request("DELETE", path, verb="delete", resource="pods",
                                      body={"preconditions": {"uid": pod.uid}})
        except ApiError as exc:
            if exc.code == 404:
                # Gone: an earlier send of this delete landed, or someone else deleted it. Either way
                # the victim is gone, which is what was asked (kube-scheduler ignores NotFound too).
                log.info("pod %s: already deleted", pod.key)
                return SUCCESS
            if exc.code == 409:
                # The uid precondition failed: the name is another pod's now, which is not a victim.
                return Status.failure(f"pod {pod.key} not deleted: the name now belongs to another pod "
                                      f"(uid {pod.uid} precondition failed: {exc.message})")
            return Status.failure(str(exc))
        except ApiUnreachable as exc:
            return Status.failure(str(exc))
        return SUCCESS

    async def _mark_disruption(self, victim: Pod, reason: str) -> None:
        # kube-scheduler's preemption: DisruptionTarget=True (PreemptionByScheduler) before the delete.
        preemptor_key = reason.removeprefix("preempted by ").split(" on node ", 1)[0]
        kind = "pod"
        if preemptor_key.startswith("podgroup "):  # a PodGroup's preemption (DefaultPreemption's PodGroupPostFilter)
            kind, preemptor_key = "podgroup", preemptor_key.removeprefix("podgroup ")
        ns, _, name = preemptor_key.partition("/")
        if kind == "pod":
            rec = self.scheduler.get_pod(ns, name)
            sched_name = rec.pod.scheduler_name if rec is not None else victim.scheduler_name
        else:
            members = self.scheduler.cache.podgroups.members(ns, name)
            sched_name = members[0].scheduler_name if members else victim.scheduler_name
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{sched_name}: preempting to accommodate a higher priority {kind}",
                "lastTransitionTime": rfc3339(time.time())}
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}/status"
        await self.client.request("PATCH", path, verb="patch", resource="pods/status",
                                  body={"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE_PATCH,
                                  idempotent=True)  # values: the same applied twice

    def already_bound(self, pod: Pod) -> bool:
        if pod.uid in self._bound_elsewhere:
            return True
        item = self.pods.store.get(pod.key)
        return item is not None and item.uid == pod.uid and bool(item.node_name)

    def scheduled(self, pod: Pod, node_name: str) -> None:
        self.events.record(pod, type_="Normal", reason="Scheduled", action="Binding",
                           note=f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}",
                           controller=pod.scheduler_name)

    def failed(self, pod: Pod, status: Status) -> None:
        if not self.may_write():
            return  # a replica that lost its lease tells nothing (the new leader will)
        reason = "Unschedulable" if status.is_rejected else "SchedulerError"
        message = status.message()
        self.events.record(pod, type_="Warning", reason="FailedScheduling", action="Scheduling", note=message,
                           controller=pod.scheduler_name)
        self.status.unschedulable(pod, reason, message)

    def nominated(self, pod: Pod, node_name: str) -> None:
        if self.may_write():
            self.status.nominate(pod, node_name)

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        # As the disruption controller keeps them: kube-scheduler reads the status and nothing else.
        return list(self.pdbs.store.values())

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        # kube-scheduler's GetNamespaceLabelsSnapshot: a namespace the informer does not have has none.
        return self.namespace_labels.get(namespace) or {}

    def preempted(self, victim: Pod, preemptor: Pod | PodGroup, node_name: str, in_memory: bool = False) -> None:
        # kube-scheduler 1.37 says when the victim was stopped without being deleted; a PodGroup's
        # preemption is "by podgroup <uid>", reported by its pods' scheduler.
        kind = "pod" if isinstance(preemptor, Pod) else "podgroup"
        note = f"Preempted by {kind} {preemptor.uid} on node {node_name}"
        if in_memory:
            note += " (in kube-scheduler memory)."
        self.events.record(victim, type_="Normal", reason="Preempted", action="Preempting", note=note,
                           controller=self._scheduler_of(preemptor, victim), related=preemptor)

    def _scheduler_of(self, preemptor: Pod | PodGroup, victim: Pod) -> str:
        """The scheduler name a preemptor acts for: a pod's own, a PodGroup's pods' (the victim's when
        none is known)."""
        if isinstance(preemptor, Pod):
            return preemptor.scheduler_name
        members = self.scheduler.cache.podgroups.members(preemptor.namespace, preemptor.name)
        return members[0].scheduler_name if members else victim.scheduler_name


def uses_default_preemption(scheduler: Scheduler) -> bool:
    """Whether some profile of ``scheduler`` runs DefaultPreemption at PostFilter (the in-tree plugin,
    the one reader of PodDisruptionBudgets)."""
    return any(DEFAULT_PREEMPTION in prof.names("postFilter") for prof in scheduler.config.profiles)


def uses_dynamic_resources(scheduler: Scheduler) -> bool:
    """Whether some profile of ``scheduler`` runs DynamicResources (at any point: PreFilter, Filter, ...),
    the one reader of ResourceSlices, DeviceClasses and ResourceClaims."""
    return any(DYNAMIC_RESOURCES in prof.names(point) for prof in scheduler.config.profiles for point in prof.plugins)


def _claim_statuses(raw: dict[str, Any]) -> Any:
    # The claims the resourceclaim controller made for a pod's templates (kube-scheduler's
    # UpdatePodGeneratedResourceClaim): a change the pod's own status carries that scheduling reads.
    status = raw.get("status")
    return status.get("resourceClaimStatuses") if isinstance(status, dict) else None
