"""A loopback HTTP proxy in front of the test suite's real API server that injects failures into chosen
requests: a request is forwarded and its real answer replaced by a ``503`` with ``Retry-After`` (the
first copy landed, the client cannot know) or by another status without it, or it is answered ``500``
(or another status: a ``403`` as a restarted API server gives until its authorizers catch up) without
being forwarded (it never landed). Every other request gets the API server's answer.

::

    proxy = FaultProxy(cluster.server, cluster.ca_file)
    proxy.fail("POST", "/apis/events.k8s.io/v1/namespaces/ns/events", landed=True, times=1)
    await proxy.start()
    client = ApiClient(KubeConfig(server=proxy.url, token=cluster.admin_token), qps=0)
    ...
    proxy.log    # (method, path, the API server's status or None, the status the client got)
    await proxy.close()

It speaks plain HTTP/1.1 to the client (one request at a time per connection, kept alive) and HTTPS to
the API server. Watches are not proxied: the client under test sends them to the API server itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

__all__ = ["FaultProxy"]

REASONS = {403: "Forbidden", 500: "InternalError", 503: "ServiceUnavailable"}



@dataclass
class _Fault:
    method: str
    path: str  # the request path, without the query
    landed: bool
    times: int
    status: int | None


class FaultProxy:
    """See the module docstring."""

    def __init__(self, upstream: str, ca_file: Path) -> None:
        self.upstream = upstream
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._faults: list[_Fault] = []
        self._server: asyncio.Server | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        #: Every request: (method, path, the API server's status (None: not forwarded), status sent back).
        self.log: list[tuple[str, str, int | None, int]] = []
        self.url = ""

    def fail(self, method: str, path: str, *, landed: bool, times: int = 1, status: int | None = None) -> None:
        """The next ``times`` requests ``method`` to a path starting with ``path``: forwarded and answered
        ``status`` (``landed``; by default 503 with ``Retry-After: 1``, any other without it), or answered
        ``status`` (by default 500) without being forwarded."""
        self._faults.append(_Fault(method, path, landed, times, status))

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl))
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # each connection's reader sees the end and returns
                writer.transport.abort()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=5)
            await self._server.wait_closed()
        if self._session is not None:
            await self._session.close()

    def _take(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.method == method and path.startswith(fault.path):
                fault.times -= 1
                return fault
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            for _ in range(10_000):  # one request after another on a kept-alive connection
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                method, target, headers = _parse(head)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status, answer, extra = await self._answer(method, target, headers, body)
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
                             f"Content-Length: {len(answer)}\r\n\r\n".encode("latin-1") + answer)
                await writer.drain()
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, method: str, target: str, headers: dict[str, str],
                      body: bytes) -> tuple[int, bytes, str]:
        path = target.split("?", 1)[0]
        fault = self._take(method, path)
        if fault is not None and not fault.landed:
            code = fault.status or 500
            self.log.append((method, path, None, code))
            return code, _status(code, REASONS.get(code, "InternalError"), "injected: not forwarded"), ""
        assert self._session is not None
        forward = {k: v for k, v in headers.items() if k in ("authorization", "content-type", "accept")}
        async with self._session.request(method, self.upstream + target, headers=forward,
                                         data=body if body else None) as resp:
            real, answer = resp.status, await resp.read()
        if fault is not None:
            code = fault.status or 503
            self.log.append((method, path, real, code))
            return code, _status(code, REASONS.get(code, "InternalError"), "injected after the request was applied"), \
                "Retry-After: 1\r\n" if fault.status is None else ""
        self.log.append((method, path, real, real))
        return real, answer, ""


def _parse(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                         "reason": reason, "message": message})
