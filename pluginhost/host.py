"""The plugin host: serves plugin classes to the Outrigger framework over gRPC.

A host process (a sidecar) runs one or more plugins written against :mod:`pluginhost.plugin` (the
same base classes in-tree plugins use) and answers the framework's Plugin service::

    from pluginhost import serve
    from mypkg import Gang, GpuTopology

    serve([Gang, GpuTopology], listen="127.0.0.1:50061")     # or: outrigger plugin serve mypkg:PLUGINS

What the host does for the plugin author:

- **Manifest**: each class is checked when the host is built (a name, at least one extension point,
  valid ``state_keys`` / ``batch_size`` / ``filter_and_score`` / ``needs_snapshot`` declarations) and
  described to the framework at Handshake, which then calls only the points a class implements.
- **Configure**: the framework sends each plugin's ``pluginConfig`` args per profile; the host builds
  the instance as ``cls(args, handle)``, exactly as the in-process registry does.
- **Node batches**: Filter and Score arrive as streams of node ids at a snapshot generation; the host's
  :class:`~pluginhost.mirror.SnapshotMirror` turns them into real ``NodeBatch`` objects, so batch-shaped
  (and per-node, ``NodeFilterPlugin``) code runs unchanged.
- **CycleState**: a per-call proxy holds the declared keys sent with the request; writes go back on
  the reply; other keys are read through the framework's CycleState service (one round trip).
- **Context**: :func:`pluginhost.context` gives the call's point, profile, cycle id, args and Handle.
- **Errors**: an exception in plugin code becomes an ``Error`` status with the exception's message
  (the framework reports it as ``running <Point> plugin 'X': <message>``), never a crashed host.
- **Lifecycle**: the standard gRPC health service (SERVING, NOT_SERVING on shutdown), ``start`` /
  ``stop(grace)`` / ``async with``, and SIGTERM/SIGINT handling in :func:`serve`.
- **Security** (optional, docs/security.md): serve TLS or mutual TLS (``tls``), require a bearer token
  from the framework (``token``), dial the framework over TLS (``framework_tls``); calls to the
  framework carry the credential it sent in its Handshake.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import inspect
import json
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pluginhost import pb
from pluginhost.context import CallContext
from pluginhost.convert import pod_from_proto, status_from_proto, status_to_proto
from pluginhost.errors import OutriggerError
from pluginhost.handle_client import CycleStateClient, HandleClient
from pluginhost.mirror import MirrorError, SnapshotMirror, rows_of_ids
from pluginhost.model import Pod
from pluginhost.plugin import (
    POINT_CLASSES,
    TRANSFORMER_CLASSES,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Controller,
    CycleState,
    EnqueueExtensions,
    FilterResult,
    NodeBatch,
    NodeToStatus,
    Plugin,
    PreBindPlugin,
    PreFilterPlugin,
    QueuedPodInfo,
    QueueingHint,
    QueueSortPlugin,
    ScoreExtensions,
)
from pluginhost.security import BearerTokenInterceptor, ClientTLS, ServerTLS, add_port
from pluginhost.snapshot import Snapshot
from pluginhost.state import StateValue, entry_of, value_of
from pluginhost.status import Status
from pluginhost.tracing import TraceMetadataInterceptor
from pluginhost.tracing import enabled as tracing_enabled
from pluginhost.tracing import enter as _enter
from pluginhost.tracing import leave as _leave
from pluginhost.view import (
    ViewError,
    apply_view,
    changes_of,
    node_change_to_proto,
    pod_change_to_proto,
    view_from_proto,
)
from pluginhost.wire import SERVER_OPTIONS, server_interceptors

__all__ = [
    "HOST_VERSION",
    "HealthServiceName",
    "PluginDefinitionError",
    "PluginHost",
    "RemoteCycleState",
    "load_plugins",
    "manifest_of",
    "serve",
]

log = logging.getLogger("outrigger.pluginhost")

HOST_FEATURES = ("start-batch",)  # optional contract features this host understands (HandshakeResponse)
HOST_VERSION = "0.1.0"
HealthServiceName = "outrigger.v1.Plugin"
DEFAULT_LISTEN = "127.0.0.1:50061"
# How long a request naming a snapshot generation waits for the mirror to reach it.
MIRROR_WAIT_SECONDS = 5.0

E = pb.plugin  # the ExtensionPoint enum lives in plugin.proto

_POINT_ENUM = {
    "preEnqueue": E.EXTENSION_POINT_PRE_ENQUEUE,
    "queueSort": E.EXTENSION_POINT_QUEUE_SORT,
    "preFilter": E.EXTENSION_POINT_PRE_FILTER,
    "filter": E.EXTENSION_POINT_FILTER,
    "postFilter": E.EXTENSION_POINT_POST_FILTER,
    "preScore": E.EXTENSION_POINT_PRE_SCORE,
    "score": E.EXTENSION_POINT_SCORE,
    "reserve": E.EXTENSION_POINT_RESERVE,
    "permit": E.EXTENSION_POINT_PERMIT,
    "preBind": E.EXTENSION_POINT_PRE_BIND,
    "bind": E.EXTENSION_POINT_BIND,
    "postBind": E.EXTENSION_POINT_POST_BIND,
}
_TRANSFORMER_ENUM = {
    "preFilter": E.EXTENSION_POINT_PRE_FILTER_TRANSFORMER,
    "filter": E.EXTENSION_POINT_FILTER_TRANSFORMER,
    "score": E.EXTENSION_POINT_SCORE_TRANSFORMER,
    "postFilter": E.EXTENSION_POINT_POST_FILTER_TRANSFORMER,
}
# Views (CycleContext.node_view) applied recently, by (generation, wire bytes): a cycle's Filter
# stream, PreScore and Score calls share one.
_VIEW_CACHE_SIZE = 8
# Points whose plugins look at nodes: their hosts follow the snapshot mirror unless told otherwise.
_SNAPSHOT_POINTS = frozenset({"preFilter", "filter", "postFilter", "preScore", "score"})


class PluginDefinitionError(OutriggerError, TypeError):
    """A class handed to the host is not a valid plugin (the message says what to fix)."""


# ---------------------------------------------------------------------------------------------------
# Manifests


def _overrides(cls: type, base: type, method: str) -> bool:
    return getattr(cls, method) is not getattr(base, method)


def manifest_of(cls: type) -> Any:
    """The ``PluginManifest`` of a plugin class; :class:`PluginDefinitionError` if it is not valid."""
    where = f"plugin class {cls.__module__}.{cls.__qualname__}"
    if not isinstance(cls, type) or not issubclass(cls, Plugin):
        raise PluginDefinitionError(f"{cls!r} is not a plugin class (derive from pluginhost.plugin base classes)")
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name:
        raise PluginDefinitionError(f"{where} has no name: set the class attribute `name = \"MyPlugin\"`")
    points = sorted(p for p, base in POINT_CLASSES.items() if issubclass(cls, base))
    if not points:
        raise PluginDefinitionError(f"{where} ({name!r}) implements no extension point")
    enums = [_POINT_ENUM[p] for p in points]
    if issubclass(cls, PreFilterPlugin) and _overrides(cls, PreFilterPlugin, "pre_filter_extensions"):
        enums.append(E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS)
    if issubclass(cls, ScoreExtensions):
        enums.append(E.EXTENSION_POINT_NORMALIZE_SCORE)
    if issubclass(cls, PreBindPlugin) and _overrides(cls, PreBindPlugin, "pre_bind_pre_flight"):
        enums.append(E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT)
    for point, (transformer, method) in TRANSFORMER_CLASSES.items():
        if issubclass(cls, transformer):
            enums.append(_TRANSFORMER_ENUM[point])
            if not _overrides(cls, POINT_CLASSES[point], method):
                enums.remove(_POINT_ENUM[point])  # it only transforms
    if issubclass(cls, Controller):
        enums.append(E.EXTENSION_POINT_CONTROLLER)
    if issubclass(cls, QueueSortPlugin) and not _overrides(cls, QueueSortPlugin, "sort_key"):
        raise PluginDefinitionError(
            f"{where} ({name!r}): a hosted QueueSort plugin must implement sort_key() (the framework "
            "orders pods by key; calling less() over the network per comparison would be absurd)"
        )
    state_keys = getattr(cls, "state_keys", ())
    if isinstance(state_keys, str) or not all(isinstance(k, str) and k for k in state_keys):
        raise PluginDefinitionError(f"{where} ({name!r}): state_keys must be a tuple of non-empty strings")
    batch_size = getattr(cls, "batch_size", 0)
    if not isinstance(batch_size, int) or batch_size < 0:
        raise PluginDefinitionError(f"{where} ({name!r}): batch_size must be an integer >= 0 (0: framework's choice)")
    filter_and_score = bool(getattr(cls, "filter_and_score", False))
    if filter_and_score and not ("filter" in points and "score" in points):
        raise PluginDefinitionError(f"{where} ({name!r}): filter_and_score needs both Filter and Score")
    lookahead = bool(getattr(cls, "lookahead", False))
    if lookahead:
        if E.EXTENSION_POINT_FILTER not in enums and E.EXTENSION_POINT_SCORE not in enums:
            raise PluginDefinitionError(f"{where} ({name!r}): lookahead needs Filter or Score")
        if state_keys or {"preFilter", "preScore"} & set(points):
            raise PluginDefinitionError(
                f"{where} ({name!r}): lookahead answers are computed before the pod's cycle, so its Filter "
                "and Score cannot depend on CycleState (state_keys, PreFilter or PreScore)"
            )
    needs_snapshot = getattr(cls, "needs_snapshot", None)
    if needs_snapshot is None:
        needs_snapshot = bool(_SNAPSHOT_POINTS & set(points))
    elif {"filter", "score", "preScore"} & set(points) and not needs_snapshot:
        raise PluginDefinitionError(
            f"{where} ({name!r}): a Python-hosted plugin that gets node batches needs the snapshot mirror "
            "(needs_snapshot = True)"
        )
    msg = pb.plugin.PluginManifest(
        name=name,
        points=enums,
        state_keys=list(state_keys),
        preferred_batch_size=batch_size,
        filter_and_score=filter_and_score,
        needs_snapshot=bool(needs_snapshot),
        lookahead=lookahead,
        nodes_only=lookahead or bool(getattr(cls, "nodes_only", False)),
    )
    msg.debug_paths.extend(_class_debug_paths(cls, where))
    if issubclass(cls, EnqueueExtensions):
        enums.append(E.EXTENSION_POINT_ENQUEUE_EXTENSIONS)
        msg.points.append(E.EXTENSION_POINT_ENQUEUE_EXTENSIONS)
        for reg in _class_events(cls, where):
            msg.events.append(
                pb.types.ClusterEventWithHint(
                    event=pb.types.ClusterEvent(resource=reg.event.resource, action=_action_text(reg.event.action)),
                    has_queueing_hint=reg.hint is not None,
                )
            )
    return msg


def _class_events(cls: type, where: str) -> list[ClusterEventWithHint]:
    # The manifest is built before any instance exists (args come later, per profile), so the events
    # are read from a bare instance: events_to_register() must not depend on constructor state.
    try:
        bare: Any = object.__new__(cls)
        events: list[ClusterEventWithHint] = bare.events_to_register()
    except Exception as exc:
        raise PluginDefinitionError(
            f"{where}: events_to_register() failed on a bare instance ({exc}); it is read once for the "
            "manifest, so it must not depend on constructor state"
        ) from exc
    return list(events)


def _class_debug_paths(cls: type, where: str) -> list[str]:
    # Like the events: read from a bare instance, before any configured instance exists.
    if getattr(cls, "debug_endpoints", Plugin.debug_endpoints) is Plugin.debug_endpoints:
        return []
    try:
        bare: Any = object.__new__(cls)
        paths = list(bare.debug_endpoints())
    except Exception as exc:
        raise PluginDefinitionError(
            f"{where}: debug_endpoints() failed on a bare instance ({exc}); its keys are read once for the "
            "manifest, so they must not depend on constructor state"
        ) from exc
    for path in paths:
        if not isinstance(path, str) or not path or path.startswith("/"):
            raise PluginDefinitionError(f"{where}: debug endpoint path {path!r} must be a non-empty relative path")
    return paths


def _action_text(action: ActionType) -> str:
    if action == ActionType.All:
        return "All"
    if action == ActionType.Update:
        return "Update"
    return "|".join(a.name for a in ActionType if a.name and a & action and a.name not in ("All", "Update"))


def action_from_text(text: str) -> ActionType:
    """ActionType from its "|"-joined names (unknown names are ignored, as the contract says)."""
    out = ActionType(0)
    for part in text.split("|"):
        part = part.strip()
        if part in ActionType.__members__:
            out |= ActionType[part]
    return out


# ---------------------------------------------------------------------------------------------------
# CycleState proxy


_MISSING: Any = object()


class RemoteCycleState(CycleState):
    """The CycleState a hosted plugin sees during one call (or one Filter/Score stream).

    It starts with the entries of the plugin's declared ``state_keys`` sent with the request. Writes
    and deletes are recorded and sent back on the reply. Reading a key that was not declared asks the
    framework's CycleState service (a blocking round trip); values must be :class:`StateValue`.
    """

    __slots__ = ("_declared", "_plugin", "_slow", "_writes")

    def __init__(
        self,
        cycle_id: str,
        snapshot: Snapshot | None,
        *,
        plugin: str,
        declared: Iterable[str] = (),
        entries: Iterable[Any] = (),
        slow: CycleStateClient | None = None,
    ) -> None:
        super().__init__(cycle_id, snapshot)
        self._plugin = plugin
        self._declared = frozenset(declared)
        self._slow = slow
        self._writes: dict[str, StateValue | None] = {}
        for e in entries:
            self._data[e.key] = value_of(e)

    def _fetch(self, key: str) -> Any:
        if key in self._data:
            return self._data[key]
        if key in self._declared or key in self._writes or self._slow is None or not self.cycle_id:
            return _MISSING  # a declared key that was not sent does not exist
        found = self._slow.read(self.cycle_id, self._plugin, [key])
        if key in found:
            self._data[key] = found[key]
            return found[key]
        return _MISSING

    def read(self, key: str) -> Any:
        value = self._fetch(key)
        if value is _MISSING:
            raise KeyError(f"cycle state has no key {key!r}")
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._fetch(key)
        return default if value is _MISSING else value

    def write(self, key: str, value: Any) -> None:
        entry_of(key, value, plugin=self._plugin)  # raises StateValueError naming the key and plugin
        self._data[key] = value
        self._writes[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)
        self._writes[key] = None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._fetch(key) is not _MISSING

    def drain_writes(self) -> list[Any]:
        """The writes since the last drain, as ``StateEntry`` messages (deletes flagged)."""
        out = [
            pb.types.StateEntry(key=k, deleted=True) if v is None else entry_of(k, v, plugin=self._plugin)
            for k, v in self._writes.items()
        ]
        self._writes.clear()
        return out


# ---------------------------------------------------------------------------------------------------
# The Plugin service


@dataclass(slots=True)
class _Hosted:
    cls: type[Plugin]
    manifest: Any
    instances: dict[str, Plugin] = field(default_factory=dict)  # profile -> instance
    args: dict[str, dict[str, Any]] = field(default_factory=dict)  # profile -> args

    @property
    def name(self) -> str:
        return str(self.manifest.name)


class _CallError(Exception):
    """Abort the RPC with a gRPC status (the framework maps it to an Error status for the plugin)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _failure(exc: BaseException) -> Status:
    return Status.failure(str(exc) or type(exc).__name__)


def _pod_json(data: bytes, kind: str) -> Any:
    if not data:
        return None
    from pluginhost.manifest import node_from_dict, pod_from_dict

    try:
        doc = json.loads(data)
        # The framework already accepted the object (maybe with --validate=warn|ignore): fields it does
        # not model must not cost the hint its object.
        if kind == "Pod":
            return pod_from_dict(doc, validate="ignore")
        return node_from_dict(doc, validate="ignore")
    except Exception:  # a hint gets what could be read; the contract says old/new may be partial
        return None


class _Servicer(pb.plugin_grpc.PluginServicer):  # type: ignore[misc]
    def __init__(self, host: PluginHost) -> None:
        self.host = host

    # ---- plumbing ------------------------------------------------------------------------------

    def _hosted(self, plugin: str) -> _Hosted:
        hosted = self.host.plugins.get(plugin)
        if hosted is None:
            raise _CallError(
                grpc.StatusCode.NOT_FOUND,
                f"this plugin host has no plugin named {plugin!r} (it hosts {', '.join(self.host.plugins)})",
            )
        return hosted

    def _instance(self, plugin: str, profile: str) -> tuple[_Hosted, Any]:
        hosted = self._hosted(plugin)
        inst = hosted.instances.get(profile)
        if inst is None:
            # The framework reconfigures and retries on this code (e.g. after the host restarted).
            raise _CallError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"plugin {plugin!r} is not configured for profile {profile!r}",
            )
        return hosted, inst

    async def _state(self, hosted: _Hosted, ctx: Any, *, exact: bool) -> RemoteCycleState:
        """The CycleState proxy of a cycle-scoped request, with the snapshot of its generation
        (``exact``: wait for the mirror to reach it; otherwise whatever the mirror holds)."""
        snapshot: Snapshot | None = None
        if hosted.manifest.needs_snapshot:
            mirror = self.host.mirror
            if exact and self.host.nodes_only and ctx.node_generation:
                # Node objects are all this host's plugins read: any snapshot with the cycle's node
                # set will do, so no waiting for the placements of the pods before this one.
                try:
                    snapshot = await mirror.with_nodes_of(ctx.node_generation, ctx.snapshot_generation,
                                                          self.host.mirror_wait)
                except MirrorError as exc:
                    raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
            elif exact:
                try:
                    snapshot = await mirror.wait_for(ctx.snapshot_generation, self.host.mirror_wait)
                except MirrorError as exc:
                    raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
            else:
                snapshot = mirror.at(ctx.snapshot_generation) or mirror.latest()
            if snapshot is not None and ctx.HasField("node_view"):
                snapshot = self._view(snapshot, ctx.node_view)
        return RemoteCycleState(
            ctx.cycle_id,
            snapshot,
            plugin=hosted.name,
            declared=hosted.manifest.state_keys,
            entries=ctx.state,
            slow=self.host.handle.cycle_state(),
        )

    def _view(self, snapshot: Snapshot, msg: Any) -> Snapshot:
        """``snapshot`` as the request's node view shows it (transformers' changes, what-if nodes)."""
        key = (snapshot.generation, msg.SerializeToString(deterministic=True))
        cache = self.host.views
        hit = cache.get(key)
        if hit is not None and hit[0] is snapshot:
            return hit[1]
        try:
            view = apply_view(snapshot, view_from_proto(msg))
        except (ViewError, ValueError) as exc:
            raise _CallError(grpc.StatusCode.INVALID_ARGUMENT, f"bad node view: {exc}") from None
        cache[key] = (snapshot, view)
        while len(cache) > _VIEW_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        return view

    def _context(self, hosted: _Hosted, point: str, profile: str, ctx: Any = None, pod: Pod | None = None,
                 state: CycleState | None = None) -> CallContext:
        return CallContext(
            plugin=hosted.name,
            point=point,
            profile=profile,
            args=hosted.args.get(profile, {}),
            handle=self.host.handle,
            pod=pod,
            cycle_id=ctx.cycle_id if ctx is not None else "",
            attempt=ctx.attempt if ctx is not None else 0,
            snapshot_generation=ctx.snapshot_generation if ctx is not None else 0,
            state=state,
            trace_context=ctx.trace_context if ctx is not None else {},
        )

    async def _rows(self, snapshot: Snapshot | None, ids: Sequence[int]) -> Any:
        if snapshot is None:
            raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, "this plugin does not follow the snapshot mirror")
        try:
            return rows_of_ids(snapshot, np.asarray(ids, dtype=np.int64))
        except MirrorError as exc:
            raise _CallError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None

    async def _abort(self, context: grpc.aio.ServicerContext, exc: _CallError) -> None:
        await context.abort(exc.code, str(exc))

    # ---- handshake ----------------------------------------------------------------------------------

    async def Handshake(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.host.framework_connected(request.framework_address, request.credential)
        return pb.plugin.HandshakeResponse(
            plugins=[h.manifest for h in self.host.plugins.values()], host_version=HOST_VERSION,
            features=list(HOST_FEATURES),
        )

    async def Configure(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            return pb.plugin.ConfigureReply(status=status_to_proto(Status.failure(str(exc))))
        try:
            args = json.loads(request.args_json) if request.args_json else {}
            if not isinstance(args, dict):
                raise ValueError(f"args must be a JSON object, got {type(args).__name__}")
        except ValueError as exc:
            return pb.plugin.ConfigureReply(status=status_to_proto(Status.failure(f"invalid args: {exc}")))
        ctx = self._context(hosted, "Configure", request.profile)
        token = _enter(ctx)
        try:
            inst = hosted.cls(args, self.host.handle)  # type: ignore[call-arg]
        except Exception as exc:
            log.warning("configuring plugin %s for profile %r failed: %s", hosted.name, request.profile, exc)
            return pb.plugin.ConfigureReply(status=status_to_proto(_failure(exc)))
        finally:
            _leave(token)
        inst.name = hosted.name
        old = hosted.instances.get(request.profile)
        if old is not None:
            await self.host.stop_controller(hosted, request.profile, old)
        hosted.instances[request.profile] = inst
        hosted.args[request.profile] = args
        if isinstance(inst, Controller):
            try:
                await self.host.start_controller(hosted, request.profile, inst)
            except Exception as exc:
                log.warning("starting the controller of %s for profile %r failed: %s", hosted.name,
                            request.profile, exc)
                return pb.plugin.ConfigureReply(status=status_to_proto(_failure(exc)))
        return pb.plugin.ConfigureReply(status=status_to_proto(Status()))

    async def Stop(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        log.info("stopping controllers (profile %r): %s", request.profile or "*", request.reason)
        await self.host.stop_controllers(request.profile)
        return pb.plugin.Ack()

    # ---- transformers --------------------------------------------------------------------------

    async def BeforePreFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "BeforePreFilter", exact=True)
        token = _enter(self._context(hosted, "BeforePreFilter", request.ctx.profile, request.ctx, pod, state))
        change = None
        try:
            change, status = await inst.before_pre_filter(state, pod)
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        reply = pb.plugin.TransformPodReply(status=status_to_proto(status), state_writes=state.drain_writes())
        if change is not None and status.ok:
            reply.change.CopyFrom(pod_change_to_proto(change))
        return reply

    async def _transform_nodes(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=True)
        token = _enter(self._context(hosted, point, request.ctx.profile, request.ctx, pod, state))
        changes: tuple[Any, ...] = ()
        try:
            snapshot = state.snapshot
            if snapshot is None:
                raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, "this plugin does not follow the snapshot mirror")
            if method == "before_score":
                rows = await self._rows(snapshot, request.node_ids) if len(request.node_ids) else snapshot.table.order
                answer, status = await inst.before_score(state, pod, NodeBatch(snapshot, rows))
            else:
                answer, status = await getattr(inst, method)(state, pod, snapshot)
            if status.ok:
                changes = changes_of(answer)
        except _CallError as exc:
            status = Status.failure(str(exc))
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        return pb.plugin.TransformNodesReply(
            status=status_to_proto(status), changes=[node_change_to_proto(c) for c in changes],
            state_writes=state.drain_writes(),
        )

    async def BeforeFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforeFilter", "before_filter")

    async def BeforeScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforeScore", "before_score")

    async def BeforePostFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._transform_nodes(request, context, "BeforePostFilter", "before_post_filter")
    async def Debug(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            await self._abort(context, exc)
        if request.path not in hosted.manifest.debug_paths:
            have = ", ".join(hosted.manifest.debug_paths) or "none"
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"plugin {hosted.name!r} has no debug endpoint {request.path!r} (it has: {have})")
        first = next(iter(hosted.instances.values()), None)
        inst = hosted.instances.get(request.profile) if request.profile else first
        if inst is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"plugin {hosted.name!r} is not configured for profile {request.profile!r}")
            raise AssertionError("unreachable: abort raises")
        token = _enter(self._context(hosted, "Debug", request.profile))
        try:
            value = inst.debug_endpoints()[request.path]()
            if inspect.isawaitable(value):
                value = await value
            text = json.dumps(value)
        except Exception as exc:
            await context.abort(grpc.StatusCode.INTERNAL,
                                f"debug endpoint {request.path!r} of plugin {hosted.name!r} failed: {exc}")
        finally:
            _leave(token)
        return pb.plugin.DebugReply(json=text)

    # ---- queueing ------------------------------------------------------------------------------

    async def PreEnqueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        pod = pod_from_proto(request.pod)
        token = _enter(self._context(hosted, "PreEnqueue", request.profile, pod=pod))
        try:
            status = await inst.pre_enqueue(pod)
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        return pb.plugin.StatusReply(status=status_to_proto(status))

    async def QueueSortKey(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        pod = pod_from_proto(request.pod)
        info = QueuedPodInfo(pod, timestamp=request.enqueue_timestamp, attempts=request.attempts)
        token = _enter(self._context(hosted, "QueueSortKey", request.profile, pod=pod))
        try:
            key = inst.sort_key(info)
        except Exception as exc:
            await context.abort(grpc.StatusCode.INTERNAL, f"sort_key failed: {exc}")
        finally:
            _leave(token)
        parts = []
        for value in key if isinstance(key, tuple | list) else (key,):
            if isinstance(value, bool | int):
                parts.append(pb.plugin.SortKeyPart(int_value=int(value)))
            elif isinstance(value, float):
                parts.append(pb.plugin.SortKeyPart(double_value=value))
            else:
                parts.append(pb.plugin.SortKeyPart(string_value=str(value)))
        return pb.plugin.QueueSortKeyReply(key=parts)

    async def EventsToRegister(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted = self._hosted(request.plugin)
        except _CallError as exc:
            await self._abort(context, exc)
        return pb.plugin.EventsReply(events=list(hosted.manifest.events))

    async def QueueingHint(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            _, inst = self._instance(request.plugin, request.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        event = ClusterEvent(request.event.resource, action_from_text(request.event.action))
        kind = "Node" if event.resource == "Node" else "Pod"
        pod = pod_from_proto(request.pod)
        old, new = _pod_json(request.old_object_json, kind), _pod_json(request.new_object_json, kind)
        try:
            for reg in inst.events_to_register():
                hinted = reg.hint is not None and reg.event.matches(event)
                if hinted and reg.hint(pod, old, new) is QueueingHint.Queue:  # type: ignore[misc]
                    return pb.plugin.QueueingHintReply(queue=True)
            return pb.plugin.QueueingHintReply(queue=False)
        except Exception:
            log.exception("queueing hint of plugin %s failed", request.plugin)
            return pb.plugin.QueueingHintReply(queue=True)  # an error counts as Queue

    # ---- PreFilter -----------------------------------------------------------------------------------

    async def _cycle_call(self, request: Any, context: grpc.aio.ServicerContext, point: str, *, exact: bool) -> Any:
        ctx = request.ctx
        try:
            hosted, inst = self._instance(ctx.plugin, ctx.profile)
            state = await self._state(hosted, ctx, exact=exact)
        except _CallError as exc:
            await self._abort(context, exc)
        return hosted, inst, state, pod_from_proto(ctx.pod)

    async def PreFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PreFilter", exact=True)
        token = _enter(self._context(hosted, "PreFilter", request.ctx.profile, request.ctx, pod, state))
        result = None
        try:
            result, status = await inst.pre_filter(state, pod)
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        reply = pb.plugin.PreFilterReply(status=status_to_proto(status), state_writes=state.drain_writes())
        if result is not None and result.node_names is not None:
            reply.narrowed = True
            reply.node_names.extend(sorted(result.node_names))
        return reply

    async def _extension(self, request: Any, context: grpc.aio.ServicerContext, add: bool) -> Any:
        point = "PreFilterAddPod" if add else "PreFilterRemovePod"
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=True)
        token = _enter(self._context(hosted, point, request.ctx.profile, request.ctx, pod, state))
        try:
            ext = inst.pre_filter_extensions()
            if ext is None:
                status = Status()
            else:
                row = -1
                if state.snapshot is not None:
                    row = int((await self._rows(state.snapshot, [request.node_id]))[0])
                other = pod_from_proto(request.other_pod)
                fn = ext.add_pod if add else ext.remove_pod
                status = await fn(state, pod, other, row)
        except _CallError as exc:
            status = Status.failure(str(exc))
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def PreFilterAddPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._extension(request, context, add=True)

    async def PreFilterRemovePod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._extension(request, context, add=False)

    # ---- Filter / Score streams -------------------------------------------------------------------

    async def _open_stream(self, first: Any, context: grpc.aio.ServicerContext, point: str) -> Any:
        ctx = first.ctx
        try:
            hosted, inst = self._instance(ctx.plugin, ctx.profile)
        except _CallError as exc:
            await self._abort(context, exc)
        try:
            state = await self._state(hosted, ctx, exact=True)
            error = None
        except _CallError as exc:
            # Answer every batch with the failure (the contract's per-batch error), not a torn stream.
            state = RemoteCycleState(ctx.cycle_id, None, plugin=hosted.name)
            error = Status.failure(str(exc))
        return hosted, inst, state, pod_from_proto(ctx.pod), error

    async def Filter(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def answer(inst: Any, state: RemoteCycleState, pod: Pod, batch: NodeBatch, reply: Any,
                         with_scores: bool) -> None:
            res = await inst.filter(state, pod, batch)
            if not isinstance(res, FilterResult):
                raise TypeError(f"filter returned {type(res).__name__}, not a FilterResult")
            _fill_filter_reply(reply, res)
            if with_scores and len(res) == len(batch):
                passing = res.codes == 0
                scores = np.zeros(len(batch), dtype=np.int64)
                if passing.any():
                    scores[passing] = np.asarray(await inst.score(state, pod, batch.take(passing)), np.int64)
                reply.scores.extend(scores.tolist())

        async for reply in self._batches(request_iterator, context, "Filter", pb.plugin.FilterReply, answer):
            yield reply

    async def Score(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def answer(inst: Any, state: RemoteCycleState, pod: Pod, batch: NodeBatch, reply: Any,
                         with_scores: bool) -> None:
            scores = await inst.score(state, pod, batch)
            reply.scores.extend(np.asarray(scores, dtype=np.int64).reshape(-1).tolist())

        async for reply in self._batches(request_iterator, context, "Score", pb.plugin.ScoreReply, answer):
            yield reply

    async def _batches(
        self,
        request_iterator: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        point: str,
        reply_type: Any,
        answer: Callable[[Any, RemoteCycleState, Pod, NodeBatch, Any, bool], Awaitable[None]],
    ) -> AsyncIterator[Any]:
        """A node-batch stream (Filter or Score): a start message, then one reply per batch. A stream
        may carry several cycles one after the other: each new start message begins the next one.
        A failure answers that batch with an error (the contract's per-batch error), never a torn stream."""
        requests = aiter(request_iterator)
        first = await anext(requests, None)
        if first is None:
            return
        if first.WhichOneof("msg") != "start":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"a {point} stream must start with {point}Start")
        self.host.streams_opened[point] += 1
        req = first
        while req is not None:
            if req.WhichOneof("msg") == "start":
                start = req.start
                self.host.cycles_started[point] += 1
                hosted, inst, state, pod, error = await self._open_stream(start, context, point)
                with_scores = bool(getattr(start, "with_scores", False))
                call_ctx = self._context(hosted, point, start.ctx.profile, start.ctx, pod, state)
                batch_msg = start.batch if start.HasField("batch") else None  # the "start-batch" feature
            else:
                batch_msg = req.batch
            if batch_msg is not None:
                reply = reply_type(batch_seq=batch_msg.batch_seq)
                if error is not None:
                    reply.error.CopyFrom(status_to_proto(error))
                else:
                    token = _enter(call_ctx)
                    try:
                        rows = await self._rows(state.snapshot, batch_msg.node_ids)
                        batch = NodeBatch(state.snapshot, rows)  # type: ignore[arg-type]
                        await answer(inst, state, pod, batch, reply, with_scores)
                    except Exception as exc:
                        reply = reply_type(batch_seq=batch_msg.batch_seq, error=status_to_proto(_failure(exc)))
                    finally:
                        _leave(token)
                    reply.state_writes.extend(state.drain_writes())
                yield reply
            req = await anext(requests, None)

    # ---- Lookahead ---------------------------------------------------------------------------------

    async def Lookahead(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        """Filter/Score answers over every node for pods ahead of their cycles (PluginManifest.lookahead):
        one reply per request, in order. A failure answers that request (or that pod) with an error,
        never a torn stream: the framework then calls Filter/Score in the pod's cycle."""
        self.host.streams_opened["Lookahead"] += 1
        async for req in request_iterator:
            try:
                yield await self._lookahead(req)
            except _CallError as exc:
                yield pb.plugin.LookaheadReply(seq=req.seq, error=status_to_proto(Status.failure(str(exc))))

    async def _lookahead(self, req: Any) -> Any:
        hosted, inst = self._instance(req.plugin, req.profile)
        if not hosted.manifest.lookahead:
            raise _CallError(grpc.StatusCode.FAILED_PRECONDITION, f"plugin {hosted.name!r} did not declare lookahead")
        try:
            snapshot = await self.host.mirror.wait_until(req.node_generation, self.host.mirror_wait)
        except MirrorError as exc:
            raise _CallError(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
        reply = pb.plugin.LookaheadReply(
            seq=req.seq, generation=self.host.mirror.generation, node_ids=snapshot.table.ids.astype("<u4").tobytes()
        )
        everything = NodeBatch(snapshot, np.arange(len(snapshot), dtype=np.int64))
        self.host.lookahead_pods += len(req.pods)
        for msg in req.pods:
            verdict = reply.verdicts.add(uid=msg.metadata.uid)
            try:
                pod = pod_from_proto(msg)
                state = RemoteCycleState("", snapshot, plugin=hosted.name)
                token = _enter(self._context(hosted, "Lookahead", req.profile, pod=pod, state=state))
                try:
                    await _verdict(inst, state, pod, everything, verdict, req.filter, req.score)
                finally:
                    _leave(token)
            except Exception as exc:
                verdict.Clear()
                verdict.uid = msg.metadata.uid
                verdict.error.CopyFrom(status_to_proto(_failure(exc)))
        return reply

    # ---- PostFilter, PreScore, NormalizeScore ------------------------------------------------------

    async def PostFilter(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PostFilter", exact=True)
        statuses = NodeToStatus()
        for name, st in request.node_statuses.items():
            if name == "":
                statuses.absent = status_from_proto(st)
            else:
                statuses.statuses[name] = status_from_proto(st)
        token = _enter(self._context(hosted, "PostFilter", request.ctx.profile, request.ctx, pod, state))
        result = None
        try:
            result, status = await inst.post_filter(state, pod, statuses)
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        reply = pb.plugin.PostFilterReply(status=status_to_proto(status), state_writes=state.drain_writes())
        if result is not None and result.nominated_node_name:
            reply.nominated_node_name = result.nominated_node_name
        return reply

    async def PreScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "PreScore", exact=True)
        token = _enter(self._context(hosted, "PreScore", request.ctx.profile, request.ctx, pod, state))
        try:
            rows = await self._rows(state.snapshot, request.feasible_node_ids)
            status = await inst.pre_score(state, pod, NodeBatch(state.snapshot, rows))  # type: ignore[arg-type]
        except _CallError as exc:
            status = Status.failure(str(exc))
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def NormalizeScore(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, "NormalizeScore", exact=True)
        scores = np.asarray(request.scores, dtype=np.int64).copy()
        token = _enter(self._context(hosted, "NormalizeScore", request.ctx.profile, request.ctx, pod, state))
        try:
            rows = await self._rows(state.snapshot, request.node_ids)
            status = await inst.normalize_score(state, pod, NodeBatch(state.snapshot, rows), scores)  # type: ignore[arg-type]
        except _CallError as exc:
            status = Status.failure(str(exc))
        except Exception as exc:
            status = _failure(exc)
        finally:
            _leave(token)
        return pb.plugin.NormalizeScoreReply(
            status=status_to_proto(status or Status()), scores=scores.tolist(), state_writes=state.drain_writes()
        )

    # ---- points about one node -----------------------------------------------------------------------

    async def _node_call(self, request: Any, context: grpc.aio.ServicerContext, point: str, method: str) -> Any:
        hosted, inst, state, pod = await self._cycle_call(request, context, point, exact=False)
        token = _enter(self._context(hosted, point, request.ctx.profile, request.ctx, pod, state))
        try:
            answer = await getattr(inst, method)(state, pod, request.node_name)
            error = None
        except Exception as exc:
            answer, error = None, exc
        finally:
            _leave(token)
        return answer, error, state

    async def Reserve(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        status, error, state = await self._node_call(request, context, "Reserve", "reserve")
        status = _failure(error) if error is not None else status
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def Unreserve(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _, error, _ = await self._node_call(request, context, "Unreserve", "unreserve")
        if error is not None:
            log.error("Unreserve of plugin %s failed: %s", request.ctx.plugin, error)
        return pb.plugin.Ack()

    async def Permit(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        answer, error, state = await self._node_call(request, context, "Permit", "permit")
        status, timeout = (_failure(error), 0.0) if error is not None else answer
        return pb.plugin.PermitReply(
            status=status_to_proto(status), timeout_ms=int(float(timeout) * 1000), state_writes=state.drain_writes()
        )

    async def PreBindPreFlight(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        status, error, state = await self._node_call(request, context, "PreBindPreFlight", "pre_bind_pre_flight")
        status = _failure(error) if error is not None else status
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def PreBind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        status, error, state = await self._node_call(request, context, "PreBind", "pre_bind")
        status = _failure(error) if error is not None else status
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def Bind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        status, error, state = await self._node_call(request, context, "Bind", "bind")
        status = _failure(error) if error is not None else status
        return pb.plugin.StatusReply(status=status_to_proto(status), state_writes=state.drain_writes())

    async def PostBind(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _, error, _ = await self._node_call(request, context, "PostBind", "post_bind")
        if error is not None:
            log.error("PostBind of plugin %s failed: %s", request.ctx.plugin, error)
        return pb.plugin.Ack()


async def _verdict(inst: Any, state: CycleState, pod: Pod, batch: NodeBatch, verdict: Any, want_filter: bool,
                   want_score: bool) -> None:
    """One pod's lookahead answers over ``batch`` (every node), columnar bytes (see PodVerdict)."""
    n = len(batch)
    passing = None
    if want_filter:
        res = await inst.filter(state, pod, batch)
        if not isinstance(res, FilterResult):
            raise TypeError(f"filter returned {type(res).__name__}, not a FilterResult")
        if len(res) != n:
            raise ValueError(f"filter answered {len(res)} of {n} nodes")
        codes = np.asarray(res.codes, dtype=np.int8)
        verdict.codes = codes.tobytes()
        failed = codes != 0
        if bool(failed.any()):
            if res.reason_index is not None and len(res.reasons) == 1:
                verdict.reason_table.add(reasons=list(res.reasons[0]))
            elif res.reason_index is not None and res.reasons:
                used = np.unique(res.reason_index[failed])
                verdict.reason_table.extend(pb.plugin.ReasonSet(reasons=list(res.reasons[i])) for i in used.tolist())
                if used.shape[0] > 1:  # one reason set needs no index
                    index = np.zeros(n, dtype="<u4")
                    index[failed] = np.searchsorted(used, res.reason_index[failed])
                    verdict.reason_index = index.tobytes()
            passing = ~failed
    if want_score:
        scores = np.zeros(n, dtype="<i8")
        if passing is None:
            scores[:] = np.asarray(await inst.score(state, pod, batch), dtype=np.int64).reshape(-1)
        elif bool(passing.any()):
            scores[passing] = np.asarray(await inst.score(state, pod, batch.take(passing)), np.int64).reshape(-1)
        lo, hi = (int(scores.min()), int(scores.max())) if n else (0, 0)
        for dtype, smallest, largest, width in _SCORE_WIDTHS:
            if smallest <= lo and hi <= largest:
                verdict.scores = scores.astype(dtype).tobytes()
                verdict.score_width = width
                break


# Lookahead scores go in the narrowest little-endian integer that holds them: (dtype, min, max, bytes).
_SCORE_WIDTHS = tuple(
    (d, int(np.iinfo(d).min), int(np.iinfo(d).max), np.dtype(d).itemsize) for d in ("<i1", "<i2", "<i4", "<i8")
)
 # lookahead scores go in the narrowest that holds them


def _fill_filter_reply(reply: Any, res: FilterResult) -> None:
    codes = res.codes
    reply.codes.extend(codes.tolist())
    if res.reason_index is not None and res.reasons and bool((codes != 0).any()):
        reply.reason_table.extend(pb.plugin.ReasonSet(reasons=list(r)) for r in res.reasons)
        reply.reason_index.extend(res.reason_index.tolist())


# ---------------------------------------------------------------------------------------------------
# The host


class PluginHost:
    """A gRPC server hosting plugin classes (see the module docstring).

    ``async with PluginHost([MyPlugin], listen="127.0.0.1:0") as host: ...`` starts it on a free port
    (``host.address``) and stops it gracefully on exit.
    """

    def __init__(
        self,
        plugins: Iterable[type[Plugin]],
        *,
        listen: str = DEFAULT_LISTEN,
        framework: str | None = None,
        mirror_wait: float = MIRROR_WAIT_SECONDS,
        tls: ServerTLS | None = None,
        token: str | None = None,
        framework_tls: ClientTLS | None = None,
    ) -> None:
        self.plugins: dict[str, _Hosted] = {}
        for cls in plugins:
            manifest = manifest_of(cls)
            if manifest.name in self.plugins:
                raise PluginDefinitionError(f"two hosted plugins are named {manifest.name!r}")
            self.plugins[manifest.name] = _Hosted(cls, manifest)
        if not self.plugins:
            raise PluginDefinitionError("a plugin host needs at least one plugin class")
        # Every plugin reading the snapshot reads node objects only (nodes_only, or lookahead): the
        # mirror needs nodes, not the pods placed on them.
        self.nodes_only = all(h.manifest.nodes_only for h in self.plugins.values() if h.manifest.needs_snapshot)
        self.listen = listen
        self.mirror_wait = mirror_wait
        self.mirror = SnapshotMirror()
        self.tls = tls  # serve TLS (mutual TLS with tls.client_ca_file)
        self.token = token  # the bearer token callers must present
        self.handle = HandleClient(self.mirror, tls=framework_tls)
        self.port = 0
        self._fixed_framework = framework
        if framework:
            self.handle.connect(framework)
        self._needs_mirror = any(h.manifest.needs_snapshot for h in self.plugins.values())
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._follower: asyncio.Task[None] | None = None
        self._stopped = False
        self.views: dict[tuple[int, bytes], tuple[Snapshot, Snapshot]] = {}
        self.controllers: dict[tuple[str, str], Controller] = {}  # (plugin, profile) -> running controller
        # Filter/Score streams opened by frameworks, and cycles started on them (a framework reuses
        # a stream for many cycles).
        self.streams_opened: collections.Counter[str] = collections.Counter()
        self.cycles_started: collections.Counter[str] = collections.Counter()
        self.lookahead_pods = 0  # pods answered ahead of their cycles (Plugin.Lookahead)

    @property
    def address(self) -> str:
        host = self.listen.rsplit(":", 1)[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    async def start(self) -> PluginHost:
        auth = [BearerTokenInterceptor(self.token, "this plugin host")] if self.token else []
        tracing = [TraceMetadataInterceptor()] if tracing_enabled() else []
        server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[*auth, *tracing, *server_interceptors()])
        pb.plugin_grpc.add_PluginServicer_to_server(_Servicer(self), server)  # type: ignore[no-untyped-call]
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        self.port = add_port(server, self.listen, self.tls)
        await server.start()
        self._server = server
        await self._health.set(HealthServiceName, health_pb2.HealthCheckResponse.SERVING)
        await self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        if self._fixed_framework and self._needs_mirror:
            self._start_following()
        return self

    def framework_connected(self, address: str, credential: str = "") -> None:
        """A Handshake: follow the framework at ``address`` (unless the host was given one), resyncing,
        presenting ``credential`` on every call to it."""
        self.handle.set_credential(credential)
        if not self._fixed_framework and address:
            self.handle.connect(address)
        if self._needs_mirror and self.handle.address:
            self._start_following()

    def _start_following(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
        self.mirror.reset()
        self._follower = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        """Follow the framework's snapshot forever, reconnecting with bounded backoff."""
        backoff = 0.05
        name = next(iter(self.plugins))
        channel, stub = self.handle.follow_channel()
        try:
            while True:
                ready = asyncio.Event()
                try:
                    await self.mirror.follow_once(stub, name, ready, nodes_only=self.nodes_only)
                except grpc.RpcError as exc:
                    log.debug("snapshot mirror stream from %s ended: %s", self.handle.address, exc)
                if ready.is_set():
                    backoff = 0.05
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        finally:
            await channel.close()

    # ---- controllers ---------------------------------------------------------------------------

    async def start_controller(self, hosted: _Hosted, profile: str, inst: Controller) -> None:
        """Start a configured plugin's controller (the framework is active for ``profile``)."""
        token = _enter(CallContext(plugin=hosted.name, point="Controller", profile=profile,
                                   args=hosted.args.get(profile, {}), handle=self.handle))
        try:
            await inst.start()
        finally:
            _leave(token)
        self.controllers[(hosted.name, profile)] = inst

    async def stop_controller(self, hosted: _Hosted, profile: str, inst: object) -> None:
        running = self.controllers.get((hosted.name, profile))
        if running is None or running is not inst:
            return
        del self.controllers[(hosted.name, profile)]
        try:
            await running.stop()
        except Exception:
            log.exception("stopping the controller of %s for profile %r failed", hosted.name, profile)

    async def stop_controllers(self, profile: str = "") -> None:
        """Stop the running controllers (of ``profile``, or all)."""
        for (name, prof), inst in list(self.controllers.items()):
            if not profile or prof == profile:
                await self.stop_controller(self.plugins[name], prof, inst)

    async def stop(self, grace: float = 5.0) -> None:
        """Graceful stop: NOT_SERVING, controllers stopped, in-flight calls get ``grace`` seconds.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.stop_controllers()
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        if self._server is not None:
            await self._server.stop(grace)
        self.handle.close()

    async def wait_for_termination(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> PluginHost:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(1.0)


def load_plugins(target: str) -> list[type[Plugin]]:
    """The plugin classes named by ``MODULE:ATTR``: a class, a list/tuple of classes, or a function
    returning either."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise PluginDefinitionError(f"expected MODULE:ATTR (e.g. mypkg.plugins:PLUGINS), got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginDefinitionError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise PluginDefinitionError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, type):
        value = value()
    classes = list(value) if isinstance(value, list | tuple) else [value]
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Plugin)):
            raise PluginDefinitionError(f"{target}: {cls!r} is not a plugin class")
    return classes


async def _serve(plugins: Sequence[type[Plugin]], listen: str, framework: str | None,
                 security: dict[str, Any]) -> None:
    from pluginhost.tracing import configure_from_env

    try:
        provider = configure_from_env()  # OTEL_* variables; off unless OTEL_TRACES_EXPORTER names an exporter
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # before saying we listen: a SIGTERM right after is graceful
    host = PluginHost(plugins, listen=listen, framework=framework, **security)
    await host.start()
    names = ", ".join(host.plugins)
    secured = ("; mutual TLS" if host.tls.client_ca_file else "; TLS") if host.tls else ""
    secured += "; bearer token required" if host.token else ""
    # The first line of output says where the host listens (tests and the demo read the port from it).
    print(f"outrigger plugin host listening on {host.address} (plugins: {names}{secured})", flush=True)
    await stop.wait()
    log.info("plugin host shutting down")
    await host.stop()
    if provider is not None:
        provider.shutdown()  # type: ignore[attr-defined]  # export the spans still buffered


def serve(
    plugins: Sequence[type[Plugin]],
    listen: str = DEFAULT_LISTEN,
    framework: str | None = None,
    *,
    tls: ServerTLS | None = None,
    token: str | None = None,
    framework_tls: ClientTLS | None = None,
) -> None:
    """Host ``plugins`` until SIGTERM or SIGINT (the blocking entry point of a sidecar). ``tls``,
    ``token`` and ``framework_tls`` are :class:`PluginHost`'s security settings."""
    security: dict[str, Any] = {"tls": tls, "token": token, "framework_tls": framework_tls}
    try:
        import uvloop

        uvloop.run(_serve(plugins, listen, framework, security))
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(_serve(plugins, listen, framework, security))


if __name__ == "__main__":  # python -m pluginhost.host MODULE:ATTR [LISTEN]
    serve(load_plugins(sys.argv[1]), *(sys.argv[2:3] or [DEFAULT_LISTEN]))

