"""The framework service: the Scheduler API over gRPC, the Handle and CycleState services for plugin
hosts, the standard health service, and the scheduler loop, in one process.

``serve`` builds the scheduler from a configuration, starts the gRPC server and the scheduling loop,
and on SIGTERM/SIGINT flips health to NOT_SERVING, stops taking pods, lets binding cycles finish, and
stops the server with a grace period. Bad requests get ``INVALID_ARGUMENT`` (or ``NOT_FOUND``) with a
message naming what is wrong, and change nothing.

With remote plugins (:func:`start_service`), the order matters: the server's port is bound first (plugin
hosts are told where to connect back during the handshake), then every endpoint is handshaken (the
registry needs their manifests), the configuration is loaded against that registry, the scheduler is
built and its remote plugins configured, and only then does the server start taking requests.

Every server here may serve TLS (``tls``, a :class:`~pluginhost.security.ServerTLS`; mutual TLS with a
client CA): the Scheduler API and the Handle/CycleState services share the port, so clients and plugin
hosts then both present certificates. See docs/security.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from clients.selector import Selector, SelectorError, parse_selector
from pluginhost import pb
from pluginhost.convert import status_to_proto
from pluginhost.manifest import ManifestError, ManifestObject, node_to_dict, parse_objects, pod_to_dict
from pluginhost.model import Node, PersistentVolumeClaim, Pod
from pluginhost.security import ServerTLS, add_port
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code
from pluginhost.view import ViewError
from pluginhost.wire import MAX_MESSAGE_BYTES, SERVER_OPTIONS, server_interceptors

from .config import SchedulerConfig
from .observability import Observability, ObservabilityConfig
from .plugins import Registry
from .profiles import build_registry_with_remote
from .queue import GATED
from .remote import EndpointConfig, RemotePlugins
from .remote.services import FrameworkServices, waiting_pod_to_proto
from .reservations import is_reserve_pod
from .scheduler import Scheduler
from .scheduler.explain import explain_pod
from .scheduler.records import (
    BOUND,
    EV_APPLIED,
    EV_BOUND,
    EV_DELETED,
    EV_ERROR,
    EV_NOMINATED,
    EV_PREEMPTED,
    EV_UNSCHEDULABLE,
    ApplyError,
    ApplyResult,
    Event,
    PodRecord,
)
from .whatif import with_node_pods

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PluginServices",
    "SchedulerService",
    "Server",
    "advertised_address",
    "node_object",
    "pod_object",
    "serve",
    "start_plugin_services",
    "start_server",
    "start_service",
]

log = logging.getLogger("outrigger.service")

SERVICE_NAME = "outrigger.v1.Scheduler"

_EVENT_TYPES = {
    EV_BOUND: pb.scheduler.EVENT_TYPE_BOUND,
    EV_UNSCHEDULABLE: pb.scheduler.EVENT_TYPE_UNSCHEDULABLE,
    EV_PREEMPTED: pb.scheduler.EVENT_TYPE_PREEMPTED,
    EV_APPLIED: pb.scheduler.EVENT_TYPE_APPLIED,
    EV_DELETED: pb.scheduler.EVENT_TYPE_DELETED,
    EV_ERROR: pb.scheduler.EVENT_TYPE_ERROR,
    EV_NOMINATED: pb.scheduler.EVENT_TYPE_NOMINATED,
}


_KNOWN_EVENT_TYPES = frozenset(_EVENT_TYPES.values())
# The volume plugins' objects (the embedded store keeps them for the volume plugins).
_STORAGE = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")
# What an Apply may hold.
_Object = ManifestObject
# What a Delete may name.
_DELETABLE = ("Pod", "Node", "Reservation", "PodDisruptionBudget", *_STORAGE)
# ApplyRequest.validate -> the manifest parser's field validation.
_VALIDATION = {"Strict": "strict", "Warn": "warn", "Ignore": "ignore"}


def _parse(text: str, source: str, validate: str, warn: Callable[[str], None]) -> list[_Object]:
    return parse_objects(text, source, validate=validate, warn=warn)


def _explicit_uid(obj: Pod | Node) -> str:
    """The uid the manifest gave (empty when the parser generated one)."""
    meta = obj.raw.get("metadata") if obj.raw else None
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


def _check_references(s: Scheduler, objects: Sequence[_Object]) -> None:
    """What an Apply of ``objects`` may not do besides what :meth:`Scheduler.apply` checks (it raises
    :class:`ApplyError` naming the object, before anything changes): reuse a uid that another object
    of either kind has (uids are unique across kinds, as in Kubernetes), and bind a pod to a node that
    neither exists nor is applied in the same request. Reservations are the scheduler's to check."""
    node_uids: dict[str, str] | None = None  # uid -> node name, built only if a manifest names a uid
    applied_nodes = {obj.name for obj in objects if isinstance(obj, Node)}
    for obj in objects:
        if not isinstance(obj, Pod | Node):
            continue
        uid = _explicit_uid(obj)
        if isinstance(obj, Node):
            if not uid:
                continue
            if node_uids is None:
                node_uids = {node.uid: name for name, node in s.nodes.items()}
            old = s.nodes.get(obj.name)
            if old is not None and old.uid != uid:
                raise ApplyError(f"Node {obj.name}: uid {uid!r} does not match the existing node's uid {old.uid!r}")
            other = node_uids.get(uid)
            if other is not None and other != obj.name:
                raise ApplyError(f"Node {obj.name}: uid {uid!r} is already used by node {other}")
            rec = s.pods.get(uid)
            if rec is not None:
                raise ApplyError(f"Node {obj.name}: uid {uid!r} is already used by pod {rec.pod.key}")
            continue
        if uid:
            if node_uids is None:
                node_uids = {node.uid: name for name, node in s.nodes.items()}
            other = node_uids.get(uid)
            if other is not None:
                raise ApplyError(f"Pod {obj.key}: uid {uid!r} is already used by node {other}")
        if obj.node_name and obj.node_name not in applied_nodes and obj.node_name not in s.nodes:
            existing = s.get_pod(obj.namespace, obj.name)
            if existing is None or existing.pod.node_name != obj.node_name:
                raise ApplyError(
                    f"Pod {obj.key}: spec.nodeName {obj.node_name!r} names no node (apply the node first, "
                    "or in the same request)"
                )


def object_ref(obj: Pod | Node) -> Any:
    if isinstance(obj, Pod):
        return pb.scheduler.ObjectRef(kind="Pod", namespace=obj.namespace, name=obj.name, uid=obj.uid)
    return pb.scheduler.ObjectRef(kind="Node", name=obj.name, uid=obj.uid)


# ---- v1 objects: what `outrigger get -o yaml` prints and `outrigger apply` takes back ----------------

# Metadata the API server fills in: a manifest that differs from the applied one only here (and in
# status, and in a bound pod's own spec.nodeName) is the same manifest, as `kubectl apply` sees it.
_SERVER_METADATA = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "selfLink")
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def _timestamp(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_scheduled(rec: PodRecord, queue: str) -> dict[str, str] | None:
    """The PodScheduled condition kube-scheduler would have written (None before a first verdict)."""
    if rec.phase == BOUND:
        return {"type": "PodScheduled", "status": "True"}
    if queue == GATED:
        return {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": GATED_MESSAGE}
    status = rec.last_status
    if status is None or status.ok:
        return None
    reason = "SchedulerError" if status.code is Code.Error else "Unschedulable"
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": status.message()}


def _with_metadata(raw: Mapping[str, Any], kind: str, first: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as a v1 object of ``kind`` (its fields copied one level deep): apiVersion and kind
    first, then metadata led by ``first`` (values the manifest gives win)."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    head = {k: meta.get(k, v) for k, v in first.items()}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": kind,
                           "metadata": head | {k: v for k, v in meta.items() if k not in head}}
    obj.update((k, v) for k, v in raw.items() if k not in ("apiVersion", "kind", "metadata"))
    return obj


def pod_object(rec: PodRecord, queue: str = "") -> dict[str, Any]:
    """The pod as a v1 Pod: the manifest as applied (quantities as written), with what the server
    fills in: metadata.namespace, uid and creationTimestamp, spec.nodeName once bound, and a status
    (phase Pending, as no kubelet runs it; the PodScheduled condition; nominatedNodeName). ``queue``:
    the scheduling queue holding the pod (``gated`` makes the condition SchedulingGated)."""
    pod = rec.pod
    obj = _with_metadata(pod_to_dict(pod), "Pod", {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                                                   "creationTimestamp": _timestamp(pod.creation_timestamp)})
    if pod.node_name:
        obj["spec"] = {**(obj.get("spec") or {}), "nodeName": pod.node_name}
    # The server owns a pod's status: what the manifest said there is replaced.
    status: dict[str, Any] = {"phase": "Pending"}
    condition = _pod_scheduled(rec, queue)
    if condition is not None:
        status["conditions"] = [condition]
    if pod.nominated_node_name:
        status["nominatedNodeName"] = pod.nominated_node_name
    obj["status"] = status
    return obj


def node_object(node: Node, created: float | None = None) -> dict[str, Any]:
    """The node as a v1 Node: the manifest as applied (status included: it is what the scheduler
    reads), with metadata.uid and, when known, creationTimestamp."""
    first: dict[str, Any] = {"name": node.name, "uid": node.uid}
    if created is not None:
        first["creationTimestamp"] = _timestamp(created)
    return _with_metadata(node_to_dict(node), "Node", first)


def _as_applied(raw: Mapping[str, Any], kind: str, node_name: str) -> dict[str, Any]:
    """``raw`` without what the server fills in: metadata it owns, a pod's status, and a pod's
    spec.nodeName when it names ``node_name`` (the node the pod is bound to)."""
    out = {k: v for k, v in raw.items() if not (kind == "Pod" and k == "status")}
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_METADATA
                           and not (kind == "Pod" and k == "namespace" and v == "default")}
    spec = raw.get("spec")
    if kind == "Pod" and isinstance(spec, dict) and node_name and spec.get("nodeName") == node_name:
        out["spec"] = {k: v for k, v in spec.items() if k != "nodeName"}
    return out


def event_to_proto(ev: Event) -> Any:
    out = pb.scheduler.Event(
        sequence=ev.sequence,
        type=_EVENT_TYPES[ev.type],
        object=pb.scheduler.ObjectRef(kind=ev.kind, namespace=ev.namespace, name=ev.name, uid=ev.uid),
        node_name=ev.node_name,
        timestamp=ev.timestamp,
        attempts=ev.attempts,
    )
    if ev.status is not None:
        out.status.CopyFrom(status_to_proto(ev.status))
    return out


class SchedulerService(pb.scheduler_grpc.SchedulerServicer):  # type: ignore[misc]
    """The public Scheduler API, backed by a :class:`Scheduler`."""

    def __init__(self, scheduler: Scheduler, observability: Observability | None = None) -> None:
        self.s = scheduler
        # Event sequence numbers restart with the framework: a watch resumes only within one run.
        self.run_id = uuid.uuid4().hex
        self.obs = observability
        # When each node was created through Apply (its creationTimestamp, unless its manifest has one).
        self.node_created: dict[str, float] = {}

    async def Apply(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        objects: list[_Object] = []
        warnings: list[str] = []
        mode = request.validate or "Strict"
        if mode not in _VALIDATION:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"validate must be Strict, Warn or Ignore, got {mode!r}")
        try:
            for m in request.manifests:
                objects.extend(_parse(m.content, m.source or "<request>", _VALIDATION[mode], warnings.append))
            _check_references(self.s, objects)
            kept, unchanged = self._unchanged(objects)
            results = await self.s.apply(kept, dry_run=request.dry_run)
        except (ManifestError, ApplyError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if not request.dry_run:
            now = time.time()
            for r in results:
                if r.kind == "Node" and r.action == "created":
                    self.node_created[r.name] = now
        # The scheduler answers for nodes first: unchanged nodes (not sent to it) go back in their place.
        node_results = iter([r for r in results if r.kind == "Node"])
        ordered = [unchanged.get(id(o)) or next(node_results) for o in objects if isinstance(o, Node)]
        ordered += [r for r in results if r.kind != "Node"]
        return pb.scheduler.ApplyResponse(
            applied=[
                pb.scheduler.AppliedObject(
                    ref=pb.scheduler.ObjectRef(kind=r.kind, namespace=r.namespace, name=r.name, uid=r.uid),
                    action=r.action,
                )
                for r in ordered
            ],
            warnings=warnings,
        )

    def _unchanged(
        self, objects: list[_Object]
    ) -> tuple[list[_Object], dict[int, ApplyResult]]:
        """Recognise manifests that are the applied ones plus what the server fills in (what
        ``get -o yaml`` prints): such a pod takes its applied manifest (the scheduler then reports it
        unchanged), such a node is answered here and not re-applied. A pod re-applied with changes
        keeps its creation time, as the API server keeps creationTimestamp."""
        kept: list[_Object] = []
        unchanged: dict[int, ApplyResult] = {}
        for obj in objects:
            if isinstance(obj, Pod):
                rec = self.s.get_pod(obj.namespace, obj.name)
                if rec is not None:
                    old = rec.pod
                    meta = obj.raw.get("metadata") if obj.raw else None
                    if not (isinstance(meta, dict) and "creationTimestamp" in meta):
                        obj.creation_timestamp = old.creation_timestamp
                    bound = old.node_name
                    if (obj.raw and old.raw and _explicit_uid(obj) in ("", old.uid)
                            and _as_applied(obj.raw, "Pod", bound) == _as_applied(old.raw, "Pod", bound)):
                        obj.raw = old.raw
            elif isinstance(obj, Node):
                node = self.s.nodes.get(obj.name)
                if (node is not None and obj.raw and node.raw
                        and _as_applied(obj.raw, "Node", "") == _as_applied(node.raw, "Node", "")):
                    unchanged[id(obj)] = ApplyResult("Node", "", node.name, node.uid, "unchanged")
                    continue
            kept.append(obj)
        return kept, unchanged

    async def Delete(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not self.s.source.accepts_apply:  # refused as Apply is: the API server holds the objects
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                "this framework schedules a Kubernetes cluster: delete pods and nodes through its "
                                "API server (kubectl delete)")
        for ref in request.objects:
            if ref.kind not in _DELETABLE:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"cannot delete kind {ref.kind!r} ({', '.join(_DELETABLE[:-1])} or {_DELETABLE[-1]})",
                )
            if not ref.name:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"delete of a {ref.kind} needs a name")
        deleted = []
        for ref in request.objects:
            if ref.kind == "Reservation":
                rec = self.s.delete_reservation(ref.name)
                if rec is not None:
                    deleted.append(pb.scheduler.ObjectRef(kind="Reservation", name=rec.name, uid=rec.uid))
            elif ref.kind == "PodDisruptionBudget":
                pdb = self.s.delete_pdb(ref.namespace or "default", ref.name)
                if pdb is not None:
                    deleted.append(pb.scheduler.ObjectRef(kind=ref.kind, namespace=pdb.namespace, name=pdb.name,
                                                          uid=pdb.uid))
            elif ref.kind in _STORAGE:
                gone = self.s.delete_storage(ref.kind, ref.namespace or "default", ref.name)
                if gone is not None:
                    namespace = gone.namespace if isinstance(gone, PersistentVolumeClaim) else ""
                    deleted.append(pb.scheduler.ObjectRef(kind=ref.kind, namespace=namespace, name=gone.name,
                                                          uid=gone.uid))
            elif ref.kind == "Pod":
                pod = self.s.delete_pod(ref.namespace or "default", ref.name)
                if pod is not None:
                    deleted.append(object_ref(pod))
            else:
                node = self.s.delete_node(ref.name)
                if node is not None:
                    deleted.append(object_ref(node))
        return pb.scheduler.DeleteResponse(deleted=deleted)

    def _pod_state(self, rec: PodRecord, with_object: bool = False) -> Any:
        pod = rec.pod
        queue = self.s.queue_of(pod.uid)
        out = pb.scheduler.PodState(
            ref=object_ref(pod),
            phase=rec.phase,
            node_name=pod.node_name,
            attempts=rec.attempts,
            queue=queue,
            nominated_node_name=rec.nominated_node,
            profile=rec.profile,
            priority=pod.priority,
        )
        if rec.last_status is not None:
            out.last_status.CopyFrom(status_to_proto(rec.last_status))
        if with_object:
            out.object_json = json.dumps(pod_object(rec, queue))
        return out

    def _node_object(self, node: Node) -> dict[str, Any]:
        return node_object(node, self.node_created.get(node.name))

    async def _selector(self, text: str, context: grpc.aio.ServicerContext) -> Selector:
        try:
            return parse_selector(text)
        except SelectorError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise AssertionError("unreachable: abort raises") from exc

    async def GetPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        ns = request.namespace or "default"
        rec = self.s.get_pod(ns, request.name)
        if rec is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {ns}/{request.name} not found")
            raise AssertionError("unreachable: abort raises")
        return self._pod_state(rec, with_object=True)

    async def ListPods(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        selector = await self._selector(request.label_selector, context)
        sequence = self.s.last_sequence
        pods = [
            self._pod_state(rec, request.objects)
            for rec in self.s.pods.values()
            if not is_reserve_pod(rec.pod)
            and (not request.namespace or rec.pod.namespace == request.namespace)
            and (not request.phase or rec.phase == request.phase)
            and (not request.node_name or rec.pod.node_name == request.node_name)
            and selector.matches(rec.pod.labels)
        ]
        pods.sort(key=lambda p: (p.ref.namespace, p.ref.name))
        return pb.scheduler.ListPodsResponse(pods=pods, sequence=sequence)

    def _node_summary(self, snap: Snapshot, row: int, with_object: bool) -> Any:
        node = snap.nodes[row]
        summary = pb.scheduler.NodeSummary(
            name=node.name,
            allocatable={r: int(snap.allocatable[row, c]) for r, c in snap.columns.items()},
            requested={r: int(snap.requested[row, c]) for r, c in snap.columns.items()},
            pods=len(snap.pods[row]),
            unschedulable=node.unschedulable,
            taints=[f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in node.taints],
            labels=node.labels,
        )
        applied = self.s.nodes.get(node.name)
        if with_object and applied is not None:
            summary.object_json = json.dumps(self._node_object(applied))
        return summary

    async def ListNodes(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        selector = await self._selector(request.label_selector, context)
        sequence = self.s.last_sequence
        snap = self.s.cache.snapshot()
        out = [self._node_summary(snap, row, request.objects) for row, node in enumerate(snap.nodes)
               if (not request.name or node.name == request.name) and selector.matches(node.labels)]
        out.sort(key=lambda n: n.name)
        return pb.scheduler.ListNodesResponse(nodes=out, generation=snap.generation, sequence=sequence)

    def _attach_object(self, ev: Event, msg: Any) -> None:
        """Put the pod or node an event is about, as it is now, on its message (nothing once deleted)."""
        if ev.kind == "Pod":
            rec = self.s.pods.get(ev.uid)
            if rec is not None:
                msg.pod.CopyFrom(self._pod_state(rec, with_object=True))
        elif ev.kind == "Node":
            node = self.s.nodes.get(ev.name)
            snap = self.s.cache.snapshot() if node is not None and node.uid == ev.uid else None
            row = snap.row(ev.name) if snap is not None else None
            if snap is not None and row is not None:
                msg.node.CopyFrom(self._node_summary(snap, row, with_object=True))

    async def Watch(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        wanted = {int(t) for t in request.types}
        unknown = sorted(wanted - _KNOWN_EVENT_TYPES)
        if unknown:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown event type(s) {unknown} in types")
        since = request.since_sequence if request.run_id in ("", self.run_id) else 0
        async for ev in self.s.events(since=since, replay=request.replay):
            msg = event_to_proto(ev)
            if wanted and msg.type not in wanted:
                continue
            msg.run_id = self.run_id
            if request.objects:
                self._attach_object(ev, msg)
            yield msg

    async def ListEvents(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        ref = request.object
        if ref.kind not in ("Pod", "Node"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"events of kind {ref.kind!r}: Pod or Node")
        ns = (ref.namespace or "default") if ref.kind == "Pod" else ""
        events = [
            event_to_proto(ev) for ev in self.s.recent_events()
            if ev.kind == ref.kind and ev.name == ref.name and ev.namespace == ns and ref.uid in ("", ev.uid)
        ]
        for msg in events:
            msg.run_id = self.run_id
        return pb.scheduler.ListEventsResponse(events=events)

    async def Explain(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.what_if_nodes.content:
            return await self._what_if(request, context)
        if request.HasField("ref"):
            pod, snap = await self._explained_pod(request.ref, context)
        else:
            snap = self.s.cache.snapshot()
            try:
                objs = parse_objects(request.pod.content, request.pod.source or "<pod>")
            except ManifestError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            pods = [o for o in objs if isinstance(o, Pod)]
            if len(pods) != 1:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"explain needs exactly one Pod, got {len(pods)}")
            pod = pods[0]
        profile = request.profile or pod.scheduler_name
        fwk = self.s.profiles.get(profile)
        if fwk is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no profile named {profile!r}")
            raise AssertionError("unreachable: abort raises")
        result = await explain_pod(fwk, snap, pod)
        return pb.scheduler.ExplainResponse(json=json.dumps(result))

    async def _what_if(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Explain with hypothetical nodes: which pending pods (or the request's pod) they would admit."""
        try:
            template = request.what_if_nodes
            nodes = [o for o in parse_objects(template.content, template.source or "<template>") if isinstance(o, Node)]
            pods: list[Pod] | None = None
            if request.pod.content:
                found = parse_objects(request.pod.content, request.pod.source or "<pod>")
                pods = [o for o in found if isinstance(o, Pod)]
        except ManifestError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise AssertionError("unreachable: abort raises") from exc
        if len(nodes) != 1:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"the what-if template needs exactly one Node, got {len(nodes)}")
        if pods is not None and len(pods) != 1:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"explain needs exactly one Pod, got {len(pods)}")
        try:
            result = await self.s.what_if(nodes[0], request.what_if_count or 1, pods)
        except ViewError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.scheduler.ExplainResponse(json=json.dumps(result))

    async def _explained_pod(self, ref: Any, context: grpc.aio.ServicerContext) -> tuple[Pod, Snapshot]:
        """A held pod and the snapshot to explain it on: a placed pod is taken off its node first (its
        own usage would otherwise count against it), so the answer shows how it is placed now."""
        if ref.kind not in ("", "Pod"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot explain kind {ref.kind!r} (Pod)")
        ns = ref.namespace or "default"
        rec = self.s.get_pod(ns, ref.name)
        if rec is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {ns}/{ref.name} not found")
            raise AssertionError("unreachable: abort raises")
        snap = self.s.cache.snapshot()
        node = self.s.cache.node_of(rec.pod.uid)
        row = snap.row(node) if node else None
        if row is None:
            return rec.pod, snap
        others = [p for p in snap.pods[row] if p.uid != rec.pod.uid]
        return dataclasses.replace(rec.pod, node_name="", nominated_node_name=""), with_node_pods(snap, row, others)

    async def ListReservations(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        out = []
        for rec in sorted(self.s.reservations.records.values(), key=lambda r: r.name):
            res = rec.reservation
            msg = pb.scheduler.ReservationState(
                name=rec.name, uid=rec.uid, phase=rec.phase, node_name=rec.node_name,
                reserved=dict(res.requests), allocated=dict(rec.allocated),
                owners=sorted(key for key, _ in rec.owners.values()),
                expires_at=res.expires_at() or 0.0, allocate_once=res.allocate_once,
            )
            pod_rec = self.s.pods.get(rec.uid)
            status = rec.last_status
            if status is None and pod_rec is not None and rec.phase == "Pending":
                status = pod_rec.last_status
            if status is not None:
                msg.last_status.CopyFrom(status_to_proto(status))
            out.append(msg)
        return pb.scheduler.ListReservationsResponse(reservations=out)

    async def ListWaitingPods(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        # The same answer plugin hosts get from the Handle service (deadlines in wall-clock time).
        pods = [wp for wp in self.s.waiting_pods if not request.profile or wp.pod.scheduler_name == request.profile]
        return pb.handle.ListWaitingPodsResponse(pods=[waiting_pod_to_proto(wp) for wp in pods])

    async def GetTrace(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        from .tracecli import spans_to_proto

        store = self.obs.tracing.store if self.obs is not None and self.obs.tracing is not None else None
        if store is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                "this framework keeps no traces (start it with --trace-store N)")
            raise AssertionError("unreachable: abort raises")
        key = f"{request.namespace or 'default'}/{request.name}"
        spans = store.trace_of(key)
        if not spans:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no trace kept for pod {key}")
        return pb.scheduler.GetTraceResponse(spans=spans_to_proto(spans))

    async def GetDebugScores(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        key = f"{request.namespace or 'default'}/{request.name}"
        scores = self.obs.scores if self.obs is not None else None
        table = scores.get(key) if scores is not None else None
        if table is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"no debug score table for pod {key} (are debug scores on? --debug-scores N)")
        return pb.scheduler.GetDebugScoresResponse(json=json.dumps(table))


@dataclass
class Server:
    """A running framework service (see :func:`start_server` and :func:`start_service`)."""

    scheduler: Scheduler
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    loop_task: asyncio.Task[None]
    services: FrameworkServices | None = None
    remote: RemotePlugins | None = None
    observability: Observability | None = None
    _stopped: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Graceful stop: NOT_SERVING, no new pods, binding cycles finished, server stopped. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.health.enter_graceful_shutdown()
        if self.observability is not None:
            await self.observability.stop_http()
        await self.scheduler.stop()
        self.loop_task.cancel()
        try:
            await self.loop_task
        except asyncio.CancelledError:
            pass
        if self.remote is not None:
            await self.remote.close()
        elif self.services is not None:
            self.services.close()
        await self.server.stop(grace)
        if self.observability is not None:
            self.observability.shutdown()  # after the last binding cycle: every trace is complete


def _new_server() -> grpc.aio.Server:
    # The message size limits and the undecodable-request guard are pluginhost.wire's, shared by every server.
    return grpc.aio.server(options=SERVER_OPTIONS, interceptors=server_interceptors())


def _bind(server: grpc.aio.Server, listen: str, tls: ServerTLS | None = None) -> int:
    return add_port(server, listen, tls)


def advertised_address(listen: str, port: int) -> str:
    """Where plugin hosts reach a framework listening on ``listen`` (a wildcard host becomes loopback:
    sidecars run next to the framework; use ``--advertise`` otherwise)."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host in ("", "0.0.0.0", "::", "*"):
        host = "127.0.0.1"
    return f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"


async def _start(
    config: SchedulerConfig,
    registry: Registry,
    server: grpc.aio.Server,
    port: int,
    services: FrameworkServices,
    remote: RemotePlugins | None,
    seed: int | None,
    observability: ObservabilityConfig | None = None,
) -> Server:
    scheduler = Scheduler(config, registry, seed=seed)
    if remote is not None:
        await remote.attach(scheduler)  # profiles, snapshot publisher, Configure (errors fail startup)
    else:
        services.attach(scheduler)
    obs = await Observability.start(observability, scheduler, remote) if observability is not None else None
    servicer = SchedulerService(scheduler, obs)
    pb.scheduler_grpc.add_SchedulerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await server.start()
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    loop_task = asyncio.get_running_loop().create_task(scheduler.run())
    return Server(scheduler, server, health_servicer, port, loop_task, services, remote, obs)


async def start_server(config: SchedulerConfig, registry: Registry, listen: str = "127.0.0.1:0",
                       *, seed: int | None = None, observability: ObservabilityConfig | None = None,
                       tls: ServerTLS | None = None) -> Server:
    """Build the scheduler and start serving on ``listen`` (port 0 picks a free port)."""
    server = _new_server()
    port = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    return await _start(config, registry, server, port, services, None, seed, observability)


async def start_service(
    config_for: Callable[[Registry], SchedulerConfig],
    endpoints: Sequence[EndpointConfig] = (),
    listen: str = "127.0.0.1:0",
    *,
    advertise: str | None = None,
    seed: int | None = None,
    observability: ObservabilityConfig | None = None,
    tls: ServerTLS | None = None,
) -> Server:
    """The whole framework with remote plugins: bind ``listen``, handshake ``endpoints`` (telling them to
    connect back to ``advertise``, by default the bound address), load the configuration with
    ``config_for(registry)``, configure the remote plugins, start serving."""
    server = _new_server()
    port = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    remote: RemotePlugins | None = None
    try:
        registry, remote = await build_registry_with_remote(
            endpoints, advertise or advertised_address(listen, port), services
        )
        return await _start(config_for(registry), registry, server, port, services, remote, seed, observability)
    except BaseException:
        if remote is not None:
            await remote.close()
        await server.stop(0)
        raise


@dataclass
class PluginServices:
    """Handle and CycleState served on their own port: for a scheduler without the Scheduler API
    (``explain`` offline, tests) whose remote plugins must still reach back."""

    server: grpc.aio.Server
    services: FrameworkServices
    port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float = 1.0) -> None:
        self.services.close()
        await self.server.stop(grace)


async def start_plugin_services(listen: str = "127.0.0.1:0", *, tls: ServerTLS | None = None) -> PluginServices:
    """Serve the Handle and CycleState services (attach a scheduler with ``services.attach`` or
    :meth:`RemotePlugins.attach`)."""
    server = _new_server()
    port = _bind(server, listen, tls)
    services = FrameworkServices()
    services.add_to(server)
    await server.start()
    return PluginServices(server, services, port)


def ready_line(listen: str, srv: Server) -> str:
    """The line ``outrigger serve`` prints once it serves: where the Scheduler API (and the secure and
    plain HTTP ports) can be reached."""
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    line = f"outrigger: serving the Scheduler API on {host}:{srv.port}"
    if srv.observability is not None and srv.observability.secure is not None:
        line += f", HTTPS on {srv.observability.secure.address}"
    if srv.observability is not None and srv.observability.http is not None:
        line += f", HTTP on {srv.observability.http.address}"
    return line


async def serve(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig] = (),
    advertise: str | None = None,
    observability: ObservabilityConfig | None = None,
    *,
    tls: ServerTLS | None = None,
) -> None:
    """Run the framework service until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # before announcing: a SIGTERM right after is graceful
    srv = await start_service(config_for, endpoints, listen, advertise=advertise, observability=observability,
                              tls=tls)
    log.info("outrigger framework serving on %s (profiles: %s)", listen, ", ".join(srv.scheduler.profiles))
    print(ready_line(listen, srv), flush=True)
    await stop.wait()
    log.info("shutting down")
    await srv.stop()
