"""Informers: a local copy of one kind of API object, kept current by list + watch (client-go's reflector
and store in one small class).

::

    nodes = Informer(client, "/api/v1/nodes", "nodes", convert=node_from_api, handler=handler)
    task = asyncio.create_task(nodes.run())
    await nodes.synced.wait()          # the first list has been handed to the handler

- **List, then watch from the list's resourceVersion**, with bookmarks (so a quiet watch still moves
  its resourceVersion forward and a reconnect does not replay history).
- **Relist on 410 Gone** (the resourceVersion fell out of the server's history): the new list replaces
  the store; objects missing from it are handed to ``on_delete``, changed ones to ``on_update``.
- **Reconnect with backoff** on any other failure (refused, forbidden, connection lost): 0.8 s doubling
  to 30 s, with jitter, reset once a watch works again. A failure is logged in one line naming the verb
  and the resource (``list pods: 403 Forbidden: ...``), once per streak, and the recovery too.
- **Each object is converted once** (``convert``, e.g. to a :class:`pluginhost.model.Pod`), when its
  event arrives; handlers get converted objects, in the order the server sent them. A change to an
  object the store has goes to ``reconvert(old, obj)`` when given (it may reuse what did not change).
- **Handlers never block the informer for long**: they update caches and queues and return; an
  exception in a handler is logged and the informer goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from .client import ApiClient, ApiError, ApiUnreachable, Gone

__all__ = ["Handler", "Informer", "object_key"]

log = logging.getLogger("outrigger.kube")

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

MIN_BACKOFF = 0.8
MAX_BACKOFF = 30.0
# A watch is ended by the server after a random 5 to 10 minutes (client-go's minWatchTimeout), then resumed.
WATCH_SECONDS = (300, 600)


class Handler(Protocol[T_contra]):
    """What an informer tells: objects added, changed and deleted."""

    async def on_add(self, obj: T_contra) -> None: ...

    async def on_update(self, old: T_contra, new: T_contra) -> None: ...

    async def on_delete(self, obj: T_contra) -> None: ...


def object_key(obj: dict[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer(Generic[T]):
    """One resource (``path``, e.g. ``/api/v1/pods``) listed and watched into ``store``."""

    def __init__(
        self,
        client: ApiClient,
        path: str,
        resource: str,
        convert: Callable[[dict[str, Any]], T],
        handler: Handler[T],
        *,
        reconvert: Callable[[T, dict[str, Any]], T] | None = None,
        order: Callable[[T], int] | None = None,
        min_backoff: float = MIN_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        watch_seconds: tuple[int, int] = WATCH_SECONDS,
    ) -> None:
        self.client = client
        self.path = path
        self.resource = resource
        self.convert = convert
        self.reconvert = reconvert
        self.handler = handler
        #: Sorts the objects of a list before they are handed over (e.g. bound pods before pending ones).
        self.order = order
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.watch_seconds = watch_seconds
        self.store: dict[str, T] = {}
        self._versions: dict[str, str] = {}
        self.resource_version = ""
        #: Set once the first list has been handed to the handler.
        self.synced = asyncio.Event()
        #: How many lists and watches were started (tests read them).
        self.lists = 0
        self.watches = 0
        self._failing = ""

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = self.min_backoff
        for _ in itertools.count():
            try:
                if not self.resource_version:
                    await self._relist()
                    self._recovered()
                    backoff = self.min_backoff
                delivered = await self._watch()
                if delivered:
                    self._recovered()
                    backoff = self.min_backoff
            except Gone as exc:
                log.info("%s: resourceVersion %s expired; listing %s again", exc.resource, self.resource_version,
                         self.resource)
                self.resource_version = ""
            except (ApiError, ApiUnreachable) as exc:
                delay = backoff * random.uniform(1.0, 1.25)
                if str(exc) != self._failing:
                    log.warning("%s; retrying with backoff (%.1fs, doubling to %.0fs)", exc, delay, self.max_backoff)
                    self._failing = str(exc)
                backoff = min(backoff * 2, self.max_backoff)
                await asyncio.sleep(delay)

    def _recovered(self) -> None:
        if self._failing:
            log.warning("%s: the API server answers again; %s are in sync", self.resource, self.resource)
            self._failing = ""

    async def _relist(self) -> None:
        self.lists += 1
        items, rv = await self.client.list(self.path, resource=self.resource)
        fresh: list[tuple[str, str, T]] = []
        for obj in items:
            meta = obj.get("metadata") or {}
            fresh.append((object_key(obj), str(meta.get("resourceVersion") or ""), self.convert(obj)))
        order = self.order
        if order is not None:
            fresh.sort(key=lambda entry: order(entry[2]))
        keys = {key for key, _, _ in fresh}
        for key in [k for k in self.store if k not in keys]:
            gone = self.store.pop(key)
            self._versions.pop(key, None)
            await self._call(self.handler.on_delete, gone)
        for key, version, item in fresh:
            old = self.store.get(key)
            self.store[key] = item
            old_version = self._versions.get(key)
            self._versions[key] = version
            if old is None:
                await self._call(self.handler.on_add, item)
            elif old_version != version:
                await self._call(self.handler.on_update, old, item)
        self.resource_version = rv
        self.synced.set()

    async def _watch(self) -> bool:
        """Follow the watch until the server ends it; True if any event came."""
        self.watches += 1
        delivered = False
        seconds = random.randint(*self.watch_seconds)
        events = self.client.watch(self.path, self.resource_version, resource=self.resource, timeout_seconds=seconds)
        async with contextlib.aclosing(events):
            async for kind, obj in events:
                delivered = True
                meta = obj.get("metadata") or {}
                version = str(meta.get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    self.resource_version = version or self.resource_version
                    continue
                key = object_key(obj)
                if kind == "DELETED":
                    old = self.store.pop(key, None)
                    self._versions.pop(key, None)
                    if old is not None:
                        await self._call(self.handler.on_delete, self.convert(obj))
                else:
                    old = self.store.get(key)
                    new = self.convert(obj) if old is None or self.reconvert is None else self.reconvert(old, obj)
                    self.store[key] = new
                    self._versions[key] = version
                    if old is None:
                        await self._call(self.handler.on_add, new)
                    else:
                        await self._call(self.handler.on_update, old, new)
                if version:
                    self.resource_version = version
        return delivered

    async def _call(self, fn: Callable[..., Any], *args: T) -> None:
        try:
            await fn(*args)
        except Exception:
            log.exception("handling a %s event failed", self.resource)
