"""What the sync and asyncio clients share: the error type and its mapping from gRPC, channel
options, request builders and the watch's resume bookkeeping."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.errors import OutriggerError
from pluginhost.manifest import node_to_dict, pod_to_dict
from pluginhost.model import Node, Pod
from pluginhost.wire import CHANNEL_OPTIONS as WIRE_CHANNEL_OPTIONS

from .selector import Selector, parse_selector
from .types import Event, EventType, NodeSummary, ObjectChange, PodState, WatchCursor

__all__ = ["ClientError"]

CHANNEL_OPTIONS = [
    *WIRE_CHANNEL_OPTIONS,  # the message size limits (pluginhost.wire, docs/bad-input.md)
    # A watch waits for a restarted framework: try again soon rather than after gRPC's default 1-120 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
# A watch stream that ends with one of these is reopened (the connection broke or the server went away).
RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
                       grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED})


class ClientError(OutriggerError):
    """Any failure of a client call, with a message meant for users. ``code`` is the gRPC status code,
    or ``None`` when nothing was sent (e.g. a manifest file that cannot be read)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def rpc_error(exc: grpc.RpcError, address: str, method: str, timeout: float | None) -> ClientError:
    """The one place gRPC failures become user-readable messages."""
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        message = f"cannot reach the framework at {address}{_tls_hint(details)}"
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        message = f"the framework at {address} did not answer {method} within {timeout:g}s" if timeout else \
            f"the framework at {address} did not answer {method} in time"
    elif code == grpc.StatusCode.UNIMPLEMENTED:
        message = f"the framework at {address} does not offer {method} (is it an older version?)"
    elif code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
                  grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.OUT_OF_RANGE) and details:
        message = details
    else:
        message = f"{method} failed at {address}: {details or code.name} ({code.name})"
    return ClientError(message, code)


def _tls_hint(details: str) -> str:
    """Why a connection failed, when it is a TLS matter (docs/security.md), as a parenthesis."""
    if "CERTIFICATE_VERIFY_FAILED" in details:
        return " (its certificate is not signed by the CA given with --tls-ca)"
    if "Hostname Verification Check failed" in details:
        return " (its certificate does not name that address: see --tls-server-name)"
    if "WRONG_VERSION_NUMBER" in details:
        return " (it does not serve TLS: drop the --tls flags)"
    if "Socket closed" in details:
        return (" (it closed the connection: it may serve TLS (--tls-ca) or require a client certificate "
                "signed by its CA (--tls-cert, --tls-key))")
    return ""


def read_manifest(path: str | os.PathLike[str]) -> Any:
    """A file (``-`` for stdin) as a ``Manifest`` message; unreadable files raise :class:`ClientError`."""
    name = os.fspath(path)
    try:
        if name == "-":
            import sys

            content = sys.stdin.read()
        else:
            content = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ClientError(f"cannot read {name}: not UTF-8 text") from None
    return pb.scheduler.Manifest(source=name, content=content)


def object_dict(obj: Mapping[str, Any] | Pod | Node) -> Mapping[str, Any]:
    if isinstance(obj, Pod):
        return pod_to_dict(obj)
    if isinstance(obj, Node):
        return node_to_dict(obj)
    return obj


def objects_manifest(objects: Iterable[Mapping[str, Any] | Pod | Node], source: str) -> Any:
    doc = {"apiVersion": "v1", "kind": "List", "items": [object_dict(o) for o in objects]}
    return pb.scheduler.Manifest(source=source, content=json.dumps(doc))


def pod_manifest(pod: str | Mapping[str, Any] | Pod, source: str) -> Any:
    content = pod if isinstance(pod, str) else json.dumps(object_dict(pod))
    return pb.scheduler.Manifest(source=source, content=content)


def delete_request(kind: str, name: str, namespace: str) -> Any:
    ref = pb.scheduler.ObjectRef(kind=kind, name=name, namespace=namespace)
    return pb.scheduler.DeleteRequest(objects=[ref])


# Field validation of Apply, as kubectl apply --validate names it -> the API's name.
VALIDATION = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}


def apply_request(manifests: list[Any], dry_run: bool, validate: str) -> Any:
    mode = VALIDATION.get(validate.lower())
    if mode is None:
        raise ClientError(f"validate must be strict, warn or ignore, got {validate!r}")
    return pb.scheduler.ApplyRequest(manifests=manifests, dry_run=dry_run, validate=mode)


def events_request(kind: str, name: str, namespace: str, uid: str) -> Any:
    ref = pb.scheduler.ObjectRef(kind=kind, name=name, namespace=namespace if kind == "Pod" else "", uid=uid)
    return pb.scheduler.ListEventsRequest(object=ref)


class ObjectTracker:
    """kubectl's list-then-watch: the pods (``kind`` "Pod") or nodes ("Node") a list found, kept up to
    date from a watch's events (asked with objects), each change as an :class:`ObjectChange`."""

    def __init__(self, kind: str, namespace: str = "", label_selector: str = "") -> None:
        if kind not in ("Pod", "Node"):
            raise ValueError(f"watch_objects watches Pod or Node, not {kind!r}")
        self.kind = kind
        self.namespace = namespace if kind == "Pod" else ""
        try:
            self.selector: Selector = parse_selector(label_selector)
        except ValueError as exc:
            raise ClientError(str(exc), grpc.StatusCode.INVALID_ARGUMENT) from None
        self.known: dict[str, PodState | NodeSummary] = {}

    def start(self, items: Iterable[PodState | NodeSummary]) -> None:
        self.known = {_key(o): o for o in items}

    def _matches(self, obj: PodState | NodeSummary) -> bool:
        if isinstance(obj, NodeSummary):
            return self.selector.matches(obj.labels)
        labels = obj.manifest.get("metadata", {}).get("labels") or {}
        return self.selector.matches(labels)

    def change(self, ev: Event) -> ObjectChange | None:
        """What ``ev`` changes among the tracked objects (None: nothing they show)."""
        if ev.object.kind != self.kind or (self.namespace and ev.object.namespace != self.namespace):
            return None
        key = ev.object.key
        now: PodState | NodeSummary | None = ev.pod if self.kind == "Pod" else ev.node
        old = self.known.get(key)
        if now is None or not self._matches(now):
            if old is None or (now is None and _uid(old) not in ("", ev.object.uid)):
                return None  # never shown, or an older incarnation's event
            del self.known[key]
            return ObjectChange("DELETED", old)
        self.known[key] = now
        return ObjectChange("ADDED" if old is None else "MODIFIED", now)


def _key(obj: PodState | NodeSummary) -> str:
    return obj.ref.key if isinstance(obj, PodState) else obj.name


def _uid(obj: PodState | NodeSummary) -> str:
    if isinstance(obj, PodState):
        return obj.ref.uid
    uid = obj.manifest.get("metadata", {}).get("uid", "")
    return uid if isinstance(uid, str) else ""


class WatchState:
    """The resume point of a watch and the request that continues from it."""

    def __init__(self, cursor: WatchCursor, types: Iterable[EventType | int], replay: bool,
                 objects: bool = False) -> None:
        self.cursor = cursor
        self.types: list[Any] = [int(EventType(t)) for t in types]
        self.replay = replay
        self.objects = objects

    def request(self) -> Any:
        return pb.scheduler.WatchRequest(since_sequence=self.cursor.sequence, run_id=self.cursor.run_id,
                                         types=self.types, replay=self.replay, objects=self.objects)

    def accept(self, msg: Any) -> Event | None:
        """The event to hand out, or None for one already seen (or of a type this client does not know)."""
        if msg.run_id == self.cursor.run_id and msg.sequence <= self.cursor.sequence:
            return None
        # Whatever happens next, a reopened stream continues after this event: replay it all.
        self.replay = True
        self.cursor = WatchCursor(msg.run_id, msg.sequence)
        try:
            return Event.from_proto(msg)
        except ValueError:  # an event type newer than this client
            return None
