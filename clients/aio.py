"""The asyncio twin of :class:`clients.client.SchedulerClient`: the same methods, awaited.

    async with AsyncSchedulerClient("127.0.0.1:50051") as c:
        await c.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, ...}])
        async for event in c.watch(timeout=10):
            print(event.sequence, event.type.label, event.object)

Same answers (:mod:`clients.types`, named ``answers`` here), same :class:`ClientError`, same watch resume:
what the two clients send and read is built once, in :mod:`clients._calls` and :mod:`clients._watch`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import grpc

from pluginhost.model import Node, Pod
from pluginhost.security import ClientTLS, aio_channel

from . import _calls as calls
from . import types as answers
from ._calls import Call, T, Warn
from ._common import CHANNEL_OPTIONS, ClientError, Connection, rpc_error, unreachable
from ._watch import ObjectTracker, ObjectWatchBase, WatchState, WatchStream

__all__ = ["AsyncEventStream", "AsyncObjectWatch", "AsyncSchedulerClient", "ClientError"]


class AsyncSchedulerClient(Connection[grpc.aio.Channel]):
    """A connection to one framework service for asyncio code (create it inside a running loop)."""

    def __init__(self, address: str, *, timeout: float = 30.0, tls: ClientTLS | None = None) -> None:
        super().__init__(address, timeout, aio_channel(address, tls, CHANNEL_OPTIONS))

    async def __aenter__(self) -> AsyncSchedulerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _run(self, call: Call[T]) -> T:
        try:
            reply = await getattr(self._stub, call.method)(call.request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.address, call.method, self.timeout) from None
        return call.answer(reply)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the framework answers (bounded); :class:`ClientError` when it does not."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            raise unreachable(self.address) from None

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
            raise unreachable(self.address)

    # ---- objects ---------------------------------------------------------------------------------

    async def apply(self, objects: Iterable[Mapping[str, Any] | Pod | Node], *, dry_run: bool = False,
                    source: str = "<objects>", validate: str = "strict",
                    warn: Warn | None = None) -> list[answers.Applied]:
        """Create or update objects (manifest dicts, or ``Pod``/``Node`` models), all or nothing."""
        return await self._run(calls.apply([calls.objects_manifest(objects, source)], dry_run, validate, warn))

    async def apply_text(self, content: str, source: str = "<input>", *, dry_run: bool = False,
                         validate: str = "strict", warn: Warn | None = None) -> list[answers.Applied]:
        """Apply manifest text (YAML or JSON, several documents or a List)."""
        return await self._run(calls.apply([calls.text_manifest(content, source)], dry_run, validate, warn))

    async def apply_manifests(self, manifests: Iterable[tuple[str, str]], *, dry_run: bool = False,
                              validate: str = "strict", warn: Warn | None = None) -> list[answers.Applied]:
        """Apply ``(source, text)`` manifests in one request: all of them or nothing."""
        return await self._run(calls.apply([calls.text_manifest(t, s) for s, t in manifests], dry_run, validate,
                                           warn))

    async def apply_files(self, paths: Iterable[str | os.PathLike[str]], *, dry_run: bool = False,
                          validate: str = "strict", warn: Warn | None = None) -> list[answers.Applied]:
        """Apply manifest files in one request: all of them or nothing."""
        return await self._run(calls.apply([calls.read_manifest(p) for p in paths], dry_run, validate, warn))

    async def delete_pod(self, name: str, namespace: str = "default") -> bool:
        """Delete a pod; False when there was no such pod."""
        return await self._run(calls.delete("Pod", name, namespace))

    async def delete_node(self, name: str) -> bool:
        """Delete a node; False when there was no such node."""
        return await self._run(calls.delete("Node", name, ""))

    async def delete_reservation(self, name: str) -> bool:
        """Delete a Reservation; False when there was no such reservation."""
        return await self._run(calls.delete("Reservation", name, ""))

    async def delete_pod_disruption_budget(self, name: str, namespace: str = "default") -> bool:
        """Delete a PodDisruptionBudget; False when there was no such PDB."""
        return await self._run(calls.delete("PodDisruptionBudget", name, namespace))

    async def list_reservations(self) -> list[answers.ReservationState]:
        """Reservations by name: phase, node, what they reserve and what owners took."""
        return await self._run(calls.list_reservations())

    async def list_pod_groups(self, namespace: str = "", name: str = "") -> list[answers.PodGroupSummary]:
        """As :meth:`clients.client.SchedulerClient.list_pod_groups`."""
        return await self._run(calls.list_pod_groups(namespace, name))

    async def get_pod(self, name: str, namespace: str = "default") -> answers.PodState:
        """One pod's state, its v1 object included; :class:`ClientError` (NOT_FOUND) when there is no
        such pod."""
        return await self._run(calls.get_pod(name, namespace))

    async def list_pods(self, namespace: str = "", phase: str = "", *, label_selector: str = "",
                        node_name: str = "", objects: bool = False) -> list[answers.PodState]:
        """As :meth:`clients.client.SchedulerClient.list_pods`."""
        return await self._run(calls.list_pods(namespace, phase, label_selector, node_name, objects))

    async def list_nodes(self, *, label_selector: str = "", name: str = "",
                         objects: bool = False) -> list[answers.NodeSummary]:
        """As :meth:`clients.client.SchedulerClient.list_nodes`."""
        return await self._run(calls.list_nodes(label_selector, name, objects))

    async def list_events(self, kind: str, name: str, namespace: str = "default", *,
                          uid: str = "") -> list[answers.Event]:
        """The retained events of a Pod or Node (``uid``: only that incarnation's), oldest first."""
        return await self._run(calls.list_events(kind, name, namespace, uid))

    async def list_waiting_pods(self, profile: str = "") -> list[answers.WaitingPod]:
        """Pods held in Permit, oldest first (only one profile's when ``profile`` is given)."""
        return await self._run(calls.list_waiting_pods(profile))

    # ---- explain ---------------------------------------------------------------------------------

    async def explain(self, pod: str | Mapping[str, Any] | Pod, *, source: str = "<pod>",
                      profile: str = "") -> answers.Explanation:
        """How a pod would be scheduled on the cluster now; nothing is reserved or bound."""
        return await self._run(calls.explain(pod, source, profile))

    async def what_if(self, template: str | Mapping[str, Any] | Node, count: int = 1, *,
                      pod: str | Mapping[str, Any] | Pod | None = None, source: str = "<template>") -> dict[str, Any]:
        """Which pending pods (or ``pod`` only) ``count`` nodes like ``template`` would admit (the
        what-if JSON document; see :meth:`SchedulerClient.what_if`)."""
        return await self._run(calls.what_if(template, count, pod, source))

    async def explain_pod(self, name: str, namespace: str = "default", *, profile: str = "") -> answers.Explanation:
        """How a pod the framework holds would be scheduled now (a placed pod as if taken off its node)."""
        return await self._run(calls.explain_pod(name, namespace, profile))

    async def explain_pod_group(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """As :meth:`clients.client.SchedulerClient.explain_pod_group`."""
        return await self._run(calls.explain_pod_group(name, namespace))

    # ---- observability ---------------------------------------------------------------------------

    async def shadow_report(self) -> list[dict[str, Any]]:
        """As :meth:`clients.client.SchedulerClient.shadow_report`."""
        return await self._run(calls.shadow_report())

    async def get_trace(self, name: str, namespace: str = "default") -> list[answers.TraceSpan]:
        """As :meth:`clients.client.SchedulerClient.get_trace`."""
        return await self._run(calls.get_trace(name, namespace))

    async def debug_scores(self, name: str, namespace: str = "default") -> answers.DebugScores:
        """As :meth:`clients.client.SchedulerClient.debug_scores`."""
        return await self._run(calls.debug_scores(name, namespace))

    # ---- watch -----------------------------------------------------------------------------------

    def watch(self, *, since: int = 0, types: Iterable[answers.EventType | int] = (), replay: bool = True,
              resume: answers.WatchCursor | None = None, timeout: float | None = None, reconnect: bool = True,
              reconnect_timeout: float = 30.0, objects: bool = False) -> AsyncEventStream:
        """As :meth:`clients.client.SchedulerClient.watch`, iterated with ``async for``."""
        state = WatchState.start(since, types, replay, resume, objects)
        return AsyncEventStream(self, state, timeout, reconnect, reconnect_timeout)

    async def watch_objects(self, kind: str, *, namespace: str = "", label_selector: str = "",
                            timeout: float | None = None) -> AsyncObjectWatch:
        """As :meth:`clients.client.SchedulerClient.watch_objects`, iterated with ``async for``."""
        tracker = ObjectTracker(kind, namespace, label_selector)
        items, sequence = await self._run(calls.list_objects(kind, tracker.namespace, label_selector))
        return AsyncObjectWatch(items, tracker, self.watch(since=sequence, timeout=timeout, objects=True))


class AsyncObjectWatch(ObjectWatchBase["AsyncEventStream"], AsyncIterator[answers.ObjectChange]):
    """A list (``items``) and the changes after it (see :meth:`AsyncSchedulerClient.watch_objects`)."""

    def __aiter__(self) -> AsyncObjectWatch:
        return self

    async def __aenter__(self) -> AsyncObjectWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def __anext__(self) -> answers.ObjectChange:
        async for ev in self._stream:
            change = self._tracker.change(ev)
            if change is not None:
                return change
        raise StopAsyncIteration


class AsyncEventStream(WatchStream, AsyncIterator[answers.Event]):
    """The events of a watch, in order; ``cursor`` is where it stands; ``close()`` ends it."""

    def __init__(self, client: AsyncSchedulerClient, state: WatchState, timeout: float | None, reconnect: bool,
                 reconnect_timeout: float) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(client._stub, client.address, state, timeout, reconnect, reconnect_timeout, loop.time)
        self._channel = client._channel

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def __anext__(self) -> answers.Event:
        broken_since: float | None = None
        attempts = 0
        while self._open():
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
            if not self._broken(err, exc):
                break
            broken_since = broken_since or self._clock()
            if attempts:
                await asyncio.sleep(self._pause(attempts))
            attempts += 1
            await self._wait_ready(broken_since + self._reconnect_timeout - self._clock())
            self.reconnects += 1
        raise StopAsyncIteration

    async def _wait_ready(self, budget: float) -> None:
        wait, remaining = self._ready_wait(budget)
        try:
            await asyncio.wait_for(self._channel.channel_ready(), wait)
        except TimeoutError:
            self._not_ready(remaining, budget)
