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
  status as the cluster's disruption controller keeps it (``disruptionsAllowed``, ``disruptedPods``).
- **PersistentVolumeClaims**, **PersistentVolumes**, **StorageClasses** and **CSINodes** are listed and
  watched into the cache's volume store (what the volume plugins read); each change may requeue pods
  the volume plugins rejected. Pods are listed once these and the nodes are in.
- A pod of a profile that Outrigger cannot model (it does not convert, or it needs dynamic resources,
  which Outrigger does not implement) is not queued: it gets a ``FailedScheduling`` event and
  ``PodScheduled=False`` (``SchedulerError``) naming the reason, once per reason.

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

With leader election (:func:`serve_cluster`, :mod:`framework.kube.leader`) a source built without a
scheduler is a standby's: its informers fill their stores and nothing is written; :meth:`KubeSource.attach`
hands the stores to the scheduler when the replica takes over, and ``fence`` keeps every write inside
the lease.
- **Volume bindings** (VolumeBinding's PreBind): a PersistentVolume's ``claimRef``, a claim's
  ``volumeName`` and annotations, with ``PUT`` and the resourceVersion read (a conflict fails the
  binding cycle, which is retried); the phases through the ``status`` subresources, best effort (a
  real cluster's PV controller sets them too).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from pluginhost.decode import TextError, load_document
from pluginhost.manifest import (
    ManifestError,
    csinode_from_dict,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from pluginhost.model import Node, PersistentVolume, PersistentVolumeClaim, Pod, PodDisruptionBudget
from pluginhost.snapshot import StorageObject, VolumeStoreError
from pluginhost.status import SUCCESS, Status

from ..config import LeaderElectionConfig, format_duration, leader_election_config
from ..httpserver import HttpServer
from ..metrics import SchedulerMetrics
from ..observe.health import ENDPOINTS as HEALTH_ENDPOINTS
from ..observe.health import HealthChecks
from .client import (
    REQUEST_TIMEOUT,
    STRATEGIC_MERGE_PATCH,
    ApiClient,
    ApiError,
    ApiUnreachable,
    KubeConfig,
    KubeConfigError,
)
from .events import EventRecorder, StatusWriter, Writer, rfc3339
from .informer import Informer
from .leader import LeaderElector, LeaderMetrics, LeaseLock, new_identity

if TYPE_CHECKING:
    from pluginhost.security import ServerTLS

    from ..config import SchedulerConfig
    from ..observability import ObservabilityConfig
    from ..plugins import Registry
    from ..remote import EndpointConfig
    from ..scheduler import Scheduler
    from ..service import Server

__all__ = [
    "ClientConnection",
    "KubeConfigError",
    "KubeSource",
    "PodItem",
    "client_connection",
    "configured_kubeconfig",
    "connect",
    "convert_node",
    "convert_pdb",
    "convert_pod",
    "leader_election",
    "reconvert_pod",
    "serve_cluster",
    "unsupported",
]

log = logging.getLogger("outrigger.kube")

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
# How long a binding cycle waits to learn whether a binding whose answer was lost went through (without
# leader election; with it, until the lease could pass to another replica), and how often it asks.
OUTCOME_SECONDS = 60.0
OUTCOME_RETRY = 0.5


def _lenient(fn: Callable[..., Any]) -> Callable[..., Any]:
    # Objects from the API server were validated by it: the manifest decoder's strictness about
    # unknown fields (meant for hand-written files) is turned off where the decoder offers it.
    if "validate" in inspect.signature(fn).parameters:
        return functools.partial(fn, validate="ignore")
    return fn


_pod_from_api = _lenient(pod_from_dict)
_node_from_api = _lenient(node_from_dict)
_pdb_from_api = _lenient(pdb_from_dict)


# ---- converting API objects -----------------------------------------------------------------------


@dataclass(slots=True)
class PodItem:
    """A pod as the informer keeps it: converted once, with what keeps Outrigger from scheduling it."""

    key: str
    uid: str
    scheduler_name: str
    node_name: str
    #: None when the object could not be converted (``problem`` says why).
    pod: Pod | None
    #: Why Outrigger cannot schedule this pod ("" when it can).
    problem: str
    raw: dict[str, Any] = field(repr=False)


def unsupported(obj: dict[str, Any]) -> str:
    """What in a pod's spec no Outrigger plugin handles, in a user's words ("" when nothing). Volumes
    are the volume plugins' (claims, ephemeral claims, CSI and in-tree disks)."""
    spec = obj.get("spec") or {}
    if spec.get("resourceClaims"):
        return "spec.resourceClaims: dynamic resource allocation (DynamicResources) is not implemented by Outrigger"
    return ""


def convert_pod(obj: dict[str, Any]) -> PodItem:
    """An API Pod as a :class:`PodItem` (``managedFields`` dropped: nothing reads them)."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    spec = obj.get("spec") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    uid = str(meta.get("uid") or "")
    sched_name = str(spec.get("schedulerName") or "default-scheduler")
    node_name = str(spec.get("nodeName") or "")
    try:
        pod: Pod | None = _pod_from_api(obj)
        problem = unsupported(obj)
    except ManifestError as exc:
        pod, problem = None, exc.reason or str(exc)
        if exc.path:
            problem = f"{exc.path}: {problem}"
    return PodItem(key, uid, sched_name, node_name, pod, problem, obj)


def reconvert_pod(old: PodItem, obj: dict[str, Any]) -> PodItem:
    """A changed API Pod as a :class:`PodItem`. When only its binding (``spec.nodeName``) or its status
    (other than ``nominatedNodeName``) changed, the pod converted before is reused with the new node:
    what the scheduler reads comes from the spec, the identity, labels and annotations. That is the
    change every pod this scheduler binds goes through once, so it skips a second full conversion."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod = old.pod
    if pod is None or old.problem or meta.get("uid") != old.uid:
        return convert_pod(obj)
    old_meta, old_spec = old.raw.get("metadata") or {}, old.raw.get("spec") or {}
    node_name = spec.get("nodeName") or ""
    if (
        len(spec) - ("nodeName" in spec) != len(old_spec) - ("nodeName" in old_spec)
        or any(v != old_spec.get(k) for k, v in spec.items() if k != "nodeName")
        or any(meta.get(k) != old_meta.get(k) for k in _POD_META)
        or ((obj.get("status") or {}).get("nominatedNodeName") or "") != pod.nominated_node_name
    ):
        return convert_pod(obj)
    meta.pop("managedFields", None)
    new = dataclasses.replace(pod, node_name=node_name, raw=obj)
    return PodItem(old.key, old.uid, old.scheduler_name, node_name, new, "", obj)


# What a Pod takes from its metadata besides its name and namespace (pluginhost.manifest).
_POD_META = ("labels", "annotations", "creationTimestamp", "deletionTimestamp")


def convert_node(obj: dict[str, Any]) -> Node:
    """An API Node as a :class:`Node`. One that cannot be converted is kept as an unschedulable node
    with nothing allocatable (its bound pods are still counted, nothing new goes there), and logged."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    try:
        node: Node = _node_from_api(obj)
        return node
    except ManifestError as exc:
        name = str(meta.get("name") or "")
        log.warning("node %s cannot be modelled, no pod will be scheduled to it: %s", name, exc)
        return Node(name=name, uid=str(meta.get("uid") or ""), unschedulable=True, raw=obj)


def convert_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    """An API PodDisruptionBudget as a :class:`PodDisruptionBudget`. One that cannot be converted is kept
    as matching no pod (kube-scheduler's preemption treats a selector it cannot read so), and logged."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    try:
        pdb: PodDisruptionBudget = _pdb_from_api(obj)
        return pdb
    except ManifestError as exc:
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        log.warning("PodDisruptionBudget %s/%s cannot be modelled, preemption ignores it: %s", namespace, name, exc)
        return PodDisruptionBudget(name=name, namespace=namespace, uid=str(meta.get("uid") or ""), raw=obj)


def _spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether more than the status changed (kube-scheduler's isPodUpdated)."""
    if old.get("spec") != new.get("spec"):
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return any(om.get(k) != nm.get(k) for k in ("labels", "annotations", "deletionTimestamp", "ownerReferences"))


# ---- the client connection ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """KubeSchedulerConfiguration's ``clientConnection``: kubeconfig, qps (50), burst (100)."""

    kubeconfig: str = ""
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST


def client_connection(config: SchedulerConfig) -> ClientConnection:
    """The configuration's ``clientConnection`` with kube-scheduler's v1 defaults (0 or unset: 50 and
    100; a negative qps turns rate limiting off, as in client-go). A wrong type is a KubeConfigError."""
    return _client_connection(config.extra.get("clientConnection") or {})


def _client_connection(raw: dict[str, Any]) -> ClientConnection:
    kubeconfig = raw.get("kubeconfig") or ""
    qps = raw.get("qps") or DEFAULT_QPS
    burst = raw.get("burst") or DEFAULT_BURST
    if not isinstance(kubeconfig, str):
        raise KubeConfigError(f"clientConnection.kubeconfig: must be a string, got {kubeconfig!r}")
    if not isinstance(qps, int | float) or isinstance(qps, bool):
        raise KubeConfigError(f"clientConnection.qps: must be a number, got {qps!r}")
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 0:
        raise KubeConfigError(f"clientConnection.burst: must be a non-negative integer, got {burst!r}")
    return ClientConnection(kubeconfig, float(qps), burst)


# ---- the source -----------------------------------------------------------------------------------


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


def _namespace(obj: dict[str, Any]) -> tuple[str, dict[str, str]]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name")), dict(meta.get("labels") or {})


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


_pvc_from_api = _lenient(pvc_from_dict)
_pv_from_api = _lenient(pv_from_dict)
_storage_class_from_api = _lenient(storage_class_from_dict)
_csinode_from_api = _lenient(csinode_from_dict)


def _storage_converter(build: Callable[[dict[str, Any]], StorageObject], kind: str
                       ) -> Callable[[dict[str, Any]], StorageObject | None]:
    """An informer's converter for one storage kind: None (logged) for an object that does not convert."""

    def convert(obj: dict[str, Any]) -> StorageObject | None:
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        try:
            return build(obj)
        except ManifestError as exc:
            log.warning("%s %s cannot be modelled, the volume plugins do not see it: %s", kind,
                        meta.get("name"), exc)
            return None

    return convert


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


class _VolumeWriter:
    """VolumeBinding's PreBind writes through the API server (:class:`pluginhost.snapshot.VolumeWriter`):
    a ``PUT`` of the object as the informer last saw it with the binder's changes, so the
    resourceVersion makes a concurrent change a 409 (VolumeStoreError). Status phases go to the
    ``status`` subresources and are best effort: a role without them (the PV controller's) is logged once."""

    def __init__(self, source: KubeSource) -> None:
        self.s = source
        self._status_refused = False

    def _timeout(self, what: str) -> float:
        if self.s.fence is None:
            return REQUEST_TIMEOUT
        window = self.s.fence()
        if window <= 0:
            raise VolumeStoreError(f"{what} not written: this replica no longer holds the leader lease")
        return min(REQUEST_TIMEOUT, window)

    async def _put(self, path: str, resource: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            answer = await self.s.client.request("PUT", path, verb="update", resource=resource, body=body,
                                                 timeout=self._timeout(what))
        except ApiError as exc:
            if exc.code in (404, 409):
                raise VolumeStoreError(str(exc)) from None
            raise
        return answer if isinstance(answer, dict) else {}

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        body = _with_meta(pv.raw, "PersistentVolume", pv.resource_version, pv.annotations)
        ref = pv.claim_ref
        spec = body.setdefault("spec", {})
        if ref is None:
            spec.pop("claimRef", None)
        else:
            spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ref.namespace, "name": ref.name,
                                "uid": ref.uid, "apiVersion": "v1"}
        answer = await self._put(f"/api/v1/persistentvolumes/{pv.name}", "persistentvolumes", body,
                                 f"persistentvolume {pv.name}")
        out: PersistentVolume = _pv_from_api(answer)
        return out

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        body = _with_meta(pvc.raw, "PersistentVolumeClaim", pvc.resource_version, pvc.annotations)
        spec = body.setdefault("spec", {})
        if pvc.volume_name:
            spec["volumeName"] = pvc.volume_name
        path = f"/api/v1/namespaces/{pvc.namespace}/persistentvolumeclaims/{pvc.name}"
        answer = await self._put(path, "persistentvolumeclaims", body, f"persistentvolumeclaim {pvc.key}")
        out: PersistentVolumeClaim = _pvc_from_api(answer)
        return out

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        body = _with_meta(pv.raw, "PersistentVolume", pv.resource_version, pv.annotations)
        body["status"] = {**(body.get("status") or {}), "phase": phase}
        answer = await self._status(f"/api/v1/persistentvolumes/{pv.name}/status", "persistentvolumes/status", body)
        return pv if answer is None else _pv_from_api(answer)  # type: ignore[no-any-return]

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        body = _with_meta(pvc.raw, "PersistentVolumeClaim", pvc.resource_version, pvc.annotations)
        status = dict(body.get("status") or {})
        status["phase"] = "Bound"
        pv_spec = pv.raw.get("spec") if isinstance(pv.raw, dict) else None
        if isinstance(pv_spec, dict):
            status["accessModes"] = pv_spec.get("accessModes") or list(pv.access_modes)
            if pv_spec.get("capacity"):
                status["capacity"] = pv_spec["capacity"]
        body["status"] = status
        path = f"/api/v1/namespaces/{pvc.namespace}/persistentvolumeclaims/{pvc.name}/status"
        answer = await self._status(path, "persistentvolumeclaims/status", body)
        return pvc if answer is None else _pvc_from_api(answer)  # type: ignore[no-any-return]

    async def _status(self, path: str, resource: str, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await self._put(path, resource, body, resource)
        except ApiError as exc:
            if exc.code != 403:
                raise
            if not self._status_refused:
                self._status_refused = True
                log.warning("update %s: %s; the phases are left to the cluster's PV controller", resource, exc)
            return None


def _with_meta(raw: dict[str, Any], kind: str, resource_version: str, annotations: dict[str, str]
               ) -> dict[str, Any]:
    """A copy of an API object to send back: its kind (the items of a list come without), its
    resourceVersion (the one read) and annotations set."""
    body = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    body["apiVersion"], body["kind"] = "v1", kind
    meta = body.setdefault("metadata", {})
    meta["resourceVersion"] = resource_version
    if annotations:
        meta["annotations"] = dict(annotations)
    else:
        meta.pop("annotations", None)
    return body


class KubeSource:
    """A live cluster behind ``scheduler`` (a :class:`framework.scheduler.ClusterSource`).

    Built without a scheduler (a standby replica), its informers only keep their stores current;
    :meth:`attach` hands everything they hold to a scheduler at once when the replica takes over.
    ``fence``, when set, says how long a write sent now may take (0: this replica may not write; see
    :meth:`framework.kube.leader.LeaderElector.bind_window`)."""

    accepts_apply = False

    def __init__(self, scheduler: Scheduler | None, client: ApiClient, *, hostname: str | None = None,
                 writers: int = 8) -> None:
        self._scheduler = scheduler
        #: Seconds a write sent now may take before another replica could hold the lease (None: no
        #: leader election, no limit).
        self.fence: Callable[[], float] | None = None
        self.client = client
        self.writer = Writer(writers)
        self.events = EventRecorder(client, self.writer, hostname=hostname or socket.gethostname())
        self.status = StatusWriter(client, self.writer, self._pod_status)
        self.nodes: Informer[Node] = Informer(client, "/api/v1/nodes", "nodes", convert_node, _Nodes(self))
        self.namespaces: Informer[tuple[str, dict[str, str]]] = Informer(
            client, "/api/v1/namespaces", "namespaces", _namespace, _Namespaces(self)
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
            _storage_converter(_pvc_from_api, "PersistentVolumeClaim"), _Storage(self, "PersistentVolumeClaim"))
        self.volumes: Informer[StorageObject | None] = Informer(
            client, "/api/v1/persistentvolumes", "persistentvolumes",
            _storage_converter(_pv_from_api, "PersistentVolume"), _Storage(self, "PersistentVolume"))
        self.storage_classes: Informer[StorageObject | None] = Informer(
            client, "/apis/storage.k8s.io/v1/storageclasses", "storageclasses",
            _storage_converter(_storage_class_from_api, "StorageClass"), _Storage(self, "StorageClass"))
        self.csinodes: Informer[StorageObject | None] = Informer(
            client, "/apis/storage.k8s.io/v1/csinodes", "csinodes",
            _storage_converter(_csinode_from_api, "CSINode"), _Storage(self, "CSINode"))
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
            self._scheduler.cache.volumes.writer = _VolumeWriter(self)
        self.writer.start()
        self.events.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.nodes.run()), loop.create_task(self.namespaces.run()),
                       loop.create_task(self.pdbs.run()),
                       *(loop.create_task(i.run()) for i in self.storage_informers()),
                       loop.create_task(self._start_pods())]

    def storage_informers(self) -> tuple[Informer[StorageObject | None], ...]:
        """The informers of the volume plugins' objects: claims, volumes, classes, CSINodes."""
        return self.claims, self.volumes, self.storage_classes, self.csinodes

    async def _start_pods(self) -> None:
        await self.nodes.synced.wait()
        for informer in self.storage_informers():
            await informer.synced.wait()
        await self.pods.run()

    async def attach(self, scheduler: Scheduler) -> None:
        """Become ``scheduler``'s source and hand it what the informers hold: nodes, namespaces, then
        bound pods before pending ones (no relist: a standby's stores are current). Informer events from
        now on go to the scheduler; one that overtakes the hand-over is applied twice, harmlessly, since
        each object is read from the store as it is handed over."""
        self._scheduler = scheduler
        scheduler.source = self
        scheduler.cache.volumes.writer = _VolumeWriter(self)
        for informer in self.storage_informers():
            for obj in list(informer.store.values()):
                if obj is not None:
                    scheduler.cache.volumes.upsert(obj)
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
        """Wait until nodes, namespaces, PodDisruptionBudgets, the volume plugins' objects and pods have
        been listed once."""
        waits = (self.nodes.synced.wait(), self.namespaces.synced.wait(), self.pdbs.synced.wait(),
                 *(i.synced.wait() for i in self.storage_informers()), self.pods.synced.wait())
        await asyncio.wait_for(asyncio.gather(*waits), timeout)

    async def stop(self, flush: float = 5.0) -> None:
        """Stop the informers, send the pending events and status writes (within ``flush`` s), close."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
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
        spec_changed = old is None or old.pod is None or _spec_changed(old.raw, new.raw)
        await sched.observe_pod(pod, spec_changed=spec_changed)

    def _pod_deleted(self, item: PodItem) -> None:
        self._bound_elsewhere.discard(item.uid)
        self._reported.pop(item.uid, None)
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
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        deadline = time.monotonic() + (timeout if self.fence is not None else OUTCOME_SECONDS)
        try:
            await self.client.request("POST", path, verb="create", resource="pods/binding", body=body,
                                      timeout=timeout)
        except ApiError as exc:
            if exc.code == 409 and "already assigned" in exc.message:
                # Bound before (by this scheduler before a restart, or by another): handled, not retried.
                self._bound_elsewhere.add(pod.uid)
                log.info("pod %s: %s", pod.key, exc.message)
            elif exc.code >= 500:
                return await self._binding_outcome(pod, node_name, str(exc), deadline)
            return Status.failure(str(exc))
        except ApiUnreachable as exc:
            # Even "connection refused" may follow an attempt on a kept-alive connection that the server
            # applied before it died: the answer is unknown, never taken as "not bound".
            return await self._binding_outcome(pod, node_name, str(exc), deadline)
        self.scheduler.stats.bound += 1
        return SUCCESS

    async def _binding_outcome(self, pod: Pod, node_name: str, why: str, deadline: float) -> Status:
        """A binding without an answer (no connection, a broken one, a server failure) may have been
        applied. Forgetting the assumed pod now could hand its room to another pod while it holds it,
        so the binding cycle holds on until the API says: read the pod (and send the binding again
        while it is unbound) until then, or until ``deadline``."""
        log.warning("pod %s: binding to %s may or may not have been applied (%s); asking the API server",
                    pod.key, node_name, why)
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        while (left := deadline - time.monotonic()) > 0:
            if self.fence is not None and self.fence() <= 0:
                break
            try:
                obj = await self.client.request("GET", path, verb="get", resource="pods", timeout=min(left, 5.0))
            except ApiError as exc:
                if exc.code == 404:
                    return Status.failure(f"pod {pod.key} not found (deleted while binding)")
                if exc.code < 500:
                    return Status.failure(str(exc))
                await asyncio.sleep(min(OUTCOME_RETRY, max(deadline - time.monotonic(), 0)))
                continue
            except ApiUnreachable:
                await asyncio.sleep(min(OUTCOME_RETRY, max(deadline - time.monotonic(), 0)))
                continue
            meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
            if meta.get("uid") != pod.uid:
                return Status.failure(f"pod {pod.key} was replaced while binding")
            bound_to = str(spec.get("nodeName") or "")
            if bound_to == node_name:
                log.warning("pod %s: the binding to %s had gone through", pod.key, node_name)
                self.scheduler.stats.bound += 1
                return SUCCESS
            if bound_to:
                self._bound_elsewhere.add(pod.uid)
                return Status.failure(f"pod {pod.key} is already assigned to node {bound_to!r}")
            try:  # not applied: send it again (the API refuses a second one, so this cannot bind twice)
                await self.client.request("POST", f"{path}/binding", verb="create", resource="pods/binding",
                                          body=body, timeout=min(left, REQUEST_TIMEOUT))
            except ApiError as exc:
                if exc.code == 409 or exc.code >= 500:
                    continue  # the first one landed meanwhile, or still unknown: read again
                return Status.failure(str(exc))
            except ApiUnreachable:
                continue
            self.scheduler.stats.bound += 1
            return SUCCESS
        return Status.failure(f"binding of pod {pod.key} to {node_name}: no answer from the API server ({why})")

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        if not self.may_write():
            return Status.failure(f"pod {pod.key} not deleted: this replica no longer holds the leader lease")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            if reason.startswith("preempted by "):
                await self._mark_disruption(pod, reason)
            await self.client.request("DELETE", path, verb="delete", resource="pods",
                                      body={"preconditions": {"uid": pod.uid}})
        except ApiError as exc:
            if exc.code == 404:
                return Status.failure(f"pod {pod.key} not found")
            return Status.failure(str(exc))
        except ApiUnreachable as exc:
            return Status.failure(str(exc))
        return SUCCESS

    async def _mark_disruption(self, victim: Pod, reason: str) -> None:
        # kube-scheduler's preemption: DisruptionTarget=True (PreemptionByScheduler) before the delete.
        preemptor_key = reason.removeprefix("preempted by ").split(" on node ", 1)[0]
        ns, _, name = preemptor_key.partition("/")
        rec = self.scheduler.get_pod(ns, name)
        sched_name = rec.pod.scheduler_name if rec is not None else victim.scheduler_name
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"{sched_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": rfc3339(time.time())}
        path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}/status"
        await self.client.request("PATCH", path, verb="patch", resource="pods/status",
                                  body={"status": {"conditions": [cond]}}, content_type=STRATEGIC_MERGE_PATCH)

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

    def preempted(self, victim: Pod, preemptor: Pod, node_name: str) -> None:
        self.events.record(victim, type_="Normal", reason="Preempted", action="Preempting",
                           note=f"Preempted by pod {preemptor.uid} on node {node_name}",
                           controller=preemptor.scheduler_name, related=preemptor)


def _config_document(config_file: str | None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration file as a mapping ({} when none is given, or unreadable: the
    configuration's own loading reports a bad file)."""
    if not config_file:
        return {}
    try:
        with open(config_file, encoding="utf-8") as fh:
            doc = load_document(fh.read()).value  # the hardened front end: no input recurses without end
    except (OSError, UnicodeDecodeError, TextError):
        return {}
    return doc if isinstance(doc, dict) else {}


def configured_kubeconfig(config_file: str | None) -> str:
    """``clientConnection.kubeconfig`` of a KubeSchedulerConfiguration file ("" when unset or unreadable:
    the configuration's own loading reports a bad file)."""
    conn = _config_document(config_file).get("clientConnection")
    value = conn.get("kubeconfig") if isinstance(conn, dict) else None
    return value if isinstance(value, str) else ""


def leader_election(config_file: str | None) -> LeaderElectionConfig:
    """The file's ``leaderElection`` with kube-scheduler's defaults (on, ``kube-system/kube-scheduler``),
    read before the plugins are known (a standby does not meet the plugin hosts until it leads). A
    value kube-scheduler would refuse is a KubeConfigError naming the file and the field."""
    raw = _config_document(config_file).get("leaderElection")
    cfg, problems = leader_election_config(raw if isinstance(raw, dict) else None)
    if problems:
        path, message = problems[0]
        raise KubeConfigError(f"{config_file}: {path}: {message}")
    return cfg


# ---- serving --------------------------------------------------------------------------------------


def _kube_config(conn: ClientConnection, kubeconfig: str, in_cluster: bool) -> KubeConfig:
    path = kubeconfig or conn.kubeconfig
    if path:
        return KubeConfig.from_file(path)
    if in_cluster:
        return KubeConfig.in_cluster()
    raise KubeConfigError("no kubeconfig: give --kubeconfig, clientConnection.kubeconfig or --in-cluster")


def connect(scheduler: Scheduler, *, kubeconfig: str = "", in_cluster: bool = False) -> KubeSource:
    """A source for ``scheduler``: the kubeconfig given, else the configuration's
    ``clientConnection.kubeconfig``, else (``in_cluster``) the pod's service account."""
    conn = client_connection(scheduler.config)
    config = _kube_config(conn, kubeconfig, in_cluster)
    return KubeSource(scheduler, ApiClient(config, qps=conn.qps, burst=conn.burst))


async def serve_cluster(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig] = (),
    advertise: str | None = None,
    observability: ObservabilityConfig | None = None,
    *,
    tls: ServerTLS | None = None,
    kubeconfig: str = "",
    in_cluster: bool = False,
    config_file: str | None = None,
) -> None:
    """Run the framework service on a live cluster until SIGTERM or SIGINT (``outrigger serve
    --kubeconfig``): as :func:`framework.service.serve`, with the API server as the cluster's source.

    With ``leaderElection.leaderElect`` (kube-scheduler's default) the replica first stands by: its
    informers list and watch, its health and metrics are served, and it contends for the Lease; only
    once it leads does it meet the plugin hosts and schedule (see :func:`_serve_elected`)."""
    election = leader_election(config_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if election.leader_elect:
        await _serve_elected(config_for, listen, endpoints, advertise, observability, tls=tls, kubeconfig=kubeconfig,
                             in_cluster=in_cluster, config_file=config_file, election=election, stop=stop)
        return
    from ..service import start_service

    srv: Server = await start_service(config_for, endpoints, listen, advertise=advertise,
                                      observability=observability, tls=tls)
    try:
        source = connect(srv.scheduler, kubeconfig=kubeconfig, in_cluster=in_cluster)
    except BaseException:
        await srv.stop()
        raise
    if srv.observability is not None:  # /readyz fails until the informers have listed everything once
        srv.observability.checks.add("informer-sync", _informers_synced(source), readyz=True)
    await source.start()
    _print_serving(srv, source)
    announce = loop.create_task(_announce_sync(source))
    with contextlib.suppress(asyncio.CancelledError):
        await stop.wait()
    log.info("shutting down")
    announce.cancel()
    await srv.scheduler.stop()  # binding cycles in flight finish, then their events are sent
    await source.stop()
    await srv.stop()


def _informers_synced(source: KubeSource) -> Callable[[], str | None]:
    synced = {"nodes": source.nodes.synced, "namespaces": source.namespaces.synced,
              "poddisruptionbudgets": source.pdbs.synced,
              **{i.resource: i.synced for i in source.storage_informers()}, "pods": source.pods.synced}

    def check() -> str | None:
        waiting = [name for name, listed in synced.items() if not listed.is_set()]
        return f"waiting for the first list of {', '.join(waiting)}" if waiting else None

    return check


def _print_serving(srv: Server, source: KubeSource) -> None:
    print(f"outrigger framework serving on {srv.address} (profiles: {', '.join(srv.scheduler.profiles)}), "
          f"scheduling the cluster at {source.client.config.server}", flush=True)
    if srv.observability is not None and srv.observability.secure is not None:
        print(f"outrigger framework HTTPS (health, metrics, configz, debug) on {srv.observability.secure.address}",
              flush=True)
    if srv.observability is not None and srv.observability.http is not None:
        print(f"outrigger framework HTTP (metrics, debug) on {srv.observability.http.address}", flush=True)


async def _announce_sync(source: KubeSource) -> None:
    await source.wait_synced()
    print(f"in sync with the cluster: {len(source.nodes.store)} nodes, {len(source.pods.store)} pods", flush=True)


# ---- leader election ------------------------------------------------------------------------------


class _StandbyHttp(HttpServer):
    """A standby's secure (or plain) port: the health endpoints and /metrics (``leader_election_master_status``
    0); anything else is 503 naming the leader, since only the leader has a scheduler to show."""

    def __init__(self, elector: LeaderElector, **kwargs: Any) -> None:
        super().__init__(None, **kwargs)
        self.elector = elector

    async def route(self, method: str, path: str, query: Mapping[str, str], body: bytes,
                    multi: Mapping[str, list[str]] | None = None) -> tuple[int, str, bytes]:
        endpoint = path.strip("/").partition("/")[0]
        if method in ("GET", "HEAD") and (endpoint in HEALTH_ENDPOINTS or path == "/metrics"):
            return await super().route(method, path, query, body, multi)
        leader = self.elector.leader or "not known yet"
        message = f"{path}: this replica is a standby (the leader is {leader}); ask the leader"
        return 503, "application/json", orjson.dumps({"error": message})


@dataclass
class _Standby:
    """The ports a standby serves, closed when it takes over (the leader's service opens them again)."""

    servers: list[HttpServer] = field(default_factory=list)
    built: list[Any] = field(default_factory=list)

    @classmethod
    async def start(cls, obs: ObservabilityConfig | None, checks: HealthChecks, elector: LeaderElector,
                    metrics: SchedulerMetrics | None) -> _Standby:
        out = cls()
        if obs is None:
            return out
        try:
            if obs.secure is not None:
                built = obs.secure.build()
                out.built.append(built)
                out.servers.append(await _StandbyHttp(elector, metrics=metrics, checks=checks, tls=built.tls,
                                                      gate=built.gate).start(obs.secure.listen))
            if obs.http:
                out.servers.append(await _StandbyHttp(elector, metrics=metrics, checks=checks).start(obs.http))
        except BaseException:
            await out.stop()
            raise
        for server in out.servers:
            print(f"outrigger framework standby {server.scheme.upper()} (health, metrics) on {server.address}",
                  flush=True)
        return out

    async def stop(self) -> None:
        for server in self.servers:
            await server.stop()
        for built in self.built:
            await built.close()
        self.servers, self.built = [], []


async def _first(*events: asyncio.Event, task: asyncio.Task[None] | None = None) -> None:
    """Wait until one of ``events`` is set; re-raise what ended ``task`` if it ends first."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait([*waits, *([task] if task is not None else [])], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    if task is not None and task.done() and not any(e.is_set() for e in events):
        task.result()  # the elector failed (a bug): say so rather than wait forever
        raise RuntimeError("leader election ended without leading or losing")


def _exit_lost(elector: LeaderElector) -> NoReturn:
    """kube-scheduler on a lost lease: say so and exit 1 at once, without any cleanup that would talk to
    the cluster or the plugin hosts (the new leader already may); a supervisor starts the process again
    and it comes back as a standby."""
    message = (f"leader election lost: lease {elector.lock.describe()} not renewed within renewDeadline "
               f"({format_duration(elector.config.renew_deadline)}); exiting")
    log.error("%s", message)
    print(message, flush=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(1)


async def _serve_elected(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig],
    advertise: str | None,
    observability: ObservabilityConfig | None,
    *,
    tls: ServerTLS | None,
    kubeconfig: str,
    in_cluster: bool,
    config_file: str | None,
    election: LeaderElectionConfig,
    stop: asyncio.Event,
) -> None:
    """One replica among several: stand by, take over through the Lease, exit when the lease is lost.

    - **Standing by**: informers list and watch into their stores (unless ``delayCacheUntilActive``),
      nothing is written, no plugin host is contacted (a host follows one framework: the one that
      handshook it last), the health and metrics ports answer.
    - **Taking over** (OnStartedLeading): the standby ports close, the framework service starts
      (handshaking every plugin host with this replica's address, so they follow it), the informers'
      stores are handed to the new scheduler and the scheduling loop runs. Bindings and deletions are
      fenced by the lease (:meth:`LeaderElector.bind_window`).
    - **Losing the lease** (OnStoppedLeading): exit 1 at once, as kube-scheduler does; restarted, the
      process is a standby again. Exiting, rather than stopping and standing by again, drops every
      assumed pod, waiting pod and CycleState of the old term in one step, and nothing of it can bind.
    - **SIGTERM**: the scheduler stops and its binding cycles finish, then the lease is released
      (ReleaseOnCancel) so a standby takes over within retryPeriod.
    """
    from ..service import start_service

    raw = _config_document(config_file)
    conn_raw = raw.get("clientConnection")
    conn = _client_connection(conn_raw if isinstance(conn_raw, dict) else {})
    delay_cache = raw.get("delayCacheUntilActive") is True
    config = _kube_config(conn, kubeconfig, in_cluster)
    client = ApiClient(config, qps=conn.qps, burst=conn.burst)
    # kube-scheduler's leader election has a client of its own: renewals never wait behind bindings
    # for the rate limiter.
    lease_client = ApiClient(config, qps=conn.qps, burst=conn.burst, max_connections=2,
                             user_agent="outrigger/leader-election")
    source = KubeSource(None, client)
    leading, lost = asyncio.Event(), asyncio.Event()
    lock = LeaseLock(lease_client, election.resource_namespace, election.resource_name, new_identity())
    elector = LeaderElector(lock, election, on_started_leading=leading.set, on_stopped_leading=lost.set)
    checks = (observability.checks if observability is not None else None) or HealthChecks()
    checks.add("informer-sync", _informers_synced(source), readyz=True)
    checks.add("leaderElection", elector.check, healthz=True, readyz=True)
    standby_metrics = None
    if observability is not None and (observability.secure is not None or observability.http):
        standby_metrics = SchedulerMetrics(observability.plugin_sample_percent)
        standby_metrics.registry.register(LeaderMetrics(elector))
    obs = dataclasses.replace(observability, checks=checks) if observability is not None else None
    standby = await _Standby.start(obs, checks, elector, standby_metrics)
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[None]] = []
    srv: Server | None = None
    try:
        if not delay_cache:
            await source.start()
            tasks.append(loop.create_task(_announce_sync(source)))
        print(f"outrigger framework standing by as {lock.identity}: contending for lease {lock.describe()} at "
              f"{config.server}", flush=True)
        if (election.resource_namespace, election.resource_name) == ("kube-system", "kube-scheduler"):
            log.warning("leader election on kube-scheduler's own Lease (kube-system/kube-scheduler): beside "
                        "kube-scheduler, set leaderElection.resourceNamespace and resourceName (or leaderElect: "
                        "false), or the two take turns")
        election_task = loop.create_task(elector.run())
        tasks.append(election_task)
        await _first(stop, leading, task=election_task)
        if stop.is_set():
            log.info("shutting down (standby)")
            return
        await standby.stop()
        srv = await start_service(config_for, endpoints, listen, advertise=advertise, observability=obs, tls=tls)
        if lost.is_set():
            _exit_lost(elector)
        if srv.observability is not None and srv.observability.metrics is not None:
            srv.observability.metrics.registry.register(LeaderMetrics(elector))
        source.fence = elector.bind_window
        if delay_cache:
            await source.start()
            tasks.append(loop.create_task(_announce_sync(source)))
        await source.attach(srv.scheduler)
        print(f"outrigger framework leading as {lock.identity} (lease {lock.describe()})", flush=True)
        _print_serving(srv, source)
        await _first(stop, lost, task=election_task)
        if lost.is_set():
            _exit_lost(elector)
        log.info("shutting down")
        await srv.scheduler.stop()  # binding cycles in flight finish (fenced), then their events are sent
        await source.stop()
        await srv.stop()
        srv = None
    finally:
        for task in reversed(tasks):  # the elector last: cancelled while leading, it releases the lease
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if srv is not None:
            await srv.stop()
        await standby.stop()
        await source.stop()
        await lease_client.close()
