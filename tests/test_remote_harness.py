"""Helpers for the remote-plugin tests: plugin host processes on 127.0.0.1 and schedulers wired to them.

No tests here. :class:`HostProcess` runs ``outrigger plugin serve MODULE:ATTR`` as a real subprocess
(on a free port, or a given one to restart "on the same port"), reads the address from its first line
of output, and kills it at the end. :func:`remote_rig` builds a :class:`Scheduler` whose registry holds
the plugins of the given endpoints, with the Handle and CycleState services on their own loopback
port, the way ``outrigger explain`` does it offline.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.config import SchedulerConfig
from framework.plugins import Registry
from framework.profiles import build_registry_with_remote
from framework.remote import EndpointConfig, RemotePlugins
from framework.scheduler import Scheduler
from framework.service import PluginServices, start_plugin_services
from pluginhost.host import PluginHost

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
STARTUP_SECONDS = 60.0  # a host's first line; Python's start-up alone takes seconds on a loaded machine
_LISTENING = re.compile(r"listening on (\S+)")


class HostProcess:
    """``outrigger plugin serve TARGET`` in a subprocess (stdout's first line gives the address)."""

    def __init__(self, target: str, env: Mapping[str, str] | None = None, listen: str = "127.0.0.1:0",
                 args: Sequence[str] = ()) -> None:
        self.target = target
        self.env = dict(env or {})
        self.listen = listen
        self.args = list(args)
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> str:
        self.spawn()
        return self.ready()

    def spawn(self) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(ROOT), env.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "plugin", "serve", self.target, "--listen", self.listen,
             *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )

    def ready(self) -> str:
        """Wait (bounded) for the host's "listening on ADDR" line."""
        assert self.proc is not None
        line = _readline(self.proc, STARTUP_SECONDS)
        m = _LISTENING.search(line)
        if m is None:
            err = self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else ""
            self.kill()
            raise RuntimeError(f"plugin host {self.target} did not start: {line!r} {err}")
        self.address = m.group(1)
        # Keep draining the host's output so it can never block on a full pipe.
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        return self.address

    def kill(self) -> None:
        """SIGKILL: the host dies mid-whatever, like a crashed sidecar."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> HostProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Hosts:
    """Several plugin hosts started together (their start-up overlaps), stopped together."""

    def __init__(self, *hosts: HostProcess) -> None:
        self.hosts = list(hosts)

    def __enter__(self) -> list[str]:
        try:
            for h in self.hosts:
                h.spawn()
            return [h.ready() for h in self.hosts]
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        for h in self.hosts:
            h.stop()


class HostThread:
    """A :class:`PluginHost` on its own event loop in a thread: real gRPC on loopback, with the host's
    internals (its snapshot mirror) open to inspection. Blocking Handle calls from plugin code are
    fine here, since the framework runs on another loop."""

    def __init__(self, plugins: Sequence[type[Any]]) -> None:
        self.plugins = list(plugins)
        self.loop = asyncio.new_event_loop()
        self.host: PluginHost | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="plugin-host", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.host = PluginHost(self.plugins, listen="127.0.0.1:0")
        self.loop.run_until_complete(self.host.start())
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> PluginHost:
        self._thread.start()
        if not self._ready.wait(STARTUP_SECONDS) or self.host is None:
            raise RuntimeError("plugin host thread did not start")
        return self.host

    def __exit__(self, *exc: object) -> None:
        if self.host is not None:
            asyncio.run_coroutine_threadsafe(self.host.stop(0.2), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else ""


def _drain(stream: Any) -> None:
    if stream is None:
        return
    for _ in stream:
        pass


def endpoint(name: str, address: str | Sequence[str], **deadlines: float) -> EndpointConfig:
    addresses = (address,) if isinstance(address, str) else tuple(address)
    return EndpointConfig(name, addresses, {"default": 5.0, **deadlines}, connect_timeout=STARTUP_SECONDS)


@dataclass
class RemoteRig:
    """A scheduler whose remote plugins are connected, configured and able to reach back."""

    scheduler: Scheduler
    remote: RemotePlugins
    services: PluginServices

    async def close(self) -> None:
        await self.remote.close()
        await self.services.stop(0.2)


async def remote_rig(
    endpoints: Sequence[EndpointConfig],
    config_for: Callable[[Registry], SchedulerConfig],
    *,
    seed: int | None = 0,
    extra: Callable[[Registry], None] | None = None,
) -> RemoteRig:
    services = await start_plugin_services()
    registry, remote = await build_registry_with_remote(endpoints, services.address, services.services)
    assert remote is not None
    if extra is not None:
        extra(registry)
    scheduler = Scheduler(config_for(registry), registry, seed=seed)
    await remote.attach(scheduler)
    remote.follow_manifests(scheduler, config_for)
    await remote.start_shadows(scheduler)
    return RemoteRig(scheduler, remote, services)


async def until(cond: Callable[[], bool], timeout: float, what: str = "condition") -> None:
    """Poll ``cond`` (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await asyncio.sleep(0.005)
