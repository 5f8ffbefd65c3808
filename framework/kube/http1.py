"""HTTP/1.1 requests to the API server over a pool of keep-alive connections: the request path of
:class:`framework.kube.client.ApiClient` (watches stay on aiohttp, which reads their stream well).

::

    pool = Pool("https://127.0.0.1:6443", ssl_context, max_connections=32)
    answer = await pool.send("POST", "/api/v1/namespaces/ns/pods/p/binding", headers, body, timeout=30)
    answer.status, answer.body, answer.retry_after
    await pool.close()

Why not aiohttp here: a scheduled pod costs two writes (the binding and its event), and aiohttp's
client spends about 150-190 µs of CPU on each against this pool's 90-100 µs (docs/benchmarks.md,
"apiserver"). The pool does only what those requests need: one request at a time per connection, no
redirects, cookies or compression. A connection is opened when none is idle (at most
``max_connections``, later requests wait for one), and reused while the server keeps it open. Answers
are parsed by ``httptools`` (llhttp, the parser uvicorn and Node use): framing by ``Content-Length``,
chunks or the server closing, interim ``1xx`` answers, ``Connection: close`` and HTTP/1.0.

Failures are :class:`ConnectionError` (refused, reset, closed before the answer ended, a malformed
answer) or :class:`TimeoutError`; the caller names them. An idle connection found closed is passed
over before anything is written to it. A request that failed is sent again on a new connection only
by the rule of Go's ``net/http`` (``shouldRetryRequest``): the connection was a reused one, the
request may be replayed and no byte of the answer came. Servers close idle connections (Go's do), and
one may do so just as a request goes out; a request that met that fate may still have been read and
applied. Whether it may be replayed is the caller's to say (``replayable``): the API client's one rule
(:func:`framework.kube.client.resendable`) lets through reads and the writes a second copy cannot
apply twice; without a word, only GET, HEAD, OPTIONS and TRACE are (Go's ``isReplayable``). Any other
request fails instead and its caller, who knows what it asked for, decides (see :func:`_may_resend`).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

__all__ = ["Answer", "Pool"]

MAX_HEAD = 64 * 1024  # bytes of status line and headers an answer may have
#: Methods a request may be sent again with after it may have reached the server (Go's isReplayable).
REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


@dataclass(slots=True)
class Answer:
    status: int
    body: bytes
    #: The ``Retry-After`` header, when the answer had one.
    retry_after: str | None = None


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request in flight at a time; the answer parsed as it arrives (by
    ``httptools``, whose callbacks are the ``on_*`` methods below)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        #: Whether any byte of the current answer arrived (a replayable request that failed before that
        #: may be sent again: :func:`_may_resend`).
        self.answered = False
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[tuple[Answer, bool]] | None = None
        self._head_only = False
        self._retry_after: str | None = None
        self._chunks: list[bytes] = []
        # Whether the answer's headers are in, and whether they frame its body (a length or chunks);
        # an answer without either ends when the server closes the connection.
        self._in_body = False
        self._framed = False
        self._head_bytes = 0

    # ---- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TLS transport is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            self._fail(ConnectionError("the server sent data with no request in flight"))
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(ConnectionError(f"malformed HTTP answer: {exc or type(exc).__name__}"))
            return
        if not self._in_body and self._waiter is not None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD:
                self._fail(ConnectionError(f"malformed HTTP answer: headers longer than {MAX_HEAD} bytes"))

    def eof_received(self) -> bool | None:
        if self._waiter is None:
            self.closed = True  # an idle connection the server closed: not taken again
        elif self._in_body and not self._framed:
            self._finish(keep_alive=False)
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

    # ---- httptools' callbacks -----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None:  # bytes beyond the answer: the connection is out of step, do not reuse it
            self.abort()
        self._retry_after = None
        self._chunks = []
        self._framed = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"retry-after":
            self._retry_after = value.strip().decode("latin-1")
        elif name in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # an interim answer (100 Continue): the real one follows
        self._in_body = True
        if status in (204, 304):
            self._framed = True  # no body, whatever the headers say
        elif self._head_only:
            # The parser cannot be told that an answer to HEAD has no body: the answer ends here and
            # the connection, whose parser waits for a body that will not come, is not used again.
            self._finish(keep_alive=False)
            self.abort()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() >= 200 and self._waiter is not None:
            self._finish(keep_alive=self._parser.should_keep_alive())

    # ---- a request ----------------------------------------------------------------------------------

    def send(self, head: bytes, body: bytes | None, head_only: bool) -> asyncio.Future[tuple[Answer, bool]]:
        """Write one request; the future's result: the answer and whether the connection stays usable."""
        assert self.transport is not None and self._waiter is None
        if self.closed or self.transport.is_closing():
            raise ConnectionError("the connection was closed before the request was sent")
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self.answered = False
        self._head_only = head_only
        self._in_body = False
        self._head_bytes = 0
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

    def _finish(self, *, keep_alive: bool) -> None:
        waiter, self._waiter = self._waiter, None
        body = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        self._in_body = False
        if waiter is not None and not waiter.done():
            waiter.set_result((Answer(self._parser.get_status_code(), body, self._retry_after), keep_alive))


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

    async def send(self, method: str, target: str, headers: str, body: bytes | None, timeout: float, *,
                   replayable: bool | None = None) -> Answer:
        """One request, answered within ``timeout`` seconds (connecting included). ``replayable``: whether
        a second copy of it is harmless (None: only for the methods of :data:`REPLAYABLE`)."""
        replay = method in REPLAYABLE if replayable is None else replayable
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
                except TimeoutError:  # an OSError too, but never sent again: the deadline is the caller's
                    self._drop(conn)
                    raise
                except (ConnectionError, OSError, ssl.SSLError):
                    self._drop(conn)
                    if attempt == 0 and reused and _may_resend(replay, conn):
                        continue  # a kept-alive connection the server had closed: once more on a new one
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
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            self._drop(conn)
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


def _may_resend(replayable: bool, conn: _Connection) -> bool:
    """Whether a request that failed on a reused connection may go once more on a new one (Go's
    ``shouldRetryRequest``): when it may be replayed and no byte of the answer came. (Go also sends
    again a request of which nothing was written; here a connection found closed is never written to:
    :meth:`Pool._take` passes over it.)

    A request not called replayable is never sent twice here: a second binding, say, of one that
    landed would be refused "already assigned"; the client raises instead, and the source asks the API
    server how the binding ended (:func:`framework.kube.bindings.binding_outcome`), sending it again only
    while the pod is unbound."""
    return replayable and not conn.answered
