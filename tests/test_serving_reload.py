"""The secure port reads its certificate files again when they change, as kube-scheduler's dynamic serving
certificate and client CA do: a rotated serving certificate (cert-manager, a Secret's new keys) reaches every
new connection without a restart, a rotated client CA decides who may present a certificate, and files that
do not load leave the last good ones serving."""

from __future__ import annotations

import asyncio
import inspect
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_serving import Client, client_cert, make_ca, secure_server

from framework.observe import certs
from framework.observe.certs import fingerprint, self_signed
from framework.observe.serving import SecureServing
from framework.service import Server


@pytest.fixture(autouse=True)
def quick_reload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(certs, "RELOAD_SECONDS", 0.05)


def replace(path: Path, data: bytes) -> None:
    """Write ``path`` as a mounted Secret changes: a new file renamed over the old one."""
    tmp = path.with_suffix(".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


async def served(port: int) -> str:
    """The fingerprint of the certificate a new connection is given."""
    return fingerprint((await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))).encode())


async def until(get: Callable[[], Any], want: object, seconds: float = 10.0) -> None:
    """Poll ``get()`` (a value or an awaitable) until it gives ``want``."""
    deadline = asyncio.get_running_loop().time() + seconds
    got = None
    while asyncio.get_running_loop().time() < deadline:
        got = get()
        if inspect.isawaitable(got):
            got = await got
        if got == want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"still {got!r}, not {want!r}, after {seconds}s")


def test_a_rotated_serving_certificate_reaches_new_connections_and_a_bad_one_is_not_taken(tmp_path: Path) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first, second, third = self_signed(), self_signed(), self_signed()  # each a new key and certificate
    cert_file.write_bytes(first[0])
    key_file.write_bytes(first[1])
    secure = SecureServing(port=0, cert_file=str(cert_file), key_file=str(key_file))

    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        port = srv.observability.secure.port
        files = srv.observability.secure.tls.files  # type: ignore[union-attr]
        assert files is not None
        assert await served(port) == fingerprint(first[0])
        assert await client("/healthz") == (200, "ok")  # a connection of the first certificate

        replace(key_file, second[1])
        replace(cert_file, second[0])
        await until(lambda: served(port), fingerprint(second[0]))
        assert await client("/healthz") == (200, "ok")  # the open connection keeps its certificate

        # A certificate whose key is not the one beside it: not taken, the second keeps serving.
        replace(cert_file, third[0])
        await until(lambda: files.seen == files.stamps(), True)  # the watcher looked at the change
        assert await served(port) == fingerprint(second[0])
        assert files.reloads == 1
        replace(key_file, third[1])  # the key arrives: now the third is served
        await until(lambda: served(port), fingerprint(third[0]))
        assert files.reloads == 2

    secure_server(secure, test)


def test_a_rotated_client_ca_decides_whose_certificates_authenticate(tmp_path: Path) -> None:
    old_path, old_key, old_ca = make_ca(tmp_path, "old-ca")
    _, new_key, new_ca = make_ca(tmp_path, "new-ca")
    ca_file = tmp_path / "client-ca.pem"
    ca_file.write_bytes(old_path.read_bytes())
    by_old = client_cert(tmp_path, old_key, old_ca, "prometheus", ("system:monitoring",))
    by_new = client_cert(tmp_path, new_key, new_ca, "prometheus-2", ("system:monitoring",))
    secure = SecureServing(port=0, client_ca_file=str(ca_file))

    async def metrics(port: int, cert: tuple[str, str]) -> int:
        """/metrics on a new connection presenting ``cert`` (0: the handshake was refused)."""
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
        ctx = ssl.create_default_context(cadata=pem)
        ctx.load_cert_chain(*cert)
        client = Client(f"https://127.0.0.1:{port}", ctx)
        try:
            return (await client("/metrics"))[0]
        except aiohttp.ClientError:
            return 0
        finally:
            await client.close()

    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        port = srv.observability.secure.port
        assert (await metrics(port, by_old), await metrics(port, by_new)) == (200, 0)
        self_signed = await served(port)
        replace(ca_file, (tmp_path / "new-ca.pem").read_bytes())
        await until(lambda: metrics(port, by_new), 200)
        assert await metrics(port, by_old) == 0
        assert await served(port) == self_signed  # the self-signed serving certificate stays the same

    secure_server(secure, test)


def test_a_token_added_or_removed_takes_effect_and_a_broken_token_file_keeps_the_last_good_ones(
        tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("old-token,prometheus,1,system:monitoring\n")
    secure = SecureServing(port=0, token_auth_file=str(path))

    async def metrics(client: Client, *tokens: str) -> list[int]:
        return [(await client("/metrics", token))[0] for token in tokens]

    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        gate = srv.observability.secure.gate
        assert gate is not None and gate.token_file is not None
        token_file = gate.token_file
        assert await metrics(client, "old-token", "new-token") == [200, 401]

        replace(path, b"new-token,prometheus-2,2,system:monitoring\n")
        await until(lambda: metrics(client, "old-token", "new-token"), [401, 200])

        # A line without the user's uid: not taken, the tokens before it stay.
        replace(path, b"new-token,prometheus-2,2,system:monitoring\nthird-token,no-uid\n")
        await until(lambda: token_file.seen == token_file.stamp(), True)  # the watcher looked at the change
        assert await metrics(client, "old-token", "new-token", "third-token") == [401, 200, 401]
        assert token_file.reloads == 1
        replace(path, b"third-token,prometheus-3,3,system:monitoring\n")  # fixed: now it is taken
        await until(lambda: metrics(client, "new-token", "third-token"), [401, 200])
        assert token_file.reloads == 2

    secure_server(secure, test)
