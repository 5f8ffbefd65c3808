"""Lookahead: Filter and Score answers of node-only remote plugins, asked for before the pods' cycles.

A remote plugin whose manifest declares ``lookahead`` promises that its Filter and Score answers
depend only on the pod and the nodes' own objects (not on the pods placed on nodes, nor on CycleState)
and are cheap for every node. Scheduling cycles are serial because each one must see the pods placed
by the one before; such a plugin's answers do not depend on those placements, so there is no reason
to wait for a pod's cycle to ask for them.

While the framework schedules one pod, the adapter (:class:`Lookahead`, one per adapter) sends the
next pods of the queue, several per message, on a long-lived ``Plugin.Lookahead`` stream; the host
answers each pod over every node, as packed columns. When a pod's cycle reaches the plugin, its
Filter (and Score) is read from the answer for the rows the cycle asks about: no exchange in the
cycle, and the host works on later pods while the framework runs the in-process plugins. The host's
work and the transport leave the serial path of the cycles.

An answer is used only when it is the answer for that very pod object (an updated pod is asked
again), computed for the node set the cycle's snapshot has (the node table of the generation it was
asked for: any node change since makes it stale), and the cycle runs on the plain snapshot (no
transformer view, no preemption what-if). Otherwise, or when the host failed, the cycle calls
Filter/Score as usual, so failure policies, replicas and deadlines apply unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
import numpy as np
import numpy.typing as npt

from pluginhost import pb
from pluginhost.convert import pod_to_proto, status_from_proto
from pluginhost.errors import OutriggerError
from pluginhost.mirror import row_of_id
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterResult, NodeBatch
from pluginhost.snapshot import NodeTable
from pluginhost.status import Code
from pluginhost.view import VIEW_STATE_KEY, NodeView

from .endpoint import Endpoint, Replica
from .publisher import SnapshotPublisher
from .stats import PointStats

__all__ = ["DEPTH", "Lookahead", "LookaheadOwner", "Verdict"]

log = logging.getLogger("outrigger.lookahead")

DEPTH = 96  # pods asked for ahead of their cycles, per plugin
REFILL = 32  # ask for more once fewer answers than this wait for their cycles
MAX_PODS = 64  # pods per request message
MAX_REQUESTS = 2  # requests in flight per plugin
STALE_CYCLES = 4 * DEPTH  # an answer not taken within this many cycles is dropped (its pod went elsewhere)

# Filter answers: Success, Error, Unschedulable, UnschedulableAndUnresolvable (codes 0 to 3).
_FILTER_CODES = (Code.Success, Code.Error, Code.Unschedulable, Code.UnschedulableAndUnresolvable)
_MAX_FILTER_CODE = max(int(c) for c in _FILTER_CODES)


_SCORE_DTYPES = {1: "<i1", 2: "<i2", 4: "<i4", 8: "<i8"}


class LookaheadOwner(Protocol):
    """What a lookahead asks of its adapter."""

    name: str
    profile: str
    endpoint: Endpoint
    needs_snapshot: bool
    publisher: SnapshotPublisher | None

    def deadline(self, point: str) -> float:
        """The deadline of ``point`` (a configuration point name, e.g. ``filter``)."""

    def stat(self, point: str) -> PointStats:
        """The statistics of ``point``."""

    async def recover(self, replica: Replica) -> None:
        """Handshake and configure ``replica`` again (it failed); never raises."""


_NOT_TAKEN = object()
_STATE_PREFIX = "outrigger.io/remote/ahead/"  # + plugin name: the cycle's lookahead answer, once taken


class LookaheadAnswerError(OutriggerError, ValueError):
    """A host's lookahead answer does not fit the contract (wrong lengths, unknown codes or node ids)."""


class Verdict:
    """One pod's answers, by row of the framework's node table."""

    __slots__ = ("codes", "reason_index", "reasons", "scores")

    def __init__(self, codes: npt.NDArray[np.int8] | None, reason_index: npt.NDArray[np.int32] | None,
                 reasons: list[tuple[str, ...]], scores: npt.NDArray[np.signedinteger[Any]] | None) -> None:
        self.codes = codes
        self.reason_index = reason_index
        self.reasons = reasons
        self.scores = scores

    def filter_result(self, rows: npt.NDArray[np.int64]) -> FilterResult:
        assert self.codes is not None
        ri = self.reason_index[rows] if self.reason_index is not None else None
        return FilterResult(self.codes[rows], ri, self.reasons)


def _rows_for(table: NodeTable, raw_ids: bytes) -> npt.NDArray[np.int64] | None:
    """Rows of ``table`` for the host's column order (None: the same order as the table's rows)."""
    ids = np.frombuffer(raw_ids, dtype="<u4")
    n = len(table.nodes)
    if ids.shape[0] != n:
        raise LookaheadAnswerError(f"answered for {ids.shape[0]} nodes, the framework has {n}")
    if np.array_equal(ids, table.ids):
        return None
    lookup = row_of_id(table)
    wide = ids.astype(np.int64)
    rows = np.full(n, -1, dtype=np.int64)
    inside = wide < lookup.shape[0]
    rows[inside] = lookup[wide[inside]]
    if n and (int(rows.min()) < 0 or np.unique(rows).shape[0] != n):
        raise LookaheadAnswerError("answered for node ids that are not the framework's nodes")
    return rows


def verdict_of(msg: Any, n: int, rows: npt.NDArray[np.int64] | None, want_filter: bool,
               want_score: bool) -> Verdict:
    """Decode and check one ``PodVerdict`` (columns over the host's node order) into table rows."""
    codes = reason_index = scores = None
    reasons: list[tuple[str, ...]] = []
    if want_filter:
        codes = np.frombuffer(msg.codes, dtype=np.int8)
        if codes.shape[0] != n:
            raise LookaheadAnswerError(f"sent {codes.shape[0]} Filter codes for {n} nodes")
        if n and int(codes.view(np.uint8).max()) > _MAX_FILTER_CODE:  # negative codes wrap to >= 128
            raise LookaheadAnswerError("sent an unknown Filter status code")
        if msg.reason_index:
            reason_index = np.frombuffer(msg.reason_index, dtype="<u4").view(np.int32)  # no copy
            if reason_index.shape[0] != n:
                raise LookaheadAnswerError(f"sent {reason_index.shape[0]} reason indexes for {n} nodes")
            used = reason_index[codes != 0]
            if used.shape[0] and not 0 <= int(used.min()) <= int(used.max()) < len(msg.reason_table):
                raise LookaheadAnswerError("sent a reason index past its reason table")
            reasons = [tuple(rs.reasons) for rs in msg.reason_table]
        elif (codes != 0).any():
            reason_index = np.zeros(n, dtype=np.int32)
            reasons = [tuple(msg.reason_table[0].reasons)] if len(msg.reason_table) == 1 else [()]
    if want_score:
        width = msg.score_width or 8
        if width not in _SCORE_DTYPES:
            raise LookaheadAnswerError(f"sent scores {width} bytes wide (1, 2, 4 or 8)")
        if len(msg.scores) % width:
            raise LookaheadAnswerError(f"sent {len(msg.scores)} bytes of {width}-byte scores")
        scores = np.frombuffer(msg.scores, dtype=_SCORE_DTYPES[width])  # the runtime widens what it takes
        if scores.shape[0] != n:
            raise LookaheadAnswerError(f"sent {scores.shape[0]} scores for {n} nodes")
    if rows is not None:  # the host's column order -> the table's rows
        if codes is not None:
            codes = _by_row(codes, rows)
        if reason_index is not None:
            reason_index = _by_row(reason_index, rows)
        if scores is not None:
            scores = _by_row(scores, rows)
    return Verdict(codes, reason_index, reasons, scores)


def _by_row(column: Any, rows: npt.NDArray[np.int64]) -> Any:
    out = np.empty_like(column)
    out[rows] = column
    return out


class _Entry:
    """The answer for one pod, asked for (``future`` pending) or received."""

    __slots__ = ("asked_at", "future", "pod", "retry", "table")

    def __init__(self, pod: Pod, table: NodeTable, future: asyncio.Future[Verdict | None], asked_at: int) -> None:
        self.pod = pod
        self.table = table
        self.future = future
        self.asked_at = asked_at
        self.retry = False  # no answer because the request failed (not the plugin): worth asking again


class _Request:
    __slots__ = ("entries", "filter", "replica", "score", "sent", "table")

    def __init__(self, table: NodeTable, entries: list[_Entry], replica: Replica, want_filter: bool,
                 want_score: bool) -> None:
        self.table = table
        self.entries = entries
        self.replica = replica
        self.filter = want_filter
        self.score = want_score
        self.sent = time.perf_counter()


class _Stream:
    """A Lookahead stream to one replica, with the tasks writing its requests and reading its replies
    (a scheduling cycle hands a request over and goes on: it never waits for the send)."""

    __slots__ = ("broken", "call", "outbox", "reader", "writer")

    def __init__(self, call: Any) -> None:
        self.call = call
        self.broken = False
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.reader: asyncio.Task[None] | None = None
        self.writer: asyncio.Task[None] | None = None


class Lookahead:
    """The lookahead of one remote plugin adapter (see the module docstring)."""

    def __init__(self, adapter: LookaheadOwner) -> None:
        self.adapter = adapter
        self.entries: dict[str, _Entry] = {}  # pod uid -> its answer, in the order asked
        self.requests: dict[int, _Request] = {}  # seq -> request in flight
        self.streams: dict[Replica, _Stream] = {}
        self.seq = 0
        self.cycles = 0  # cycles seen (the clock of STALE_CYCLES)
        self.hits = 0  # cycles that used an answer
        self.misses = 0  # cycles of this plugin that found none usable (asked too late, stale, failed)
        self.asked = 0  # pods asked for
        self.bad_answers = 0  # answers that broke the contract (the cycle asked again)
        self.waited = 0  # cycles that reached the plugin before their answer arrived (and waited for it)
        self._recovering: asyncio.Task[None] | None = None

    # ---- asking ------------------------------------------------------------------------------------

    def wanted(self, table: NodeTable) -> bool:
        """Called once per cycle of the plugin's profile, with the cycle's node table: should the
        scheduler look at the queue?"""
        self.cycles += 1
        if len(self.requests) >= MAX_REQUESTS:
            oldest_request = next(iter(self.requests.values()))
            if time.perf_counter() - oldest_request.sent <= self.adapter.deadline("filter"):
                return False
            # No answer within the Filter deadline: the host is stalled (or the stream is): start over.
            stream = self.streams.get(oldest_request.replica)
            if stream is not None:
                self._broken(oldest_request.replica, stream, "no answer within the Filter deadline")
            else:
                _settle(self.requests.pop(next(iter(self.requests))).entries, retry=True)
            return len(self.requests) < MAX_REQUESTS
        if len(self.entries) < REFILL:
            return True
        oldest = next(iter(self.entries.values()))
        if oldest.table is table and self.cycles - oldest.asked_at <= STALE_CYCLES and not _retry(oldest):
            return False
        self._drop_unusable(table)
        return len(self.entries) < REFILL

    def _drop_unusable(self, table: NodeTable) -> None:
        """Forget answers no cycle will use (for another node set, or too old) and failed requests."""
        for uid in [u for u, e in self.entries.items()
                    if e.table is not table or _retry(e) or self.cycles - e.asked_at > STALE_CYCLES]:
            entry = self.entries.pop(uid)
            if not entry.future.done():
                entry.future.cancel()

    def ask(self, table: NodeTable, pods: Sequence[Pod], want_filter: bool, want_score: bool) -> None:
        """Ask for the answers of ``pods`` (the next ones in the queue) that are not asked for yet."""
        fresh: list[Pod] = []
        for pod in pods:
            entry = self.entries.get(pod.uid)
            if entry is not None and entry.pod is pod and entry.table is table and not _retry(entry):
                continue
            fresh.append(pod)
            if len(fresh) >= MAX_PODS:
                break
        if not fresh:
            return
        adapter = self.adapter
        ordered = [r for r in adapter.endpoint.usable() if r.declares(adapter.name, 0)]
        if not ordered:
            return
        replica = ordered[self.seq % adapter.endpoint.spread(ordered)]
        if replica.suspect and (self._recovering is None or self._recovering.done()):
            # Handshake and configure it again (a restarted host): ask again once it is back.
            self._recovering = asyncio.get_running_loop().create_task(adapter.recover(replica))
        if replica.suspect or not replica.serving:
            return
        stream = self.streams.get(replica)
        if stream is None or stream.broken:
            stream = self.streams[replica] = _Stream(replica.stub.Lookahead())
            stream.reader = asyncio.get_running_loop().create_task(self._read(replica, stream))
            stream.writer = asyncio.get_running_loop().create_task(self._write(replica, stream))
        if adapter.needs_snapshot and adapter.publisher is not None:
            adapter.publisher.publish_up_to(table.generation)
        loop = asyncio.get_running_loop()
        seq = self.seq
        self.seq += 1
        request = pb.plugin.LookaheadRequest(
            seq=seq, plugin=adapter.name, profile=adapter.profile, node_generation=table.generation,
            filter=want_filter, score=want_score,
        )
        entries: list[_Entry] = []
        for pod in fresh:
            request.pods.append(pod_to_proto(pod))
            old = self.entries.pop(pod.uid, None)
            if old is not None and not old.future.done():
                old.future.cancel()
            entry = self.entries[pod.uid] = _Entry(pod, table, loop.create_future(), self.cycles)
            entries.append(entry)
        self.requests[seq] = _Request(table, entries, replica, want_filter, want_score)
        self.asked += len(entries)
        stat = adapter.stat("Lookahead")
        stat.bytes_sent += request.ByteSize()
        stat.batches += len(entries)
        stream.outbox.put_nowait(request)

    async def _write(self, replica: Replica, stream: _Stream) -> None:
        while not stream.broken:
            request = await stream.outbox.get()
            try:
                await stream.call.write(request)
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                self._broken(replica, stream, f"cannot send: {exc}")

    # ---- answers -----------------------------------------------------------------------------------

    async def _read(self, replica: Replica, stream: _Stream) -> None:
        why = "the plugin host closed its Lookahead stream"
        try:
            while True:
                reply = await stream.call.read()
                if reply is grpc.aio.EOF:
                    break
                self._answer(reply)
        except grpc.RpcError as exc:
            why = f"{exc.code().name}: {exc.details()}"
        except asyncio.CancelledError:
            why = "closed"
            raise
        finally:
            self._broken(replica, stream, why)

    def _answer(self, reply: Any) -> None:
        request = self.requests.pop(reply.seq, None)
        if request is None:
            return  # a request already given up (its stream broke and was replaced)
        stat = self.adapter.stat("Lookahead")
        stat.bytes_received += reply.ByteSize()
        stat.record(time.perf_counter() - request.sent, error=reply.HasField("error"))
        if reply.HasField("error") and reply.error.code != pb.types.CODE_SUCCESS:
            # E.g. a restarted host that lost its configuration: handshake and configure it again.
            log.debug("lookahead of plugin %r failed: %s", self.adapter.name, status_from_proto(reply.error).message())
            request.replica.suspect = True
            _settle(request.entries, retry=True)
            return
        table = request.table
        n = len(table.nodes)
        try:
            if len(reply.verdicts) != len(request.entries):
                raise LookaheadAnswerError(f"answered {len(reply.verdicts)} of {len(request.entries)} pods")
            rows = _rows_for(table, reply.node_ids)
        except LookaheadAnswerError as exc:
            self._bad(exc)
            _settle(request.entries)
            return
        for entry, msg in zip(request.entries, reply.verdicts, strict=True):
            if entry.future.done():
                continue
            if msg.HasField("error") and msg.error.code != pb.types.CODE_SUCCESS:
                entry.future.set_result(None)
                continue
            try:
                if msg.uid != entry.pod.uid:
                    raise LookaheadAnswerError(f"answered pod uid {msg.uid!r} where {entry.pod.uid!r} was asked")
                entry.future.set_result(verdict_of(msg, n, rows, request.filter, request.score))
            except LookaheadAnswerError as exc:
                self._bad(exc)
                entry.future.set_result(None)

    def _bad(self, exc: LookaheadAnswerError) -> None:
        self.bad_answers += 1
        if self.bad_answers == 1 or self.bad_answers % 1000 == 0:
            log.warning("plugin %r broke the lookahead contract (%s; %d so far): its cycles call Filter/Score "
                        "instead", self.adapter.name, exc, self.bad_answers)

    def _broken(self, replica: Replica, stream: _Stream, why: str) -> None:
        """The stream to ``replica`` ended: its unanswered requests get no answer (the cycles ask)."""
        if stream.broken:
            return
        stream.broken = True
        stream.call.cancel()
        for task in (stream.writer, stream.reader):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        if self.streams.get(replica) is stream:
            del self.streams[replica]
        for seq in [s for s, r in self.requests.items() if r.replica is replica]:
            _settle(self.requests.pop(seq).entries, retry=True)
        if why != "closed":
            log.debug("lookahead stream of plugin %r to %s ended: %s", self.adapter.name, replica.address, why)

    # ---- taking ------------------------------------------------------------------------------------

    def take(self, pod: Pod, table: NodeTable) -> Verdict | asyncio.Future[Verdict | None] | None:
        """The answer for ``pod`` on ``table`` if one was asked for: the answer itself once received,
        the future that will hold it while it is on its way, None when there is none to use (see
        :meth:`counted`). Each answer is taken once."""
        entry = self.entries.pop(pod.uid, None)
        if entry is None or entry.pod is not pod or entry.table is not table:
            if entry is not None and not entry.future.done():
                entry.future.cancel()  # for another pod object or node set: no cycle will use it
            self.misses += 1
            return None
        future = entry.future
        if not future.done():
            self.waited += 1
            return future
        return self.counted(None if future.cancelled() else future.result())

    async def verdict(self, state: CycleState, pod: Pod, batch: NodeBatch) -> Verdict | None:
        """The answer for the cycle's pod, when there is one to use on ``batch``'s snapshot (taken
        once per cycle and kept in its CycleState; never under a transformer's view or a what-if)."""
        view = state.get(VIEW_STATE_KEY)
        if isinstance(view, NodeView) and view:
            return None
        key = _STATE_PREFIX + self.adapter.name
        taken = state.get(key, _NOT_TAKEN)
        if taken is _NOT_TAKEN:
            got = self.take(pod, batch.snapshot.table)
            if isinstance(got, asyncio.Future):  # asked for, on its way
                try:
                    async with asyncio.timeout(self.adapter.deadline("filter")):
                        got = self.counted(await asyncio.shield(got))
                except TimeoutError:
                    got = self.counted(None)  # slow or stalled: the cycle's own call decides
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise  # this cycle is being cancelled
                    got = self.counted(None)  # the answer was dropped (stale, or the plugin closing)
            state.write(key, got)
            taken = got
        table = state.snapshot.table if state.snapshot is not None else None
        if taken is None or batch.snapshot.table is not table:
            return None
        return taken  # type: ignore[no-any-return]

    def counted(self, verdict: Verdict | None) -> Verdict | None:
        """``verdict``, counted as a hit (or a miss when None)."""
        if verdict is None:
            self.misses += 1
        else:
            self.hits += 1
        return verdict

    async def close(self) -> None:
        if self._recovering is not None:
            self._recovering.cancel()
        for stream in list(self.streams.values()):
            stream.call.cancel()
            for task in (stream.reader, stream.writer):
                if task is not None:
                    task.cancel()
        for entry in self.entries.values():
            if not entry.future.done():
                entry.future.cancel()
        self.entries.clear()
        self.requests.clear()
        self.streams.clear()


def _retry(entry: _Entry) -> bool:
    """No answer came because the request failed (the stream broke, the host was not ready): ask
    again. (A pod the plugin failed on, or an answer outside the contract, is not asked again: its
    cycle calls Filter/Score, which decide.)"""
    return entry.retry and entry.future.done()


def _settle(entries: list[_Entry], *, retry: bool = False) -> None:
    """No answer for ``entries``."""
    for entry in entries:
        if not entry.future.done():
            entry.retry = retry
            entry.future.set_result(None)
