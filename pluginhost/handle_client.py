"""The framework's Handle and CycleState services, seen from a plugin host.

:class:`HandleClient` implements :class:`pluginhost.plugin.Handle`, so a plugin constructed as
``cls(args, handle)`` gets the same interface in a host as in-process: ``waiting_pods()`` and
``waiting_pod(uid).allow(name)`` reach the framework's waiting pods, ``snapshot()`` is the host's
snapshot mirror, ``bind_pod``/``delete_pod`` go through the framework.

The protocol's synchronous methods (``waiting_pods``, ``waiting_pod``, ``reject_waiting_pod``,
``WaitingPod.allow``/``reject``) make a blocking unary call with a deadline: one round trip on
loopback, during which the host's event loop waits. That keeps plugin code identical in both worlds;
a plugin that prefers not to block uses the ``*_async`` forms. (A blocking call to a framework served
by the *same* event loop would deadlock; hosts always run in their own process or thread.)

:class:`CycleStateClient` is the CycleState slow path (keys a plugin did not declare).

Every call carries the credential the framework sent in its Handshake (``authorization: Bearer``
metadata: the framework serves registered plugin hosts only) and, when the host was given a
:class:`~pluginhost.security.ClientTLS`, goes over TLS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.context import _current
from pluginhost.convert import pod_from_proto, pod_ref_to_proto, status_from_proto
from pluginhost.errors import OutriggerError
from pluginhost.mirror import SnapshotMirror
from pluginhost.model import Pod
from pluginhost.security import ClientTLS, Metadata, aio_channel, bearer_metadata, sync_channel, with_metadata
from pluginhost.snapshot import Snapshot
from pluginhost.state import StateValue, entry_of, value_of
from pluginhost.status import Status
from pluginhost.wire import CHANNEL_OPTIONS as WIRE_CHANNEL_OPTIONS

__all__ = ["DEFAULT_DEADLINE", "CycleStateClient", "FrameworkUnavailableError", "HandleClient", "RemoteWaitingPod"]

DEFAULT_DEADLINE = 5.0
CHANNEL_OPTIONS = [
    *WIRE_CHANNEL_OPTIONS,  # the message size limits (pluginhost.wire)
    # Reconnect quickly after the framework restarts (the defaults back off up to two minutes). Not
    # grpc.min_reconnect_backoff_ms: gRPC takes it as the connect timeout (20 s by default), and 100 ms
    # made connection attempts time out on a loaded machine.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class FrameworkUnavailableError(OutriggerError, RuntimeError):
    """The host does not know the framework's address yet, or the framework did not answer."""


class _Channels:
    """A sync and an async channel to the framework, (re)created when its address changes, and the
    credential every call carries."""

    def __init__(self, tls: ClientTLS | None = None) -> None:
        self.address: str = ""
        self.tls = tls
        self.metadata: Metadata = ()  # the credential from the framework's Handshake
        self._sync: grpc.Channel | None = None
        self._aio: grpc.aio.Channel | None = None

    def set_credential(self, credential: str) -> None:
        self.metadata = bearer_metadata(credential) if credential else ()

    def new_aio(self) -> grpc.aio.Channel:
        """A new asyncio channel to the framework (the caller closes it)."""
        if not self.address:
            raise FrameworkUnavailableError("the framework has not connected to this plugin host yet")
        return aio_channel(self.address, self.tls, CHANNEL_OPTIONS)

    def stub(self, stub_class: Any, channel: Any) -> Any:
        """A ``stub_class`` stub on ``channel`` whose calls carry the current credential."""
        return with_metadata(stub_class(channel), lambda: self.metadata)

    def set_address(self, address: str) -> None:
        if address == self.address:
            return
        self.close()
        self.address = address

    def sync(self) -> grpc.Channel:
        if not self.address:
            raise FrameworkUnavailableError("the framework has not connected to this plugin host yet")
        if self._sync is None:
            self._sync = sync_channel(self.address, self.tls, CHANNEL_OPTIONS)
        return self._sync

    def aio(self) -> grpc.aio.Channel:
        if not self.address:
            raise FrameworkUnavailableError("the framework has not connected to this plugin host yet")
        if self._aio is None:
            self._aio = self.new_aio()
        return self._aio

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        if self._aio is not None:
            # close() is a coroutine; nothing is in flight when the address changes or the host stops.
            channel, self._aio = self._aio, None
            try:
                asyncio.get_running_loop().create_task(channel.close())
            except RuntimeError:
                pass


def _framework_error(exc: grpc.RpcError, what: str) -> FrameworkUnavailableError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return FrameworkUnavailableError(f"{what}: {getattr(code, 'name', code)}: {details}")


class RemoteWaitingPod:
    """A pod waiting at Permit in the framework (:class:`pluginhost.plugin.WaitingPod`)."""

    def __init__(self, client: HandleClient, msg: Any) -> None:
        self._client = client
        self._pod = pod_from_proto(msg.pod)
        self._node_name: str = msg.node_name
        self._pending = list(msg.pending_plugins)
        self.deadline = msg.deadline
        self.profile = msg.profile

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def node_name(self) -> str:
        return self._node_name

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        self._client.allow_waiting_pod(self._pod.uid, plugin)

    def reject(self, plugin: str, message: str) -> bool:
        return self._client.reject_waiting_pod(self._pod.uid, plugin, message)

    def __repr__(self) -> str:
        return f"<RemoteWaitingPod {self._pod.key} on {self._node_name} pending={self._pending}>"


class HandleClient:
    """The framework Handle for hosted plugins (see the module docstring)."""

    def __init__(self, mirror: SnapshotMirror | None = None, deadline: float = DEFAULT_DEADLINE,
                 tls: ClientTLS | None = None) -> None:
        self.mirror = mirror
        self.deadline = deadline
        self._channels = _Channels(tls)

    @property
    def address(self) -> str:
        return self._channels.address

    def connect(self, address: str) -> None:
        """Talk to the framework at ``address`` from now on."""
        self._channels.set_address(address)

    def set_credential(self, credential: str) -> None:
        """Present ``credential`` (HandshakeRequest.credential) on every call from now on."""
        self._channels.set_credential(credential)

    def follow_channel(self) -> tuple[grpc.aio.Channel, Any]:
        """A new channel to the framework and a Handle stub on it (for the snapshot mirror stream)."""
        channel = self._channels.new_aio()
        return channel, self._channels.stub(pb.handle_grpc.HandleStub, channel)

    def close(self) -> None:
        self._channels.close()

    def _stub(self) -> Any:
        return self._channels.stub(pb.handle_grpc.HandleStub, self._channels.sync())

    def _astub(self) -> Any:
        return self._channels.stub(pb.handle_grpc.HandleStub, self._channels.aio())

    # ---- snapshot --------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The snapshot of the current call's cycle, else the mirror's latest generation."""
        ctx = _current.get(None)
        if ctx is not None and ctx.state is not None and ctx.state.snapshot is not None:
            return ctx.state.snapshot
        if self.mirror is None:
            raise FrameworkUnavailableError(
                "this plugin host does not follow the snapshot mirror: set needs_snapshot = True on the plugin"
            )
        return self.mirror.latest()

    # ---- waiting pods (blocking forms of the Handle protocol) -------------------------------------

    def waiting_pods(self) -> Sequence[RemoteWaitingPod]:
        try:
            reply = self._stub().ListWaitingPods(pb.handle.ListWaitingPodsRequest(), timeout=self.deadline)
        except grpc.RpcError as exc:
            raise _framework_error(exc, "listing waiting pods") from exc
        return [RemoteWaitingPod(self, wp) for wp in reply.pods]

    def waiting_pod(self, uid: str) -> RemoteWaitingPod | None:
        try:
            msg = self._stub().GetWaitingPod(pb.handle.GetWaitingPodRequest(uid=uid), timeout=self.deadline)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise _framework_error(exc, f"getting waiting pod {uid}") from exc
        return RemoteWaitingPod(self, msg)

    def allow_waiting_pod(self, uid: str, plugin: str) -> bool:
        try:
            reply = self._stub().AllowWaitingPod(
                pb.handle.AllowWaitingPodRequest(uid=uid, plugin=plugin), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"allowing waiting pod {uid}") from exc
        return bool(reply.found)

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool:
        try:
            reply = self._stub().RejectWaitingPod(
                pb.handle.RejectWaitingPodRequest(uid=uid, plugin=plugin, message=message), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"rejecting waiting pod {uid}") from exc
        return bool(reply.found)

    # ---- async forms ---------------------------------------------------------------------------

    async def waiting_pods_async(self) -> list[RemoteWaitingPod]:
        try:
            reply = await self._astub().ListWaitingPods(pb.handle.ListWaitingPodsRequest(), timeout=self.deadline)
        except grpc.RpcError as exc:
            raise _framework_error(exc, "listing waiting pods") from exc
        return [RemoteWaitingPod(self, wp) for wp in reply.pods]

    async def allow_waiting_pod_async(self, uid: str, plugin: str) -> bool:
        try:
            reply = await self._astub().AllowWaitingPod(
                pb.handle.AllowWaitingPodRequest(uid=uid, plugin=plugin), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"allowing waiting pod {uid}") from exc
        return bool(reply.found)

    async def reject_waiting_pod_async(self, uid: str, plugin: str, message: str) -> bool:
        try:
            reply = await self._astub().RejectWaitingPod(
                pb.handle.RejectWaitingPodRequest(uid=uid, plugin=plugin, message=message), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"rejecting waiting pod {uid}") from exc
        return bool(reply.found)

    # ---- pods ----------------------------------------------------------------------------------

    async def bind_pod(self, pod: Pod, node_name: str) -> Status:
        plugin = ctx.plugin if (ctx := _current.get(None)) is not None else ""
        try:
            reply = await self._astub().BindPod(
                pb.handle.BindPodRequest(pod=pod_ref_to_proto(pod), node_name=node_name, plugin=plugin),
                timeout=self.deadline,
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"binding pod {pod.key}") from exc
        return status_from_proto(reply.status)

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        plugin = ctx.plugin if (ctx := _current.get(None)) is not None else ""
        try:
            reply = await self._astub().DeletePod(
                pb.handle.DeletePodRequest(pod=pod_ref_to_proto(pod), reason=reason, plugin=plugin),
                timeout=self.deadline,
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"deleting pod {pod.key}") from exc
        return status_from_proto(reply.status)

    # ---- the CycleState slow path ----------------------------------------------------------------

    def cycle_state(self) -> CycleStateClient:
        return CycleStateClient(self._channels, self.deadline)


class CycleStateClient:
    """Reads and writes a cycle's CycleState in the framework (the slow path; one RPC per call)."""

    def __init__(self, channels: _Channels, deadline: float) -> None:
        self._channels = channels
        self.deadline = deadline

    def read(self, cycle_id: str, plugin: str, keys: Sequence[str]) -> dict[str, StateValue]:
        stub = self._channels.stub(pb.cyclestate_grpc.CycleStateStub, self._channels.sync())
        try:
            reply = stub.Read(
                pb.cyclestate.ReadStateRequest(cycle_id=cycle_id, plugin=plugin, keys=keys), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"reading cycle state of cycle {cycle_id}") from exc
        return {e.key: value_of(e) for e in reply.entries}

    async def read_async(self, cycle_id: str, plugin: str, keys: Sequence[str]) -> dict[str, StateValue]:
        stub = self._channels.stub(pb.cyclestate_grpc.CycleStateStub, self._channels.aio())
        try:
            reply = await stub.Read(
                pb.cyclestate.ReadStateRequest(cycle_id=cycle_id, plugin=plugin, keys=keys), timeout=self.deadline
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"reading cycle state of cycle {cycle_id}") from exc
        return {e.key: value_of(e) for e in reply.entries}

    async def write_async(self, cycle_id: str, plugin: str, values: dict[str, StateValue | None]) -> None:
        """Write ``values`` (``None`` deletes the key)."""
        entries = [
            pb.types.StateEntry(key=k, deleted=True) if v is None else entry_of(k, v, plugin=plugin)
            for k, v in values.items()
        ]
        stub = self._channels.stub(pb.cyclestate_grpc.CycleStateStub, self._channels.aio())
        try:
            await stub.Write(
                pb.cyclestate.WriteStateRequest(cycle_id=cycle_id, plugin=plugin, entries=entries),
                timeout=self.deadline,
            )
        except grpc.RpcError as exc:
            raise _framework_error(exc, f"writing cycle state of cycle {cycle_id}") from exc
