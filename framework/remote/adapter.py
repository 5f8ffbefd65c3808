"""The adapter the runtime calls exactly like an in-process plugin: :class:`RemotePlugin`, one class
per set of declared points (:func:`adapter_class`), each call turned into gRPC to the plugin's host.

The adapter calls only the points of the plugin's manifest. Every call carries the point's deadline.
A gRPC failure raises :class:`~framework.remote.errors.RemotePluginError` naming the code, the
endpoint and its address; the runtime reports it as ``running "X" filter plugin: UNAVAILABLE: ...``.
Filter keeps one stream per (cycle, plugin) open across the runtime's windows and closes it in
``filter_finished``; Score sends one stream per cycle (:mod:`.streams`); declared CycleState keys ride
on requests and writes come back on replies. Binding-cycle points wait for their replies except
PostBind, which is informational and sent without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt

from pluginhost import pb
from pluginhost.convert import pod_to_proto, status_from_proto, status_to_proto
from pluginhost.definition import action_from_text
from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    Plugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterResult,
    QueuedPodInfo,
    QueueingHint,
)
from pluginhost.snapshot import Snapshot
from pluginhost.state import apply_entries, entries_for
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import (
    NodeChange,
    node_change_from_proto,
    pod_change_from_proto,
)

from ..hooks import BeforeCycle, OutOfProcess, Upcoming
from ..observe import tracing
from .convert import converted, view_proto
from .endpoint import POINT_ENUMS, Endpoint, Replica
from .errors import RemotePluginError, RemotePluginsError, describe
from .lookahead import DEPTH as LOOKAHEAD_DEPTH
from .lookahead import Lookahead
from .publisher import SnapshotPublisher
from .services import FrameworkServices, join_cycle
from .stats import PointStats
from .streams import CycleStreams, NodeExchange, Window

__all__ = ["RemotePlugin", "post_filter_result"]

log = logging.getLogger("outrigger.remote")

E = pb.plugin

# Points a failed unary call may be sent again to another replica: they only compute (the binding
# points, Reserve and Permit never are: a second replica might act twice).
_RETRYABLE = frozenset({"PreFilter", "PreFilterAddPod", "PreFilterRemovePod", "PreScore", "NormalizeScore"})
_FAILOVER_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
_STATE_PREFIX = "outrigger.io/remote/"  # CycleState keys the adapters keep their per-cycle data under


class RemotePlugin(Plugin, OutOfProcess):
    """A plugin served by a plugin host. Built by :meth:`RemotePlugins.register`'s factories as an
    instance of a class deriving from the base class of every point in the host's manifest."""

    manifest: Any = None
    points: frozenset[str] = frozenset()

    def __init__(self, endpoint: Endpoint, args: dict[str, Any], handle: Handle | None) -> None:
        m = self.manifest
        self.name = str(m.name)
        self.endpoint = endpoint
        self.args = args
        self.handle = handle
        self.profile = ""  # set by RemotePlugins.attach
        self.shadow = False  # a shadow plugin's adapter (.shadow): its failures are counted, never ignored
        self.scores_enabled = "score" in self.points
        self.state_keys = tuple(m.state_keys)
        self.needs_snapshot = bool(m.needs_snapshot)
        # Its host follows the mirror: for node ids (needs_snapshot), or for storage or device objects alone.
        self.follows_mirror = self.needs_snapshot or bool(m.needs_volumes) or bool(m.needs_devices)
        self.batch_size = endpoint.config.batch_size or int(m.preferred_batch_size)
        self.with_scores = bool(m.filter_and_score) and "score" in self.points and "preScore" not in self.points
        self.stats: dict[str, PointStats] = {}
        self.publisher: SnapshotPublisher | None = None
        self.services: FrameworkServices | None = None
        self._data_key = _STATE_PREFIX + self.name
        self._informational: set[asyncio.Task[None]] = set()
        # Answers asked for ahead of the pods' cycles (a lookahead class: see classes.adapter_class).
        self.ahead = Lookahead(self) if isinstance(self, BeforeCycle) else None
        endpoint.adapters.append(self)

    # ---- hooks (framework.hooks) --------------------------------------------------------------

    def before_cycle(self, snapshot: Snapshot, pod: Pod, upcoming: Upcoming, at_filter: bool,
                     at_score: bool) -> None:
        """Ask the host for the answers of ``pod`` and the pods queued behind it (lookahead)."""
        if self.ahead is not None and self.ahead.wanted(snapshot.table):
            self.ahead.ask(snapshot.table, [pod, *upcoming(LOOKAHEAD_DEPTH)], at_filter, at_score)

    @property
    def served_by(self) -> str:
        return self.endpoint.name

    def debug_paths(self) -> list[str]:
        return list(self.manifest.debug_paths)

    async def debug(self, path: str, profile: str) -> str:
        replica = self.endpoint.pick(plugin=self.name)
        request = pb.plugin.DebugRequest(plugin=self.name, profile=profile, path=path)
        try:
            reply = await replica.stub.Debug(request, timeout=self.endpoint.config.deadline("default"))
        except grpc.RpcError as exc:
            raise RemotePluginError(f"{describe(exc)} ({self.endpoint.where(replica)})", exc.code()) from None
        return str(reply.json)

    # ---- plumbing ------------------------------------------------------------------------------

    def stat(self, point: str) -> PointStats:
        st = self.stats.get(point)
        if st is None:
            st = self.stats[point] = PointStats()
        return st

    def _error(self, replica: Replica, exc: grpc.RpcError) -> RemotePluginError:
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            self.endpoint.failed(replica)  # handshake again before its next call; prefer other replicas
        elif code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
                      grpc.StatusCode.CANCELLED):
            replica.suspect = True  # the host may have restarted: handshake again before the next call
        return RemotePluginError(f"{describe(exc)} ({self.endpoint.where(replica)})", code)

    async def configure_on(self, replica: Replica) -> None:
        request = pb.plugin.ConfigureRequest(plugin=self.name, profile=self.profile, args_json=json.dumps(self.args))
        where = self.endpoint.where(replica)
        try:
            reply = await replica.stub.Configure(request, timeout=self.endpoint.config.deadline("configure"))
        except grpc.RpcError as exc:
            raise RemotePluginsError(
                f"configuring remote plugin {self.name!r} for profile {self.profile!r} at {where}: {describe(exc)}"
            ) from None
        status = status_from_proto(reply.status)
        if not status.ok:
            raise RemotePluginsError(
                f"remote plugin {self.name!r} rejected its configuration for profile {self.profile!r} "
                f"({where}): {status.message() or status.code.name}"
            )

    def cycle_context(self, state: CycleState, pod: Pod) -> Any:
        snapshot = state.snapshot
        generation = snapshot.generation if snapshot is not None else 0
        node_generation = snapshot.table.generation if snapshot is not None else 0
        if self.follows_mirror and self.publisher is not None:
            # A host that reads node objects only answers once it has the cycle's node set: the pod
            # placements since can follow with the next timed delta instead of before this call.
            self.publisher.publish_up_to(node_generation if self.endpoint.nodes_only else generation)
        join_cycle(state, self.name)  # this plugin may now use the cycle's CycleState
        ctx = pb.plugin.CycleContext(
            cycle_id=state.cycle_id,
            plugin=self.name,
            profile=self.profile,
            snapshot_generation=generation,
            node_generation=node_generation,
            pod=self._pod_proto(state, pod),
            state=entries_for(state, self.state_keys, plugin=self.name) if self.state_keys else (),
            attempt=state.attempt,
            node_view=view_proto(state),
        )
        tracing.inject(ctx.trace_context)  # the plugin call's span (nothing outside a traced cycle)
        return ctx

    def _pod_proto(self, state: CycleState, pod: Pod) -> Any:
        return converted(state, _STATE_PREFIX + "pod", pod, pod_to_proto)

    def _data(self, state: CycleState) -> CycleStreams:
        data = state.get(self._data_key)
        if data is None:
            data = CycleStreams()
            state.write(self._data_key, data)
        return data  # type: ignore[no-any-return]

    def deadline(self, point: str) -> float:
        return self.endpoint.config.deadline(point)

    async def _call(self, point: str, method: str, request: Any, *, state: CycleState | None = None,
                    config_point: str = "") -> Any:
        """One unary call with the point's deadline; retried once if the host lost its configuration,
        and on another replica when the point is pure and the first replica is unreachable."""
        key = state.cycle_id if state is not None else ""
        stat = self.stat(point)
        try:
            replicas = self.endpoint.route(self.name, point, key)  # those whose manifest declares it
        except RemotePluginError:
            stat.record(0.0, error=True)
            raise
        stat.bytes_sent += request.ByteSize()
        started = time.perf_counter()
        timeout = self.deadline(config_point or point)
        in_flight = (
            self.services.in_flight(state) if self.services is not None and state is not None
            else contextlib.nullcontext()
        )
        tries = replicas if point in _RETRYABLE else replicas[:1]
        with in_flight:
            for i, replica in enumerate(tries):
                replica.picked += 1
                try:
                    reply = await self._call_once(replica, method, request, timeout, point)
                except grpc.RpcError as exc:
                    error = self._error(replica, exc)
                    if i + 1 < len(tries) and exc.code() in _FAILOVER_CODES:
                        stat.retries += 1
                        log.warning("%s of plugin %r failed on %s (%s): trying %s", point, self.name,
                                    replica.address, describe(exc), tries[i + 1].address)
                        continue
                    stat.record(time.perf_counter() - started, error=True)
                    raise error from None
                except RemotePluginError:
                    if i + 1 < len(tries):
                        continue
                    stat.record(time.perf_counter() - started, error=True)
                    raise
                except BaseException:
                    stat.record(time.perf_counter() - started, error=True)
                    raise
                stat.record(time.perf_counter() - started)
                stat.bytes_received += reply.ByteSize()
                return reply
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call_once(self, replica: Replica, method: str, request: Any, timeout: float, point: str) -> Any:
        await self.endpoint.ready(replica)
        if not replica.declares(self.name, POINT_ENUMS.get(point, 0)):  # handshaken again: now another version
            raise RemotePluginError(f"{self.endpoint.where(replica)} no longer declares {point} of {self.name!r}")
        metadata = tracing.grpc_metadata()  # the plugin call's span (None outside a traced cycle)
        try:
            return await replica.call(method, request, timeout, metadata)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            # "not configured": the host restarted between two calls. Configure and retry once.
            replica.suspect = True
            await self.endpoint.ready(replica)
            return await replica.call(method, request, timeout, metadata)

    def _ignored(self, point: str, state: CycleState | None, exc: BaseException) -> bool:
        """Under failurePolicy Ignore, a failed call skips the plugin for the rest of the cycle: record
        it (statistics, log, the current trace span) and tell the caller to carry on without it."""
        if self.shadow or self.endpoint.config.failure_policy != "Ignore" or not isinstance(exc, RemotePluginError):
            return False
        self.stat(point).ignored += 1
        if state is not None:
            state.skip_filter.add(self.name)
            state.skip_score.add(self.name)
        log.warning("%s plugin %r failed and is ignored for this cycle (failurePolicy Ignore): %s",
                    point, self.name, exc)
        tracing.add_event(
            "remote plugin failure ignored", {"plugin": self.name, "extension_point": point, "error": str(exc)}
        )
        return True

    def _node_request(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        node_id = 0
        snap = state.snapshot
        if snap is not None:
            row = snap.row(node_name)
            if row is not None:
                node_id = int(snap.table.ids[row])
        return pb.plugin.NodeRequest(ctx=self.cycle_context(state, pod), node_name=node_name, node_id=node_id)

    def _ids(self, batch: NodeBatch) -> list[int]:
        ids: list[int] = batch.snapshot.table.ids[batch.rows].tolist()
        return ids

    # ---- queueing ------------------------------------------------------------------------------

    async def pre_enqueue(self, pod: Pod) -> Status:
        request = pb.plugin.PodRequest(plugin=self.name, profile=self.profile, pod=pod_to_proto(pod))
        try:
            reply = await self._call("PreEnqueue", "PreEnqueue", request, config_point="preEnqueue")
        except RemotePluginError as exc:
            if self._ignored("PreEnqueue", None, exc):
                return SUCCESS
            raise
        return status_from_proto(reply.status)

    def sort_key(self, info: QueuedPodInfo) -> Any:
        replica = self.endpoint.pick(plugin=self.name)
        request = pb.plugin.QueueSortKeyRequest(
            pod=pod_to_proto(info.pod), enqueue_timestamp=info.timestamp, attempts=info.attempts,
            plugin=self.name, profile=self.profile,
        )
        stat = self.stat("QueueSortKey")
        started = time.perf_counter()
        try:
            reply = replica.sync_stub().QueueSortKey(request, timeout=self.deadline("queueSort"))
        except grpc.RpcError as exc:
            stat.record(time.perf_counter() - started, error=True)
            # The queue cannot fail a push: a pod whose key is unknown sorts after every other pod.
            log.error("QueueSort plugin %r: %s; the pod sorts last", self.name, self._error(replica, exc))
            self._recover_soon(replica)
            return ((3, ""),)
        stat.record(time.perf_counter() - started)
        # Parts of different kinds order int64 < double < string (the contract's rule).
        out = []
        for part in reply.key:
            kind = part.WhichOneof("value")
            rank = {"int_value": 0, "double_value": 1, "string_value": 2}.get(kind or "", 2)
            out.append((rank, getattr(part, kind) if kind else ""))
        return tuple(out)

    def _recover_soon(self, replica: Replica) -> None:
        """Synchronous callers (the queue) cannot await a re-handshake: schedule it, so a restarted
        host serves the next call even if this plugin has no asynchronous point."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self.recover(replica))
        self._informational.add(task)
        task.add_done_callback(self._informational.discard)

    async def recover(self, replica: Replica) -> None:
        try:
            await self.endpoint.ready(replica)
        except Exception as exc:
            log.warning("plugin host of %r is still unavailable: %s", self.name, exc)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return bool(self.sort_key(a) < self.sort_key(b))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        out = []
        for ev in self.manifest.events:
            event = ClusterEvent(ev.event.resource, action_from_text(ev.event.action))
            hint = functools.partial(self._hint, ev.event) if ev.has_queueing_hint else None
            out.append(ClusterEventWithHint(event, hint))
        if not out:
            out.append(ClusterEventWithHint(ClusterEvent("*", ActionType.All)))
        return out

    def _hint(self, event: Any, pod: Pod, old: Any, new: Any) -> QueueingHint:
        def as_json(obj: Any) -> bytes:
            if isinstance(obj, Pod | Node) and obj.raw:
                return json.dumps(obj.raw).encode()
            return b""

        request = pb.plugin.QueueingHintRequest(
            plugin=self.name, pod=pod_to_proto(pod), profile=self.profile, event=event,
            old_object_json=as_json(old), new_object_json=as_json(new),
        )
        replica = self.endpoint.pick(plugin=self.name)
        try:
            reply = replica.sync_stub().QueueingHint(request, timeout=self.deadline("preEnqueue"))
        except grpc.RpcError as exc:
            log.warning("queueing hint of plugin %r failed (%s): requeueing", self.name, self._error(replica, exc))
            self._recover_soon(replica)
            return QueueingHint.Queue  # the contract: an error counts as Queue
        return QueueingHint.Queue if reply.queue else QueueingHint.QueueSkip

    # ---- PreFilter -----------------------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        try:
            request = pb.plugin.CycleRequest(ctx=self.cycle_context(state, pod))
            reply = await self._call("PreFilter", "PreFilter", request, state=state, config_point="preFilter")
        except RemotePluginError as exc:
            if self._ignored("PreFilter", state, exc):
                return None, Status(Code.Skip)
            raise
        apply_entries(state, reply.state_writes)
        result = PreFilterResult(frozenset(reply.node_names)) if reply.narrowed else None
        return result, status_from_proto(reply.status)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        if E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS not in self.manifest.points:
            return None
        return _RemoteExtensions(self)

    async def _extension(self, state: CycleState, pod: Pod, other: Pod, node_row: int, add: bool) -> Status:
        snap = state.snapshot
        node_id = int(snap.table.ids[node_row]) if snap is not None else 0
        node_name = snap.table.names[node_row] if snap is not None else ""
        request = pb.plugin.PreFilterExtensionRequest(
            ctx=self.cycle_context(state, pod), other_pod=pod_to_proto(other), node_id=node_id, node_name=node_name
        )
        point = "PreFilterAddPod" if add else "PreFilterRemovePod"
        try:
            reply = await self._call(point, point, request, state=state, config_point="preFilter")
        except RemotePluginError as exc:
            if self._ignored(point, state, exc):
                return SUCCESS
            raise
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    # ---- Filter and Score streams ------------------------------------------------------------------

    def _filter_data(self, state: CycleState) -> CycleStreams:
        data = self._data(state)
        if data.with_scores is None:
            data.with_scores = self.with_scores and self.scores_enabled and self.name not in state.skip_score
        return data

    async def prefetch_filter(
        self, state: CycleState, pod: Pod, batch: NodeBatch
    ) -> Awaitable[FilterResult] | FilterResult:
        """Send ``batch`` now and return what collects the answers: the runtime sends a window to remote
        plugins first, runs the in-process plugins while the hosts work, then collects (Filter is pure,
        so answering for nodes an earlier plugin rejects changes nothing). An answer already at hand
        (a lookahead answer) is returned as it is."""
        if self.name in state.skip_filter:  # ignored after a failure earlier in this cycle
            return FilterResult.passing(len(batch))
        if self.ahead is not None:
            verdict = await self.ahead.verdict(state, pod, batch)
            if verdict is not None and verdict.codes is not None:
                self.stat("Filter (lookahead)").calls += 1  # no exchange: counted, not timed
                return verdict.filter_result(batch.rows)
        exchange = NodeExchange(self, "Filter", state, pod, self._filter_data(state), self.stat("Filter"))
        started = time.perf_counter()
        try:
            window = await exchange.send(batch)
        except BaseException as exc:
            exchange.stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Filter", state, exc):
                return FilterResult.passing(len(batch))
            raise
        return self._finish_filter(exchange, window, started)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        early = await self.prefetch_filter(state, pod, batch)
        return early if isinstance(early, FilterResult) else await early

    async def _finish_filter(self, exchange: NodeExchange, window: Window, started: float) -> FilterResult:
        state, data, stat = exchange.state, exchange.data, exchange.stat
        try:
            await exchange.collect(window)
        except BaseException as exc:
            stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Filter", state, exc):
                return FilterResult.passing(len(window.batch))
            raise
        stat.record(time.perf_counter() - started)
        result = FilterResult(window.codes, window.reason_index, window.reasons)
        if data.with_scores:
            passing = window.codes == 0
            data.score_rows.append(window.batch.rows[passing])
            data.score_values.append(window.scores[passing])
        return result

    async def filter_finished(self, state: CycleState) -> None:
        data = state.get(self._data_key)
        if isinstance(data, CycleStreams):
            data.give_back("Filter")

    # ---- PostFilter ----------------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        request = pb.plugin.PostFilterRequest(ctx=self.cycle_context(state, pod))
        for name, st in statuses.statuses.items():
            request.node_statuses[name].CopyFrom(status_to_proto(st))
        # The key "" carries the status of every node not listed (NodeToStatus.absent).
        request.node_statuses[""].CopyFrom(status_to_proto(statuses.absent))
        try:
            reply = await self._call("PostFilter", "PostFilter", request, state=state, config_point="postFilter")
        except RemotePluginError as exc:
            if self._ignored("PostFilter", state, exc):
                return None, Status(Code.Unschedulable, (f"remote plugin {self.name} failed and was ignored",))
            raise
        apply_entries(state, reply.state_writes)
        return post_filter_result(reply), status_from_proto(reply.status)

    # ---- PreScore / Score / NormalizeScore -------------------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        request = pb.plugin.PreScoreRequest(ctx=self.cycle_context(state, pod), feasible_node_ids=self._ids(nodes))
        if not self.needs_snapshot:
            request.feasible_node_names.extend(nodes.names)
        try:
            reply = await self._call("PreScore", "PreScore", request, state=state, config_point="preScore")
        except RemotePluginError as exc:
            if self._ignored("PreScore", state, exc):
                return Status(Code.Skip)
            raise
        apply_entries(state, reply.state_writes)
        return status_from_proto(reply.status)

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        if self.ahead is not None:
            verdict = await self.ahead.verdict(state, pod, batch)
            if verdict is not None and verdict.scores is not None:
                self.stat("Score (lookahead)").calls += 1
                return verdict.scores[batch.rows]
        data = state.get(self._data_key)
        if isinstance(data, CycleStreams) and data.score_rows:
            cached = self._cached_scores(data, batch)
            if cached is not None:
                self.stat("Score (with Filter)").record(0.0)
                return cached
        return await self._score_stream(state, pod, batch)

    def _cached_scores(self, data: CycleStreams, batch: NodeBatch) -> npt.NDArray[np.int64] | None:
        rows = np.concatenate(data.score_rows)
        values = np.concatenate(data.score_values)
        data.score_rows, data.score_values = [], []
        by_row = np.full(len(batch.snapshot), -1, dtype=np.int64)
        have = np.zeros(len(batch.snapshot), dtype=np.bool_)
        by_row[rows] = values
        have[rows] = True
        if not bool(have[batch.rows].all()):
            return None  # a node Filter did not score (it should not happen): ask Score
        return by_row[batch.rows]

    async def _score_stream(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        data = self._data(state)
        stat = self.stat("Score")
        exchange = NodeExchange(self, "Score", state, pod, data, stat)
        started = time.perf_counter()
        try:
            window = await exchange.send(batch)
            await exchange.collect(window)
        except BaseException as exc:
            stat.record(time.perf_counter() - started, error=True)
            if self._ignored("Score", state, exc):
                return np.zeros(len(batch), dtype=np.int64)  # the same for every node: no influence
            raise
        finally:
            data.give_back("Score")
        stat.record(time.perf_counter() - started)
        return window.scores

    async def normalize_score(
        self, state: CycleState, pod: Pod, batch: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> Status:
        request = pb.plugin.NormalizeScoreRequest(
            ctx=self.cycle_context(state, pod), node_ids=self._ids(batch), scores=scores.tolist()
        )
        if not self.needs_snapshot:
            request.node_names.extend(batch.names)
        try:
            reply = await self._call("NormalizeScore", "NormalizeScore", request, state=state,
                                     config_point="normalizeScore")
        except RemotePluginError as exc:
            if self._ignored("NormalizeScore", state, exc):
                scores[:] = 0
                return SUCCESS
            raise
        apply_entries(state, reply.state_writes)
        status = status_from_proto(reply.status)
        if status.ok:
            got = np.asarray(reply.scores, dtype=np.int64)
            if got.shape[0] != scores.shape[0]:
                raise RemotePluginError(f"returned {got.shape[0]} normalized scores for {scores.shape[0]} nodes")
            scores[:] = got
        return status

    # ---- Reserve / Permit / binding -----------------------------------------------------------------

    async def _node_point(self, point: str, method: str, config_point: str, state: CycleState, pod: Pod,
                          node_name: str) -> Any:
        """A call about one node; None when it failed and failurePolicy Ignore says to go on without it."""
        try:
            reply = await self._call(point, method, self._node_request(state, pod, node_name), state=state,
                                     config_point=config_point)
        except RemotePluginError as exc:
            if self._ignored(point, state, exc):
                return None
            raise
        if hasattr(reply, "state_writes"):
            apply_entries(state, reply.state_writes)
        return reply

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Reserve", "Reserve", "reserve", state, pod, node_name)
        return SUCCESS if reply is None else status_from_proto(reply.status)

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        # Awaited (not fire-and-forget): plugins rely on Unreserve running in reverse order before
        # the pod is requeued, e.g. a gang releasing its siblings.
        await self._node_point("Unreserve", "Unreserve", "reserve", state, pod, node_name)

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        reply = await self._node_point("Permit", "Permit", "permit", state, pod, node_name)
        if reply is None:
            return SUCCESS, 0.0
        return status_from_proto(reply.status), reply.timeout_ms / 1000.0

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT not in self.manifest.points:
            return SUCCESS
        reply = await self._node_point("PreBindPreFlight", "PreBindPreFlight", "preBind", state, pod, node_name)
        return Status(Code.Skip) if reply is None else status_from_proto(reply.status)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("PreBind", "PreBind", "preBind", state, pod, node_name)
        return SUCCESS if reply is None else status_from_proto(reply.status)

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reply = await self._node_point("Bind", "Bind", "bind", state, pod, node_name)
        return Status(Code.Skip) if reply is None else status_from_proto(reply.status)  # the next Bind plugin binds

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        # Informational: sent without waiting, so binding does not pay a round trip for it.
        request = self._node_request(state, pod, node_name)

        async def send() -> None:
            try:
                await self._call("PostBind", "PostBind", request, config_point="postBind")
            except Exception as exc:
                log.warning("PostBind of remote plugin %r for pod %s failed: %s", self.name, pod.key, exc)

        task = asyncio.get_running_loop().create_task(send())
        self._informational.add(task)
        task.add_done_callback(self._informational.discard)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait for informational calls in flight (PostBind)."""
        if self._informational:
            await asyncio.wait(list(self._informational), timeout=timeout)

    async def close(self) -> None:
        """Stop asking ahead (the endpoint is closing)."""
        if self.ahead is not None:
            await self.ahead.close()


    # ---- transformers ------------------------------------------------------------------------------

    async def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Any, Status]:
        request = pb.plugin.CycleRequest(ctx=self.cycle_context(state, pod))
        reply = await self._call("BeforePreFilter", "BeforePreFilter", request, state=state, config_point="preFilter")
        apply_entries(state, reply.state_writes)
        change = pod_change_from_proto(reply.change) if reply.HasField("change") else None
        return change, status_from_proto(reply.status)

    async def _transform_nodes(self, point: str, config_point: str, state: CycleState, pod: Pod,
                               batch: NodeBatch | None) -> tuple[list[NodeChange], Status]:
        request = pb.plugin.TransformNodesRequest(ctx=self.cycle_context(state, pod))
        if batch is not None:
            request.node_ids.extend(self._ids(batch))
            if not self.needs_snapshot:
                request.node_names.extend(batch.names)
        reply = await self._call(point, point, request, state=state, config_point=config_point)
        apply_entries(state, reply.state_writes)
        return [node_change_from_proto(c) for c in reply.changes], status_from_proto(reply.status)

    async def before_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforeFilter", "filter", state, pod, None)

    async def before_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforeScore", "score", state, pod, nodes)

    async def before_post_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[Any, Status]:
        return await self._transform_nodes("BeforePostFilter", "postFilter", state, pod, None)


class _RemoteExtensions(PreFilterExtensions):
    def __init__(self, adapter: RemotePlugin) -> None:
        self.adapter = adapter

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self.adapter._extension(state, pod, other, node_row, add=True)

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self.adapter._extension(state, pod, other, node_row, add=False)


def post_filter_result(reply: Any) -> PostFilterResult | None:
    """The PostFilterResult a PostFilterReply carries: None (no result, the nomination stays) or a
    result whose node, "" included, is the pod's nomination from now on. A host that does not say
    (nominating_mode unset, as hosts before it) has a result only when it names a node."""
    mode = reply.nominating_mode
    if mode == pb.plugin.NOMINATING_MODE_OVERRIDE:
        return PostFilterResult(reply.nominated_node_name)
    if mode == pb.plugin.NOMINATING_MODE_UNSPECIFIED and reply.nominated_node_name:
        return PostFilterResult(reply.nominated_node_name)
    return None
