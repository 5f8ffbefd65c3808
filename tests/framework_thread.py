"""Test helpers: a real framework service on 127.0.0.1 in a background thread (so blocking clients and
the CLI can talk to it), restartable on the same port, and a TCP proxy whose connections can be cut."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from framework.config import SchedulerConfig
from framework.observe.observability import ObservabilityConfig
from framework.plugins import Registry
from framework.profiles import build_registry, default_scheduler_config
from framework.service import Server, start_server

__all__ = ["FrameworkThread", "Proxy"]


class FrameworkThread:
    """``start_server`` on its own event loop in a daemon thread; every wait is bounded."""

    def __init__(self, config_for: Callable[[Registry], SchedulerConfig] | None = None,
                 registry: Registry | None = None, observability: ObservabilityConfig | None = None) -> None:
        self.observability = observability
        self.registry = registry or build_registry()
        self.config_for = config_for or default_scheduler_config
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-framework", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        """Run ``coro`` on the framework's loop and wait (bounded) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> FrameworkThread:
        """Serve (on a free port the first time, on the same port after :meth:`stop`)."""
        listen = f"127.0.0.1:{self.port}"

        async def boot() -> Server:
            return await start_server(self.config_for(self.registry), self.registry, listen, seed=3,
                                      observability=self.observability)

        self.server = self.call(boot())
        self.port = self.server.port
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.call(self.server.stop(0.2))
            self.server = None

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        # The loop is not closed: gRPC's poller may still hold a reader on it until the interpreter exits.

    def __enter__(self) -> FrameworkThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class Proxy:
    """A loopback TCP proxy to ``target`` on the given loop; :meth:`cut` drops every open connection
    (new ones are still accepted), as a network failure would. ``delay``: seconds each new connection is
    held before anything passes, as a busy server is slow to answer a handshake."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target_port: int, delay: float = 0.0) -> None:
        self.loop = loop
        self.target_port = target_port
        self.delay = delay
        self.port = 0
        self.accepted = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self) -> None:
        """Start listening (on the proxy's loop)."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self) -> Proxy:
        """Start listening, from another thread than the loop's."""
        asyncio.run_coroutine_threadsafe(self.serve(), self.loop).result(10)
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        await asyncio.sleep(self.delay)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def abort_all(self, *, close: bool = False) -> None:
        """Drop every open connection now (on the proxy's loop); ``close``: stop listening too."""
        if close and self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    def cut(self) -> None:
        """Drop every open connection, from another thread than the loop's."""
        self.loop.call_soon_threadsafe(self.abort_all)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(lambda: self.abort_all(close=True))
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(10)
