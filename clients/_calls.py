"""The Scheduler API's unary calls as both clients make them: each a :class:`Call` naming the method,
its request and how its reply becomes the client's answer (:mod:`clients.types`).

:class:`~clients.client.SchedulerClient` and :class:`~clients.aio.AsyncSchedulerClient` differ only in
how they send a call (blocking or awaited): what goes out and what comes back is built here once,
including the manifests made of files, dicts and ``Pod``/``Node`` models. A request that cannot be
built (a manifest file that cannot be read, an unknown validation mode) raises :class:`ClientError`
before anything is sent.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pluginhost import pb
from pluginhost.manifest import node_to_dict, pod_to_dict
from pluginhost.model import Node, Pod

from ._common import ClientError
from .types import (
    Applied,
    DebugScores,
    Event,
    Explanation,
    NodeSummary,
    PodGroupSummary,
    PodState,
    ReservationState,
    TraceSpan,
    WaitingPod,
)

__all__ = ["Call", "T", "Warn"]

T = TypeVar("T")
Warn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One unary call: the stub's ``method``, its ``request`` and ``answer``, which turns the reply
    into what the client's method returns."""

    method: str
    request: Any
    answer: Callable[[Any], T]


# ---- manifests ----------------------------------------------------------------------------------


def read_manifest(path: str | os.PathLike[str]) -> Any:
    """A file (``-`` for stdin) as a ``Manifest`` message; unreadable files raise :class:`ClientError`."""
    name = os.fspath(path)
    try:
        content = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ClientError(f"cannot read {name}: not UTF-8 text") from None
    return pb.scheduler.Manifest(source=name, content=content)


def text_manifest(content: str, source: str) -> Any:
    return pb.scheduler.Manifest(source=source, content=content)


def object_dict(obj: Mapping[str, Any] | Pod | Node) -> Mapping[str, Any]:
    if isinstance(obj, Pod):
        return pod_to_dict(obj)
    if isinstance(obj, Node):
        return node_to_dict(obj)
    return obj


def objects_manifest(objects: Iterable[Mapping[str, Any] | Pod | Node], source: str) -> Any:
    doc = {"apiVersion": "v1", "kind": "List", "items": [object_dict(o) for o in objects]}
    return text_manifest(json.dumps(doc), source)


def object_manifest(obj: str | Mapping[str, Any] | Pod | Node, source: str) -> Any:
    """One object's manifest: text as it is, a dict or a model as JSON."""
    return text_manifest(obj if isinstance(obj, str) else json.dumps(object_dict(obj)), source)


# ---- objects ------------------------------------------------------------------------------------

# Field validation of Apply, as kubectl apply --validate names it -> the API's name.
VALIDATION = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}


def apply(manifests: list[Any], dry_run: bool, validate: str, warn: Warn | None) -> Call[list[Applied]]:
    """Apply ``manifests`` all or nothing; the reply's warnings go to ``warn``."""
    mode = VALIDATION.get(validate.lower())
    if mode is None:
        raise ClientError(f"validate must be strict, warn or ignore, got {validate!r}")

    def answer(reply: Any) -> list[Applied]:
        if warn is not None:
            for w in reply.warnings:
                warn(w)
        return [Applied.from_proto(a) for a in reply.applied]

    request = pb.scheduler.ApplyRequest(manifests=manifests, dry_run=dry_run, validate=mode)
    return Call("Apply", request, answer)


def delete(kind: str, name: str, namespace: str) -> Call[bool]:
    """Delete one object; the answer is False when there was no such object."""
    ref = pb.scheduler.ObjectRef(kind=kind, name=name, namespace=namespace)
    return Call("Delete", pb.scheduler.DeleteRequest(objects=[ref]), lambda reply: bool(reply.deleted))


def list_reservations() -> Call[list[ReservationState]]:
    return Call("ListReservations", pb.scheduler.ListReservationsRequest(),
                lambda reply: [ReservationState.from_proto(r) for r in reply.reservations])


def list_pod_groups(namespace: str, name: str) -> Call[list[PodGroupSummary]]:
    return Call("ListPodGroups", pb.scheduler.ListPodGroupsRequest(namespace=namespace, name=name),
                lambda reply: [PodGroupSummary.from_proto(g) for g in reply.pod_groups])


def get_pod(name: str, namespace: str) -> Call[PodState]:
    return Call("GetPod", pb.scheduler.GetPodRequest(namespace=namespace, name=name), PodState.from_proto)


def list_pods(namespace: str, phase: str, label_selector: str, node_name: str,
              objects: bool) -> Call[list[PodState]]:
    request = pb.scheduler.ListPodsRequest(namespace=namespace, phase=phase, label_selector=label_selector,
                                           node_name=node_name, objects=objects)
    return Call("ListPods", request, lambda reply: [PodState.from_proto(p) for p in reply.pods])


def list_nodes(label_selector: str, name: str, objects: bool) -> Call[list[NodeSummary]]:
    request = pb.scheduler.ListNodesRequest(label_selector=label_selector, name=name, objects=objects)
    return Call("ListNodes", request, lambda reply: [NodeSummary.from_proto(n) for n in reply.nodes])


def list_objects(kind: str, namespace: str, label_selector: str) -> Call[tuple[list[PodState | NodeSummary], int]]:
    """The pods (``kind`` "Pod") or nodes a list-then-watch starts from, with their v1 objects, and the
    event sequence the list is at (where the watch continues)."""
    listing: Call[list[PodState]] | Call[list[NodeSummary]]
    listing = list_pods(namespace, "", label_selector, "", True) if kind == "Pod" else \
        list_nodes(label_selector, "", True)

    def answer(reply: Any) -> tuple[list[PodState | NodeSummary], int]:
        items: list[PodState | NodeSummary] = [*listing.answer(reply)]
        return items, reply.sequence

    return Call(listing.method, listing.request, answer)


def list_events(kind: str, name: str, namespace: str, uid: str) -> Call[list[Event]]:
    ref = pb.scheduler.ObjectRef(kind=kind, name=name, namespace=namespace if kind == "Pod" else "", uid=uid)
    return Call("ListEvents", pb.scheduler.ListEventsRequest(object=ref),
                lambda reply: [Event.from_proto(e) for e in reply.events])


def list_waiting_pods(profile: str) -> Call[list[WaitingPod]]:
    return Call("ListWaitingPods", pb.handle.ListWaitingPodsRequest(profile=profile),
                lambda reply: [WaitingPod.from_proto(p) for p in reply.pods])


# ---- explain ------------------------------------------------------------------------------------


def _explanation(reply: Any) -> Explanation:
    return Explanation.from_json(reply.json)


def explain(pod: str | Mapping[str, Any] | Pod, source: str, profile: str) -> Call[Explanation]:
    request = pb.scheduler.ExplainRequest(pod=object_manifest(pod, source), profile=profile)
    return Call("Explain", request, _explanation)


def what_if(template: str | Mapping[str, Any] | Node, count: int, pod: str | Mapping[str, Any] | Pod | None,
            source: str) -> Call[dict[str, Any]]:
    """The what-if JSON document: which pending pods (or ``pod`` only) ``count`` nodes like
    ``template`` would admit."""
    request = pb.scheduler.ExplainRequest(what_if_nodes=object_manifest(template, source), what_if_count=count)
    if pod is not None:
        request.pod.CopyFrom(object_manifest(pod, "<pod>"))

    def answer(reply: Any) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(reply.json)
        return result

    return Call("Explain", request, answer)


def explain_pod(name: str, namespace: str, profile: str) -> Call[Explanation]:
    ref = pb.scheduler.ObjectRef(kind="Pod", namespace=namespace, name=name)
    return Call("Explain", pb.scheduler.ExplainRequest(ref=ref, profile=profile), _explanation)


def explain_pod_group(name: str, namespace: str) -> Call[dict[str, Any]]:
    ref = pb.scheduler.ObjectRef(kind="PodGroup", namespace=namespace, name=name)
    return Call("Explain", pb.scheduler.ExplainRequest(ref=ref), lambda reply: json.loads(reply.json))


# ---- observability ------------------------------------------------------------------------------


def get_trace(name: str, namespace: str) -> Call[list[TraceSpan]]:
    return Call("GetTrace", pb.scheduler.GetTraceRequest(namespace=namespace, name=name),
                lambda reply: [TraceSpan.from_proto(s) for s in reply.spans])


def shadow_report() -> Call[list[dict[str, Any]]]:
    return Call("GetShadowReport", pb.scheduler.GetShadowReportRequest(), lambda reply: json.loads(reply.json))


def debug_scores(name: str, namespace: str) -> Call[DebugScores]:
    return Call("GetDebugScores", pb.scheduler.GetDebugScoresRequest(namespace=namespace, name=name),
                lambda reply: DebugScores.from_json(reply.json))
