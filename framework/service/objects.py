"""The Scheduler API's objects: a pod or node as the v1 object ``outrigger get -o yaml`` prints
(:func:`pod_object`, :func:`node_object`, with the ``PodScheduled`` condition kube-scheduler would
write), what of such a manifest an apply compares (:func:`as_applied`), and the proto messages of
object references and events."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pluginhost import pb
from pluginhost.convert import status_to_proto
from pluginhost.manifest import node_to_dict, pod_to_dict
from pluginhost.model import Node, Pod
from pluginhost.status import Code

from ..queue import GATED
from ..scheduler.records import (
    BOUND,
    EV_APPLIED,
    EV_BOUND,
    EV_DELETED,
    EV_ERROR,
    EV_NOMINATED,
    EV_PREEMPTED,
    EV_UNSCHEDULABLE,
    Event,
    PodRecord,
)

__all__ = [
    "GATED_MESSAGE",
    "KNOWN_EVENT_TYPES",
    "as_applied",
    "event_to_proto",
    "node_object",
    "object_ref",
    "pod_object",
]


_EVENT_TYPES = {
    EV_BOUND: pb.scheduler.EVENT_TYPE_BOUND,
    EV_UNSCHEDULABLE: pb.scheduler.EVENT_TYPE_UNSCHEDULABLE,
    EV_PREEMPTED: pb.scheduler.EVENT_TYPE_PREEMPTED,
    EV_APPLIED: pb.scheduler.EVENT_TYPE_APPLIED,
    EV_DELETED: pb.scheduler.EVENT_TYPE_DELETED,
    EV_ERROR: pb.scheduler.EVENT_TYPE_ERROR,
    EV_NOMINATED: pb.scheduler.EVENT_TYPE_NOMINATED,
}


KNOWN_EVENT_TYPES = frozenset(_EVENT_TYPES.values())


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
    # What DynamicResources' PreBind wrote there (the claim made for the pod's extended resources).
    written = (pod.raw.get("status") or {}).get("extendedResourceClaimStatus") if pod.raw else None
    if written:
        status["extendedResourceClaimStatus"] = written
    obj["status"] = status
    return obj


def node_object(node: Node, created: float | None = None) -> dict[str, Any]:
    """The node as a v1 Node: the manifest as applied (status included: it is what the scheduler
    reads), with metadata.uid and, when known, creationTimestamp."""
    first: dict[str, Any] = {"name": node.name, "uid": node.uid}
    if created is not None:
        first["creationTimestamp"] = _timestamp(created)
    return _with_metadata(node_to_dict(node), "Node", first)


def as_applied(raw: Mapping[str, Any], kind: str, node_name: str) -> dict[str, Any]:
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
