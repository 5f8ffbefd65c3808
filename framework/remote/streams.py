"""Filter and Score over streams of node batches: one :class:`NodeExchange` per (cycle, method).

A cycle's Filter windows (and its Score) are sent as batches of node ids spread over the endpoint's
healthy replicas, on streams each replica keeps open between cycles. The exchange owns what one
(cycle, method) needs: the adapter, the cycle's state and pod, the streams the cycle took
(:class:`CycleStreams`, kept in the CycleState and freed with it) and the point's statistics. A
replica that fails with batches unanswered has them sent to another (Filter and Score are pure);
when none is left the call fails with :class:`~framework.remote.errors.RemotePluginError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import grpc
import numpy as np
import numpy.typing as npt

from pluginhost import pb
from pluginhost.convert import status_from_proto
from pluginhost.errors import OutriggerError
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.state import apply_entries
from pluginhost.status import Code

from .endpoint import POINT_ENUMS, Endpoint, NodeStream, Replica
from .errors import RemotePluginError, describe, why
from .services import FrameworkServices
from .stats import PointStats

__all__ = ["CycleStreams", "ExchangeOwner", "NodeExchange", "StreamBroken", "Window"]

log = logging.getLogger("outrigger.remote")

_VALID_CODES = max(int(c) for c in Code)


class ExchangeOwner(Protocol):
    """What an exchange asks of its adapter."""

    name: str
    endpoint: Endpoint
    batch_size: int
    needs_snapshot: bool
    services: FrameworkServices | None

    def cycle_context(self, state: CycleState, pod: Pod) -> Any:
        """The cycle's context message for this plugin."""

    def deadline(self, point: str) -> float:
        """The deadline of ``point`` (a configuration point name, e.g. ``filter``)."""


class Window:
    """The batches of one Filter or Score request in flight: per stream, batch_seq -> (lo, hi), the
    positions of its nodes in ``batch``."""

    __slots__ = ("batch", "codes", "pending", "reason_index", "reasons", "scores", "tried", "want_scores")

    def __init__(self, batch: NodeBatch, want_scores: bool) -> None:
        n = len(batch)
        self.batch = batch
        self.want_scores = want_scores
        self.pending: dict[NodeStream, dict[int, tuple[int, int]]] = {}
        self.codes = np.zeros(n, dtype=np.int8)
        self.reason_index = np.zeros(n, dtype=np.int32)
        self.reasons: list[tuple[str, ...]] = []
        self.scores = np.zeros(n, dtype=np.int64)
        self.tried: set[Replica] = set()


class StreamBroken(OutriggerError):
    """A stream ended or timed out with batches unanswered (retryable on another replica)."""


class CycleStreams:
    """An adapter's per-cycle data: the streams it took for the cycle, the scores Filter brought back,
    and whether the cycle is registered with the CycleState service while it runs.

    Kept in the CycleState so it is freed with the scheduling context. A clone (preemption's what-if
    states) gets an empty one: a what-if never shares the original's streams.
    """

    __slots__ = ("in_flight", "score_rows", "score_values", "streams", "with_scores")

    def __init__(self) -> None:
        self.streams: dict[tuple[str, Replica], NodeStream] = {}
        self.score_rows: list[npt.NDArray[np.int64]] = []
        self.score_values: list[npt.NDArray[np.int64]] = []
        self.with_scores: bool | None = None
        self.in_flight: contextlib.ExitStack | None = None

    def clone(self) -> CycleStreams:
        return CycleStreams()

    def hold(self, services: FrameworkServices | None, state: CycleState) -> None:
        """Register the cycle with the CycleState service until its streams are given back."""
        if self.in_flight is None and services is not None:
            self.in_flight = contextlib.ExitStack()
            self.in_flight.enter_context(services.in_flight(state))

    def give_back(self, method: str) -> None:
        """The cycle is done with its ``method`` streams: back to their replicas' idle pools."""
        for key in [k for k in self.streams if k[0] == method]:
            stream = self.streams.pop(key)
            stream.replica.give_back(stream)
        if not self.streams and self.in_flight is not None:
            self.in_flight.close()
            self.in_flight = None


class NodeExchange:
    """One cycle's ``Filter`` or ``Score`` exchange with one plugin's replicas (see the module docstring)."""

    __slots__ = ("adapter", "data", "method", "pod", "stat", "state")

    def __init__(self, adapter: ExchangeOwner, method: str, state: CycleState, pod: Pod, data: CycleStreams,
                 stat: PointStats) -> None:
        self.adapter = adapter
        self.method = method
        self.state = state
        self.pod = pod
        self.data = data
        self.stat = stat

    @property
    def _endpoint(self) -> Endpoint:
        return self.adapter.endpoint

    def _deadline(self) -> float:
        return self.adapter.deadline(self.method.lower())

    def _declaring(self, key: str) -> list[Replica]:
        enum = POINT_ENUMS[self.method]
        return [r for r in self._endpoint.usable(key) if r.declares(self.adapter.name, enum)]

    async def _stream_for(self, replica: Replica) -> NodeStream:
        """This cycle's stream to ``replica``: an idle one (or a new one) started with this cycle's context."""
        method, data = self.method, self.data
        stream = data.streams.get((method, replica))
        if stream is not None:
            return stream
        try:
            await self._endpoint.ready(replica)
        except RemotePluginError as exc:
            raise StreamBroken(str(exc)) from None  # unreachable or restarted badly: try another replica
        if not replica.declares(self.adapter.name, POINT_ENUMS[method]):  # restarted as another version
            raise StreamBroken(f"{self._endpoint.where(replica)} no longer declares {method} of {self.adapter.name!r}")
        data.hold(self.adapter.services, self.state)
        replica.picked += 1
        stream = replica.take_stream(method)
        data.streams[(method, replica)] = stream
        stream.base = stream.seq
        ctx = self.adapter.cycle_context(self.state, self.pod)
        if method == "Filter":
            start: Any = pb.plugin.FilterRequest(
                start=pb.plugin.FilterStart(ctx=ctx, with_scores=bool(data.with_scores))
            )
        else:
            start = pb.plugin.ScoreRequest(start=pb.plugin.ScoreStart(ctx=ctx))
        if replica.start_batch:
            stream.start = start  # sent with the first batch (one message, not two)
            return stream
        self.stat.bytes_sent += start.ByteSize()
        try:
            await stream.call.write(start)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            stream.broken = True
            raise StreamBroken(f"cannot start a {method} stream: {why(exc)}") from None
        return stream

    def _batches(self, batch: NodeBatch, replicas: int = 1) -> list[tuple[int, int]]:
        n = len(batch)
        size = self.adapter.batch_size or -(-n // max(replicas, 1)) or 1
        return [(lo, min(lo + size, n)) for lo in range(0, n, size)]

    async def _send_part(self, replica: Replica, window: Window, lo: int, hi: int) -> None:
        stream, request = await self._part(replica, window, lo, hi)
        await self._write(stream, request)

    async def _part(self, replica: Replica, window: Window, lo: int, hi: int) -> tuple[NodeStream, Any]:
        """The message carrying nodes ``lo:hi`` of ``window`` to ``replica``, counted as pending there."""
        stream = await self._stream_for(replica)
        batch = window.batch
        if stream.start is not None:  # the cycle's first batch rides in its start message
            request, stream.start = stream.start, None
            msg = request.start.batch
        else:
            request = pb.plugin.FilterRequest() if self.method == "Filter" else pb.plugin.ScoreRequest()
            msg = request.batch
        msg.SetInParent()
        msg.snapshot_generation = batch.snapshot.generation
        msg.batch_seq = stream.seq
        msg.node_ids.extend(batch.snapshot.table.ids[batch.rows[lo:hi]].tolist())
        if not self.adapter.needs_snapshot:
            msg.node_names.extend(batch.snapshot.table.names[r] for r in batch.rows[lo:hi].tolist())
        self.stat.bytes_sent += request.ByteSize()
        self.stat.batches += 1
        spans = window.pending.setdefault(stream, {})
        spans[stream.seq] = (lo, hi)
        stream.pending = spans
        stream.sent[stream.seq] = time.perf_counter()
        stream.seq += 1
        return stream, request

    async def _write(self, stream: NodeStream, *requests: Any) -> None:
        try:
            for request in requests:
                await stream.call.write(request)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            stream.broken = True
            raise StreamBroken(f"cannot send a {self.method} batch: {why(exc)}") from None

    async def send(self, batch: NodeBatch) -> Window:
        """Send ``batch`` as node batches spread over the healthy replicas; answers are read by :meth:`collect`."""
        window = Window(batch, want_scores=self.method == "Score" or bool(self.data.with_scores))
        cycle_id = self.state.cycle_id
        ordered = self._endpoint.route(self.adapter.name, self.method, cycle_id)  # those declaring it
        replicas = ordered[: self._endpoint.spread(ordered)]
        outgoing: dict[NodeStream, list[Any]] = {}
        for i, (lo, hi) in enumerate(self._batches(batch, len(replicas))):
            replica = replicas[i % len(replicas)]
            if replica in window.tried:
                others = [r for r in self._declaring(cycle_id) if r not in window.tried]
                if not others:
                    raise RemotePluginError(f"no replica left for {self.method} ({self._endpoint.name})",
                                            grpc.StatusCode.UNAVAILABLE)
                replica = others[0]
            try:
                stream, request = await self._part(replica, window, lo, hi)
            except StreamBroken as exc:  # no stream to it: nothing of this part was sent
                await self._failover(window, replica, str(exc), [(lo, hi)])
                continue
            outgoing.setdefault(stream, []).append(request)
        # The replicas' writes go out together: a write completes only after a trip through gRPC's
        # poller, and the replica written second would otherwise start that much later.
        streams = list(outgoing)
        if len(streams) == 1:
            failed: list[BaseException | None] = [await _caught(self._write(streams[0], *outgoing[streams[0]]))]
        else:
            failed = list(await asyncio.gather(*(_caught(self._write(s, *outgoing[s])) for s in streams)))
        for stream, broke in zip(streams, failed, strict=True):
            if broke is not None and stream in window.pending:  # its batches are pending: send them elsewhere
                await self._failover(window, stream.replica, str(broke), [])
        return window

    async def _failover(self, window: Window, replica: Replica, reason: str, unsent: list[tuple[int, int]]) -> None:
        """``replica`` failed with batches of ``window`` unanswered: Filter and Score are pure, so send
        them to another healthy replica (each replica is tried once per window); else fail the call."""
        spans = list(unsent)
        while True:
            window.tried.add(replica)
            self._endpoint.failed(replica)
            for stream in [s for s in window.pending if s.replica is replica]:
                spans.extend(window.pending.pop(stream).values())
            others = [r for r in self._declaring(self.state.cycle_id) if r not in window.tried]
            if not others:
                raise RemotePluginError(f"{reason} ({self._endpoint.where(replica)})", grpc.StatusCode.UNAVAILABLE)
            target = others[0]
            log.warning("%s batches of plugin %r failed on %s (%s): sending them to %s", self.method,
                        self.adapter.name, replica.address, reason, target.address)
            spans.sort()
            self.stat.retries += len(spans)
            for i, (lo, hi) in enumerate(spans):
                try:
                    await self._send_part(target, window, lo, hi)
                except StreamBroken as exc:
                    sent = any((lo, hi) in sp.values() for st, sp in window.pending.items() if st.replica is target)
                    spans = spans[i + 1 :] if sent else spans[i:]
                    replica, reason = target, str(exc)
                    break
            else:
                return

    async def collect(self, window: Window) -> None:
        """Read every answer of ``window`` (within the point's deadline), failing over a broken replica."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._deadline()
        while window.pending:
            stream = next(iter(window.pending))
            try:
                if stream.broken:
                    raise StreamBroken("the stream broke")
                async with asyncio.timeout_at(deadline):
                    await self._read(stream, window)
            except (grpc.RpcError, StreamBroken, TimeoutError) as exc:
                stream.broken = True
                if isinstance(exc, TimeoutError):
                    reason = f"DEADLINE_EXCEEDED: no answer within {self._deadline():g}s"
                elif isinstance(exc, grpc.RpcError):
                    reason = describe(exc)
                else:
                    reason = str(exc)
                await self._failover(window, stream.replica, reason, [])
                deadline = loop.time() + self._deadline()
            except BaseException:
                stream.broken = True
                raise

    async def _read(self, stream: NodeStream, window: Window) -> None:
        method = self.method
        spans = window.pending[stream]
        while spans:
            reply = await stream.call.read()
            if reply is grpc.aio.EOF:
                raise StreamBroken(f"the plugin closed its {method} stream with {len(spans)} batch(es) unanswered")
            self.stat.bytes_received += reply.ByteSize()
            sent = stream.sent.pop(reply.batch_seq, None)
            if reply.batch_seq < stream.base:
                continue  # the answer to an abandoned cycle's batch
            if sent is not None:
                stream.replica.observe(time.perf_counter() - sent)
            span = spans.pop(reply.batch_seq, None)
            if span is None:
                raise RemotePluginError(f"answered {method} batch {reply.batch_seq}, which was not sent (or twice)")
            apply_entries(self.state, reply.state_writes)
            if reply.HasField("error") and reply.error.code != pb.types.CODE_SUCCESS:
                raise RemotePluginError(status_from_proto(reply.error).message() or f"{method} batch failed")
            if method == "Filter":
                _take_filter_reply(reply, span, window)
            else:
                lo, hi = span
                got = np.asarray(reply.scores, dtype=np.int64)
                if got.shape[0] != hi - lo:
                    # The runtime's own words for a wrong-length answer, for the whole batch.
                    raise RemotePluginError(f"returned {got.shape[0]} scores for {hi - lo} nodes")
                window.scores[lo:hi] = got
        del window.pending[stream]


def _take_filter_reply(reply: Any, span: tuple[int, int], window: Window) -> None:
    lo, hi = span
    got = np.asarray(reply.codes, dtype=np.int64)
    if got.shape[0] != hi - lo:
        raise RemotePluginError(f"answered {got.shape[0]} of the {hi - lo} nodes of Filter batch {reply.batch_seq}")
    if got.shape[0] and (int(got.min()) < 0 or int(got.max()) > _VALID_CODES):
        raise RemotePluginError("returned an unknown status code")
    window.codes[lo:hi] = got
    failed = got != 0
    if failed.any() and len(reply.reason_index):
        index = np.asarray(reply.reason_index, dtype=np.int64)
        if index.shape[0] != hi - lo or int(index[failed].max()) >= len(reply.reason_table):
            raise RemotePluginError(f"sent a bad reason index in Filter batch {reply.batch_seq}")
        window.reason_index[lo:hi] = index + len(window.reasons)
        window.reasons.extend(tuple(rs.reasons) for rs in reply.reason_table)
    elif failed.any():
        window.reason_index[lo:hi] = len(window.reasons)
        window.reasons.append(())
    if window.want_scores:
        scores = np.asarray(reply.scores, dtype=np.int64)
        if scores.shape[0] != hi - lo:
            raise RemotePluginError(
                f"sent {scores.shape[0]} scores for the {hi - lo} nodes of Filter batch {reply.batch_seq}"
            )
        window.scores[lo:hi] = scores


async def _caught(write: Awaitable[None]) -> BaseException | None:
    """The :class:`StreamBroken` a write raised, or None."""
    try:
        await write
    except StreamBroken as exc:
        return exc
    return None
