"""How the framework dials each plugin host: the ``tls`` block of a RemotePlugins endpoint, its bearer
token, and the credential the framework issues to the host.

- :class:`EndpointTransport`: per endpoint, the channel credentials (``tls:`` block), the bearer token
  a host requires (``tokenFile:``) and the credential the framework issues to the host (sent in its
  Handshake, checked by the Handle and CycleState services). Files are read once, when the endpoint
  is created; a problem is a :class:`~framework.remote.errors.RemotePluginsError` naming the endpoint.
- :func:`parse_tls_block`: the endpoint's ``tls`` mapping (``caFile``, ``certFile``, ``keyFile``,
  ``serverName``) as :class:`~pluginhost.security.ClientTLS`.

The command-line flags of servers and clients are :mod:`framework.cli.security`; docs/security.md has the
whole picture.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from pluginhost.security import (
    ClientTLS,
    Metadata,
    TLSConfigError,
    aio_channel,
    bearer_metadata,
    channel_credentials,
    read_token,
    sync_channel,
    with_metadata,
)

from .errors import RemotePluginsError

__all__ = ["TLS_FIELDS", "EndpointTransport", "is_tls_failure", "parse_tls_block"]

# The RemotePlugins endpoint's `tls` block: YAML name -> ClientTLS field.
TLS_FIELDS = {"caFile": "ca_file", "certFile": "cert_file", "keyFile": "key_file", "serverName": "server_name"}


def parse_tls_block(value: Any, path: str, fail: Callable[[str, str], None]) -> ClientTLS | None:
    """An endpoint's ``tls`` mapping; problems are reported with ``fail(field path, message)``."""
    if not isinstance(value, dict):
        fail(path, f"must be a mapping with {', '.join(TLS_FIELDS)} (an empty mapping: TLS with the system's CAs)")
        return None
    fields: dict[str, str] = {}
    for key, item in value.items():
        if key not in TLS_FIELDS:
            fail(f"{path}.{key}", f"unknown field (allowed: {', '.join(TLS_FIELDS)})")
        elif not isinstance(item, str) or not item:
            fail(f"{path}.{key}", "must be a non-empty string")
        else:
            fields[TLS_FIELDS[key]] = item
    if ("cert_file" in fields) != ("key_file" in fields):
        fail(path, "certFile and keyFile go together (the client certificate for mutual TLS and its key)")
    return ClientTLS(**fields)


def is_tls_failure(detail: str) -> bool:
    """Whether a failed connection's ``detail`` is a certificate problem (retrying will not help)."""
    return "handshake failed" in detail.lower() or "Hostname Verification Check failed" in detail


class EndpointTransport:
    """How the framework reaches one endpoint's hosts, and the credential it issues them."""

    def __init__(self, name: str, tls: ClientTLS | None, token_file: str = "") -> None:
        self.tls = tls
        self.credential = secrets.token_urlsafe(32)
        try:
            names = {k: f"endpoint {name!r}: tls.{k}File" for k in ("ca", "cert", "key")}
            self._credentials = channel_credentials(tls, names) if tls else None
            token = read_token(token_file, f"endpoint {name!r}: tokenFile") if token_file else ""
        except TLSConfigError as exc:
            raise RemotePluginsError(str(exc)) from None
        self._metadata: Metadata = bearer_metadata(token) if token else ()

    def aio_channel(self, address: str, options: Sequence[tuple[str, Any]]) -> grpc.aio.Channel:
        return aio_channel(address, self.tls, options, self._credentials)

    def sync_channel(self, address: str, options: Sequence[tuple[str, Any]]) -> grpc.Channel:
        return sync_channel(address, self.tls, options, self._credentials)

    def hint(self, detail: str) -> str:
        """What a failed connection's ``detail`` likely means for this endpoint's settings ("" if unsure)."""
        if "CERTIFICATE_VERIFY_FAILED" in detail:
            return "the host's certificate is not signed by the endpoint's tls.caFile"
        if "WRONG_VERSION_NUMBER" in detail:
            return "the host does not serve TLS: remove the endpoint's tls block, or start the host with --tls-cert"
        if "Hostname Verification Check failed" in detail:
            return "the host's certificate does not name the address's host (or tls.serverName)"
        if "Socket closed" not in detail:
            return ""
        if self.tls is None:
            return "the host may serve TLS: add a tls block to the endpoint"
        if not self.tls.cert_file:
            return "the host may require a client certificate: set the endpoint's tls.certFile and tls.keyFile"
        return "the host may not accept the endpoint's client certificate (is it signed by the host's --tls-client-ca?)"

    def stub(self, stub: Any) -> Any:
        """``stub`` sending the endpoint's bearer token with every call (if it has one)."""
        return with_metadata(stub, self._metadata)


