"""The framework's gRPC ports read their certificate, key and client CA again when the files change, as the
secure port does (tests/test_serving_reload.py): a rotated certificate reaches every new connection, a
rotated client CA decides whose certificates connect, and files that do not load leave the last good
ones serving. Each check opens a new connection to the Handle service of :func:`start_plugin_services`:
the certificate it is shown (a raw TLS handshake offering ``h2``, as gRPC clients do), and whether a
gRPC channel trusting a given certificate gets through the handshake (the call is then refused
UNAUTHENTICATED for want of a plugin host's credential) or not (UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from test_serving import client_cert, make_ca
from test_serving_reload import replace, until

from framework.observe import certs
from framework.observe.certs import fingerprint, self_signed
from framework.service import PluginServices, start_plugin_services
from framework.service.tlsfiles import ReloadingCredentials
from pluginhost import pb
from pluginhost.security import ClientTLS, ServerTLS, TLSConfigError, aio_channel


@pytest.fixture(autouse=True)
def reload_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every new connection looks at the files (10 s apart otherwise).
    monkeypatch.setattr(certs, "RELOAD_SECONDS", 0.0)


async def shown(port: int) -> str:
    """The fingerprint of the certificate a new connection to ``port`` is shown."""
    def handshake() -> bytes:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, ctx.wrap_socket(sock) as conn:
            der = conn.getpeercert(binary_form=True)
        assert der is not None
        return der

    return fingerprint(ssl.DER_cert_to_PEM_cert(await asyncio.to_thread(handshake)).encode())


async def call(address: str, tls: ClientTLS) -> str:
    """The code of a Handle call on a new channel with ``tls`` (a channel of its own: no shared connection)."""
    async with aio_channel(address, tls, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = pb.handle_grpc.HandleStub(channel)  # type: ignore[no-untyped-call]
        try:
            await stub.ListNodeInfos(pb.handle.ListNodeInfosRequest(), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code().name
    return "OK"


def serving(tls: ServerTLS, test: Callable[[PluginServices], Awaitable[None]]) -> None:
    async def main() -> None:
        services = await start_plugin_services(tls=tls)
        try:
            await test(services)
        finally:
            await services.stop(0.2)

    asyncio.run(main())


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_a_rotated_grpc_certificate_reaches_new_connections_and_a_bad_one_is_not_taken(tmp_path: Path) -> None:
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first, second, third = self_signed(), self_signed(), self_signed()  # each a new key and certificate
    write(cert_file, first[0])
    write(key_file, first[1])
    trusting = {name: ClientTLS(write(tmp_path / f"{name}.crt", pair[0]))
                for name, pair in (("first", first), ("second", second), ("third", third))}

    async def test(services: PluginServices) -> None:
        port, files = services.port, services.tls_files
        assert files is not None
        assert await shown(port) == fingerprint(first[0])
        assert [await call(services.address, trusting[n]) for n in ("first", "second")] == [
            "UNAUTHENTICATED", "UNAVAILABLE"]

        replace(key_file, second[1])
        replace(cert_file, second[0])
        await until(lambda: shown(port), fingerprint(second[0]))
        assert [await call(services.address, trusting[n]) for n in ("first", "second")] == [
            "UNAVAILABLE", "UNAUTHENTICATED"]

        # A certificate whose key is not the one beside it: not taken, the second keeps serving.
        replace(cert_file, third[0])
        assert await shown(port) == fingerprint(second[0])
        assert (files.seen == files.stamps(), files.reloads) == (True, 1)  # looked at, not taken
        replace(key_file, third[1])  # the key arrives: now the third is served
        await until(lambda: shown(port), fingerprint(third[0]))
        assert await call(services.address, trusting["third"]) == "UNAUTHENTICATED"
        assert files.reloads == 2

    serving(ServerTLS(str(cert_file), str(key_file)), test)


def test_a_rotated_grpc_client_ca_decides_whose_certificates_connect(tmp_path: Path) -> None:
    old_path, old_key, old_ca = make_ca(tmp_path, "old-ca")
    new_path, new_key, new_ca = make_ca(tmp_path, "new-ca")
    ca_file = tmp_path / "client-ca.pem"
    write(ca_file, old_path.read_bytes())
    serving_pair = self_signed()
    server_cert = write(tmp_path / "tls.crt", serving_pair[0])
    by_old = ClientTLS(server_cert, *client_cert(tmp_path, old_key, old_ca, "host-old"))
    by_new = ClientTLS(server_cert, *client_cert(tmp_path, new_key, new_ca, "host-new"))

    async def test(services: PluginServices) -> None:
        assert [await call(services.address, by_old), await call(services.address, by_new)] == [
            "UNAUTHENTICATED", "UNAVAILABLE"]
        replace(ca_file, new_path.read_bytes())
        await until(lambda: call(services.address, by_new), "UNAUTHENTICATED")
        assert await call(services.address, by_old) == "UNAVAILABLE"
        # A client CA file that is not PEM: logged, the new CA stays.
        replace(ca_file, b"not a certificate\n")
        assert await call(services.address, by_new) == "UNAUTHENTICATED"
        assert services.tls_files is not None and services.tls_files.reloads == 1

    tls = ServerTLS(server_cert, write(tmp_path / "tls.key", serving_pair[1]), client_ca_file=str(ca_file))
    serving(tls, test)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (("first.crt", "second.key", ""), "--tls-key: {d}/second.key is not the key of the certificate in "
                                          "{d}/first.crt"),
        (("first.key", "first.key", ""), "--tls-cert: {d}/first.key holds no PEM certificate"),
        (("first.crt", "first.crt", ""), "--tls-key: {d}/first.crt holds no unencrypted PEM private key"),
        (("first.crt", "first.key", "junk.pem"), "--tls-client-ca: {d}/junk.pem holds no PEM certificate"),
    ],
)
def test_grpc_tls_files_that_do_not_belong_together_fail_startup(tmp_path: Path, files: tuple[str, str, str],
                                                                 message: str) -> None:
    first, second = self_signed(), self_signed()
    for name, data in (("first.crt", first[0]), ("first.key", first[1]), ("second.key", second[1]),
                       ("junk.pem", b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")):
        write(tmp_path / name, data)
    cert, key, ca = (str(tmp_path / f) if f else "" for f in files)
    with pytest.raises(TLSConfigError) as err:
        ReloadingCredentials(ServerTLS(cert, key, ca))
    assert str(err.value) == message.format(d=tmp_path)
