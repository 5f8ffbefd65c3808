"""What the scheduler tells the cluster, written in the background: ``events.k8s.io/v1`` Events and pod
status patches (the ``PodScheduled`` condition, ``status.nominatedNodeName``).

Neither is on a pod's path to its node, so neither is awaited by a scheduling or binding cycle: they
are handed to a :class:`Writer`, whose few workers send them (bounded concurrency, the client's rate
limit applies). Field values are kube-scheduler's, so ``kubectl describe pod`` reads the same:

- an Event is named ``<pod>.<unix nanoseconds in hex>``, with ``reportingController`` the profile's
  ``schedulerName`` and ``reportingInstance`` ``<schedulerName>-<hostname>`` (client-go's events
  broadcaster); its note is cut to 1024 bytes with `` ...`` (schedule_one.go's truncateMessage);
- the same event again (same pod, reason, action, note, reporter) within 6 minutes becomes a series:
  its count and last time are patched onto the first one, at most every ``series_seconds``, instead of
  a new Event per attempt; a series whose Event is gone (404) is created again with its count, as
  client-go's recordEvent does;
- an occurrence is one Event, however often its create is sent: the name is fixed when the event is
  recorded, so a second copy of a create that landed (the client sends a create again after a ``5xx``
  with ``Retry-After``, the writer after a lost connection) is refused ``409 AlreadyExists`` and taken
  as done. client-go sends the same named Event again on the same failures and drops that refusal
  silently; not sending again at all would lose the Events whose first copy did not land;
- a status patch is sent only when it changes something (podutil.UpdatePodCondition: the condition's
  status, reason or message; ``lastTransitionTime`` moves only when its status does). Several changes
  to one pod before its patch is sent make one patch (two when it nominates a node: see next);
- a node is written to ``nominatedNodeName`` only while the pod is unbound: a JSON patch whose first
  operation tests that ``spec.nodeName`` is unset, refused (422) once the pod is bound and then dropped
  without a word. The binding cycle's expectation (kube-scheduler's NominatedNodeNameForExpectation) is
  queued here while the binding is sent directly, so it may arrive after the binding, which cleared
  the field (ClearingNominatedNodeNameAfterBinding). An API server with that gate (v1.35) refuses a
  node for a bound pod anyway ("may not be set on pods that are already bound to a node"), which would
  be logged as a refusal; one without it would take the node and leave the bound pod nominated.
  kube-scheduler's API dispatcher drops such a patch too: a pod's binding call overwrites its pending
  status patch (``PodBinding`` outranks ``PodStatusPatch``).

Writes that fail are retried a few times with backoff when the server could not be reached (every
job given to the :class:`Writer` is one a second copy cannot apply twice: a named create, a patch that
sets values); a pod that is gone (404) is dropped; any other refusal is logged in one line naming the
verb and resource and counted in ``Writer.failed``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pluginhost.model import Pod
from pluginhost.workload import PodGroup

from .client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiClient, ApiError, ApiUnreachable

__all__ = ["EventRecorder", "StatusWriter", "Writer", "micro_time", "truncate_note"]

log = logging.getLogger("outrigger.kube")

JSON_PATCH = "application/json-patch+json"

NOTE_LIMIT = 1024  # validation.NoteLengthLimit
SERIES_WINDOW = 360.0  # seconds an event stays isomorphic (client-go's finishTime)
SERIES_KEPT = 10_000
RETRIES = 5


def truncate_note(message: str) -> str:
    """kube-scheduler's truncateMessage: at most 1024 bytes, ending with `` ...`` when cut."""
    if len(message.encode()) <= NOTE_LIMIT:
        return message
    suffix = " ..."
    cut = message.encode()[: NOTE_LIMIT - len(suffix)].decode("utf-8", "ignore")
    return cut + suffix


def micro_time(ts: float) -> str:
    """A MicroTime: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Job = Callable[[], Awaitable[None]]


class Writer:
    """A queue of API writes and ``workers`` tasks sending them. A job is sent again when the server
    could not be reached, so each must be harmless twice (see the module's docstring)."""

    def __init__(self, workers: int = 8) -> None:
        self._jobs: collections.deque[Job] = collections.deque()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0
        self._logged: set[str] = set()
        #: Writes given up: refused (other than 404) or never answered after every attempt.
        self.failed = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._work()) for _ in range(self._workers)]

    def submit(self, job: Job) -> None:
        self._jobs.append(job)
        self._idle.clear()
        self._ready.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until every submitted write was sent (or dropped); False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (within ``timeout``), then stop the workers."""
        await self.flush(timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self) -> None:
        for _ in itertools.count():  # until stopped (cancelled)
            while not self._jobs:
                self._ready.clear()
                if not self._busy:
                    self._idle.set()
                await self._ready.wait()
            job = self._jobs.popleft()
            self._busy += 1
            try:
                await self._run(job)
            finally:
                self._busy -= 1
                if not self._jobs and not self._busy:
                    self._idle.set()

    async def _run(self, job: Job) -> None:
        delay = 0.5
        for attempt in range(RETRIES):
            try:
                await job()
                return
            except ApiUnreachable as exc:
                if attempt == RETRIES - 1:
                    self.failed += 1
                    log.warning("%s; giving up after %d attempts", exc, RETRIES)
                    return
                await asyncio.sleep(delay)
                delay *= 2
            except ApiError as exc:
                if exc.code == 404:
                    return  # the object is gone: nothing to tell it any more
                self.failed += 1
                line = f"{exc.verb} {exc.resource}: {exc.code} {exc.reason}"
                if line not in self._logged:  # one line per kind of refusal, not one per pod
                    self._logged.add(line)
                    log.warning("%s (further refusals like this one are not logged)", exc)
                return
            except Exception:
                self.failed += 1
                log.exception("an API write failed")
                return


@dataclass(slots=True)
class _Series:
    name: str
    namespace: str
    count: int
    last: float
    dirty: bool = False
    #: The Event as first created (sent again, with the series, if the Event is gone).
    body: dict[str, Any] | None = None


class EventRecorder:
    """``events.k8s.io/v1`` Events about pods, as kube-scheduler's recorder writes them."""

    def __init__(self, client: ApiClient, writer: Writer, *, hostname: str | None = None,
                 series_seconds: float = 30.0) -> None:
        self.client = client
        self.writer = writer
        self.hostname = hostname or socket.gethostname()
        self.series_seconds = series_seconds
        self._series: dict[tuple[str, ...], _Series] = {}
        #: How many series are held before old ones are looked for on each event.
        self.keep = SERIES_KEPT
        self._flusher: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._flusher = asyncio.get_running_loop().create_task(self._flush_series_loop())

    async def stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        self._flush_series()

    def record(self, pod: Pod, *, type_: str, reason: str, action: str, note: str, controller: str,
               related: Pod | PodGroup | None = None) -> None:
        """An event about ``pod`` reported by ``controller`` (the profile's schedulerName)."""
        note = truncate_note(note)
        key = (pod.uid, type_, reason, action, note, controller, related.uid if related else "")
        now = time.time()
        series = self._series.get(key)
        if series is not None and now - series.last < SERIES_WINDOW:
            series.count += 1
            series.last = now
            series.dirty = True
            self._series[key] = self._series.pop(key)  # kept in the order last seen (see _expire)
            return
        name = f"{pod.name}.{time.time_ns():x}"
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "eventTime": micro_time(now),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.hostname}",
            "action": action,
            "reason": reason,
            "type": type_,
            "note": note,
            "regarding": _reference(pod),
        }
        if related is not None:
            body["related"] = _reference(related)
        self._series.pop(key, None)
        self._series[key] = _Series(name, pod.namespace, 1, now, body=body)
        if len(self._series) > self.keep:
            self._expire(now)

        async def create() -> None:
            await self._create(body)

        self.writer.submit(create)

    async def _create(self, body: dict[str, Any]) -> bool:
        """Create one Event; False when it was there already. Its name was fixed when it was recorded:
        AlreadyExists means a copy sent before (whose answer was a 5xx or a lost connection) landed,
        and the occurrence is recorded."""
        path = f"/apis/events.k8s.io/v1/namespaces/{body['metadata']['namespace']}/events"
        try:
            await self.client.request("POST", path, verb="create", resource="events", body=body)
        except ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":
                raise
            log.debug("event %s: created by an earlier send", body["metadata"]["name"])
            return False
        return True

    def _expire(self, now: float) -> None:
        """Forget the series not seen for a window. They are kept in the order they were last seen, so
        this stops at the first one still current: it costs what it removes, not every series (it runs
        on each event once more than ``keep`` are held, as in a burst of scheduled pods). A series whose
        count was not sent yet waits for the next flush."""
        gone = []
        for key, series in self._series.items():
            if now - series.last < SERIES_WINDOW:
                break
            if not series.dirty:
                gone.append(key)
        for key in gone:
            del self._series[key]

    async def _flush_series_loop(self) -> None:
        for _ in itertools.count():  # until stopped
            await asyncio.sleep(self.series_seconds)
            self._flush_series()
            self._expire(time.time())

    def _flush_series(self) -> None:
        for series in self._series.values():
            if not series.dirty:
                continue
            series.dirty = False
            patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last)}}

            async def send(series: _Series = series, patch: dict[str, Any] = patch) -> None:
                await self._patch_series(series, patch)

            self.writer.submit(send)

    async def _patch_series(self, series: _Series, patch: dict[str, Any]) -> None:
        """The series' count and last time onto its Event: a merge patch of values, the same applied
        twice. An Event that is gone (deleted, expired, or its create lost) is created again with the
        series, under its name (client-go's recordEvent)."""
        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}"
        for attempt in range(2):
            try:
                await self.client.request("PATCH", path, verb="patch", resource="events", body=patch,
                                          content_type=MERGE_PATCH, idempotent=True)
                return
            except ApiError as exc:
                if exc.code != 404 or series.body is None or attempt:
                    raise
            if await self._create({**series.body, **patch}):
                return
            # Created meanwhile (its first create landed late): patch it once more.


def _reference(pod: Pod | PodGroup) -> dict[str, Any]:
    if isinstance(pod, PodGroup):
        ref = {"kind": "PodGroup", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid,
               "apiVersion": pod.api_version}
        if pod.resource_version:
            ref["resourceVersion"] = pod.resource_version
        return ref
    ref = {"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "apiVersion": "v1"}
    rv = (pod.raw.get("metadata") or {}).get("resourceVersion") if pod.raw else None
    if rv:
        ref["resourceVersion"] = rv
    return ref


# ---- pod status -----------------------------------------------------------------------------------

PodStatusLookup = Callable[[str, str], "dict[str, Any] | None"]


@dataclass(slots=True)
class _Wanted:
    uid: str
    name: str
    namespace: str
    generation: int | None
    #: (reason, message) of a PodScheduled=False condition; None leaves the condition alone.
    condition: tuple[str, str] | None = None
    #: The nominated node ("" clears it); None leaves it alone.
    nominated: str | None = None
    queued: bool = False


class StatusWriter:
    """Pod status patches: ``PodScheduled`` False with a reason and message, ``nominatedNodeName``.

    ``current(key, uid)`` gives the pod's status as last seen by the informer, to patch only what
    differs. One patch per pod at a time; changes arriving meanwhile are merged into the next one. A
    node to nominate goes in a patch of its own that applies only to an unbound pod (see the module's
    docstring); a pod found bound then gets nothing else either: its binding said where it is."""

    def __init__(self, client: ApiClient, writer: Writer, current: PodStatusLookup) -> None:
        self.client = client
        self.writer = writer
        self.current = current
        self._wanted: dict[str, _Wanted] = {}
        #: What was last sent per pod uid, so a write the informer has not shown yet is not sent twice.
        self._sent: dict[str, tuple[tuple[str, str] | None, str | None]] = {}

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        self._want(pod).condition = (reason, message)
        self._submit(pod.key)

    def nominate(self, pod: Pod, node_name: str) -> None:
        self._want(pod).nominated = node_name
        self._submit(pod.key)

    def forget(self, uid: str) -> None:
        self._sent.pop(uid, None)

    def _want(self, pod: Pod) -> _Wanted:
        wanted = self._wanted.get(pod.key)
        if wanted is None or wanted.uid != pod.uid:
            meta = pod.raw.get("metadata") if pod.raw else None
            generation = meta.get("generation") if isinstance(meta, dict) else None
            wanted = self._wanted[pod.key] = _Wanted(pod.uid, pod.name, pod.namespace,
                                                     generation if isinstance(generation, int) else None)
        return wanted

    def _submit(self, key: str) -> None:
        wanted = self._wanted[key]
        if wanted.queued:
            return
        wanted.queued = True

        async def send() -> None:
            await self._send(key)

        self.writer.submit(send)

    async def _send(self, key: str) -> None:
        wanted = self._wanted.pop(key, None)
        if wanted is None:
            return
        status = self.current(key, wanted.uid)
        if status is None:
            return  # the pod is gone (or was replaced by another of the same name)
        patch: dict[str, Any] = {}
        sent_condition, sent_nominated = self._sent.get(wanted.uid, (None, None))
        if wanted.condition is not None and wanted.condition != sent_condition:
            cond = _changed_condition(status, wanted.condition, wanted.generation)
            if cond is not None:
                patch["conditions"] = [cond]
        nominated, on_pod = wanted.nominated, status.get("nominatedNodeName") or ""
        nominate = ""  # a node: sent first, to the pod only while it is unbound
        if nominated is not None and nominated != sent_nominated and on_pod != nominated:
            if nominated:
                nominate = nominated
            else:
                patch["nominatedNodeName"] = None
        if not patch and not nominate:
            return
        self._sent[wanted.uid] = (
            wanted.condition if wanted.condition is not None else sent_condition,
            wanted.nominated if wanted.nominated is not None else sent_nominated,
        )
        path = f"/api/v1/namespaces/{wanted.namespace}/pods/{wanted.name}/status"
        try:
            if nominate and not await self._nominate_unbound(path, nominate):
                log.debug("pod %s/%s was bound before its nomination to %s was sent: not sent",
                          wanted.namespace, wanted.name, nominate)
                return
            if patch:  # values (lastTransitionTime included): the same applied twice
                await self.client.request("PATCH", path, verb="patch", resource="pods/status",
                                          body={"status": patch}, content_type=STRATEGIC_MERGE_PATCH,
                                          idempotent=True)
        except ApiUnreachable:
            # The Writer runs this job again when the server could not be reached: what it was to
            # send must be there for that attempt, which would otherwise find nothing to send.
            self._sent.pop(wanted.uid, None)
            self._restore(key, wanted)
            raise
        except Exception:
            self._sent.pop(wanted.uid, None)
            raise

    def _restore(self, key: str, wanted: _Wanted) -> None:
        """Put back a status write that got no answer, under what was asked for the pod since."""
        newer = self._wanted.get(key)
        if newer is None:
            wanted.queued = False  # a change asked meanwhile queues a job of its own
            self._wanted[key] = wanted
        elif newer.uid == wanted.uid:
            newer.condition = newer.condition if newer.condition is not None else wanted.condition
            newer.nominated = newer.nominated if newer.nominated is not None else wanted.nominated

    async def _nominate_unbound(self, path: str, node_name: str) -> bool:
        """Set ``nominatedNodeName`` to ``node_name`` if the pod is unbound: False when the API server
        found it bound. The JSON patch's test of ``spec.nodeName`` then fails with a 422 whose message
        says only "the server rejected our request due to an error in our request"; the patch has
        nothing else the server could find invalid in a node's name it listed."""
        ops = [{"op": "test", "path": "/spec/nodeName", "value": None},
               {"op": "add", "path": "/status/nominatedNodeName", "value": node_name}]
        try:
            # A test and an add of one field's value: the same applied twice.
            await self.client.request("PATCH", path, verb="patch", resource="pods/status", body=ops,
                                      content_type=JSON_PATCH, idempotent=True)
        except ApiError as exc:
            if exc.code == 422:
                return False
            raise
        return True


def _changed_condition(
    status: dict[str, Any], wanted: tuple[str, str], generation: int | None
) -> dict[str, Any] | None:
    """The PodScheduled=False condition to write, or None when the pod already has it."""
    reason, message = wanted
    old = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
    if old is not None and old.get("status") == "False" and old.get("reason") == reason and (
        old.get("message") == message
    ):
        return None
    transition = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" else None
    cond: dict[str, Any] = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": transition or rfc3339(time.time()),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond
