"""A small typed client for the framework's Scheduler API (blocking; see :mod:`clients.aio` for asyncio).

    with SchedulerClient("127.0.0.1:50051") as c:
        c.apply_files(["cluster.yaml"])
        for pod in c.list_pods():
            print(pod.ref.name, pod.phase, pod.node_name)
        for event in c.watch(timeout=10):
            print(event.sequence, event.type.label, event.object)

Answers are the frozen dataclasses of :mod:`clients.types`. Every call carries a deadline. Every failure
is a :class:`ClientError` whose message is meant for users: the server's own message for a bad request
(the manifest field that is wrong, the pod that does not exist), "cannot reach the framework at ADDR"
when nothing answers. A watch survives a broken stream and a restarted framework: it reconnects and
resumes after the last event it handed out, with no event twice and none missed. A framework serving
TLS is reached with ``SchedulerClient(address, tls=ClientTLS(ca_file="ca.pem"))`` (plus ``cert_file`` and
``key_file`` when it requires client certificates; docs/security.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.model import Node, Pod
from pluginhost.security import ClientTLS, sync_channel

from ._common import (
    CHANNEL_OPTIONS,
    RESUMABLE,
    ClientError,
    ObjectTracker,
    WatchState,
    apply_request,
    delete_request,
    events_request,
    object_dict,
    objects_manifest,
    pod_manifest,
    read_manifest,
    rpc_error,
)
from .types import (
    Applied,
    DebugScores,
    Event,
    EventType,
    Explanation,
    NodeSummary,
    ObjectChange,
    PodState,
    ReservationState,
    TraceSpan,
    WaitingPod,
    WatchCursor,
)

__all__ = ["ClientError", "EventStream", "ObjectWatch", "SchedulerClient"]

Warn = Callable[[str], None]


class SchedulerClient:
    """A connection to one framework service. ``timeout``: the deadline of each unary call (seconds)."""

    def __init__(self, address: str, *, timeout: float = 30.0, tls: ClientTLS | None = None) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = sync_channel(address, tls, CHANNEL_OPTIONS)
        self._stub = pb.scheduler_grpc.SchedulerStub(self._channel)  # type: ignore[no-untyped-call]

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.address, method, self.timeout) from None

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the framework answers (bounded); :class:`ClientError` when it does not."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise ClientError(f"cannot reach the framework at {self.address}", grpc.StatusCode.UNAVAILABLE) from None

    def ping(self, timeout: float = 10.0) -> None:
        """Connect now: :class:`ClientError` at the first failed connection attempt (or after ``timeout``)
        rather than waiting for the framework to come up, as :meth:`wait_ready` does."""
        done = threading.Event()
        seen: list[grpc.ChannelConnectivity] = []

        def on_change(state: grpc.ChannelConnectivity) -> None:
            if state in (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                         grpc.ChannelConnectivity.SHUTDOWN):
                seen.append(state)
                done.set()

        self._channel.subscribe(on_change, try_to_connect=True)
        try:
            done.wait(timeout)
        finally:
            self._channel.unsubscribe(on_change)
        if not seen or seen[0] != grpc.ChannelConnectivity.READY:
            raise ClientError(f"cannot reach the framework at {self.address}", grpc.StatusCode.UNAVAILABLE)

    # ---- objects ---------------------------------------------------------------------------------

    # Every apply takes ``validate`` (kubectl apply's --validate: "strict", the default, refuses an
    # unknown or duplicate field; "warn" reports it to ``warn``; "ignore") and ``dry_run``.

    def apply(self, objects: Iterable[Mapping[str, Any] | Pod | Node], *, dry_run: bool = False,
              source: str = "<objects>", validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Create or update objects (manifest dicts, or ``Pod``/``Node`` models), all or nothing."""
        return self._apply([objects_manifest(objects, source)], dry_run, validate, warn)

    def apply_text(self, content: str, source: str = "<input>", *, dry_run: bool = False,
                   validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest text (YAML or JSON, several documents or a List)."""
        return self._apply([pb.scheduler.Manifest(source=source, content=content)], dry_run, validate, warn)

    def apply_manifests(self, manifests: Iterable[tuple[str, str]], *, dry_run: bool = False,
                        validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply ``(source, text)`` manifests in one request: all of them or nothing."""
        return self._apply([pb.scheduler.Manifest(source=s, content=t) for s, t in manifests], dry_run, validate,
                           warn)

    def apply_files(self, paths: Iterable[str | os.PathLike[str]], *, dry_run: bool = False,
                    validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest files (``-`` for stdin) in one request: all of them or nothing."""
        return self._apply([read_manifest(p) for p in paths], dry_run, validate, warn)

    def _apply(self, manifests: list[Any], dry_run: bool, validate: str, warn: Warn | None) -> list[Applied]:
        reply = self._call("Apply", apply_request(manifests, dry_run, validate))
        if warn is not None:
            for w in reply.warnings:
                warn(w)
        return [Applied.from_proto(a) for a in reply.applied]

    def delete_pod(self, name: str, namespace: str = "default") -> bool:
        """Delete a pod; False when there was no such pod."""
        return bool(self._call("Delete", delete_request("Pod", name, namespace)).deleted)

    def delete_node(self, name: str) -> bool:
        """Delete a node; False when there was no such node."""
        return bool(self._call("Delete", delete_request("Node", name, "")).deleted)

    def delete_reservation(self, name: str) -> bool:
        """Delete a Reservation (what it held is free again); False when there was no such reservation."""
        return bool(self._call("Delete", delete_request("Reservation", name, "")).deleted)

    def delete(self, kind: str, name: str, namespace: str = "") -> bool:
        """Delete an object of any kind the API deletes (``PersistentVolumeClaim``, ``StorageClass``, ...);
        False when there was no such object."""
        return bool(self._call("Delete", delete_request(kind, name, namespace)).deleted)

    def delete_pod_disruption_budget(self, name: str, namespace: str = "default") -> bool:
        """Delete a PodDisruptionBudget; False when there was no such PDB."""
        return bool(self._call("Delete", delete_request("PodDisruptionBudget", name, namespace)).deleted)

    def list_reservations(self) -> list[ReservationState]:
        """Reservations by name: phase, node, what they reserve and what owners took."""
        reply = self._call("ListReservations", pb.scheduler.ListReservationsRequest())
        return [ReservationState.from_proto(r) for r in reply.reservations]

    def get_pod(self, name: str, namespace: str = "default") -> PodState:
        """One pod's state, its v1 object included; :class:`ClientError` (NOT_FOUND) when there is no
        such pod."""
        return PodState.from_proto(self._call("GetPod", pb.scheduler.GetPodRequest(namespace=namespace, name=name)))

    def list_pods(self, namespace: str = "", phase: str = "", *, label_selector: str = "", node_name: str = "",
                  objects: bool = False) -> list[PodState]:
        """Pods by namespace and name: all, or those of one namespace, phase, node and/or whose labels
        match ``label_selector`` (kubectl's ``-l`` syntax). ``objects``: with their v1 objects."""
        return [PodState.from_proto(p) for p in self._list_pods(namespace, phase, label_selector, node_name,
                                                                objects).pods]

    def _list_pods(self, namespace: str, phase: str, label_selector: str, node_name: str, objects: bool) -> Any:
        return self._call("ListPods", pb.scheduler.ListPodsRequest(
            namespace=namespace, phase=phase, label_selector=label_selector, node_name=node_name, objects=objects))

    def list_nodes(self, *, label_selector: str = "", name: str = "", objects: bool = False) -> list[NodeSummary]:
        """Nodes by name, with their accounted usage: all, or the one named, or those whose labels
        match ``label_selector``. ``objects``: with their v1 objects."""
        return [NodeSummary.from_proto(n) for n in self._list_nodes(label_selector, name, objects).nodes]

    def _list_nodes(self, label_selector: str, name: str, objects: bool) -> Any:
        return self._call("ListNodes", pb.scheduler.ListNodesRequest(label_selector=label_selector, name=name,
                                                                      objects=objects))

    def list_events(self, kind: str, name: str, namespace: str = "default", *, uid: str = "") -> list[Event]:
        """The retained events of a Pod or Node (``uid``: only that incarnation's), oldest first."""
        reply = self._call("ListEvents", events_request(kind, name, namespace, uid))
        return [Event.from_proto(e) for e in reply.events]

    def list_waiting_pods(self, profile: str = "") -> list[WaitingPod]:
        """Pods held in Permit, oldest first (only one profile's when ``profile`` is given)."""
        reply = self._call("ListWaitingPods", pb.handle.ListWaitingPodsRequest(profile=profile))
        return [WaitingPod.from_proto(p) for p in reply.pods]

    # ---- explain ---------------------------------------------------------------------------------

    def explain(self, pod: str | Mapping[str, Any] | Pod, *, source: str = "<pod>", profile: str = "") -> Explanation:
        """How a pod (manifest text, a manifest dict or a ``Pod``) would be scheduled on the cluster now;
        nothing is reserved or bound."""
        request = pb.scheduler.ExplainRequest(pod=pod_manifest(pod, source), profile=profile)
        return Explanation.from_json(self._call("Explain", request).json)

    def what_if(self, template: str | Mapping[str, Any] | Node, count: int = 1, *,
                pod: str | Mapping[str, Any] | Pod | None = None, source: str = "<template>") -> dict[str, Any]:
        """Which pending pods (or ``pod`` only) would be scheduled if ``count`` nodes like ``template`` (a
        Node manifest, dict or model) were added: the what-if JSON document (``admitted``, ``pods``)."""
        content = template if isinstance(template, str) else json.dumps(object_dict(template))
        request = pb.scheduler.ExplainRequest(what_if_nodes=pb.scheduler.Manifest(source=source, content=content),
                                              what_if_count=count)
        if pod is not None:
            request.pod.CopyFrom(pod_manifest(pod, "<pod>"))
        result: dict[str, Any] = json.loads(self._call("Explain", request).json)
        return result

    def explain_pod(self, name: str, namespace: str = "default", *, profile: str = "") -> Explanation:
        """How a pod the framework holds would be scheduled now (a placed pod as if taken off its node)."""
        ref = pb.scheduler.ObjectRef(kind="Pod", namespace=namespace, name=name)
        return Explanation.from_json(self._call("Explain", pb.scheduler.ExplainRequest(ref=ref, profile=profile)).json)

    # ---- observability ---------------------------------------------------------------------------

    def get_trace(self, name: str, namespace: str = "default") -> list[TraceSpan]:
        """The framework's spans of the pod's last scheduling context, by start time; the framework keeps
        them with ``outrigger serve --trace-store N`` (:class:`ClientError` otherwise)."""
        reply = self._call("GetTrace", pb.scheduler.GetTraceRequest(namespace=namespace, name=name))
        return [TraceSpan.from_proto(s) for s in reply.spans]

    def debug_scores(self, name: str, namespace: str = "default") -> DebugScores:
        """The pod's last debug score table (``outrigger serve --debug-scores N``, or switched on over
        HTTP); :class:`ClientError` (NOT_FOUND) when it has none."""
        reply = self._call("GetDebugScores", pb.scheduler.GetDebugScoresRequest(namespace=namespace, name=name))
        return DebugScores.from_json(reply.json)

    # ---- watch -----------------------------------------------------------------------------------

    def watch(self, *, since: int = 0, types: Iterable[EventType | int] = (), replay: bool = True,
              resume: WatchCursor | None = None, timeout: float | None = None, reconnect: bool = True,
              reconnect_timeout: float = 30.0, objects: bool = False) -> EventStream:
        """Events with a sequence above ``since`` (retained ones first when ``replay``), then live ones.
        ``objects``: each Pod and Node event carries the pod or node as it is when sent.

        ``resume``: continue after a cursor from an earlier stream (``EventStream.cursor``). ``timeout``:
        stop quietly after this many seconds. A broken stream is reopened after the last event handed
        out (``reconnect``), waiting up to ``reconnect_timeout`` seconds for the framework to answer.
        """
        state = WatchState(resume or WatchCursor("", since), types, replay or resume is not None, objects)
        return EventStream(self, state, timeout, reconnect, reconnect_timeout)

    def watch_objects(self, kind: str, *, namespace: str = "", label_selector: str = "",
                      timeout: float | None = None) -> ObjectWatch:
        """kubectl's ``get -w``: list the pods (``kind`` "Pod", of ``namespace`` or all) or nodes ("Node")
        whose labels match ``label_selector`` (``ObjectWatch.items``), then iterate over each change
        after that list (ADDED, MODIFIED, DELETED) until ``timeout`` seconds have passed or the watch is
        closed."""
        tracker = ObjectTracker(kind, namespace, label_selector)
        if kind == "Pod":
            reply = self._list_pods(tracker.namespace, "", label_selector, "", True)
            items: list[PodState | NodeSummary] = [PodState.from_proto(p) for p in reply.pods]
        else:
            reply = self._list_nodes(label_selector, "", True)
            items = [NodeSummary.from_proto(n) for n in reply.nodes]
        tracker.start(items)
        stream = self.watch(since=reply.sequence, timeout=timeout, objects=True)
        return ObjectWatch(items, tracker, stream)


class ObjectWatch(Iterator[ObjectChange]):
    """A list (``items``) and the changes after it (see :meth:`SchedulerClient.watch_objects`)."""

    def __init__(self, items: list[PodState | NodeSummary], tracker: ObjectTracker, stream: EventStream) -> None:
        self.items = items
        self._tracker = tracker
        self._stream = stream

    def __iter__(self) -> ObjectWatch:
        return self

    def __enter__(self) -> ObjectWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()

    def __next__(self) -> ObjectChange:
        for ev in self._stream:
            change = self._tracker.change(ev)
            if change is not None:
                return change
        raise StopIteration


class EventStream(Iterator[Event]):
    """The events of a watch, in order; ``cursor`` is where it stands; ``close()`` ends it."""

    def __init__(self, client: SchedulerClient, state: WatchState, timeout: float | None, reconnect: bool,
                 reconnect_timeout: float) -> None:
        self._client = client
        self._state = state
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._reconnect = reconnect
        self._reconnect_timeout = reconnect_timeout
        self._call: Any = None
        self._closed = False
        self.reconnects = 0

    @property
    def cursor(self) -> WatchCursor:
        return self._state.cursor

    def __iter__(self) -> EventStream:
        return self

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def __next__(self) -> Event:
        broken_since: float | None = None
        attempts = 0
        while not self._closed:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                self.close()
                break
            if self._call is None:
                self._call = self._client._stub.Watch(self._state.request(), timeout=remaining)
            try:
                msg = next(self._call)
            except StopIteration:
                err: grpc.StatusCode | None = grpc.StatusCode.UNAVAILABLE  # the server ended the stream: it is going
                exc: grpc.RpcError | None = None
            except grpc.RpcError as e:
                err, exc = e.code(), e
            else:
                ev = self._state.accept(msg)
                if ev is not None:
                    return ev
                continue
            self._call = None
            if self._closed or (err == grpc.StatusCode.DEADLINE_EXCEEDED and self._deadline is not None):
                break
            if not self._reconnect or err not in RESUMABLE:
                self.close()
                raise rpc_error(exc, self._client.address, "Watch", None) if exc is not None else \
                    ClientError(f"cannot reach the framework at {self._client.address}", err)
            now = time.monotonic()
            broken_since = broken_since or now
            if attempts:
                time.sleep(min(0.05 * 2**attempts, 1.0))  # it answers yet the stream breaks: do not spin
            attempts += 1
            self._wait_ready(broken_since + self._reconnect_timeout - time.monotonic())
            self.reconnects += 1
        raise StopIteration

    def _wait_ready(self, budget: float) -> None:
        remaining = self._remaining()
        wait = budget if remaining is None else min(budget, remaining)
        try:
            grpc.channel_ready_future(self._client._channel).result(timeout=max(wait, 0.0))
        except grpc.FutureTimeoutError:
            if remaining is not None and remaining <= budget:
                return  # the watch's own time is up: the loop ends it quietly
            self.close()
            raise ClientError(f"cannot reach the framework at {self._client.address}",
                              grpc.StatusCode.UNAVAILABLE) from None
