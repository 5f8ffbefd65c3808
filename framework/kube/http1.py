"""HTTP/1.1 requests to the API server over a pool of keep-alive connections: the request path of
:class:`framework.kube.client.ApiClient` (watches stay on aiohttp, which reads their stream well).

::

    pool = Pool("https://127.0.0.1:6443", ssl_context, max_connections=32)
    answer = await pool.send(b"POST", "/api/v1/namespaces/ns/pods/p/binding", headers, body, timeout=30)
    answer.status, answer.body, answer.retry_after
    await pool.close()

Why not aiohttp here: a scheduled pod costs two writes (the binding and its event), and aiohttp's
client spends about 190 µs of CPU on each against this one's 60 µs (docs/benchmarks.md, "apiserver").
This does only what those requests need: one request at a time per connection, a ``Content-Length``
or chunked answer (or one ended by the server closing), ``Connection: close`` honoured, no redirects,
cookies or compression. A connection is opened when none is idle (at most ``max_connections``, later
requests wait for one), and reused while the server keeps it open.

Failures are :class:`ConnectionError` (refused, reset, closed before the answer ended, a malformed
answer) or :class:`TimeoutError`; the caller names them. A request that fails on a *reused*
connection before any byte of the answer came is sent once more on a new connection: the server may
have closed an idle connection just as the request went out (Go's servers close idle ones).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

__all__ = ["Answer", "Pool"]

MAX_HEAD = 64 * 1024  # bytes of status line and headers an answer may have
_HEAD_END = b"\r\n\r\n"


@dataclass(slots=True)
class Answer:
    status: int
    body: bytes
    #: The ``Retry-After`` header, when the answer had one.
    retry_after: str | None = None


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request in flight at a time; the answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        #: Whether any byte of the current answer arrived (a failure before that may be retried).
        self.answered = False
        self._buf = bytearray()
        self._waiter: asyncio.Future[tuple[Answer, bool]] | None = None
        self._head_only = False
        self._status = 0
        self._retry_after: str | None = None
        self._keep_alive = True
        # Body framing: "length" (``_left`` bytes), "chunked", "eof" (until the server closes).
        self._framing = ""
        self._left = 0
        self._chunks: list[bytes] = []
        self._in_body = False
        self._chunk_crlf = False
        self._trailers = False

    # ---- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TLS transport is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            self._fail(ConnectionError("the server sent data with no request in flight"))
            return
        self.answered = True
        self._buf += data
        try:
            self._parse()
        except (ValueError, IndexError) as exc:
            self._fail(ConnectionError(f"malformed HTTP answer: {exc}"))

    def eof_received(self) -> bool | None:
        if self._waiter is not None and self._in_body and self._framing == "eof":
            self._chunks.append(bytes(self._buf))
            self._buf.clear()
            self._keep_alive = False
            self._finish()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            if exc is None:
                exc = ConnectionError("the server closed the connection before "
                                      + ("the answer ended" if self.answered else "answering"))
            elif not isinstance(exc, OSError | ssl.SSLError):
                exc = ConnectionError(str(exc) or type(exc).__name__)
            self._waiter.set_exception(exc)
        self._waiter = None

    # ---- a request ----------------------------------------------------------------------------------

    def send(self, head: bytes, body: bytes | None, head_only: bool) -> asyncio.Future[tuple[Answer, bool]]:
        """Write one request; the future's result: the answer and whether the connection stays usable."""
        assert self.transport is not None and self._waiter is None
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self.answered = False
        self._head_only = head_only
        self._status = 0
        self._retry_after = None
        self._keep_alive = True
        self._framing = ""
        self._left = 0  # a sized answer before leaves its length here
        self._chunks = []
        self._in_body = False
        self._chunk_crlf = False
        self._trailers = False
        self.transport.write(head + body if body else head)
        return waiter

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.abort()

    def _finish(self) -> None:
        waiter, self._waiter = self._waiter, None
        body = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        if waiter is not None and not waiter.done():
            waiter.set_result((Answer(self._status, body, self._retry_after), self._keep_alive))
        if self._buf:  # bytes beyond the answer: the connection is out of step, do not reuse it
            self._keep_alive = False
            self.abort()

    def _parse(self) -> None:
        buf = self._buf
        if not self._in_body:
            end = buf.find(_HEAD_END)
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ValueError(f"headers longer than {MAX_HEAD} bytes")
                return
            self._head(bytes(buf[:end]))
            del buf[: end + 4]
            if self._status < 200:  # an interim answer (100 Continue): the real one follows
                self._in_body = False
                self._parse()
                return
            if self._framing == "":
                self._finish()
                return
        if self._framing == "length":
            if len(buf) < self._left:
                return
            self._chunks.append(bytes(buf[: self._left]))
            del buf[: self._left]
            self._finish()
        elif self._framing == "chunked":
            self._parse_chunks()

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1."):
            raise ValueError(f"status line {status_line[:40]!r}")
        self._status = int(status_line[9:12])
        http10 = status_line.startswith(b"HTTP/1.0")
        length: int | None = None
        chunked = False
        connection = b""
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                connection = value.strip().lower()
            elif name == b"retry-after":
                self._retry_after = value.strip().decode("latin-1")
        self._keep_alive = connection != b"close" and (not http10 or connection == b"keep-alive")
        self._in_body = True
        if self._head_only or self._status < 200 or self._status in (204, 304):
            self._framing = ""  # no body, whatever the headers say
        elif chunked:
            self._framing = "chunked"
        elif length is not None:
            self._framing = "length" if length > 0 else ""
            self._left = length
        else:
            self._framing = "eof"
            self._keep_alive = False

    def _parse_chunks(self) -> None:
        buf = self._buf
        while True:
            if self._trailers:  # after the last chunk: optional trailers, then an empty line
                if buf[:2] == b"\r\n":
                    del buf[:2]
                    self._finish()
                    return
                end = buf.find(_HEAD_END)
                if end < 0:
                    return
                del buf[: end + 4]
                self._finish()
                return
            if self._chunk_crlf:
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
                del buf[:2]
                self._chunk_crlf = False
            if self._left == 0:
                line_end = buf.find(b"\r\n")
                if line_end < 0:
                    return
                size = int(bytes(buf[:line_end]).split(b";", 1)[0], 16)
                del buf[: line_end + 2]
                if size == 0:
                    self._trailers = True
                    continue
                self._left = size
            if not buf:
                return
            take = min(self._left, len(buf))
            self._chunks.append(bytes(buf[:take]))
            del buf[:take]
            self._left -= take
            if self._left == 0:
                self._chunk_crlf = True


class Pool:
    """Keep-alive connections to one server (``https://host:port[/prefix]`` or ``http://``)."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | bool, *, max_connections: int = 32,
                 server_hostname: str = "", user_agent: str = "outrigger") -> None:
        url = urlsplit(server)
        self.host = url.hostname or ""
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            self._ssl = ssl_context if isinstance(ssl_context, ssl.SSLContext) else ssl.create_default_context()
        self._server_hostname = server_hostname
        netloc = url.netloc.rsplit("@", 1)[-1]
        self._fixed = f"Host: {netloc}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max(1, max_connections))
        self._all: set[_Connection] = set()
        #: Connections opened so far (how well they are reused).
        self.opened = 0

    def head(self, method: str, target: str, headers: str, length: int | None) -> bytes:
        """The request line and headers; ``headers`` is ``"Name: value\\r\\n"`` lines."""
        text = f"{method} {self.prefix}{target} HTTP/1.1\r\n{self._fixed}{headers}"
        if length is not None:
            text += f"Content-Length: {length}\r\n"
        return (text + "\r\n").encode("latin-1")

    async def send(self, method: str, target: str, headers: str, body: bytes | None, timeout: float) -> Answer:
        """One request, answered within ``timeout`` seconds (connecting included)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        length = len(body) if body is not None else (0 if method in ("POST", "PUT", "PATCH") else None)
        head = self.head(method, target, headers, length)
        async with self._slots:
            for attempt in range(2):
                conn = self._take()
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(deadline)
                try:
                    answer, keep = await self._exchange(conn, head, body, method == "HEAD", deadline)
                except TimeoutError:
                    self._drop(conn)
                    raise
                except (ConnectionError, OSError, ssl.SSLError):
                    self._drop(conn)
                    if reused and not conn.answered and attempt == 0:
                        continue  # an idle connection the server had closed: once more on a new one
                    raise
                except BaseException:  # timeout, cancellation: the connection is out of step
                    self._drop(conn)
                    raise
                if keep and not conn.closed:
                    self._idle.append(conn)
                else:
                    self._drop(conn)
                return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return None

    def _drop(self, conn: _Connection) -> None:
        conn.abort()
        self._all.discard(conn)

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        left = max(deadline - loop.time(), 0.001)
        if self._ssl is not None:
            opening = loop.create_connection(_Connection, self.host, self.port, ssl=self._ssl,
                                             server_hostname=self._server_hostname or None,
                                             ssl_handshake_timeout=left)
        else:
            opening = loop.create_connection(_Connection, self.host, self.port)
        _, conn = await asyncio.wait_for(opening, left)
        self.opened += 1
        self._all.add(conn)
        return conn

    async def _exchange(self, conn: _Connection, head: bytes, body: bytes | None, head_only: bool,
                        deadline: float) -> tuple[Answer, bool]:
        loop = asyncio.get_running_loop()
        waiter = conn.send(head, body, head_only)
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()

    async def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()


def _expire(waiter: asyncio.Future[tuple[Answer, bool]]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer in time"))
