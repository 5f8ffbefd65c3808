"""Workload-aware scheduling on a live cluster (the GenericWorkload gate): the PodGroup informer that fills
the scheduler's PodGroup store (``cache.podgroups``), and the PodGroup cycle's condition writes through
the API server.

::

    watch = PodGroupWatch(source)                       # KubeSource builds one
    tasks = watch.start()                               # nothing with GenericWorkload off
    source.scheduler.cache.podgroups.writer = watch.writer

What comes in (kube-scheduler's PodGroup informer, started when GenericWorkload is on):

- The API version is the one the API server serves PodGroups in: ``scheduling.k8s.io/v1beta1`` (1.37),
  else ``v1alpha2`` (1.36), asked once of its discovery documents (:func:`served_version`). One that
  serves neither (the gate or ``--runtime-config`` missing there) is logged once, with what to turn on,
  and nothing is watched: pods that name a PodGroup then wait, gated, for a group that never comes.
- Every PodGroup of the cluster is decoded strictly as it arrives (:meth:`PodGroupStore.decode`) and put
  into the store, whose listener makes each change the cluster event ``PodGroup`` Add, Update or Delete
  (GangScheduling's events: a group appearing, its ``minCount`` lowered). An object that does not
  decode is logged with what is wrong and left out, as if it were not there; one that stops decoding on
  an update is taken out. The informer goes on either way.
- Workloads are not watched: kube-scheduler does not read them either.

What goes out (``updatePodGroupCondition``, ``util.PatchPodGroupStatus``):

- the ``PodGroupInitiallyScheduled`` condition the group cycle decides, as a strategic-merge PATCH of
  the ``status`` subresource carrying only that condition (the merge key is ``type``, so the group's
  other conditions stay, in their order, a new one last, as client-go's two-way patch keeps them) and
  the group's uid (a group deleted and created again under the same name
  refuses it: the condition was about the old one). It is sent in the background, as the pods'
  ``PodScheduled`` conditions are: a later condition for a group whose previous one is not sent yet
  replaces it. A write that cannot reach the server is tried again a few times; a group that is gone is
  not an error; the write is fenced by the leader lease as bindings are.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from framework import features
from framework.podgroups.store import PodGroupDecodeError, PodGroupStore
from pluginhost.workload import SCHEDULING_API_VERSIONS, PodGroup, PodGroupCondition

from .client import REQUEST_TIMEOUT, STRATEGIC_MERGE_PATCH, ApiClient, ApiError, ApiUnreachable
from .informer import MAX_BACKOFF, MIN_BACKOFF, Informer

if TYPE_CHECKING:
    from ..scheduler import Scheduler
    from .events import Writer

__all__ = ["GROUP", "RESOURCE", "ApiPodGroupStatusWriter", "PodGroupWatch", "pod_group_converter", "served_version"]

log = logging.getLogger("outrigger.kube")

GROUP = "scheduling.k8s.io"
#: The resource as RBAC rules and the informer's messages name it.
RESOURCE = "podgroups.scheduling.k8s.io"
#: The versions understood, the one to prefer first: ``v1beta1``, ``v1alpha2``.
VERSIONS = tuple(v.split("/", 1)[1] for v in SCHEDULING_API_VERSIONS)
#: Sends of one condition when the server cannot be reached (or answers 5xx), and the first pause.
SENDS = 4
FIRST_PAUSE = 0.1


def _collection(version: str) -> str:
    return f"/apis/{GROUP}/{version}/podgroups"


async def served_version(client: ApiClient) -> str | None:
    """The version of :data:`VERSIONS` the API server serves PodGroups in (``v1beta1`` first), from its
    discovery documents; None when it serves none. Raises ApiError or ApiUnreachable when it cannot say."""
    for version in VERSIONS:
        try:
            doc = await client.request("GET", f"/apis/{GROUP}/{version}", verb="get", resource="apiresources")
        except ApiError as exc:
            if exc.code == 404:
                continue  # the version is not served
            raise
        resources = doc.get("resources") if isinstance(doc, dict) else None
        if any(isinstance(r, dict) and r.get("name") == "podgroups" for r in resources or ()):
            return version
    return None


def pod_group_converter(obj: dict[str, Any]) -> PodGroup | None:
    """The informer's converter: the decoded PodGroup, or None (logged) for one that does not decode."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    try:
        pg = PodGroupStore.decode("PodGroup", obj)
    except PodGroupDecodeError as exc:
        log.warning("%s; the scheduler leaves it out until it is fixed", exc)
        return None
    assert isinstance(pg, PodGroup)
    return pg


class Source(Protocol):
    """What the watch needs of its source (:class:`framework.kube.source.KubeSource`)."""

    client: ApiClient
    writer: Writer
    fence: Callable[[], float] | None

    @property
    def attached(self) -> bool: ...

    @property
    def scheduler(self) -> Scheduler: ...


class _PodGroups:
    """The informer's events into the scheduler's PodGroup store (whose listener tells the queue)."""

    def __init__(self, source: Source) -> None:
        self.s = source

    async def on_add(self, pg: PodGroup | None) -> None:
        if pg is not None and self.s.attached:
            self.s.scheduler.cache.podgroups.put(pg)

    async def on_update(self, old: PodGroup | None, new: PodGroup | None) -> None:
        if not self.s.attached:
            return
        if new is not None:
            self.s.scheduler.cache.podgroups.put(new)
        elif old is not None:  # no longer decodes: out, as if deleted
            self.s.scheduler.cache.podgroups.remove("PodGroup", old.namespace, old.name)

    async def on_delete(self, pg: PodGroup | None) -> None:
        if pg is not None and self.s.attached:
            self.s.scheduler.cache.podgroups.remove("PodGroup", pg.namespace, pg.name)


class PodGroupWatch:
    """The PodGroup informer of one source and its condition writer (see the module docstring)."""

    def __init__(self, source: Source) -> None:
        self.s = source
        #: The version watched ("" until the API server was asked, or when it serves none).
        self.version = ""
        self.informer: Informer[PodGroup | None] = Informer(
            source.client, _collection(VERSIONS[0]), RESOURCE, self._convert, _PodGroups(source))
        self.writer = ApiPodGroupStatusWriter(source, lambda: self.version or VERSIONS[0])
        self._task: asyncio.Task[None] | None = None

    def _convert(self, obj: dict[str, Any]) -> PodGroup | None:
        # A list's items carry no apiVersion and kind (a watch's objects do): those of the version watched.
        obj.setdefault("apiVersion", f"{GROUP}/{self.version or VERSIONS[0]}")
        obj.setdefault("kind", "PodGroup")
        return pod_group_converter(obj)

    def start(self) -> list[asyncio.Task[None]]:
        """Start watching when GenericWorkload is on (the tasks started; none when it is off)."""
        if self._task is not None or not features.enabled("GenericWorkload"):
            return []
        self._task = asyncio.get_running_loop().create_task(self.run())
        return [self._task]

    def running(self) -> list[Informer[PodGroup | None]]:
        """The informer, when it runs (a list, to splice into the source's)."""
        return [self.informer] if self._task is not None else []

    async def run(self) -> None:
        """Find the version served, then list and watch it until cancelled."""
        version = await self._discover()
        if version is None:
            log.warning("GenericWorkload is on but the API server serves no PodGroups (%s): give kube-apiserver "
                        "--feature-gates=GenericWorkload=true and --runtime-config=%s=true (1.37; %s on 1.36). "
                        "Pods that name a PodGroup wait until it is served and Outrigger restarted",
                        ", ".join(SCHEDULING_API_VERSIONS), *SCHEDULING_API_VERSIONS)
            self.informer.synced.set()  # nothing to list: pods need not wait for it
            return
        self.version = version
        self.informer.path = _collection(version)
        log.info("watching %s in %s/%s", RESOURCE, GROUP, version)
        await self.informer.run()

    async def _discover(self) -> str | None:
        delay, failing = MIN_BACKOFF, ""
        for _ in itertools.count():  # until answered or cancelled, as the informers retry
            try:
                return await served_version(self.s.client)
            except (ApiError, ApiUnreachable) as exc:
                if str(exc) != failing:
                    log.warning("%s; asking again with backoff", exc)
                    failing = str(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF)
        return None  # not reached

    def hand_over(self, scheduler: Scheduler) -> None:
        """Put what the informer holds into ``scheduler``'s store (a standby taking over)."""
        for pg in list(self.informer.store.values()):
            if pg is not None:
                scheduler.cache.podgroups.put(pg)


class ApiPodGroupStatusWriter:
    """The PodGroup cycle's condition writes through the API server (a
    :class:`framework.podgroups.store.PodGroupStatusWriter`; see the module docstring). ``version()``:
    the API version to write in when the group does not say (the one watched)."""

    def __init__(self, source: Source, version: Callable[[], str]) -> None:
        self.s = source
        self.version = version
        self._wanted: dict[str, tuple[PodGroup, PodGroupCondition]] = {}
        self._queued: set[str] = set()
        self._logged: set[str] = set()
        #: Conditions the API server took, and writes given up (refused, or never answered).
        self.written = 0
        self.failed = 0

    async def write_condition(self, pg: PodGroup, condition: PodGroupCondition) -> None:
        self._wanted[pg.key] = (pg, condition)  # replaces one not sent yet
        if pg.key not in self._queued:
            self._queued.add(pg.key)
            key = pg.key
            self.s.writer.submit(lambda: self._send(key))

    async def flush(self, timeout: float) -> bool:
        """Wait until every condition handed over was sent (or given up); False when ``timeout`` passed."""
        return await self.s.writer.flush(timeout)

    async def _send(self, key: str) -> None:
        try:
            for _ in range(16):  # a condition decided while the previous one was being sent goes next
                item = self._wanted.pop(key, None)
                if item is None:
                    return
                await self._patch(*item)
        finally:
            self._queued.discard(key)
        if key in self._wanted:  # still more: after the others queued
            self._queued.add(key)
            self.s.writer.submit(lambda: self._send(key))

    def _path(self, pg: PodGroup) -> str:
        version = pg.api_version.split("/", 1)[1] if pg.api_version in SCHEDULING_API_VERSIONS else self.version()
        return f"/apis/{GROUP}/{version}/namespaces/{pg.namespace}/podgroups/{pg.name}/status"

    async def _patch(self, pg: PodGroup, condition: PodGroupCondition) -> None:
        """One condition, sent until it is taken, refused, or :data:`SENDS` sends found no answer."""
        # As client-go's two-way patch from the group's conditions to the same with this one set: the
        # order kept (a new type last), the other conditions untouched.
        order = [c.type for c in pg.conditions]
        if condition.type not in order:
            order.append(condition.type)
        body: dict[str, Any] = {"status": {"$setElementOrder/conditions": [{"type": t} for t in order],
                                           "conditions": [condition.as_dict()]}}
        if pg.uid:
            body["metadata"] = {"uid": pg.uid}
        pause, why = FIRST_PAUSE, ""
        for attempt in range(SENDS):
            if attempt:
                await asyncio.sleep(pause)
                pause *= 5  # client-go's retry.DefaultBackoff, as kube-scheduler's patch retries
            timeout = REQUEST_TIMEOUT
            if self.s.fence is not None:
                window = self.s.fence()
                if window <= 0:
                    log.info("podgroup %s: condition not written: this replica no longer holds the leader lease",
                             pg.key)
                    return
                timeout = min(timeout, window)
            try:
                await self.s.client.request("PATCH", self._path(pg), verb="patch", resource="podgroups/status",
                                            body=body, content_type=STRATEGIC_MERGE_PATCH, idempotent=True,
                                            timeout=timeout)
                self.written += 1
                return
            except ApiError as exc:
                if self._settled(pg, exc):
                    return
                why = str(exc)
            except ApiUnreachable as exc:
                why = str(exc)
        self.failed += 1
        log.warning("podgroup %s: condition %s not written after %d sends: %s", pg.key, condition.type, SENDS, why)

    def _settled(self, pg: PodGroup, exc: ApiError) -> bool:
        """Whether a refusal ends the write (the group is gone or replaced, or the API refuses it for good);
        False for one worth sending again (5xx, a conflict)."""
        if exc.code == 404 or (exc.code == 422 and "metadata.uid" in exc.message):
            log.info("podgroup %s: condition not written, the group is gone or was replaced (%s)", pg.key, exc)
            return True
        if exc.code >= 500 or exc.code == 409:
            return False
        self.failed += 1
        line = f"{exc.verb} {exc.resource}: {exc.code} {exc.reason}"
        if line not in self._logged:  # one line per kind of refusal, not one per group
            self._logged.add(line)
            log.warning("%s (further refusals like this one are not logged)", exc)
        return True
