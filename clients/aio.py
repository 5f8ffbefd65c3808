"""The asyncio twin of :class:`clients.client.SchedulerClient`: the same methods, awaited.

    async with AsyncSchedulerClient("127.0.0.1:50051") as c:
        await c.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, ...}])
        async for event in c.watch(timeout=10):
            print(event.sequence, event.type.label, event.object)

Same answers (:mod:`clients.types`), same :class:`ClientError`, same watch resume.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.model import Node, Pod
from pluginhost.security import ClientTLS, aio_channel

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

__all__ = ["AsyncEventStream", "AsyncObjectWatch", "AsyncSchedulerClient", "ClientError"]

Warn = Callable[[str], None]


class AsyncSchedulerClient:
    """A connection to one framework service for asyncio code (create it inside a running loop)."""

    def __init__(self, address: str, *, timeout: float = 30.0, tls: ClientTLS | None = None) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = aio_channel(address, tls, CHANNEL_OPTIONS)
        self._stub = pb.scheduler_grpc.SchedulerStub(self._channel)  # type: ignore[no-untyped-call]

    async def __aenter__(self) -> AsyncSchedulerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.address, method, self.timeout) from None

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the framework answers (bounded); :class:`ClientError` when it does not."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            raise ClientError(f"cannot reach the framework at {self.address}", grpc.StatusCode.UNAVAILABLE) from None

    async def ping(self, timeout: float = 10.0) -> None:
        """Connect now: :class:`ClientError` at the first failed connection attempt (or after ``timeout``)
        rather than waiting for the framework to come up, as :meth:`wait_ready` does."""
        settled = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                   grpc.ChannelConnectivity.SHUTDOWN)

        async def outcome() -> grpc.ChannelConnectivity:
            state = self._channel.get_state(try_to_connect=True)
            while state not in settled:
                await self._channel.wait_for_state_change(state)
                state = self._channel.get_state(try_to_connect=True)
            return state

        try:
            state = await asyncio.wait_for(outcome(), timeout)
        except TimeoutError:
            state = None
        if state != grpc.ChannelConnectivity.READY:
            raise ClientError(f"cannot reach the framework at {self.address}", grpc.StatusCode.UNAVAILABLE)

    # ---- objects ---------------------------------------------------------------------------------

    async def apply(self, objects: Iterable[Mapping[str, Any] | Pod | Node], *, dry_run: bool = False,
                    source: str = "<objects>", validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Create or update objects (manifest dicts, or ``Pod``/``Node`` models), all or nothing."""
        return await self._apply([objects_manifest(objects, source)], dry_run, validate, warn)

    async def apply_text(self, content: str, source: str = "<input>", *, dry_run: bool = False,
                         validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest text (YAML or JSON, several documents or a List)."""
        return await self._apply([pb.scheduler.Manifest(source=source, content=content)], dry_run, validate, warn)

    async def apply_manifests(self, manifests: Iterable[tuple[str, str]], *, dry_run: bool = False,
                              validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply ``(source, text)`` manifests in one request: all of them or nothing."""
        return await self._apply([pb.scheduler.Manifest(source=s, content=t) for s, t in manifests], dry_run,
                                 validate, warn)

    async def apply_files(self, paths: Iterable[str | os.PathLike[str]], *, dry_run: bool = False,
                          validate: str = "strict", warn: Warn | None = None) -> list[Applied]:
        """Apply manifest files in one request: all of them or nothing."""
        return await self._apply([read_manifest(p) for p in paths], dry_run, validate, warn)

    async def _apply(self, manifests: list[Any], dry_run: bool, validate: str, warn: Warn | None) -> list[Applied]:
        reply = await self._call("Apply", apply_request(manifests, dry_run, validate))
        if warn is not None:
            for w in reply.warnings:
                warn(w)
        return [Applied.from_proto(a) for a in reply.applied]

    async def delete_pod(self, name: str, namespace: str = "default") -> bool:
        """Delete a pod; False when there was no such pod."""
        return bool((await self._call("Delete", delete_request("Pod", name, namespace))).deleted)

    async def delete_node(self, name: str) -> bool:
        """Delete a node; False when there was no such node."""
        return bool((await self._call("Delete", delete_request("Node", name, ""))).deleted)

    async def delete_reservation(self, name: str) -> bool:
        """Delete a Reservation; False when there was no such reservation."""
        return bool((await self._call("Delete", delete_request("Reservation", name, ""))).deleted)

    async def delete_pod_disruption_budget(self, name: str, namespace: str = "default") -> bool:
        """Delete a PodDisruptionBudget; False when there was no such PDB."""
        return bool((await self._call("Delete", delete_request("PodDisruptionBudget", name, namespace))).deleted)

    async def list_reservations(self) -> list[ReservationState]:
        """Reservations by name: phase, node, what they reserve and what owners took."""
        reply = await self._call("ListReservations", pb.scheduler.ListReservationsRequest())
        return [ReservationState.from_proto(r) for r in reply.reservations]

    async def get_pod(self, name: str, namespace: str = "default") -> PodState:
        """One pod's state, its v1 object included; :class:`ClientError` (NOT_FOUND) when there is no
        such pod."""
        request = pb.scheduler.GetPodRequest(namespace=namespace, name=name)
        return PodState.from_proto(await self._call("GetPod", request))

    async def list_pods(self, namespace: str = "", phase: str = "", *, label_selector: str = "",
                        node_name: str = "", objects: bool = False) -> list[PodState]:
        """As :meth:`clients.client.SchedulerClient.list_pods`."""
        reply = await self._list_pods(namespace, phase, label_selector, node_name, objects)
        return [PodState.from_proto(p) for p in reply.pods]

    async def _list_pods(self, namespace: str, phase: str, label_selector: str, node_name: str,
                         objects: bool) -> Any:
        return await self._call("ListPods", pb.scheduler.ListPodsRequest(
            namespace=namespace, phase=phase, label_selector=label_selector, node_name=node_name, objects=objects))

    async def list_nodes(self, *, label_selector: str = "", name: str = "", objects: bool = False) -> list[NodeSummary]:
        """As :meth:`clients.client.SchedulerClient.list_nodes`."""
        return [NodeSummary.from_proto(n) for n in (await self._list_nodes(label_selector, name, objects)).nodes]

    async def _list_nodes(self, label_selector: str, name: str, objects: bool) -> Any:
        return await self._call("ListNodes", pb.scheduler.ListNodesRequest(label_selector=label_selector, name=name,
                                                                            objects=objects))

    async def list_events(self, kind: str, name: str, namespace: str = "default", *, uid: str = "") -> list[Event]:
        """The retained events of a Pod or Node (``uid``: only that incarnation's), oldest first."""
        reply = await self._call("ListEvents", events_request(kind, name, namespace, uid))
        return [Event.from_proto(e) for e in reply.events]

    async def list_waiting_pods(self, profile: str = "") -> list[WaitingPod]:
        """Pods held in Permit, oldest first (only one profile's when ``profile`` is given)."""
        reply = await self._call("ListWaitingPods", pb.handle.ListWaitingPodsRequest(profile=profile))
        return [WaitingPod.from_proto(p) for p in reply.pods]

    # ---- explain ---------------------------------------------------------------------------------

    async def explain(self, pod: str | Mapping[str, Any] | Pod, *, source: str = "<pod>",
                      profile: str = "") -> Explanation:
        """How a pod would be scheduled on the cluster now; nothing is reserved or bound."""
        request = pb.scheduler.ExplainRequest(pod=pod_manifest(pod, source), profile=profile)
        return Explanation.from_json((await self._call("Explain", request)).json)

    async def what_if(self, template: str | Mapping[str, Any] | Node, count: int = 1, *,
                      pod: str | Mapping[str, Any] | Pod | None = None, source: str = "<template>") -> dict[str, Any]:
        """Which pending pods (or ``pod`` only) ``count`` nodes like ``template`` would admit (the
        what-if JSON document; see :meth:`SchedulerClient.what_if`)."""
        content = template if isinstance(template, str) else json.dumps(object_dict(template))
        request = pb.scheduler.ExplainRequest(what_if_nodes=pb.scheduler.Manifest(source=source, content=content),
                                              what_if_count=count)
        if pod is not None:
            request.pod.CopyFrom(pod_manifest(pod, "<pod>"))
        result: dict[str, Any] = json.loads((await self._call("Explain", request)).json)
        return result

    async def explain_pod(self, name: str, namespace: str = "default", *, profile: str = "") -> Explanation:
        """How a pod the framework holds would be scheduled now (a placed pod as if taken off its node)."""
        ref = pb.scheduler.ObjectRef(kind="Pod", namespace=namespace, name=name)
        reply = await self._call("Explain", pb.scheduler.ExplainRequest(ref=ref, profile=profile))
        return Explanation.from_json(reply.json)

    # ---- observability ---------------------------------------------------------------------------

    async def get_trace(self, name: str, namespace: str = "default") -> list[TraceSpan]:
        """As :meth:`clients.client.SchedulerClient.get_trace`."""
        reply = await self._call("GetTrace", pb.scheduler.GetTraceRequest(namespace=namespace, name=name))
        return [TraceSpan.from_proto(s) for s in reply.spans]

    async def debug_scores(self, name: str, namespace: str = "default") -> DebugScores:
        """As :meth:`clients.client.SchedulerClient.debug_scores`."""
        request = pb.scheduler.GetDebugScoresRequest(namespace=namespace, name=name)
        return DebugScores.from_json((await self._call("GetDebugScores", request)).json)

    # ---- watch -----------------------------------------------------------------------------------

    def watch(self, *, since: int = 0, types: Iterable[EventType | int] = (), replay: bool = True,
              resume: WatchCursor | None = None, timeout: float | None = None, reconnect: bool = True,
              reconnect_timeout: float = 30.0, objects: bool = False) -> AsyncEventStream:
        """As :meth:`clients.client.SchedulerClient.watch`, iterated with ``async for``."""
        state = WatchState(resume or WatchCursor("", since), types, replay or resume is not None, objects)
        return AsyncEventStream(self, state, timeout, reconnect, reconnect_timeout)

    async def watch_objects(self, kind: str, *, namespace: str = "", label_selector: str = "",
                            timeout: float | None = None) -> AsyncObjectWatch:
        """As :meth:`clients.client.SchedulerClient.watch_objects`, iterated with ``async for``."""
        tracker = ObjectTracker(kind, namespace, label_selector)
        if kind == "Pod":
            reply = await self._list_pods(tracker.namespace, "", label_selector, "", True)
            items: list[PodState | NodeSummary] = [PodState.from_proto(p) for p in reply.pods]
        else:
            reply = await self._list_nodes(label_selector, "", True)
            items = [NodeSummary.from_proto(n) for n in reply.nodes]
        tracker.start(items)
        return AsyncObjectWatch(items, tracker, self.watch(since=reply.sequence, timeout=timeout, objects=True))


class AsyncObjectWatch(AsyncIterator[ObjectChange]):
    """A list (``items``) and the changes after it (see :meth:`AsyncSchedulerClient.watch_objects`)."""

    def __init__(self, items: list[PodState | NodeSummary], tracker: ObjectTracker,
                 stream: AsyncEventStream) -> None:
        self.items = items
        self._tracker = tracker
        self._stream = stream

    def __aiter__(self) -> AsyncObjectWatch:
        return self

    async def __aenter__(self) -> AsyncObjectWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()

    async def __anext__(self) -> ObjectChange:
        async for ev in self._stream:
            change = self._tracker.change(ev)
            if change is not None:
                return change
        raise StopAsyncIteration


class AsyncEventStream(AsyncIterator[Event]):
    """The events of a watch, in order; ``cursor`` is where it stands; ``close()`` ends it."""

    def __init__(self, client: AsyncSchedulerClient, state: WatchState, timeout: float | None, reconnect: bool,
                 reconnect_timeout: float) -> None:
        self._client = client
        self._state = state
        self._loop = asyncio.get_running_loop()
        self._deadline = None if timeout is None else self._loop.time() + timeout
        self._reconnect = reconnect
        self._reconnect_timeout = reconnect_timeout
        self._call: Any = None
        self._closed = False
        self.reconnects = 0

    @property
    def cursor(self) -> WatchCursor:
        return self._state.cursor

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - self._loop.time()

    async def __anext__(self) -> Event:
        broken_since: float | None = None
        attempts = 0
        while not self._closed:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                self.close()
                break
            if self._call is None:
                self._call = self._client._stub.Watch(self._state.request(), timeout=remaining)
            exc: grpc.RpcError | None = None
            try:
                msg = await self._call.read()
            except grpc.RpcError as e:
                err, exc = e.code(), e
            else:
                if msg is not grpc.aio.EOF:
                    ev = self._state.accept(msg)
                    if ev is not None:
                        return ev
                    continue
                err = grpc.StatusCode.UNAVAILABLE  # the server ended the stream: it is going away
            self._call = None
            if self._closed or (err == grpc.StatusCode.DEADLINE_EXCEEDED and self._deadline is not None):
                break
            if not self._reconnect or err not in RESUMABLE:
                self.close()
                raise rpc_error(exc, self._client.address, "Watch", None) if exc is not None else \
                    ClientError(f"cannot reach the framework at {self._client.address}", err)
            now = self._loop.time()
            broken_since = broken_since or now
            if attempts:
                await asyncio.sleep(min(0.05 * 2**attempts, 1.0))  # it answers yet the stream breaks: do not spin
            attempts += 1
            await self._wait_ready(broken_since + self._reconnect_timeout - self._loop.time())
            self.reconnects += 1
        raise StopAsyncIteration

    async def _wait_ready(self, budget: float) -> None:
        remaining = self._remaining()
        wait = budget if remaining is None else min(budget, remaining)
        try:
            await asyncio.wait_for(self._client._channel.channel_ready(), max(wait, 0.0))
        except TimeoutError:
            if remaining is not None and remaining <= budget:
                return  # the watch's own time is up: the loop ends it quietly
            self.close()
            raise ClientError(f"cannot reach the framework at {self._client.address}",
                              grpc.StatusCode.UNAVAILABLE) from None
