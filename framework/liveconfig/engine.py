"""The live configuration of a running framework service: :class:`LiveConfig` watches the
``--config`` and ``--plugins`` files and applies a change without a restart.

::

    live = LiveConfig(server, WatchedFiles("scheduler.yaml", "plugins.yaml"), "127.0.0.1:50051")
    live.start()                 # polls every second; or: await live.apply() to try the files now
    live.status()                # what /configz shows: the generation serving, its files' hashes, ...

A change goes through these steps; any failure refuses it (one log line naming the file and the
field or reason, ``outrigger_config_reloads_total{result="refused"}``, ``/configz``'s ``lastRefused``)
and the configuration serving keeps scheduling, untouched:

1. the start-up fields of the KubeSchedulerConfiguration are compared (:mod:`.changes`): one that
   differs "needs a restart";
2. the RemotePlugins document is decoded and every endpoint it names is handshaken anew (new
   channels: the generation serving keeps its own);
3. the KubeSchedulerConfiguration is decoded, validated and resolved against the in-tree plugins and
   those endpoints', exactly as at start-up; its queue sort must be the one serving;
4. every profile's Frameworks are built (plugin args checked) and the remote plugins are configured;
5. between two scheduling cycles the scheduler switches to the new Frameworks (generation N+1): a
   pod whose cycle started under N binds under N; the queue follows (``Scheduler.reconfigure``);
   the old generation's endpoints are closed once its last binding cycle is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pluginhost.decode import TextError, load_document
from pluginhost.errors import OutriggerError

from ..config import SchedulerConfig, load_config
from ..plugins import Registry
from ..profiles import build_registry_with_remote, default_scheduler_config, unavailable_plugins
from ..remote import EndpointConfig, RemotePlugins
from ..remote.config import parse_remote_plugins
from ..remote.errors import RemotePluginsError
from ..runtime import Framework
from .changes import queue_sort_problem, restart_problems, summary

__all__ = ["ConfigChangeRefused", "LiveCollector", "LiveConfig", "WatchedFiles", "watch_files"]

log = logging.getLogger("outrigger.config")


@dataclass(frozen=True)
class WatchedFiles:
    """The files a service was started from: ``--config`` (None: kube-scheduler's defaults) and
    ``--plugins`` (None: no remote plugins), polled every ``interval`` seconds."""

    config: str | None = None
    plugins: str | None = None
    interval: float = 1.0

    def paths(self) -> list[str]:
        return [p for p in (self.config, self.plugins) if p]


class ConfigChangeRefused(OutriggerError, ValueError):
    """A change that cannot be applied; the message names the file and the field or reason."""


@dataclass
class _Prepared:
    """A new configuration, ready to serve: nothing of the serving one changed yet."""

    config: SchedulerConfig
    registry: Registry
    remote: RemotePlugins | None
    endpoints: list[EndpointConfig]
    profiles: dict[str, Framework]
    document: dict[str, Any]
    text: str | None


def _signature(path: str) -> tuple[int, int, int, int] | None:
    """What changes when a file is written or replaced: a ConfigMap volume's ``..data`` symlink swap
    gives another inode (stat follows the links), an edit in place another mtime or size."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigChangeRefused(f"{path}: cannot read the file: {exc.strerror or exc}") from None


def _document(text: str | None) -> dict[str, Any]:
    """The top-level fields of a configuration as written ({} for the defaults, or text that does not
    decode: its own loading reports that)."""
    if text is None:
        return {}
    try:
        doc = load_document(text).value
    except TextError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigChangeRefused(f"{path}: the file is not UTF-8 text: {exc.reason}") from None


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class LiveConfig:
    """The watcher and reload engine of one running service (see the module docstring). ``server``
    is a :class:`framework.service.Server` (its ``scheduler``, ``services``, ``remote`` and
    ``observability``); ``framework_address`` is where plugin hosts reach the framework."""

    def __init__(self, server: Any, files: WatchedFiles, framework_address: str) -> None:
        self.server = server
        self.scheduler = server.scheduler
        self.files = files
        self.framework_address = framework_address
        self.generation = 1
        self.applied_at = time.time()
        self.applied = self.refused = self.unchanged = 0
        self.last_refused: dict[str, Any] | None = None
        #: The last applied change: from reading the files to serving (ms), and how long scheduling
        #: paused for the switch itself (ms; the cycle under way finishes first).
        self.last_apply_ms = 0.0
        self.last_pause_ms = 0.0
        self._signatures = {p: _signature(p) for p in files.paths()}
        self.hashes = {p: self._hash(p) for p in files.paths()}
        self._config_text = self._current_text(files.config)
        self._document = _document(self._config_text)
        remote = server.remote
        self._endpoints: list[EndpointConfig] = [ep.config for ep in remote.endpoints] if remote else []
        if remote is not None:
            remote.follow_manifests(self.scheduler, self._serving_config)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self.scheduler.live = self

    def _serving_config(self, registry: Registry) -> SchedulerConfig:
        """The configuration serving, resolved against ``registry`` again (a host's manifest changed):
        from the text it was read from, not the file, which may hold a change that was refused."""
        return self._load(self._config_text, registry)

    def _load(self, text: str | None, registry: Registry) -> SchedulerConfig:
        if self.files.config and text is not None:
            return load_config(text, registry.points(), self.files.config, unavailable=unavailable_plugins(registry))
        return default_scheduler_config(registry)

    @staticmethod
    def _hash(path: str) -> str:
        try:
            with open(path, "rb") as fh:
                return "sha256:" + hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            return ""

    @staticmethod
    def _current_text(path: str | None) -> str | None:
        if not path:
            return None
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

    # ---- the watcher ---------------------------------------------------------------------------

    def start(self) -> None:
        """Poll the files every ``interval`` seconds until :meth:`stop`."""
        if self._task is None and self.files.paths():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.files.interval)
            async with self._lock:
                try:
                    await self._check()
                except Exception:  # the watcher outlives any one bad poll
                    log.exception("checking the configuration files failed")

    async def _check(self) -> None:
        signatures = {p: _signature(p) for p in self.files.paths()}
        if signatures == self._signatures:
            return
        if any(s is None for s in signatures.values()):
            return  # a file is being replaced (or gone): judged once it is there
        await asyncio.sleep(0.05)  # a writer still at it changes the signature again: next poll
        if {p: _signature(p) for p in self.files.paths()} != signatures:
            return
        self._signatures = signatures
        if {p: self._hash(p) for p in self.files.paths()} != self.hashes:
            await self._apply()

    async def stop(self) -> None:
        """Stop watching (a change being applied is finished first). Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            async with self._lock:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self, timeout: float = 10.0) -> None:
        """After the scheduler stopped: close the endpoints of replaced generations."""
        if self._retiring:
            await asyncio.wait(list(self._retiring), timeout=timeout)

    # ---- applying ------------------------------------------------------------------------------

    async def apply(self) -> bool:
        """Apply the files as they are now, if they differ from the generation serving: True when a
        new generation serves (False: refused, or nothing changed)."""
        async with self._lock:
            self._signatures = {p: _signature(p) for p in self.files.paths()}
            return await self._apply()

    async def _apply(self) -> bool:
        started = time.perf_counter()
        try:
            data = {p: _read(p) for p in self.files.paths()}
        except ConfigChangeRefused as exc:
            self._refuse(str(exc), {})
            return False
        hashes = {p: "sha256:" + hashlib.sha256(d).hexdigest() for p, d in data.items()}
        changed = [p for p in self.files.paths() if hashes[p] != self.hashes.get(p)] or self.files.paths()
        try:
            prepared = await self._prepare(data)
        except ConfigChangeRefused as exc:
            self._refuse(str(exc), hashes, changed)
            return False
        except Exception as exc:  # whatever else fails, the serving configuration stays
            log.debug("preparing the configuration failed", exc_info=True)
            reason = " ".join(str(exc).split()) or type(exc).__name__
            if isinstance(exc, RemotePluginsError) and self.files.plugins:
                reason = f"{self.files.plugins}: {reason}"  # an endpoint of the document cannot be used
            self._refuse(reason, hashes, changed)
            return False
        what = summary(self.scheduler.config, prepared.config, self._endpoints, prepared.endpoints)
        if what == "no change in meaning":
            if prepared.remote is not None:
                await self._discard(prepared.remote, configured=True)  # the endpoints serving stay
            self.hashes, self._document, self._config_text = hashes, prepared.document, prepared.text
            self.unchanged += 1
            log.info("configuration files changed (%s) with no change in meaning: generation %d serves on",
                     ", ".join(changed), self.generation)
            return False
        await self._commit(prepared)
        self.hashes = hashes
        self.last_apply_ms = (time.perf_counter() - started) * 1000
        line = f"applied configuration generation {self.generation} (from {', '.join(changed)}): {what}"
        log.info("%s", line)
        print(line, flush=True)  # beside serve's other lines: a record of each generation, at any log level
        return True

    async def _prepare(self, data: dict[str, bytes]) -> _Prepared:
        files = self.files
        config_text = _text(data[files.config], files.config) if files.config else None
        document = _document(config_text)
        problems = restart_problems(self._document, document)
        if problems:
            raise ConfigChangeRefused(f"{files.config}: {'; '.join(problems)}")
        endpoints: list[EndpointConfig] = []
        if files.plugins:
            endpoints = parse_remote_plugins(_text(data[files.plugins], files.plugins), files.plugins)
        registry, remote = await build_registry_with_remote(endpoints, self.framework_address, self.server.services)
        configured = False
        try:
            config = self._load(config_text, registry)
            problem = queue_sort_problem(self.scheduler.config, config)
            if problem:
                raise ConfigChangeRefused(f"{files.config or '<defaults>'}: {problem}")
            profiles = self.scheduler.build_profiles(config, registry)
            if remote is not None:
                configured = True
                await remote.attach(self.scheduler, profiles)  # Configure: a host refusing its args fails here
        except BaseException:
            if remote is not None:
                await self._discard(remote, configured=configured)
            raise
        return _Prepared(config, registry, remote, endpoints, profiles, document, config_text)

    async def _commit(self, prepared: _Prepared) -> None:
        """Switch to ``prepared`` between two cycles; the old endpoints close once its cycles are over."""
        srv, scheduler = self.server, self.scheduler
        before = set(scheduler.config.warnings)
        remote_plugins = [name for ep in prepared.remote.endpoints for name in ep.manifests] if prepared.remote else []
        done = await scheduler.reconfigure(prepared.config, prepared.registry, prepared.profiles, remote_plugins)
        self.last_pause_ms = done.pause * 1000
        old_remote, srv.remote = srv.remote, prepared.remote
        metrics = srv.observability.metrics if srv.observability is not None else None
        if metrics is not None:
            metrics.follow_remote(prepared.remote)
        self.generation += 1
        self.applied += 1
        self.applied_at = time.time()
        self._document, self._endpoints = prepared.document, prepared.endpoints
        self._config_text = prepared.text
        if prepared.remote is not None:  # a host's new manifest rebuilds this generation's profiles
            prepared.remote.follow_manifests(scheduler, self._serving_config)
        for warning in prepared.config.warnings:
            if warning not in before:
                log.warning("generation %d: %s", self.generation, warning)
        reconfigured = getattr(scheduler.source, "reconfigured", None)
        if reconfigured is not None:
            reconfigured()
        task = asyncio.get_running_loop().create_task(self._retire(done, old_remote))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _discard(self, remote: RemotePlugins, *, configured: bool) -> None:
        """Close the endpoints of a change that will not serve. Their hosts were handshaken by it, so
        they now present its credential: that credential is granted to the serving endpoint of the
        same name; and hosts it configured get the serving generation's configuration back."""
        await remote.retire()
        serving = self.server.remote
        if serving is None:
            return
        by_name = {ep.name: ep for ep in serving.endpoints}
        for ep in remote.endpoints:
            mine = by_name.get(ep.name)
            if mine is None:
                continue
            self.server.services.grant(ep.transport.credential, mine)
            if configured:
                try:
                    await mine.configure_all()
                except Exception as exc:  # the replica is marked and handshaken again on its next call
                    log.warning("configuring endpoint %r again for generation %d failed: %s", ep.name,
                                self.generation, exc)

    async def _retire(self, done: Any, remote: RemotePlugins | None) -> None:
        await done.finished()
        if remote is not None:
            await remote.retire()

    def _refuse(self, reason: str, hashes: dict[str, str], files: Iterable[str] = ()) -> None:
        self.refused += 1
        reason = " ".join(reason.replace("\n", "; ").split())
        names = ", ".join(files) or ", ".join(self.files.paths())
        self.last_refused = {"at": _iso(time.time()), "files": names, "reason": reason, "sources": hashes}
        log.warning("refused configuration change (%s): %s; generation %d keeps scheduling",
                    names, reason, self.generation)

    # ---- reading -------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``/configz``'s ``liveConfiguration``: the generation serving, when it was applied, its files'
        hashes, and the last change refused (None when none was)."""
        return {"generation": self.generation, "appliedAt": _iso(self.applied_at), "sources": dict(self.hashes),
                "watching": self._task is not None, "lastRefused": self.last_refused,
                "lastApplyMilliseconds": round(self.last_apply_ms, 3),
                "lastPauseMilliseconds": round(self.last_pause_ms, 3)}


class LiveCollector(Collector):
    """``outrigger_config_reloads_total{result}`` and ``outrigger_config_generation``, read at scrape time."""

    def __init__(self, live: LiveConfig) -> None:
        self.live = live

    def collect(self) -> Iterable[Any]:
        reloads = CounterMetricFamily("outrigger_config_reloads",
                                      "Changes of the configuration files, by result: applied (a new generation), "
                                      "refused, unchanged (no change in meaning).", labels=["result"])
        reloads.add_metric(["applied"], self.live.applied)
        reloads.add_metric(["refused"], self.live.refused)
        reloads.add_metric(["unchanged"], self.live.unchanged)
        generation = GaugeMetricFamily("outrigger_config_generation",
                                       "The generation of the configuration scheduling (1: the one started with).")
        generation.add_metric([], self.live.generation)
        yield reloads
        yield generation


def watch_files(server: Any, files: WatchedFiles, framework_address: str) -> LiveConfig:
    """Start watching ``files`` for the running ``server`` (its metrics get the live configuration's);
    stop with :meth:`LiveConfig.stop` before the server, and :meth:`LiveConfig.close` after it."""
    live = LiveConfig(server, files, framework_address)
    obs = server.observability
    if obs is not None and obs.metrics is not None:
        obs.metrics.registry.register(LiveCollector(live))
    live.start()
    return live
