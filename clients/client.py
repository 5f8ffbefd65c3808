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

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import grpc

from pluginhost.model import Node, Pod
from pluginhost.security import ClientTLS, sync_channel

from . import _calls as calls
from ._calls import Call, T, Warn
from ._common import CHANNEL_OPTIONS, ClientError, Connection, rpc_error, unreachable
from ._watch import ObjectTracker, ObjectWatchBase, WatchState, WatchStream
from .types import (
    Applied,
    DebugScores,
    Event,
    EventType,
    Explanation,
    NodeSummary,
    ObjectChange,
    PodGroupSummary,
    PodState,
    ReservationState,
    TraceSpan,
    WaitingPod,
    WatchCursor,
)

__all__ = ["ClientError", "EventStream", "ObjectWatch", "SchedulerClient"]


class SchedulerClient(Connection[grpc.Channel]):
    """A connection to one framework service. ``timeout``: the deadline of each unary call (seconds)."""

    def __init__(self, address: str, *, timeout: float = 30.0, tls: ClientTLS | None = None) -> None:
        super().__init__(address, timeout, sync_channel(address, tls, CHANNEL_OPTIONS))

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _run(self, call: Call[T]) -> T:
        try:
            reply = getattr(self._stub, call.method)(call.request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.address, call.method, self.timeout) from None
        return call.answer(reply)

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the framework answers (bounded); :class:`ClientError` when it does not."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise unreachable(self.address) from None

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
            raise unreachable(self.address)

    # ---- objects ---------------------------------------------------------------------------------

    # Every apply takes ``validate`` (kubectl apply's --validate: "strict", the default, refuses an
    # unknown or duplicate field; "warn" reports it to ``warn``; "ignore") and ``dry_run``.

    def apply(self, objects: Iterable[Mapping[str, Any] | Pod | Node], *, dry_run: bool = False,
              source: str = "<objects>", validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Create or update objects (manifest dicts, or ``Pod``/``Node`` models), all or nothing."""
        return self._run(calls.apply([calls.objects_manifest(objects, source)], dry_run, validate, warn))

    def apply_text(self, content: str, source: str = "<input>", *, dry_run: bool = False,
                   validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest text (YAML or JSON, several documents or a List)."""
        return self._run(calls.apply([calls.text_manifest(content, source)], dry_run, validate, warn))

    def apply_manifests(self, manifests: Iterable[tuple[str, str]], *, dry_run: bool = False,
                        validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply ``(source, text)`` manifests in one request: all of them or nothing."""
        return self._run(calls.apply([calls.text_manifest(t, s) for s, t in manifests], dry_run, validate, warn))

    def apply_files(self, paths: Iterable[str | os.PathLike[str]], *, dry_run: bool = False,
                    validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest files (``-`` for stdin) in one request: all of them or nothing."""
        return self._run(calls.apply([calls.read_manifest(p) for p in paths], dry_run, validate, warn))

    def delete_pod(self, name: str, namespace: str = "default") -> bool:
        """Delete a pod; False when there was no such pod."""
        return self._run(calls.delete("Pod", name, namespace))

    def delete_node(self, name: str) -> bool:
        """Delete a node; False when there was no such node."""
        return self._run(calls.delete("Node", name, ""))

    def delete_reservation(self, name: str) -> bool:
        """Delete a Reservation (what it held is free again); False when there was no such reservation."""
        return self._run(calls.delete("Reservation", name, ""))

    def delete(self, kind: str, name: str, namespace: str = "") -> bool:
        """Delete an object of any kind the API deletes (``PersistentVolumeClaim``, ``StorageClass``, ...);
        False when there was no such object."""
        return self._run(calls.delete(kind, name, namespace))

    def delete_pod_disruption_budget(self, name: str, namespace: str = "default") -> bool:
        """Delete a PodDisruptionBudget; False when there was no such PDB."""
        return self._run(calls.delete("PodDisruptionBudget", name, namespace))

    def list_reservations(self) -> list[ReservationState]:
        """Reservations by name: phase, node, what they reserve and what owners took."""
        return self._run(calls.list_reservations())

    def list_pod_groups(self, namespace: str = "", name: str = "") -> list[PodGroupSummary]:
        """The PodGroups (``scheduling.k8s.io``) the framework knows, by namespace and name, each with its
        object and the names of its pods (``namespace`` empty: every namespace; ``name``: that one only)."""
        return self._run(calls.list_pod_groups(namespace, name))

    def get_pod(self, name: str, namespace: str = "default") -> PodState:
        """One pod's state, its v1 object included; :class:`ClientError` (NOT_FOUND) when there is no
        such pod."""
        return self._run(calls.get_pod(name, namespace))

    def list_pods(self, namespace: str = "", phase: str = "", *, label_selector: str = "", node_name: str = "",
                  objects: bool = False) -> list[PodState]:
        """Pods by namespace and name: all, or those of one namespace, phase, node and/or whose labels
        match ``label_selector`` (kubectl's ``-l`` syntax). ``objects``: with their v1 objects."""
        return self._run(calls.list_pods(namespace, phase, label_selector, node_name, objects))

    def list_nodes(self, *, label_selector: str = "", name: str = "", objects: bool = False) -> list[NodeSummary]:
        """Nodes by name, with their accounted usage: all, or the one named, or those whose labels
        match ``label_selector``. ``objects``: with their v1 objects."""
        return self._run(calls.list_nodes(label_selector, name, objects))

    def list_events(self, kind: str, name: str, namespace: str = "default", *, uid: str = "") -> list[Event]:
        """The retained events of a Pod or Node (``uid``: only that incarnation's), oldest first."""
        return self._run(calls.list_events(kind, name, namespace, uid))

    def list_waiting_pods(self, profile: str = "") -> list[WaitingPod]:
        """Pods held in Permit, oldest first (only one profile's when ``profile`` is given)."""
        return self._run(calls.list_waiting_pods(profile))

    # ---- explain ---------------------------------------------------------------------------------

    def explain(self, pod: str | Mapping[str, Any] | Pod, *, source: str = "<pod>", profile: str = "") -> Explanation:
        """How a pod (manifest text, a manifest dict or a ``Pod``) would be scheduled on the cluster now;
        nothing is reserved or bound."""
        return self._run(calls.explain(pod, source, profile))

    def what_if(self, template: str | Mapping[str, Any] | Node, count: int = 1, *,
                pod: str | Mapping[str, Any] | Pod | None = None, source: str = "<template>") -> dict[str, Any]:
        """Which pending pods (or ``pod`` only) would be scheduled if ``count`` nodes like ``template`` (a
        Node manifest, dict or model) were added: the what-if JSON document (``admitted``, ``pods``)."""
        return self._run(calls.what_if(template, count, pod, source))

    def explain_pod(self, name: str, namespace: str = "default", *, profile: str = "") -> Explanation:
        """How a pod the framework holds would be scheduled now (a placed pod as if taken off its node)."""
        return self._run(calls.explain_pod(name, namespace, profile))

    def explain_pod_group(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """Why a PodGroup's pending pods would (or would not) be placed now, as the explain JSON of a
        group: its status, each pod's node and status, and each placement tried (with
        TopologyAwareWorkloadScheduling). Nothing is reserved or bound."""
        return self._run(calls.explain_pod_group(name, namespace))

    # ---- observability ---------------------------------------------------------------------------

    def shadow_report(self) -> list[dict[str, Any]]:
        """What the shadow plugins found on live cycles, one entry per shadow plugin (its counts,
        latency and examples: docs/plugins-live.md); :class:`ClientError` (NOT_FOUND) when there are none."""
        return self._run(calls.shadow_report())

    def get_trace(self, name: str, namespace: str = "default") -> list[TraceSpan]:
        """The framework's spans of the pod's last scheduling context, by start time; the framework keeps
        them with ``outrigger serve --trace-store N`` (:class:`ClientError` otherwise)."""
        return self._run(calls.get_trace(name, namespace))

    def debug_scores(self, name: str, namespace: str = "default") -> DebugScores:
        """The pod's last debug score table (``outrigger serve --debug-scores N``, or switched on over
        HTTP); :class:`ClientError` (NOT_FOUND) when it has none."""
        return self._run(calls.debug_scores(name, namespace))

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
        state = WatchState.start(since, types, replay, resume, objects)
        return EventStream(self, state, timeout, reconnect, reconnect_timeout)

    def watch_objects(self, kind: str, *, namespace: str = "", label_selector: str = "",
                      timeout: float | None = None) -> ObjectWatch:
        """kubectl's ``get -w``: list the pods (``kind`` "Pod", of ``namespace`` or all) or nodes ("Node")
        whose labels match ``label_selector`` (``ObjectWatch.items``), then iterate over each change
        after that list (ADDED, MODIFIED, DELETED) until ``timeout`` seconds have passed or the watch is
        closed."""
        tracker = ObjectTracker(kind, namespace, label_selector)
        items, sequence = self._run(calls.list_objects(kind, tracker.namespace, label_selector))
        return ObjectWatch(items, tracker, self.watch(since=sequence, timeout=timeout, objects=True))


class ObjectWatch(ObjectWatchBase["EventStream"], Iterator[ObjectChange]):
    """A list (``items``) and the changes after it (see :meth:`SchedulerClient.watch_objects`)."""

    def __iter__(self) -> ObjectWatch:
        return self

    def __enter__(self) -> ObjectWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> ObjectChange:
        for ev in self._stream:
            change = self._tracker.change(ev)
            if change is not None:
                return change
        raise StopIteration


class EventStream(WatchStream, Iterator[Event]):
    """The events of a watch, in order; ``cursor`` is where it stands; ``close()`` ends it."""

    def __init__(self, client: SchedulerClient, state: WatchState, timeout: float | None, reconnect: bool,
                 reconnect_timeout: float) -> None:
        super().__init__(client._stub, client.address, state, timeout, reconnect, reconnect_timeout, time.monotonic)
        self._channel = client._channel

    def __iter__(self) -> EventStream:
        return self

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> Event:
        broken_since: float | None = None
        attempts = 0
        while self._open():
            try:
                msg = next(self._call)
            except StopIteration:
                err, exc = grpc.StatusCode.UNAVAILABLE, None  # the server ended the stream: it is going away
            except grpc.RpcError as e:
                err, exc = e.code(), e
            else:
                ev = self._state.accept(msg)
                if ev is not None:
                    return ev
                continue
            if not self._broken(err, exc):
                break
            broken_since = broken_since or self._clock()
            if attempts:
                time.sleep(self._pause(attempts))
            attempts += 1
            self._wait_ready(broken_since + self._reconnect_timeout - self._clock())
            self.reconnects += 1
        raise StopIteration

    def _wait_ready(self, budget: float) -> None:
        wait, remaining = self._ready_wait(budget)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=wait)
        except grpc.FutureTimeoutError:
            self._not_ready(remaining, budget)
