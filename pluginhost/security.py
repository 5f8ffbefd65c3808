"""Transport security shared by the framework, plugin hosts and clients.

TLS credentials come from PEM files; a server may require a bearer token; a client sends metadata
(a token) with every call without touching the calling code::

    server_tls = ServerTLS("host.pem", "host-key.pem", client_ca_file="ca.pem")   # mutual TLS
    port = add_port(server, "127.0.0.1:50061", server_tls)
    channel = aio_channel("127.0.0.1:50061", ClientTLS("ca.pem", "fw.pem", "fw-key.pem"))
    stub = with_metadata(PluginStub(channel), bearer_metadata(read_token("token")))

- :class:`ServerTLS`: the certificate a server presents; with ``client_ca_file`` every client must
  present a certificate signed by that CA (mutual TLS), otherwise the connection is closed.
- :class:`ClientTLS`: the CA a client verifies the server against (empty: the system's roots), the
  certificate it presents for mutual TLS, and an optional name to verify instead of the address's host.
- :class:`BearerTokenInterceptor`: refuses calls without ``authorization: Bearer <token>`` with
  ``UNAUTHENTICATED``. The standard health service stays open (probes carry no token).
- :func:`with_metadata`: a stub whose every call carries extra metadata (static, or computed per call).

Problems with files are :class:`TLSConfigError` s naming the file and what it was for.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from pluginhost.errors import OutriggerError

__all__ = [
    "AUTHORIZATION",
    "CLIENT_FLAG_NAMES",
    "SERVER_FLAG_NAMES",
    "BearerTokenInterceptor",
    "ClientTLS",
    "Metadata",
    "ServerTLS",
    "TLSConfigError",
    "add_port",
    "aio_channel",
    "bearer_metadata",
    "bearer_token",
    "channel_credentials",
    "read_pem",
    "read_token",
    "server_credentials",
    "sync_channel",
    "with_metadata",
]

AUTHORIZATION = "authorization"  # gRPC metadata keys are lowercase
_BEARER = "Bearer "
_HEALTH_PREFIX = "/grpc.health.v1.Health/"

Metadata = tuple[tuple[str, str], ...]


class TLSConfigError(OutriggerError, ValueError):
    """A certificate, key or token file cannot be used (the message names the file and its role)."""


def read_pem(path: str, what: str) -> bytes:
    """The PEM file at ``path`` (``what`` names its role in errors, e.g. ``"--tls-cert"``)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise TLSConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise TLSConfigError(f"{what}: {path} is not a PEM file (no -----BEGIN line)")
    return data


def read_token(path: str, what: str = "token file") -> str:
    """The bearer token in the file at ``path`` (surrounding whitespace removed; must not be empty)."""
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TLSConfigError(f"{what}: cannot read {path}: {reason}") from None
    if not token:
        raise TLSConfigError(f"{what}: {path} is empty")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise TLSConfigError(f"{what}: {path} must hold one token without spaces or control characters")
    return token


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """A server's certificate and key; ``client_ca_file`` set: clients must present a certificate
    signed by that CA (mutual TLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str = ""


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """How a client dials a TLS server: the CA to verify it (empty: the system's roots), the
    certificate and key to present for mutual TLS (both or neither), and ``server_name`` to verify
    instead of the address's host (e.g. a DNS name in the certificate while dialing an IP)."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


# How errors name the files of a ServerTLS / ClientTLS (the command-line flags by default).
SERVER_FLAG_NAMES = {"cert": "--tls-cert", "key": "--tls-key", "ca": "--tls-client-ca"}
CLIENT_FLAG_NAMES = {"ca": "--tls-ca", "cert": "--tls-cert", "key": "--tls-key"}


def server_credentials(tls: ServerTLS, names: Mapping[str, str] = SERVER_FLAG_NAMES) -> Any:
    """``grpc.ssl_server_credentials`` for ``tls`` (``names``: what errors call each file)."""
    if not tls.cert_file or not tls.key_file:
        raise TLSConfigError(f"{names['cert']} and {names['key']} are both required to serve TLS")
    cert = read_pem(tls.cert_file, names["cert"])
    key = read_pem(tls.key_file, names["key"])
    if tls.client_ca_file:
        ca = read_pem(tls.client_ca_file, names["ca"])
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
    return grpc.ssl_server_credentials([(key, cert)])


def channel_credentials(tls: ClientTLS, names: Mapping[str, str] = CLIENT_FLAG_NAMES) -> Any:
    """``grpc.ssl_channel_credentials`` for ``tls`` (``names``: what errors call each file)."""
    if bool(tls.cert_file) != bool(tls.key_file):
        raise TLSConfigError(f"{names['cert']} and {names['key']} go together (a client certificate needs its key)")
    ca = read_pem(tls.ca_file, names["ca"]) if tls.ca_file else None
    cert = read_pem(tls.cert_file, names["cert"]) if tls.cert_file else None
    key = read_pem(tls.key_file, names["key"]) if tls.key_file else None
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


# gRPC bounds each connection attempt by "grpc.min_reconnect_backoff_ms" (its minimum connect timeout).
# Channels here set it low to reconnect quickly, but a TLS handshake with a busy Python server can take
# longer than that: give TLS connection attempts this long (reconnecting after a refusal stays quick).
TLS_MIN_CONNECT_TIMEOUT_MS = 10_000


def _options(tls: ClientTLS, options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    out = [(k, v) for k, v in options if k != "grpc.min_reconnect_backoff_ms"]
    given = [int(v) for k, v in options if k == "grpc.min_reconnect_backoff_ms"]
    out.append(("grpc.min_reconnect_backoff_ms", max([*given, TLS_MIN_CONNECT_TIMEOUT_MS])))
    if tls.server_name:
        out.append(("grpc.ssl_target_name_override", tls.server_name))
    return out


def aio_channel(address: str, tls: ClientTLS | None, options: Sequence[tuple[str, Any]] = (),
                credentials: Any = None) -> grpc.aio.Channel:
    """An asyncio channel to ``address``: TLS when ``tls`` is given, plaintext otherwise
    (``credentials``: already-built channel credentials for ``tls``, to read its files once)."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    creds = credentials if credentials is not None else channel_credentials(tls)
    return grpc.aio.secure_channel(address, creds, options=_options(tls, options))


def sync_channel(address: str, tls: ClientTLS | None, options: Sequence[tuple[str, Any]] = (),
                 credentials: Any = None) -> grpc.Channel:
    """A blocking channel to ``address`` (see :func:`aio_channel`)."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    creds = credentials if credentials is not None else channel_credentials(tls)
    return grpc.secure_channel(address, creds, options=_options(tls, options))


def add_port(server: grpc.aio.Server, listen: str, tls: ServerTLS | None,
             names: Mapping[str, str] = SERVER_FLAG_NAMES) -> int:
    """Bind ``listen`` (TLS when ``tls`` is given); ``OSError`` if the address cannot be bound."""
    if tls is None:
        port = server.add_insecure_port(listen)
    else:
        port = server.add_secure_port(listen, server_credentials(tls, names))
    if port == 0:
        raise OSError(f"cannot listen on {listen!r}")
    return int(port)


# ---------------------------------------------------------------------------------------------------
# Bearer tokens


def bearer_metadata(token: str) -> Metadata:
    """The metadata carrying ``token`` (``authorization: Bearer <token>``)."""
    return ((AUTHORIZATION, _BEARER + token),)


def bearer_token(metadata: Sequence[Any] | None) -> str:
    """The bearer token in call ``metadata`` (pairs or ``Metadatum`` s); empty when there is none."""
    for item in metadata or ():
        key, value = item[0], item[1]
        if key == AUTHORIZATION and isinstance(value, str) and value.startswith(_BEARER):
            return value[len(_BEARER):].strip()
    return ""


def _denying_handler(handler: Any, code: grpc.StatusCode, message: str) -> Any:
    """A method handler of ``handler``'s shape that aborts every call with ``code``."""

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(code, message)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses every call (but health checks) whose ``authorization`` metadata is not
    ``Bearer <token>``, with ``UNAUTHENTICATED``."""

    def __init__(self, token: str, who: str = "this server") -> None:
        if not token:
            raise TLSConfigError("a bearer token must not be empty")
        self._digest = hashlib.sha256(token.encode()).digest()
        self._who = who

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], handler_call_details: Any
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or str(handler_call_details.method).startswith(_HEALTH_PREFIX):
            return handler
        token = bearer_token(handler_call_details.invocation_metadata)
        if token and hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self._digest):
            return handler
        why = "an invalid bearer token" if token else "no bearer token ('authorization: Bearer <token>' metadata)"
        return _denying_handler(handler, grpc.StatusCode.UNAUTHENTICATED, f"{self._who} refused a call with {why}")


# ---------------------------------------------------------------------------------------------------
# Stubs that send metadata


class _MetadataStub:
    """A stub whose calls carry the metadata ``metadata()`` returns, after the caller's own."""

    def __init__(self, stub: Any, metadata: Callable[[], Metadata]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        metadata = self._metadata

        def call(*args: Any, **kwargs: Any) -> Any:
            extra = metadata()
            if extra:
                kwargs["metadata"] = (*(kwargs.get("metadata") or ()), *extra)
            return method(*args, **kwargs)

        setattr(self, name, call)  # later lookups skip __getattr__
        return call


def with_metadata(stub: Any, metadata: Metadata | Callable[[], Metadata]) -> Any:
    """``stub`` whose every call carries ``metadata`` (a tuple, or a function returning one per
    call). An empty static tuple returns ``stub`` itself: nothing is added to calls that need nothing."""
    if callable(metadata):
        return _MetadataStub(stub, metadata)
    if not metadata:
        return stub
    fixed = tuple(metadata)
    return _MetadataStub(stub, lambda: fixed)
