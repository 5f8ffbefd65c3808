"""The secure port's settings (kube-scheduler's serving flags) and what they build.

::

    secure = SecureServing(bind_address="127.0.0.1", port=10259, token_auth_file="tokens.csv")
    cfg = ObservabilityConfig(secure=secure)          # outrigger serve: the flags below
    srv = await start_service(config_for, endpoints, observability=cfg)
    srv.observability.secure.address                  # "127.0.0.1:10259"

``outrigger serve`` flags (:func:`add_serving_flags`, :func:`serving_config`):

==================================================  ===================================================================
``--secure-port N``                                 HTTPS port (default ``$OUTRIGGER_SECURE_PORT``, else 10259; 0: off)
``--bind-address IP``                               its address (default 127.0.0.1)
``--tls-cert-file``, ``--tls-private-key-file``     its certificate (default: self-signed, in memory)
``--client-ca-file``                                authenticate client certificates signed by this CA
``--token-auth-file``                               static bearer tokens (embedded mode)
``--authentication-kubeconfig``                     the cluster that reviews tokens (TokenReview)
``--authorization-kubeconfig``                      the cluster that authorizes (SubjectAccessReview)
``--authorization-always-allow-paths``              open paths (default /healthz,/readyz,/livez)
``--authentication-token-webhook-cache-ttl``        10s
``--authorization-webhook-cache-authorized-ttl``    10s
``--authorization-webhook-cache-unauthorized-ttl``  10s
==================================================  ===================================================================

Both kubeconfigs default to ``serve --kubeconfig`` (a live cluster), else, inside a pod, to its service
account (the in-cluster configuration), else there is no cluster: embedded mode, where callers are
authenticated by ``--token-auth-file`` or client certificates and authorized by
:class:`~framework.observe.auth.StaticAuthorizer`. With no authentication at all the port is open, and
may then only bind a loopback address. Bad settings are :class:`ServingConfigError`, one line each.

Why 127.0.0.1 rather than kube-scheduler's 0.0.0.0 by default: an embedded framework has no cluster to
authenticate callers with, so its default port is the open loopback one (like ``--listen``'s default);
a deployment in a cluster says ``--bind-address 0.0.0.0`` (deploy/kubernetes) and gets the cluster's
authentication.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pluginhost.errors import OutriggerError

from .auth import ALWAYS_ALLOW_PATHS, Gate, PathMatcher, StaticAuthorizer, TokenFile, TokenFileError

if TYPE_CHECKING:  # imported when the port is built: every `outrigger` command reads the flags below
    from framework.kube.client import ApiClient, KubeConfig

    from .certs import ServingTLS

__all__ = [
    "DEFAULT_BIND_ADDRESS",
    "DEFAULT_SECURE_PORT",
    "SECURE_PORT_ENV",
    "Built",
    "SecureServing",
    "ServingConfigError",
    "add_serving_flags",
    "is_loopback",
    "parse_duration",
    "serving_config",
]

log = logging.getLogger("outrigger.serving")

DEFAULT_SECURE_PORT = 10259
DEFAULT_BIND_ADDRESS = "127.0.0.1"
#: The environment variable ``--secure-port`` defaults to (like ``--server``'s ``OUTRIGGER_SERVER``): a
#: machine running several frameworks, or a test suite, sets it once.
SECURE_PORT_ENV = "OUTRIGGER_SECURE_PORT"


class ServingConfigError(OutriggerError, ValueError):
    """Secure-port settings that cannot be used (one line naming the flag)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str, flag: str) -> float:
    """A Go-style duration (``10s``, ``1m30s``, ``500ms``; a bare number is seconds) in seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ServingConfigError(f"{flag}: {text!r} is not a duration (like 10s, 1m30s or 500ms)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


@dataclass(frozen=True)
class SecureServing:
    """The secure port (see the module docstring). ``port`` 0 picks a free port (the command line's
    ``--secure-port 0`` means no secure port at all: no :class:`SecureServing`)."""

    bind_address: str = DEFAULT_BIND_ADDRESS
    port: int = DEFAULT_SECURE_PORT
    cert_file: str = ""
    key_file: str = ""
    client_ca_file: str = ""
    token_auth_file: str = ""
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""
    #: With no kubeconfig, delegate to the pod's own cluster when running in one (kube-scheduler does).
    in_cluster: bool = False
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    token_cache_ttl: float = 10.0
    allow_cache_ttl: float = 10.0
    deny_cache_ttl: float = 10.0

    @property
    def listen(self) -> str:
        host = self.bind_address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def check(self) -> None:
        """The checks that need no file or cluster: ServingConfigError naming the flag."""
        if not 0 <= self.port <= 65535:
            raise ServingConfigError(f"--secure-port must be in [0, 65535], got {self.port}")
        try:
            ipaddress.ip_address(self.bind_address.strip("[]"))
        except ValueError:
            raise ServingConfigError(f"--bind-address must be an IP address, got {self.bind_address!r}") from None
        if bool(self.cert_file) != bool(self.key_file):
            raise ServingConfigError("--tls-cert-file and --tls-private-key-file go together (the certificate and "
                                     "its key)")
        try:
            PathMatcher(self.always_allow_paths)
        except ValueError as exc:
            raise ServingConfigError(f"--authorization-always-allow-paths: {exc}") from None
        for flag, ttl in (("--authentication-token-webhook-cache-ttl", self.token_cache_ttl),
                          ("--authorization-webhook-cache-authorized-ttl", self.allow_cache_ttl),
                          ("--authorization-webhook-cache-unauthorized-ttl", self.deny_cache_ttl)):
            if ttl < 0:
                raise ServingConfigError(f"{flag} must not be negative, got {ttl:g}s")
        authenticated = (self.token_auth_file or self.client_ca_file or self.authentication_kubeconfig
                         or self.in_cluster)
        if not authenticated and not is_loopback(self.bind_address):
            raise ServingConfigError(
                f"--bind-address {self.bind_address}: without authentication the secure port serves loopback "
                "only; give --token-auth-file or --client-ca-file, or a cluster to delegate to "
                "(--authentication-kubeconfig, or serve --kubeconfig)")

    def build(self) -> Built:
        """Read the files and make the TLS context, the gate and its clients (ServingConfigError)."""
        from .certs import CertificateError, server_context
        from .delegated import AccessReviewer, TokenReviewer, review_client

        self.check()
        try:
            tls = server_context(self.cert_file, self.key_file, self.client_ca_file, [self.bind_address])
        except CertificateError as exc:
            raise ServingConfigError(str(exc)) from None
        clients: list[ApiClient] = []
        tokens: Any = None
        token_file: TokenFile | None = None
        if self.token_auth_file:
            try:
                tokens = token_file = TokenFile.load(self.token_auth_file)
            except TokenFileError as exc:
                raise ServingConfigError(str(exc)) from None
        authn = self._cluster(self.authentication_kubeconfig, "--authentication-kubeconfig")
        same = self.authorization_kubeconfig == self.authentication_kubeconfig  # one cluster, one client
        authz = authn if same else self._cluster(self.authorization_kubeconfig, "--authorization-kubeconfig")
        if authn is not None:
            clients.append(review_client(authn))
            reviewer = TokenReviewer(clients[-1], self.token_cache_ttl)
            tokens = reviewer if tokens is None else _Either(tokens, reviewer)
        authorizer: Any = None
        if authz is not None:
            if not (same and clients):
                clients.append(review_client(authz))
            authorizer = AccessReviewer(clients[-1], self.allow_cache_ttl, self.deny_cache_ttl)
        elif tokens is not None or self.client_ca_file:
            authorizer = StaticAuthorizer()
        if tokens is None and not self.client_ca_file and not is_loopback(self.bind_address):
            # In a pod without a usable service account: nothing left to authenticate with.
            raise ServingConfigError(f"--bind-address {self.bind_address}: no authentication could be set up "
                                     "(see the warnings above); the secure port serves loopback only without it")
        gate = Gate(tokens, authorizer, bool(self.client_ca_file), PathMatcher(self.always_allow_paths),
                    token_file=token_file)
        return Built(tls, gate, clients, self._mode(tokens, authn, authz))

    def _cluster(self, kubeconfig: str, flag: str) -> KubeConfig | None:
        from framework.kube.client import KubeConfig, KubeConfigError

        try:
            if kubeconfig:
                return KubeConfig.from_file(kubeconfig)
            if self.in_cluster:
                return KubeConfig.in_cluster()
        except KubeConfigError as exc:
            if kubeconfig:
                raise ServingConfigError(f"{flag}: {exc}") from None
            log.warning("no delegated authentication or authorization: %s", exc)
        return None

    def _mode(self, tokens: Any, authn: KubeConfig | None, authz: KubeConfig | None) -> str:
        parts = []
        if authn is not None:
            parts.append(f"tokens reviewed by {authn.server}")
        if self.token_auth_file:
            parts.append(f"tokens of {self.token_auth_file}")
        if self.client_ca_file:
            parts.append(f"client certificates of {self.client_ca_file}")
        if not parts:
            return "open (loopback only, no authentication)"
        who = f"authorized by {authz.server}" if authz is not None else "authorized as system:monitoring"
        return "; ".join(parts) + f"; {who}"


class _Either:
    """Tokens of a static file first, then the cluster's review."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    async def authenticate(self, token: str) -> Any:
        user = await self.first.authenticate(token)
        return user if user is not None else await self.second.authenticate(token)


@dataclass
class Built:
    """What :meth:`SecureServing.build` made: the TLS, the gate, the review clients (closed with the
    port) and a one-line ``mode`` for the log."""

    tls: ServingTLS
    gate: Gate
    clients: list[ApiClient] = field(default_factory=list)
    mode: str = ""

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


# ---- command-line flags ---------------------------------------------------------------------------


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    """kube-scheduler's serving, authentication and authorization flags (``outrigger serve``)."""
    g = parser.add_argument_group("secure serving (kube-scheduler's /healthz, /livez, /readyz, /metrics, "
                                  "/configz and debug paths over HTTPS)")
    default = os.environ.get(SECURE_PORT_ENV) or str(DEFAULT_SECURE_PORT)
    g.add_argument("--secure-port", type=int, default=default, metavar="N",
                   help=f"serve HTTPS on this port (default ${SECURE_PORT_ENV}, else {DEFAULT_SECURE_PORT}; now "
                        f"{default}; 0: no secure port)")
    g.add_argument("--bind-address", default=DEFAULT_BIND_ADDRESS, metavar="IP",
                   help=f"address of the secure port (default {DEFAULT_BIND_ADDRESS}; 0.0.0.0 for every "
                        "interface, which needs authentication)")
    g.add_argument("--tls-cert-file", metavar="FILE",
                   help="the secure port's certificate (PEM; default: a self-signed one made at startup)")
    g.add_argument("--tls-private-key-file", metavar="FILE", help="the key of --tls-cert-file (PEM)")
    g.add_argument("--client-ca-file", metavar="FILE",
                   help="authenticate callers presenting a client certificate signed by this CA (user: its "
                        "Common Name, groups: its Organizations)")
    g.add_argument("--token-auth-file", metavar="FILE",
                   help='bearer tokens, one CSV line each: token,user,uid,"group1,group2" (kube-apiserver\'s '
                        "format); group system:monitoring may read /metrics")
    g.add_argument("--authentication-kubeconfig", metavar="FILE",
                   help="the cluster that reviews bearer tokens (TokenReview; default: --kubeconfig, or the "
                        "pod's service account)")
    g.add_argument("--authorization-kubeconfig", metavar="FILE",
                   help="the cluster that authorizes callers (SubjectAccessReview; default: --kubeconfig, or "
                        "the pod's service account)")
    g.add_argument("--authorization-always-allow-paths", default=",".join(ALWAYS_ALLOW_PATHS), metavar="PATHS",
                   help="paths open to anyone, comma-separated ('/debug/*' for a prefix; default "
                        f"{','.join(ALWAYS_ALLOW_PATHS)})")
    g.add_argument("--authentication-token-webhook-cache-ttl", default="10s", metavar="DURATION",
                   help="how long a token review's answer is kept (default 10s)")
    g.add_argument("--authorization-webhook-cache-authorized-ttl", default="10s", metavar="DURATION",
                   help="how long an 'allowed' access review is kept (default 10s)")
    g.add_argument("--authorization-webhook-cache-unauthorized-ttl", default="10s", metavar="DURATION",
                   help="how long a 'not allowed' access review is kept (default 10s)")


def in_a_pod() -> bool:
    """Whether this process runs in a Kubernetes pod (the in-cluster configuration is there)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def serving_config(args: argparse.Namespace, kubeconfig: str = "") -> SecureServing | None:
    """The :class:`SecureServing` of :func:`add_serving_flags`' flags (None for ``--secure-port 0``);
    ``kubeconfig``: the live cluster the framework schedules, if any (the reviews' default).
    ServingConfigError naming a bad flag."""
    if args.secure_port == 0:
        return None
    paths: Sequence[str] = [p.strip() for p in args.authorization_always_allow_paths.split(",") if p.strip()]
    cfg = SecureServing(
        bind_address=args.bind_address,
        port=args.secure_port,
        cert_file=args.tls_cert_file or "",
        key_file=args.tls_private_key_file or "",
        client_ca_file=args.client_ca_file or "",
        token_auth_file=args.token_auth_file or "",
        authentication_kubeconfig=args.authentication_kubeconfig or kubeconfig,
        authorization_kubeconfig=args.authorization_kubeconfig or kubeconfig,
        in_cluster=bool(getattr(args, "in_cluster", False)) or in_a_pod(),
        always_allow_paths=tuple(paths),
        token_cache_ttl=parse_duration(args.authentication_token_webhook_cache_ttl,
                                       "--authentication-token-webhook-cache-ttl"),
        allow_cache_ttl=parse_duration(args.authorization_webhook_cache_authorized_ttl,
                                       "--authorization-webhook-cache-authorized-ttl"),
        deny_cache_ttl=parse_duration(args.authorization_webhook_cache_unauthorized_ttl,
                                      "--authorization-webhook-cache-unauthorized-ttl"),
    )
    cfg.check()
    return cfg
