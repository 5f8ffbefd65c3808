"""The public Scheduler API (``outrigger.v1.Scheduler``) over a :class:`~framework.scheduler.Scheduler`:
Apply and Delete (a request is checked as a whole and refused with ``INVALID_ARGUMENT`` naming what is
wrong, changing nothing), reading pods, nodes and events, Watch, Explain and what-if, reservations,
waiting pods, traces and debug scores."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from clients.selector import Selector, SelectorError, parse_selector
from pluginhost import pb
from pluginhost.convert import status_to_proto
from pluginhost.manifest import ManifestError, ManifestObject, parse_objects
from pluginhost.model import Node, PersistentVolumeClaim, Pod
from pluginhost.snapshot import Snapshot
from pluginhost.view import ViewError

from ..canary import for_pod
from ..observe.observability import Observability
from ..podgroups.store import pod_group_manifest
from ..remote.services import waiting_pod_to_proto
from ..reservations import is_reserve_pod
from ..scheduler import Scheduler
from ..scheduler.explain import explain_pod
from ..scheduler.records import ApplyError, ApplyResult, Event, PodRecord
from ..whatif import with_node_pods
from .objects import KNOWN_EVENT_TYPES, as_applied, event_to_proto, node_object, object_ref, pod_object

__all__ = ["SERVICE_NAME", "SchedulerService"]


SERVICE_NAME = "outrigger.v1.Scheduler"

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
                            and as_applied(obj.raw, "Pod", bound) == as_applied(old.raw, "Pod", bound)):
                        obj.raw = old.raw
            elif isinstance(obj, Node):
                node = self.s.nodes.get(obj.name)
                if (node is not None and obj.raw and node.raw
                        and as_applied(obj.raw, "Node", "") == as_applied(node.raw, "Node", "")):
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
        unknown = sorted(wanted - KNOWN_EVENT_TYPES)
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
        if request.HasField("ref") and request.ref.kind == "PodGroup":
            ns = request.ref.namespace or "default"
            if self.s.cache.podgroups.get(ns, request.ref.name) is None:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"podgroup {ns}/{request.ref.name} not found")
            return pb.scheduler.ExplainResponse(json=json.dumps(await self.s.explain_group(ns, request.ref.name)))
        last = ""  # the variant of a held pod's last cycle (framework.canary)
        if request.HasField("ref"):
            pod, snap = await self._explained_pod(request.ref, context)
            held = self.s.pods.get(pod.uid)
            last = held.variant if held is not None else ""
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
        # A profile with a canary: the variant that schedules this pod explains it, and says so.
        fwk, variant = for_pod(fwk, pod, last)
        result = await explain_pod(fwk, snap, pod)
        if variant is not None:
            result["variant"] = variant
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
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot explain kind {ref.kind!r} (Pod, PodGroup)")
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

    async def ListPodGroups(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        store = self.s.cache.podgroups
        groups = sorted((pg for pg in store.pod_groups.values()
                         if (not request.namespace or pg.namespace == request.namespace)
                         and (not request.name or pg.name == request.name)), key=lambda pg: (pg.namespace, pg.name))
        return pb.scheduler.ListPodGroupsResponse(pod_groups=[
            pb.scheduler.PodGroupSummary(object_json=json.dumps(pod_group_manifest(pg)),
                                         pods=[p.name for p in store.members(pg.namespace, pg.name)])
            for pg in groups])

    async def ListWaitingPods(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        # The same answer plugin hosts get from the Handle service (deadlines in wall-clock time).
        pods = [wp for wp in self.s.waiting_pods if not request.profile or wp.pod.scheduler_name == request.profile]
        return pb.handle.ListWaitingPodsResponse(pods=[waiting_pod_to_proto(wp) for wp in pods])

    async def GetTrace(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        from ..observe.tracecli import spans_to_proto

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

    async def GetShadowReport(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        report = self.s.shadow_report() if self.s.shadow_report is not None else []
        if not report:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                "no shadow plugins (a RemotePlugins endpoint with a shadow block)")
        return pb.scheduler.GetShadowReportResponse(json=json.dumps(report))

    async def GetDebugScores(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        key = f"{request.namespace or 'default'}/{request.name}"
        scores = self.obs.scores if self.obs is not None else None
        table = scores.get(key) if scores is not None else None
        if table is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"no debug score table for pod {key} (are debug scores on? --debug-scores N)")
        return pb.scheduler.GetDebugScoresResponse(json=json.dumps(table))
