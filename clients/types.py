"""What the Scheduler API answers, as plain frozen dataclasses (never protobuf messages).

Each class has ``from_proto`` (used by the clients) and ``to_dict`` (JSON/YAML-ready, the shape the
``outrigger`` CLI prints with ``-o json`` and ``-o yaml``)::

    pod = client.get_pod("web")
    pod.phase, pod.node_name, pod.last_status.reasons
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from pluginhost import pb
from pluginhost.status import Code

__all__ = [
    "Applied",
    "DebugScores",
    "Event",
    "EventType",
    "Explanation",
    "NodeScores",
    "NodeSummary",
    "NodeVerdict",
    "ObjectChange",
    "ObjectRef",
    "PluginScore",
    "PodGroupSummary",
    "PodState",
    "ReservationState",
    "Status",
    "TraceSpan",
    "WaitingPod",
    "WatchCursor",
]


class EventType(enum.IntEnum):
    """The kind of a scheduling event; the values are the proto's ``EventType`` numbers."""

    BOUND = 1
    UNSCHEDULABLE = 2
    PREEMPTED = 3
    APPLIED = 4
    DELETED = 5
    ERROR = 6
    NOMINATED = 7

    @property
    def label(self) -> str:
        """``"Bound"``, ``"Unschedulable"``, ... as events are shown to users."""
        return self.name.capitalize()


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A Pod or Node: ``kind``, ``namespace`` (empty for nodes), ``name``, ``uid``."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    @classmethod
    def from_proto(cls, msg: Any) -> ObjectRef:
        return cls(kind=msg.kind, name=msg.name, namespace=msg.namespace, uid=msg.uid)

    @property
    def key(self) -> str:
        """``namespace/name`` for pods, ``name`` for nodes."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.key}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "uid": self.uid}


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's or an attempt's answer: ``code`` by name (``"Unschedulable"``), reasons, plugin."""

    code: str = "Success"
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @classmethod
    def from_proto(cls, msg: Any) -> Status:
        try:
            code = Code(msg.code).name
        except ValueError:
            code = f"Code{msg.code}"
        return cls(code=code, reasons=tuple(msg.reasons), plugin=msg.plugin)

    @property
    def ok(self) -> bool:
        return self.code == "Success"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reasons": list(self.reasons), "plugin": self.plugin}


@dataclass(frozen=True, slots=True)
class Applied:
    """One object an apply touched: ``action`` is "created", "configured" or "unchanged"."""

    ref: ObjectRef
    action: str

    @classmethod
    def from_proto(cls, msg: Any) -> Applied:
        return cls(ObjectRef.from_proto(msg.ref), msg.action)

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.ref.to_dict(), "action": self.action}


@dataclass(frozen=True, slots=True)
class PodState:
    """A pod's scheduling state. ``phase``: Pending, Unschedulable, Waiting, Binding or Bound.
    ``manifest``: the pod as a v1 Pod object (what ``outrigger get pod -o yaml`` prints), when the
    call asked for objects (``get_pod`` always does); empty otherwise."""

    ref: ObjectRef
    phase: str
    node_name: str = ""
    last_status: Status = field(default_factory=Status)
    attempts: int = 0
    queue: str = ""
    nominated_node_name: str = ""
    profile: str = ""
    priority: int = 0
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, msg: Any) -> PodState:
        return cls(
            ref=ObjectRef.from_proto(msg.ref),
            phase=msg.phase,
            node_name=msg.node_name,
            last_status=Status.from_proto(msg.last_status),
            attempts=msg.attempts,
            queue=msg.queue,
            nominated_node_name=msg.nominated_node_name,
            profile=msg.profile,
            priority=msg.priority,
            manifest=_object(msg.object_json),
        )

    @property
    def reason(self) -> str:
        """Why the pod is not bound (its last attempt's first reason); empty once bound."""
        return self.last_status.reasons[0] if self.last_status.reasons and self.phase != "Bound" else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.ref.namespace, "name": self.ref.name, "uid": self.ref.uid, "phase": self.phase,
            "node": self.node_name, "attempts": self.attempts, "queue": self.queue,
            "nominatedNode": self.nominated_node_name, "profile": self.profile, "priority": self.priority,
            "lastStatus": self.last_status.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """A node with its accounted usage (canonical units: cpu in millicores, memory in bytes).
    ``manifest``: the node as a v1 Node object, when the call asked for objects; empty otherwise."""

    name: str
    allocatable: dict[str, int]
    requested: dict[str, int]
    pods: int
    unschedulable: bool
    taints: tuple[str, ...]
    labels: dict[str, str]
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, msg: Any) -> NodeSummary:
        return cls(
            name=msg.name, allocatable=dict(sorted(msg.allocatable.items())),
            requested=dict(sorted(msg.requested.items())), pods=msg.pods, unschedulable=msg.unschedulable,
            taints=tuple(msg.taints), labels=dict(sorted(msg.labels.items())), manifest=_object(msg.object_json),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "unschedulable": self.unschedulable, "pods": self.pods,
            "allocatable": dict(self.allocatable), "requested": dict(self.requested),
            "taints": list(self.taints), "labels": dict(self.labels),
        }


@dataclass(frozen=True, slots=True)
class PodGroupSummary:
    """A PodGroup (``scheduling.k8s.io``) the framework knows: ``manifest`` is the object as API JSON,
    as the cluster source has it; ``pods`` the names of the pods that name it, in the order seen."""

    namespace: str
    name: str
    manifest: dict[str, Any]
    pods: tuple[str, ...] = ()

    @classmethod
    def from_proto(cls, msg: Any) -> PodGroupSummary:
        obj = _object(msg.object_json)
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return cls(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                   manifest=obj, pods=tuple(msg.pods))

    def to_dict(self) -> dict[str, Any]:
        return self.manifest


@dataclass(frozen=True, slots=True)
class ReservationState:
    """A Reservation: ``phase`` Pending, Available, Succeeded or Expired; what it reserves and what owner
    pods took (canonical units); ``expires_at`` in Unix seconds (0: never); ``last_status`` says why it
    is pending, or that it expired."""

    name: str
    uid: str
    phase: str
    node_name: str
    reserved: dict[str, int]
    allocated: dict[str, int]
    owners: tuple[str, ...]
    expires_at: float
    allocate_once: bool
    last_status: Status = field(default_factory=Status)

    @classmethod
    def from_proto(cls, msg: Any) -> ReservationState:
        return cls(
            name=msg.name, uid=msg.uid, phase=msg.phase, node_name=msg.node_name,
            reserved=dict(sorted(msg.reserved.items())), allocated=dict(sorted(msg.allocated.items())),
            owners=tuple(msg.owners), expires_at=msg.expires_at, allocate_once=msg.allocate_once,
            last_status=Status.from_proto(msg.last_status),
        )

    @property
    def reason(self) -> str:
        return self.last_status.reasons[0] if self.last_status.reasons else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "uid": self.uid, "phase": self.phase, "node": self.node_name,
            "reserved": dict(self.reserved), "allocated": dict(self.allocated), "owners": list(self.owners),
            "expiresAt": self.expires_at, "allocateOnce": self.allocate_once, "lastStatus": self.last_status.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class WaitingPod:
    """A pod held in Permit: the plugins it waits for, its node, its deadline (Unix seconds)."""

    ref: ObjectRef
    node_name: str
    pending_plugins: tuple[str, ...]
    deadline: float
    profile: str

    @classmethod
    def from_proto(cls, msg: Any) -> WaitingPod:
        meta = msg.pod.metadata
        return cls(
            ref=ObjectRef("Pod", meta.name, meta.namespace or "default", meta.uid), node_name=msg.node_name,
            pending_plugins=tuple(msg.pending_plugins), deadline=msg.deadline, profile=msg.profile,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.ref.namespace, "name": self.ref.name, "uid": self.ref.uid, "node": self.node_name,
            "pendingPlugins": list(self.pending_plugins), "deadline": self.deadline, "profile": self.profile,
        }


@dataclass(frozen=True, slots=True)
class ObjectChange:
    """One change a list-then-watch (``watch_objects``) sees, as kubectl's watch events name them:
    ``type`` is "ADDED", "MODIFIED" or "DELETED"; ``object`` is the pod or node (its last state when
    deleted)."""

    type: str
    object: PodState | NodeSummary


@dataclass(frozen=True, slots=True)
class WatchCursor:
    """Where a watch stands: the framework run and the last event sequence seen in it. Pass it back
    to ``watch(resume=...)`` to continue without duplicates, even after the framework restarted."""

    run_id: str = ""
    sequence: int = 0


@dataclass(frozen=True, slots=True)
class Event:
    """A scheduling event. ``sequence`` counts up within one framework run (``run_id``). A watch
    asked for objects sets ``pod`` (Pod events) or ``node`` (Node events) to the object as it was when
    the event was sent, unless it was deleted by then."""

    sequence: int
    type: EventType
    object: ObjectRef
    node_name: str = ""
    status: Status = field(default_factory=Status)
    timestamp: float = 0.0
    attempts: int = 0
    run_id: str = ""
    pod: PodState | None = None
    node: NodeSummary | None = None

    @classmethod
    def from_proto(cls, msg: Any) -> Event:
        return cls(
            sequence=msg.sequence, type=EventType(msg.type), object=ObjectRef.from_proto(msg.object),
            node_name=msg.node_name, status=Status.from_proto(msg.status), timestamp=msg.timestamp,
            attempts=msg.attempts, run_id=msg.run_id,
            pod=PodState.from_proto(msg.pod) if msg.HasField("pod") else None,
            node=NodeSummary.from_proto(msg.node) if msg.HasField("node") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence, "type": self.type.label, "object": self.object.to_dict(),
            "node": self.node_name, "status": self.status.to_dict(), "timestamp": self.timestamp,
            "attempts": self.attempts, "runId": self.run_id,
        }


@dataclass(frozen=True, slots=True)
class PluginScore:
    """One Score plugin's score for a node: as returned, after NormalizeScore, times its weight."""

    raw: int
    normalized: int
    weighted: int


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node in an explanation: its Filter status (``None`` when not evaluated), scores and total."""

    filter: Status | None
    scores: dict[str, PluginScore]
    total: int | None


@dataclass(frozen=True, slots=True)
class Explanation:
    """How a pod would be scheduled now: the cycle's status, the node selected, a verdict per node.
    ``document`` is the explain JSON document as the server sent it."""

    pod: str
    selected: str | None
    status: Status
    nodes: dict[str, NodeVerdict]
    document: dict[str, Any]

    @classmethod
    def from_json(cls, text: str) -> Explanation:
        doc: dict[str, Any] = json.loads(text)
        nodes = {}
        for name, n in doc["nodes"].items():
            f = n["filter"]
            verdict = None if f is None else Status(f["code"], tuple(f["reasons"]), f.get("plugin") or "")
            scores = {p: PluginScore(s["raw"], s["normalized"], s["weighted"]) for p, s in n["scores"].items()}
            nodes[name] = NodeVerdict(verdict, scores, n["total"])
        st = doc["status"]
        return cls(doc["pod"], doc["selected"], Status(st["code"], tuple(st["reasons"])), nodes, doc)

    def to_dict(self) -> dict[str, Any]:
        return self.document


@dataclass(frozen=True, slots=True)
class NodeScores:
    """One node of a debug score table: its total and every Score plugin's score."""

    node: str
    total: int
    scores: dict[str, PluginScore]


@dataclass(frozen=True, slots=True)
class DebugScores:
    """The debug score table of a pod's last scored attempt: the top ``top`` of ``scored_nodes`` nodes,
    highest total first (the numbers explain reports). ``document`` is the JSON the server sent."""

    pod: str
    uid: str
    profile: str
    attempt: int
    scored_nodes: int
    top: int
    selected: str | None
    nodes: tuple[NodeScores, ...]
    document: dict[str, Any]

    @classmethod
    def from_json(cls, text: str) -> DebugScores:
        doc: dict[str, Any] = json.loads(text)
        nodes = tuple(
            NodeScores(n["node"], n["total"],
                       {p: PluginScore(s["raw"], s["normalized"], s["weighted"]) for p, s in n["scores"].items()})
            for n in doc["nodes"]
        )
        return cls(doc["pod"], doc.get("uid", ""), doc.get("profile", ""), doc["attempt"], doc["scored_nodes"],
                   doc.get("top", len(nodes)), doc.get("selected"), nodes, doc)

    def to_dict(self) -> dict[str, Any]:
        return self.document


@dataclass(frozen=True, slots=True)
class TraceSpan:
    """One span of a pod's trace: ids as hex, times in Unix nanoseconds, attributes decoded."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_unix_nano: int
    end_unix_nano: int
    attributes: dict[str, Any]
    status_code: str = "UNSET"
    status_message: str = ""

    @classmethod
    def from_proto(cls, msg: Any) -> TraceSpan:
        return cls(
            trace_id=msg.trace_id, span_id=msg.span_id, parent_span_id=msg.parent_span_id, name=msg.name,
            start_unix_nano=msg.start_unix_nano, end_unix_nano=msg.end_unix_nano,
            attributes=json.loads(msg.attributes_json or "{}"), status_code=msg.status_code,
            status_message=msg.status_message,
        )

    @property
    def duration_ms(self) -> float:
        return (self.end_unix_nano - self.start_unix_nano) / 1e6

    def to_dict(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id, "spanId": self.span_id, "parentSpanId": self.parent_span_id,
            "name": self.name, "startUnixNano": self.start_unix_nano, "endUnixNano": self.end_unix_nano,
            "attributes": dict(self.attributes), "statusCode": self.status_code,
            "statusMessage": self.status_message,
        }


def _object(text: str) -> dict[str, Any]:
    if not text:
        return {}
    obj: dict[str, Any] = json.loads(text)
    return obj


def event_types_to_proto(types: Any) -> list[int]:
    return [int(EventType(t)) for t in types]


# The proto enum and EventType must agree (tests/test_client.py checks every value).
PROTO_EVENT_TYPES = {name[len("EVENT_TYPE_"):]: value for name, value in pb.scheduler.EventType.items()
                     if name != "EVENT_TYPE_UNSPECIFIED"}
