"""The framework's side of transport security: how it dials each plugin host, its command-line flags,
and the ``tls`` block of a RemotePlugins endpoint.

- :class:`EndpointTransport`: per endpoint, the channel credentials (``tls:`` block), the bearer token
  a host requires (``tokenFile:``) and the credential the framework issues to the host (sent in its
  Handshake, checked by the Handle and CycleState services). Files are read once, when the endpoint
  is created; a problem is a :class:`~framework.remote.RemotePluginsError` naming the endpoint.
- :func:`parse_tls_block`: the endpoint's ``tls`` mapping (``caFile``, ``certFile``, ``keyFile``,
  ``serverName``) as :class:`~pluginhost.security.ClientTLS`.
- :func:`add_server_flags` / :func:`server_tls`: ``--tls-cert``, ``--tls-key``, ``--tls-client-ca``
  for servers (``outrigger serve``, ``outrigger plugin serve``); :func:`add_plugin_host_flags` /
  :func:`plugin_host_security`: a plugin host's ``--token-file`` and ``--framework-*`` (how it dials
  the framework back); :func:`add_client_flags` /
  :func:`client_tls`: ``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--tls-server-name`` for
  clients of the Scheduler API.

See docs/security.md for the whole picture.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from pluginhost.security import (
    ClientTLS,
    Metadata,
    ServerTLS,
    TLSConfigError,
    aio_channel,
    bearer_metadata,
    channel_credentials,
    read_token,
    sync_channel,
    with_metadata,
)

__all__ = [
    "TLS_FIELDS",
    "EndpointTransport",
    "add_client_flags",
    "add_plugin_host_flags",
    "add_server_flags",
    "client_tls",
    "is_tls_failure",
    "parse_tls_block",
    "plugin_host_security",
    "server_tls",
]

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
            from .remote import RemotePluginsError

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


# ---------------------------------------------------------------------------------------------------
# Command-line flags


def add_server_flags(parser: argparse.ArgumentParser, who: str) -> None:
    """``--tls-cert``, ``--tls-key`` and ``--tls-client-ca`` for a server (``who`` names its clients)."""
    parser.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this certificate (PEM; needs --tls-key)")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    parser.add_argument("--tls-client-ca", metavar="FILE",
                        help=f"require {who} to present a client certificate signed by this CA (mutual TLS)")


def server_tls(args: argparse.Namespace) -> ServerTLS | None:
    """The server TLS of :func:`add_server_flags`' flags (None: plaintext); ``TLSConfigError`` if
    they do not go together."""
    cert, key, ca = args.tls_cert or "", args.tls_key or "", args.tls_client_ca or ""
    if not (cert or key or ca):
        return None
    if not (cert and key):
        raise TLSConfigError("--tls-cert and --tls-key are both required to serve TLS"
                             + (" (--tls-client-ca only adds client certificate checks)" if ca else ""))
    return ServerTLS(cert, key, ca)


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--tls-server-name`` for a client."""
    parser.add_argument("--tls", action="store_true",
                        help="use TLS, verifying the server against the system's CAs (implied by --tls-ca)")
    parser.add_argument("--tls-ca", metavar="FILE", help="use TLS, verifying the server against this CA (PEM)")
    parser.add_argument("--tls-cert", metavar="FILE", help="client certificate for mutual TLS (PEM; needs --tls-key)")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    parser.add_argument("--tls-server-name", metavar="NAME",
                        help="name to verify in the server's certificate instead of the --server host")


def client_tls(args: argparse.Namespace) -> ClientTLS | None:
    """The client TLS of :func:`add_client_flags`' flags (None: plaintext)."""
    ca, cert, key = args.tls_ca or "", args.tls_cert or "", args.tls_key or ""
    name = args.tls_server_name or ""
    if not (args.tls or ca or cert or key or name):
        return None
    if bool(cert) != bool(key):
        raise TLSConfigError("--tls-cert and --tls-key go together (a client certificate needs its key)")
    return ClientTLS(ca, cert, key, name)


def add_plugin_host_flags(parser: argparse.ArgumentParser) -> None:
    """``outrigger plugin serve``'s flags besides :func:`add_server_flags`: the bearer token it
    requires, and how it dials the framework back."""
    parser.add_argument("--token-file", metavar="FILE",
                        help="require the framework to send this bearer token (the file holds the token)")
    parser.add_argument("--framework-ca", metavar="FILE",
                        help="dial the framework with TLS, verifying it against this CA (PEM)")
    parser.add_argument("--framework-cert", metavar="FILE",
                        help="client certificate to present to the framework (default with --framework-ca: "
                             "--tls-cert)")
    parser.add_argument("--framework-key", metavar="FILE", help="the private key of --framework-cert")
    parser.add_argument("--framework-server-name", metavar="NAME",
                        help="name to verify in the framework's certificate instead of its address's host")


def plugin_host_security(args: argparse.Namespace) -> dict[str, Any]:
    """``PluginHost`` keyword arguments (``tls``, ``token``, ``framework_tls``) from the flags of
    :func:`add_server_flags` and :func:`add_plugin_host_flags`; ``TLSConfigError`` naming a bad flag."""
    token = read_token(args.token_file, "--token-file") if args.token_file else None
    cert, key = args.framework_cert or "", args.framework_key or ""
    if bool(cert) != bool(key):
        raise TLSConfigError("--framework-cert and --framework-key go together (a client certificate needs its key)")
    framework_tls = None
    if args.framework_ca or cert or args.framework_server_name:
        if not cert and args.tls_cert and args.tls_key:
            cert, key = args.tls_cert, args.tls_key  # one certificate for both roles (serverAuth + clientAuth)
        framework_tls = ClientTLS(args.framework_ca or "", cert, key, args.framework_server_name or "")
        names = {"ca": "--framework-ca", "cert": "--framework-cert", "key": "--framework-key"}
        channel_credentials(framework_tls, names)  # read the files now: a bad flag fails at startup
    return {"tls": server_tls(args), "token": token, "framework_tls": framework_tls}
