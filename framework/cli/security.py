"""Transport security flags of the command line: ``--tls-*`` for servers (``outrigger serve``,
``outrigger plugin serve``) and clients of the Scheduler API, a plugin host's ``--token-file`` and
``--framework-*`` (how it dials the framework back).

- :func:`add_server_flags` / :func:`server_tls`: ``--tls-cert``, ``--tls-key``, ``--tls-client-ca``.
- :func:`add_plugin_host_flags` / :func:`plugin_host_security`: ``--token-file`` and ``--framework-*``.
- :func:`add_client_flags` / :func:`client_tls`: ``--tls-ca``, ``--tls-cert``, ``--tls-key``,
  ``--tls-server-name``.

How the framework dials plugin hosts (a RemotePlugins endpoint's ``tls`` block) is
:mod:`framework.remote.security`; docs/security.md has the whole picture.
"""

from __future__ import annotations

import argparse
from typing import Any

from pluginhost.security import ClientTLS, ServerTLS, TLSConfigError, channel_credentials, read_token

__all__ = [
    "add_client_flags",
    "add_plugin_host_flags",
    "add_server_flags",
    "client_tls",
    "plugin_host_security",
    "server_tls",
]


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
