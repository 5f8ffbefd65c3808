"""The API client's HTTP/1.1 request pool (framework/kube/http1.py) against a real server on 127.0.0.1 that
answers each request with scripted bytes: framing (length, chunked, until close), keep-alive and its end,
a stale idle connection and which requests are sent again on a new one, timeouts, refusals and malformed
answers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httptools
import pytest

from framework.kube.http1 import Answer, Pool

# What the scripted server does with one request: the bytes it writes back (sent in pieces of
# ``piece`` bytes, flushed one by one), then whether it closes the connection.
Script = Callable[[int], "Reply"]


@dataclass
class Reply:
    data: bytes
    close: bool = False
    piece: int = 0  # 0: all at once
    silent: bool = False  # never answer


@dataclass
class Server:
    script: Script
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    address: tuple[str, int] = ("", 0)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            for _ in range(100):
                self.requests.append(await read_request(reader))
                reply = self.script(len(self.requests))
                if reply.silent:
                    await asyncio.sleep(30)
                step = reply.piece or len(reply.data)
                for i in range(0, len(reply.data), step):
                    writer.write(reply.data[i : i + step])
                    await writer.drain()
                if reply.close:
                    break
        writer.close()


class _Complete:
    """httptools' callbacks: only the end of a message matters here."""

    done = False

    def on_message_complete(self) -> None:
        self.done = True


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's bytes as the client wrote them, framed by httptools (the client has one request in
    flight at a time, so what arrives before the message completes is that request)."""
    complete = _Complete()
    parser = httptools.HttpRequestParser(complete)
    raw = b""
    while not complete.done:
        chunk = await reader.read(65536)
        if not chunk:
            raise asyncio.IncompleteReadError(raw, None)
        raw += chunk
        parser.feed_data(chunk)
    return raw


@contextlib.asynccontextmanager
async def serving(script: Script) -> AsyncIterator[Server]:
    server = Server(script)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.address = srv.sockets[0].getsockname()[:2]
    try:
        yield server
    finally:
        srv.close()
        for w in server.writers:
            w.close()


def ok(body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def chunked(parts: list[bytes]) -> bytes:
    out = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in parts:
        out += f"{len(p):x}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n\r\n"


async def send_all(pool: Pool, count: int, timeout: float = 5.0, *, method: str = "POST",
                   pause: float = 0.0) -> list[Answer]:
    """``count`` requests one after the other, ``pause`` seconds apart."""
    body = b'{"a":1}' if method == "POST" else None
    answers = []
    for i in range(count):
        if i and pause:
            await asyncio.sleep(pause)
        answers.append(await pool.send(method, "/api/v1/x", "", body, timeout))
    return answers


BODY = b'{"kind":"Status","code":201}'
CASES = [
    # (name, script, requests, expected bodies, expected status, connections opened)
    ("content-length, kept alive", lambda n: Reply(ok(BODY)), 3, [BODY] * 3, 200, 1),
    ("chunked, one byte at a time", lambda n: Reply(chunked([b'{"a":', b"[1,2,3]", b"}"]), piece=1), 2,
     [b'{"a":[1,2,3]}'] * 2, 201, 1),
    ("chunked with an extension and trailers", lambda n: Reply(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"), 2,
     [b"hello"] * 2, 200, 1),
    ("Connection: close ends the connection", lambda n: Reply(ok(BODY, "Connection: close\r\n"), close=True), 3,
     [BODY] * 3, 200, 3),
    ("no length: the body ends when the server closes", lambda n: Reply(b"HTTP/1.1 200 OK\r\n\r\n" + BODY,
                                                                          close=True), 2, [BODY] * 2, 200, 2),
    ("HTTP/1.0 without keep-alive is not reused", lambda n: Reply(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
                                                                  close=True), 2, [b"{}"] * 2, 200, 2),
    ("an empty answer", lambda n: Reply(b"HTTP/1.1 204 No Content\r\n\r\n"), 2, [b""] * 2, 204, 1),
    ("a 100 Continue before the answer", lambda n: Reply(b"HTTP/1.1 100 Continue\r\n\r\n" + ok(BODY)), 2,
     [BODY] * 2, 200, 1),
    ("a chunked answer after a sized one on the same connection", lambda n: Reply(
        ok(BODY) if n % 2 else b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 4,
     [BODY, b"hello"] * 2, 200, 1),
    ("the server closing after an answer: the next request opens another",
     lambda n: Reply(ok(BODY), close=n % 2 == 1), 4, [BODY] * 4, 200, 3),
]


@pytest.mark.parametrize(("script", "count", "bodies", "status", "opened"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_answers_are_framed_and_connections_reused_as_the_server_says(
        script: Script, count: int, bodies: list[bytes], status: int, opened: int) -> None:
    async def run() -> tuple[list[Answer], int, Server]:
        async with serving(script) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            try:
                # A pause between requests lets a connection the server closed after answering be seen
                # closed before the next request (what a request sent in the meantime meets is below).
                answers = await send_all(pool, count, pause=0.02)
                if count > 1:
                    await asyncio.sleep(0.05)  # the server's close of an idle connection arrives
            finally:
                await pool.close()
            return answers, pool.opened, server

    answers, pool_opened, server = asyncio.run(run())
    assert [a.body for a in answers] == bodies
    assert {a.status for a in answers} == {status}
    assert (pool_opened, server.connections) == (opened, opened)
    assert len(server.requests) == count


RESENT = [
    # (name, method, the script: which request the server closes the connection on without answering,
    #  expected bodies (None: the second request fails), requests the server read, connections)
    ("a GET is sent again once on a new connection", "GET", lambda n: Reply(b"", close=True) if n == 2
     else Reply(ok(BODY)), [BODY, BODY], 3, 2),
    ("a POST is not sent again: the server may have applied it", "POST", lambda n: Reply(b"", close=True) if n == 2
     else Reply(ok(BODY)), None, 2, 1),
    ("a POST right after the server closed the connection is not sent again", "POST",
     lambda n: Reply(ok(BODY), close=True), None, 1, 1),
    ("a GET right after the server closed the connection is sent again", "GET",
     lambda n: Reply(ok(BODY), close=True), [BODY, BODY], 2, 2),
]


@pytest.mark.parametrize(("method", "script", "bodies", "requests", "connections"), [c[1:] for c in RESENT],
                         ids=[c[0] for c in RESENT])
def test_a_reused_connection_closed_before_its_answer_resends_only_replayable_requests(
        method: str, script: Script, bodies: list[bytes] | None, requests: int, connections: int) -> None:
    # The second request meets a kept-alive connection the server closes without answering (as an idle
    # connection closed just as a request went out): Go's net/http rule, sent once more on a new
    # connection only when replaying it does no harm.
    async def run() -> tuple[list[bytes] | None, int, int]:
        async with serving(script) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            try:
                try:
                    answers: list[bytes] | None = [a.body for a in await send_all(pool, 2, method=method)]
                except ConnectionError:
                    answers = None
            finally:
                await pool.close()
            return answers, len(server.requests), server.connections

    assert asyncio.run(run()) == (bodies, requests, connections)


@pytest.mark.parametrize(("replayable", "bodies", "requests"), [(True, [BODY, BODY], 3), (False, None, 2)],
                         ids=["a POST its caller calls replayable (a named create) is sent again",
                              "a POST its caller does not call replayable is not"])
def test_the_caller_says_whether_a_request_may_be_sent_again(replayable: bool, bodies: list[bytes] | None,
                                                             requests: int) -> None:
    # The API client's rule (framework.kube.client.resendable) decides for each request, not its method.
    async def run() -> tuple[list[bytes] | None, int]:
        script = lambda n: Reply(b"", close=True) if n == 2 else Reply(ok(BODY))  # noqa: E731
        async with serving(script) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            got: list[bytes] = []
            try:
                for _ in range(2):
                    got.append((await pool.send("POST", "/api/v1/x", "", b'{"a":1}', 5.0, replayable=replayable)).body)
                answers: list[bytes] | None = got
            except ConnectionError:
                answers = None
            finally:
                await pool.close()
            return answers, len(server.requests)

    assert asyncio.run(run()) == (bodies, requests)


def test_the_request_carries_its_line_headers_and_body() -> None:
    async def run() -> bytes:
        async with serving(lambda n: Reply(ok(BODY))) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}/prefix/", False, user_agent="ua/1")
            try:
                await pool.send("PATCH", "/api/v1/p?x=1", "Authorization: Bearer t\r\nContent-Type: a/b\r\n",
                                b"{}", 5)
                await pool.send("GET", "/api/v1/q", "", None, 5)
            finally:
                await pool.close()
            return b"|".join(server.requests)

    host = "127.0.0.1"
    sent = asyncio.run(run()).decode()
    first, second = sent.split("|")
    assert first.startswith("PATCH /prefix/api/v1/p?x=1 HTTP/1.1\r\n")
    assert "\r\nAuthorization: Bearer t\r\n" in first and "\r\nContent-Type: a/b\r\n" in first
    assert "\r\nUser-Agent: ua/1\r\n" in first and "\r\nAccept: application/json\r\n" in first
    assert f"\r\nHost: {host}:" in first
    assert first.endswith("\r\nContent-Length: 2\r\n\r\n{}")
    assert second.startswith("GET /prefix/api/v1/q HTTP/1.1\r\n") and "Content-Length" not in second


def test_retry_after_is_read_from_the_answer() -> None:
    async def run() -> Answer:
        async with serving(lambda n: Reply(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n"
                                           b"Content-Length: 2\r\n\r\n{}")) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            try:
                return await pool.send("POST", "/x", "", b"{}", 5)
            finally:
                await pool.close()

    answer = asyncio.run(run())
    assert (answer.status, answer.retry_after, answer.body) == (429, "3", b"{}")


FAILURES = [
    ("no answer in time", lambda n: Reply(b"", silent=True), TimeoutError, "no answer in time"),
    ("a malformed status line", lambda n: Reply(b"SPDY/3 200 OK\r\n\r\n"), ConnectionError,
     "malformed HTTP answer: Expected HTTP/, RTSP/ or ICE/"),
    ("a bad chunk size", lambda n: Reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
     ConnectionError, "malformed HTTP answer: Invalid character in chunk size"),
    ("closed before the whole body", lambda n: Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", close=True),
     ConnectionError, "the server closed the connection before the answer ended"),
    ("headers without end", lambda n: Reply(b"HTTP/1.1 200 OK\r\n" + b"X-A: aaaaaaaaaaaaaaaa\r\n" * 5000),
     ConnectionError, "malformed HTTP answer: headers longer than 65536 bytes"),
    ("closed before any answer (a fresh connection is not retried)", lambda n: Reply(b"", close=True),
     ConnectionError, "the server closed the connection before answering"),
]


@pytest.mark.parametrize(("script", "error", "message"), [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failures_raise_one_error_and_drop_the_connection(script: Script, error: type[Exception],
                                                          message: str) -> None:
    async def run() -> tuple[BaseException, int, int]:
        async with serving(script) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            try:
                with pytest.raises(error) as caught:
                    await pool.send("POST", "/x", "", b"{}", 0.5)
                return caught.value, len(pool._idle), server.connections
            finally:
                await pool.close()

    exc, idle, connections = asyncio.run(run())
    assert str(exc) == message
    assert (idle, connections) == (0, 1)


def test_an_answer_to_head_ends_with_its_headers() -> None:
    # Its Content-Length is the body a GET would have had: none follows. The parser cannot be told so,
    # so the connection is not used again.
    async def run() -> tuple[Answer, int]:
        async with serving(lambda n: Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False)
            try:
                return await pool.send("HEAD", "/x", "", None, 2), len(pool._idle)
            finally:
                await pool.close()

    answer, idle = asyncio.run(run())
    assert (answer.status, answer.body, idle) == (200, b"", 0)


def test_a_refused_connection_is_an_os_error() -> None:
    async def run() -> None:
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        srv.close()
        await srv.wait_closed()
        pool = Pool(f"http://127.0.0.1:{port}", False)
        with pytest.raises(ConnectionRefusedError):
            await pool.send("GET", "/x", "", None, 2)

    asyncio.run(run())


def test_at_most_max_connections_and_later_requests_wait_for_one() -> None:
    async def run() -> tuple[int, int]:
        async with serving(lambda n: Reply(ok(BODY))) as server:
            pool = Pool(f"http://{server.address[0]}:{server.address[1]}", False, max_connections=3)
            try:
                answers = await asyncio.gather(*(pool.send("POST", "/x", "", b"{}", 5) for _ in range(20)))
            finally:
                await pool.close()
            assert [a.body for a in answers] == [BODY] * 20
            return pool.opened, server.connections

    assert asyncio.run(run()) == (3, 3)
