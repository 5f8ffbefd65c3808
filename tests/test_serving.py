"""The secure port, as kube-scheduler serves it: HTTPS on 127.0.0.1 with a self-signed certificate that
the client verifies (it fetched the certificate first), kube's health endpoints, /configz, and /metrics
behind authentication and authorization: a static token file and client certificates (embedded mode),
then the real test API server (TokenReview, SubjectAccessReview); a real Prometheus scrapes with a token.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httptools
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from framework import cli, features
from framework.config import load_config
from framework.observe.auth import (
    ANONYMOUS,
    Decision,
    Gate,
    PathMatcher,
    StaticAuthorizer,
    TokenFile,
    TokenFileError,
    TTLCache,
    User,
    bearer_token,
    certificate_user,
)
from framework.observe.certs import fingerprint
from framework.observe.configz import componentconfig
from framework.observe.health import HealthChecks
from framework.observe.httpserver import MAX_BODY
from framework.observe.observability import ObservabilityConfig
from framework.observe.serving import (
    SECURE_PORT_ENV,
    SecureServing,
    ServingConfigError,
    is_loopback,
    parse_duration,
    serving_config,
)
from framework.profiles import build_registry, default_scheduler_config
from framework.service import Server, start_server
from tools.localcluster import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
PROMETHEUS = "/usr/bin/prometheus"

TOKENS = """\
# token,user,uid,"groups"
prom-token,prometheus,uid-prom,"system:monitoring"
admin-token,admin,uid-admin,"system:masters,ops"
bob-token,bob,uid-bob
"""


def status(code: int, message: str) -> dict[str, Any]:
    """The Kubernetes Status a refused request gets."""
    reasons = {401: "Unauthorized", 403: "Forbidden", 500: "InternalError"}
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reasons[code]}
    if code == 403:
        out["details"] = {}
    out["code"] = code
    return out


def unauthorized() -> dict[str, Any]:
    return status(401, "Unauthorized")


def forbidden(user: str, verb: str, path: str) -> dict[str, Any]:
    return status(403, f'forbidden: User "{user}" cannot {verb} path "{path}"')


# ---- a framework with a secure port, and a client that verifies it ------------------------------------


async def fetched_context(port: int, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    """A client context trusting the certificate the port presents (fetched first, as `openssl s_client`
    would), verifying hostname 127.0.0.1; ``cert``: a client certificate and key to present."""
    pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
    ctx = ssl.create_default_context(cadata=pem)
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


class Client:
    """Requests to one port over one keep-alive connection pool."""

    def __init__(self, base: str, context: ssl.SSLContext | None) -> None:
        self.base = base
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context if context else False))

    async def __call__(self, path: str, token: str | None = None, method: str = "GET",
                       data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        async with self.session.request(method, self.base + path, headers=h, data=data,
                                        timeout=aiohttp.ClientTimeout(total=30)) as resp:
            return resp.status, await resp.text()

    async def close(self) -> None:
        await self.session.close()


def secure_server(secure: SecureServing, test: Callable[[Server, Client], Awaitable[None]], *,
                  checks: HealthChecks | None = None, config_text: str | None = None,
                  cert: tuple[str, str] | None = None) -> None:
    """A framework (kube-scheduler's default profile, or ``config_text``) with ``secure`` on a free port."""

    async def main() -> None:
        reg = build_registry()
        cfg = load_config(config_text, reg.points()) if config_text else default_scheduler_config(reg)
        obs = ObservabilityConfig(secure=secure, checks=checks)
        srv = await start_server(cfg, reg, "127.0.0.1:0", seed=1, observability=obs)
        client: Client | None = None
        try:
            assert srv.observability is not None and srv.observability.secure is not None
            port = srv.observability.secure.port
            client = Client(f"https://127.0.0.1:{port}", await fetched_context(port, cert))
            await test(srv, client)
        finally:
            if client is not None:
                await client.close()
            await srv.stop(0.5)

    asyncio.run(main())


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.csv"
    path.write_text(TOKENS)
    return path


# ---- health --------------------------------------------------------------------------------------------

HEALTH = [  # path, status, body: what a caller without credentials gets from a port that wants them
    ("/healthz", 200, "ok"),
    ("/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n"),
    ("/livez?verbose", 200, "[+]ping ok\nlivez check passed\n"),
    ("/readyz", 200, "ok"),
    ("/readyz?verbose", 200, "[+]ping ok\n[+]shutdown ok\nreadyz check passed\n"),
    ("/readyz?verbose&exclude=shutdown&exclude=nope", 200,
     '[+]ping ok\n[+]shutdown excluded: ok\nwarn: some health checks cannot be excluded: no matches for "nope"\n'
     "readyz check passed\n"),
    # Only the three paths are open: a single check names its failure, so it is for authorized callers.
    ("/readyz/shutdown", 401, json.dumps(unauthorized())),
]


def test_health_endpoints_are_open_and_answer_as_kube_over_verified_https(tokens: Path) -> None:
    async def test(srv: Server, client: Client) -> None:
        for path, code, body in HEALTH:
            got = await client(path)
            assert got[0] == code, path
            assert (json.loads(got[1]) if code != 200 else got[1]) == (json.loads(body) if code != 200 else body)
        # A token that is not valid is refused even on an open path (authentication comes first).
        assert (await client("/healthz", "wrong"))[0] == 401

    secure_server(SecureServing(port=0, token_auth_file=str(tokens)), test)


def test_the_self_signed_certificate_names_loopback_and_its_fingerprint_is_the_one_served() -> None:
    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        served = srv.observability.secure
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", served.port))
        cert = x509.load_pem_x509_certificate(pem.encode())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert {"localhost", socket.gethostname()} <= set(names.get_values_for_type(x509.DNSName))
        assert {"127.0.0.1", "::1"} <= {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
        assert cert.issuer == cert.subject
        assert served.tls is not None and served.tls.source == "self-signed"
        assert served.tls.fingerprint == fingerprint(pem.encode())
        # A client trusting something else refuses the port.
        other = ssl.create_default_context()
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await s.get(f"https://127.0.0.1:{served.port}/healthz", ssl=other)

    secure_server(SecureServing(port=0), test)


def test_readyz_is_500_until_a_registered_check_passes() -> None:
    synced = asyncio.Event()
    checks = HealthChecks()
    checks.add("informer-sync", lambda: None if synced.is_set() else "waiting for informers to sync", readyz=True)

    async def slow() -> str | None:  # an awaitable check works too
        return None

    checks.add("leader-election", slow, healthz=True, readyz=True)

    async def test(srv: Server, client: Client) -> None:
        assert await client("/readyz") == (500, "[+]ping ok\n[+]shutdown ok\n[-]informer-sync failed: reason "
                                                "withheld\n[+]leader-election ok\nreadyz check failed\n")
        assert await client("/readyz/informer-sync") == (500, "internal server error: waiting for informers to sync\n")
        assert await client("/healthz?verbose") == (200, "[+]ping ok\n[+]leader-election ok\nhealthz check passed\n")
        assert await client("/readyz?exclude=informer-sync") == (200, "ok")
        synced.set()
        assert await client("/readyz") == (200, "ok")
        assert await client("/readyz/informer-sync") == (200, "ok")
        code, body = await client("/readyz/nope")
        assert (code, json.loads(body)) == (404, {"error": "/readyz has no check 'nope' (it has: ping, shutdown, "
                                                           "informer-sync, leader-election)"})

    secure_server(SecureServing(port=0), test, checks=checks)


@pytest.mark.parametrize(
    ("name", "endpoints", "message"),
    [
        ("Informer_Sync", {"readyz": True}, "health check name 'Informer_Sync': use letters, digits and '-'"),
        ("ping", {"livez": True}, "health check 'ping' is already registered on /livez"),
        ("sync", {}, "health check 'sync': name at least one of healthz, livez, readyz"),
    ],
)
def test_a_bad_health_check_registration_is_refused(name: str, endpoints: dict[str, bool], message: str) -> None:
    checks = HealthChecks()
    with pytest.raises(ValueError) as err:
        checks.add(name, lambda: None, **endpoints)
    assert str(err.value) == message
    assert checks.names("readyz") == ["ping", "shutdown"]


def test_a_failing_or_hanging_check_fails_without_breaking_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from framework.observe import health

    monkeypatch.setattr(health, "CHECK_TIMEOUT", 0.05)
    checks = HealthChecks()

    def broken() -> str | None:
        raise RuntimeError("lost the lease")

    async def hangs() -> str | None:
        await asyncio.sleep(10)
        return None

    checks.add("broken", broken, livez=True)
    checks.add("hangs", hangs, livez=True)

    async def run() -> None:
        assert await checks.render("livez", {}) == (
            500, "[+]ping ok\n[-]broken failed: reason withheld\n[-]hangs failed: reason withheld\n"
                 "livez check failed\n")
        assert await checks.run("livez", "broken") == "RuntimeError: lost the lease"
        assert await checks.run("livez", "hangs") == "no answer within 0.05s"
        checks.shutting_down()
        assert await checks.run("readyz", "shutdown") == "process is shutting down"

    asyncio.run(run())


# ---- authentication and authorization: embedded mode -------------------------------------------------

ACCESS = [  # method, path, token (None: no Authorization header), status, body (a dict is JSON)
    ("GET", "/metrics", None, 401, unauthorized()),
    ("GET", "/metrics", "wrong", 401, unauthorized()),
    ("GET", "/metrics", "", 401, unauthorized()),
    ("GET", "/metrics", "bob-token", 403, forbidden("bob", "get", "/metrics")),
    ("GET", "/metrics", "prom-token", 200, "# HELP scheduler_schedule_attempts_total"),
    ("GET", "/readyz/shutdown", "prom-token", 200, "ok"),
    ("GET", "/configz", "prom-token", 403, forbidden("prometheus", "get", "/configz")),
    ("GET", "/apis/v1/__services__", "prom-token", 403, forbidden("prometheus", "get", "/apis/v1/__services__")),
    ("PUT", "/debug/flags/scores?top=2", "prom-token", 403, forbidden("prometheus", "put", "/debug/flags/scores")),
    ("PUT", "/debug/flags/scores?top=2", "admin-token", 200, {"top": 2}),
    ("GET", "/configz", "admin-token", 200, "{\"componentconfig\": {"),
    ("GET", "/metrics", "admin-token", 200, "# HELP scheduler_schedule_attempts_total"),
    ("GET", "/apis/v1/nodes/nope", "admin-token", 404, {"error": "node 'nope' not found"}),
    ("HEAD", "/healthz", None, 200, ""),  # HEAD is a GET without the body; its verb is head
    ("HEAD", "/metrics", "prom-token", 403, ""),
]


def check_answer(got: tuple[int, str], code: int, want: Any, what: str) -> None:
    assert got[0] == code, f"{what}: {got}"
    if isinstance(want, dict):
        assert json.loads(got[1]) == want, what
    else:
        assert got[1].startswith(want), f"{what}: {got[1][:200]!r}"


def test_static_tokens_are_authenticated_and_authorized_as_kube_bootstrap_roles(tokens: Path) -> None:
    async def test(srv: Server, client: Client) -> None:
        for method, path, token, code, want in ACCESS:
            check_answer(await client(path, token, method), code, want, f"{method} {path} {token}")
        # A header that is not a bearer token counts as no token at all.
        assert (await client("/metrics", headers={"Authorization": "Basic Ym9iOnB3"}))[0] == 401

    secure_server(SecureServing(port=0, token_auth_file=str(tokens)), test)


def make_ca(tmp: Path, name: str) -> tuple[Path, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, key, cert


def client_cert(tmp: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, cn: str,
                orgs: tuple[str, ...] = ()) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = tmp / f"{cn}.pem", tmp / f"{cn}-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_client_certificates_signed_by_the_client_ca_authenticate_their_common_name(tmp_path: Path) -> None:
    ca_path, ca_key, ca = make_ca(tmp_path, "clients-ca")
    _, rogue_key, rogue = make_ca(tmp_path, "rogue-ca")
    prom = client_cert(tmp_path, ca_key, ca, "prometheus", ("system:monitoring",))
    bob = client_cert(tmp_path, ca_key, ca, "bob", ("developers",))
    mallory = client_cert(tmp_path, rogue_key, rogue, "mallory", ("system:masters",))
    secure = SecureServing(port=0, client_ca_file=str(ca_path))
    cases = [(prom, 200, "# HELP"), (bob, 403, forbidden("bob", "get", "/metrics")), (None, 401, unauthorized())]
    for cert, code, want in cases:
        async def test(srv: Server, client: Client, code: int = code, want: Any = want) -> None:
            check_answer(await client("/metrics"), code, want, "client certificate")
            assert (await client("/healthz"))[0] == 200

        secure_server(secure, test, cert=cert)

    async def rogue_test(srv: Server, client: Client) -> None:  # a certificate of another CA: no handshake
        with pytest.raises(aiohttp.ClientError):
            await client("/healthz")

    secure_server(secure, rogue_test, cert=mallory)


def test_without_authentication_the_loopback_port_is_open() -> None:
    async def test(srv: Server, client: Client) -> None:
        check_answer(await client("/metrics"), 200, "# HELP", "open /metrics")
        check_answer(await client("/debug/flags/scores", method="POST", data=b"3"), 200, {"top": 3}, "open debug")

    secure_server(SecureServing(port=0), test)


# ---- /configz --------------------------------------------------------------------------------------------

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 40
podMaxBackoffSeconds: 20
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
- schedulerName: spread
  percentageOfNodesToScore: 70
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"""


def test_configz_is_the_effective_configuration_and_loads_back_to_the_same_profiles() -> None:
    reg = build_registry()
    original = load_config(CONFIG, reg.points())

    async def test(srv: Server, client: Client) -> None:
        code, body = await client("/configz")
        assert code == 200
        doc = json.loads(body)
        assert list(doc) == ["componentconfig", "featureGates"]
        assert doc["featureGates"] == features.current().scheduling()  # the defaults: no --feature-gates here
        assert (doc["featureGates"]["OpportunisticBatching"], doc["featureGates"]["GenericWorkload"]) == (True, False)
        cc = doc["componentconfig"]
        assert {k: cc[k] for k in ("apiVersion", "kind", "leaderElection", "percentageOfNodesToScore",
                                   "podInitialBackoffSeconds", "podMaxBackoffSeconds")} == {
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False}, "percentageOfNodesToScore": 40,
            "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 20}
        spread = cc["profiles"][1]
        # kube's multiPoint expansion: a plugin also enabled at the point itself comes first, with its weight.
        assert spread["plugins"]["score"] == {"enabled": [
            {"name": "NodeResourcesFit", "weight": 5}, {"name": "TaintToleration", "weight": 3},
            {"name": "NodeAffinity", "weight": 2}, {"name": "VolumeBinding", "weight": 1},
            {"name": "PodTopologySpread", "weight": 2}, {"name": "InterPodAffinity", "weight": 2},
            {"name": "DynamicResources", "weight": 2},
            {"name": "ImageLocality", "weight": 1}]}
        # kube-scheduler v1.37's pod-group sets, as multiPoint expansion resolves them (not run).
        assert {k: spread["plugins"][k] for k in ("placementGenerate", "placementScore", "podGroupPostFilter")} == {
            "placementGenerate": {}, "placementScore": {"enabled": [{"name": "NodeResourcesFit", "weight": 1}]},
            "podGroupPostFilter": {"enabled": [{"name": "DynamicResources"}, {"name": "DefaultPreemption"}]}}
        assert spread["pluginConfig"] == [{"name": "NodeResourcesFit",
                                           "args": {"scoringStrategy": {"type": "MostAllocated"}}}]
        again = load_config(yaml.safe_dump(cc), reg.points())
        assert again.profiles == original.profiles
        assert [p.pod_group_plugins for p in again.profiles] == [p.pod_group_plugins for p in original.profiles]
        assert (again.percentage_of_nodes_to_score, again.pod_max_backoff_seconds) == (40, 20.0)
        assert componentconfig(again) == cc

    secure_server(SecureServing(port=0), test, config_text=CONFIG)


# ---- request limits and keep-alive ---------------------------------------------------------------------


async def raw_exchange(port: int, ctx: ssl.SSLContext, data: bytes, answers: int) -> list[bytes]:
    """Send ``data`` on one TLS connection and read ``answers`` HTTP responses (heads and bodies)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    responses = _Responses()
    try:
        writer.write(data)
        await writer.drain()
        while len(responses.out) < answers:
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            assert chunk, f"the server closed after {len(responses.out)} of {answers} responses"
            responses.parser.feed_data(chunk)
    finally:
        writer.close()
    return responses.out


class _Responses:
    """Responses framed by httptools, each kept as its status line, a space and its body."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.out: list[bytes] = []
        self.reason = b""
        self.body = b""

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        version = self.parser.get_http_version().encode()
        status = self.parser.get_status_code()
        self.out.append(b"HTTP/%s %d %s %s" % (version, status, self.reason, self.body))
        self.reason = self.body = b""


def test_keep_alive_and_request_limits() -> None:
    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        port = srv.observability.secure.port
        ctx = await fetched_context(port)
        # Three requests on one connection, answered in order.
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
        request += b"GET /readyz/ping HTTP/1.1\r\nHost: x\r\n\r\n"
        assert await raw_exchange(port, ctx, request, 3) == [b"HTTP/1.1 200 OK ok"] * 3
        code, body = await client("/debug/flags/scores", method="PUT", data=b"1" * (MAX_BODY + 1))
        assert (code, json.loads(body)) == (413, {"error": f"request body of {MAX_BODY + 1} bytes is over {MAX_BODY}"})
        assert (await client("/healthz?" + "a" * 9000))[0] == 400  # a request line over 8190 bytes
        many = {f"x-h{i}": "v" for i in range(200)}  # more than 128 header fields
        assert (await client("/healthz", headers=many))[0] == 400
        code, body = await client("/metrics", method="POST", data=b"")
        assert (code, json.loads(body)) == (405, {"error": "/metrics is read-only (GET)"})
        # The server kept running through all of it.
        assert await client("/healthz") == (200, "ok")

    secure_server(SecureServing(port=0), test)


# ---- settings --------------------------------------------------------------------------------------------


def args_of(*argv: str) -> Any:
    return cli.parser().parse_args(["serve", *argv])


@pytest.fixture
def default_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--secure-port``'s own default (tests/conftest.py turns it off for the frameworks tests start)."""
    monkeypatch.delenv(SECURE_PORT_ENV, raising=False)


def test_serving_flags_default_to_kube_schedulers_port_on_loopback(default_port: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert serving_config(args_of()) == SecureServing(
        bind_address="127.0.0.1", port=10259, always_allow_paths=("/healthz", "/readyz", "/livez"))
    assert serving_config(args_of("--secure-port", "0")) is None
    got = serving_config(args_of("--bind-address", "0.0.0.0", "--token-auth-file", "t.csv",
                                 "--authorization-always-allow-paths", "/healthz,/debug/*",
                                 "--authorization-webhook-cache-authorized-ttl", "1m30s",
                                 "--authorization-webhook-cache-unauthorized-ttl", "500ms",
                                 "--authentication-token-webhook-cache-ttl", "2"), kubeconfig="kc.yaml")
    assert got == SecureServing(bind_address="0.0.0.0", token_auth_file="t.csv", authentication_kubeconfig="kc.yaml",
                                authorization_kubeconfig="kc.yaml", always_allow_paths=("/healthz", "/debug/*"),
                                token_cache_ttl=2.0, allow_cache_ttl=90.0, deny_cache_ttl=0.5)
    monkeypatch.setenv(SECURE_PORT_ENV, "20259")  # a machine with several frameworks moves the default
    assert serving_config(args_of()) == SecureServing(port=20259)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bind-address", "0.0.0.0"],
         "--bind-address 0.0.0.0: without authentication the secure port serves loopback only; give "
         "--token-auth-file or --client-ca-file, or a cluster to delegate to (--authentication-kubeconfig, or "
         "serve --kubeconfig)"),
        (["--bind-address", "localhost"], "--bind-address must be an IP address, got 'localhost'"),
        (["--secure-port", "70000"], "--secure-port must be in [0, 65535], got 70000"),
        (["--tls-cert-file", "c.pem"],
         "--tls-cert-file and --tls-private-key-file go together (the certificate and its key)"),
        (["--authorization-always-allow-paths", "/a*b"],
         "--authorization-always-allow-paths: always-allow path '/a*b': '*' may only end a path"),
        (["--authorization-webhook-cache-authorized-ttl", "ten"],
         "--authorization-webhook-cache-authorized-ttl: 'ten' is not a duration (like 10s, 1m30s or 500ms)"),
    ],
)
def test_bad_serving_flags_are_one_line_errors(argv: list[str], message: str, default_port: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ServingConfigError) as err:
        serving_config(args_of(*argv))
    assert str(err.value) == message
    code = cli.main(["serve", "--listen", "127.0.0.1:0", *argv])
    assert (code, capsys.readouterr().err) == (1, f"error: {message}\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tok,alice\n", "--token-auth-file {path}:1: needs at least 3 columns (token, user name, user uid), found 2"),
        ("a,alice,1\na,bob,2\n", "--token-auth-file {path}:2: this token is already given to user 'alice'"),
        (",alice,1\n", "--token-auth-file {path}:1: the token and the user name must not be empty"),
        ("# nothing\n\n", "--token-auth-file {path}: no tokens in it"),
        (None, "--token-auth-file: cannot read {path}: No such file or directory"),
    ],
)
def test_a_bad_token_file_is_refused_at_startup_naming_the_line(tmp_path: Path, content: str | None,
                                                                 message: str) -> None:
    path = tmp_path / "tokens.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TokenFileError) as err:
        TokenFile.load(str(path))
    assert str(err.value) == message.format(path=path)
    with pytest.raises(ServingConfigError) as err2:
        SecureServing(port=0, token_auth_file=str(path)).build()
    assert str(err2.value) == message.format(path=path)


def test_bad_certificate_files_are_refused_naming_the_flag(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ServingConfigError) as err:
        SecureServing(port=0, cert_file=str(junk), key_file=str(junk)).build()
    assert str(err.value).startswith(f"--tls-cert-file {junk} with --tls-private-key-file {junk}: ")
    with pytest.raises(ServingConfigError) as err:
        SecureServing(port=0, client_ca_file=str(tmp_path / "missing.pem")).build()
    assert str(err.value) == f"--client-ca-file: cannot read {tmp_path / 'missing.pem'}: No such file or directory"


def test_a_busy_secure_port_fails_startup_naming_it() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(OSError) as err:
            secure_server(SecureServing(port=port), lambda srv, client: asyncio.sleep(0))
    assert str(err.value) == f"cannot serve HTTPS on '127.0.0.1:{port}': address already in use"


# ---- the pieces, one by one ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer abc", "abc"), ("  Bearer abc  ", "abc"), ("Bearer", None), ("Bearer  abc", ""),
     ("Basic abc", None), ("", None)],
)
def test_bearer_token_parsing_follows_kube(header: str, token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    ("paths", "path", "allowed"),
    [(("/healthz",), "/healthz", True), (("/healthz",), "/healthz/ping", False), (("/debug/*",), "/debug/x/y", True),
     (("debug/*",), "/debug/", True), (("/debug/*",), "/debugger", False), (("/*",), "/anything", True)],
)
def test_always_allow_paths_match_exactly_or_by_prefix(paths: tuple[str, ...], path: str, allowed: bool) -> None:
    assert PathMatcher(paths)(path) is allowed


def test_certificate_user_is_the_common_name_with_organizations_as_groups() -> None:
    peer = {"subject": ((("organizationName", "system:monitoring"),), (("organizationName", "ops"),),
                        (("commonName", "prometheus"),))}
    assert certificate_user(peer) == User("prometheus", groups=("system:monitoring", "ops"))
    assert certificate_user({"subject": ((("organizationName", "ops"),),)}) is None
    assert certificate_user(None) is None


def test_ttl_cache_expires_each_answer_and_drops_the_oldest_when_full() -> None:
    now = [0.0]
    cache: TTLCache[str, int] = TTLCache(size=2, clock=lambda: now[0])
    cache.put("a", 1, 10.0)
    cache.put("b", 2, 5.0)
    cache.put("zero", 3, 0.0)  # a TTL of 0 keeps nothing
    assert (cache.get("a"), cache.get("b"), cache.get("zero"), len(cache)) == (1, 2, None, 2)
    now[0] = 6.0
    assert (cache.get("a"), cache.get("b")) == (1, None)
    cache.put("c", 3, 10.0)
    cache.put("d", 4, 10.0)  # full: "a", the oldest, goes
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == (None, 3, 4)


def test_the_gate_in_embedded_mode() -> None:
    async def run() -> None:
        gate = Gate(TokenFile({"t": User("prom", groups=("system:monitoring",))}), StaticAuthorizer())
        got = [(await gate.check(m, p, a)).status for m, p, a in [
            ("GET", "/metrics", "Bearer t"), ("GET", "/metrics/slis", "Bearer t"), ("HEAD", "/metrics", "Bearer t"),
            ("GET", "/livez/ping", "Bearer t"), ("GET", "/configz", "Bearer t"), ("GET", "/livez", "")]]
        assert got == [200, 200, 403, 200, 403, 200]
        assert (await gate.check("GET", "/metrics", "Bearer t")).user == User(
            "prom", groups=("system:monitoring", "system:authenticated"))
        assert (await gate.check("GET", "/livez")).user == ANONYMOUS
        assert await StaticAuthorizer().authorize(User("x"), "get", "/metrics") == (Decision.NO_OPINION, "")
        # An authorizer with nothing to authenticate with: only the open paths are served.
        lonely = Gate(None, StaticAuthorizer())
        assert [(await lonely.check("GET", p)).status for p in ("/metrics", "/readyz")] == [401, 200]

    asyncio.run(run())


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                               ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                               ("10.0.0.5", False), ("example.com", False)])
def test_loopback_addresses_are_what_an_open_port_may_bind(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("2", 2.0),
                                               ("1h", 3600.0), ("0s", 0.0)])
def test_durations_are_read_as_go_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text, "--x") == seconds


# ---- a real Prometheus, over HTTPS with a bearer token file --------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK),
                    reason=f"{PROMETHEUS} is not installed (Debian: apt-get install prometheus)")
def test_a_real_prometheus_scrapes_the_secure_port_with_a_bearer_token(tokens: Path) -> None:
    async def test(srv: Server, client: Client) -> None:
        assert srv.observability is not None and srv.observability.secure is not None
        port = srv.observability.secure.port
        with tempfile.TemporaryDirectory() as tmp:
            ca = Path(tmp, "framework.pem")
            ca.write_text(await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port)))
            token = Path(tmp, "token")
            token.write_text("prom-token\n")
            web = _free_port()
            cfg = Path(tmp, "prometheus.yml")
            cfg.write_text(yaml.safe_dump({
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{
                    "job_name": "outrigger", "scheme": "https",
                    "authorization": {"credentials_file": str(token)},
                    "tls_config": {"ca_file": str(ca)},
                    "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                }],
            }))
            proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
                                     f"--web.listen-address=127.0.0.1:{web}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                query = f"http://127.0.0.1:{web}/api/v1/query?query=up"
                result: list[Any] = []
                deadline = time.monotonic() + 60
                async with aiohttp.ClientSession() as s:
                    while time.monotonic() < deadline:
                        try:
                            async with s.get(query, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                                result = (await resp.json())["data"]["result"]
                        except (aiohttp.ClientError, ValueError, KeyError):
                            result = []
                        if result:
                            break
                        await asyncio.sleep(0.5)
                assert [(r["metric"]["job"], r["value"][1]) for r in result] == [("outrigger", "1")]
            finally:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)

    secure_server(SecureServing(port=0, token_auth_file=str(tokens)), test)


# ---- the real API server: TokenReview and SubjectAccessReview ------------------------------------------


def manifest(name: str, kind: str, path: Path = DEPLOY / "serving.yaml") -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind and d["metadata"]["name"] == name]
    return dict(doc)


def sa_token(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


@pytest.fixture
def delegating(kube_cluster: LocalCluster, kube_namespace: str) -> dict[str, Any]:
    """The framework's own service account, with the delegation RBAC of deploy/kubernetes/serving.yaml
    (system:auth-delegator), and two scrapers: one granted serving.yaml's outrigger-metrics-reader, one
    granted nothing."""
    reader = manifest("outrigger-metrics-reader", "ClusterRole")
    delegator = manifest("outrigger-auth-delegator", "ClusterRoleBinding")["roleRef"]["name"]
    assert delegator == "system:auth-delegator"
    framework = kube_cluster.service_account_kubeconfig(kube_namespace, "outrigger", cluster_roles=[delegator])
    allowed = kube_cluster.service_account_kubeconfig(kube_namespace, "prometheus",
                                                      roles_yaml=yaml.safe_dump(reader))
    denied = kube_cluster.service_account_kubeconfig(kube_namespace, "nobody")
    return {"framework": framework, "allowed": sa_token(allowed), "denied": sa_token(denied),
            "namespace": kube_namespace}


def test_against_the_real_api_server_metrics_is_401_403_or_200(delegating: dict[str, Any]) -> None:
    ns = delegating["namespace"]
    secure = SecureServing(port=0, authentication_kubeconfig=str(delegating["framework"]),
                           authorization_kubeconfig=str(delegating["framework"]))

    async def test(srv: Server, client: Client) -> None:
        cases = [
            (None, 401, unauthorized()),
            ("not-a-token", 401, unauthorized()),
            (delegating["denied"], 403, forbidden(f"system:serviceaccount:{ns}:nobody", "get", "/metrics")),
            (delegating["allowed"], 200, "# HELP scheduler_schedule_attempts_total"),
            (delegating["allowed"], 200, "# HELP scheduler_schedule_attempts_total"),
        ]
        for token, code, want in cases:
            check_answer(await client("/metrics", token), code, want, f"/metrics with {token and token[:12]}")
        for path in ("/healthz", "/livez", "/readyz"):
            assert await client(path) == (200, "ok")
        # The answers were cached as kube's delegating authenticator and authorizer cache them: each token
        # reviewed once, each (user, verb, path) asked once, however often it was used.
        assert srv.observability is not None and srv.observability.serving is not None
        gate = srv.observability.serving.gate
        assert (gate.tokens.reviews, gate.authorizer.reviews) == (3, 2)  # type: ignore[union-attr]
        check_answer(await client("/configz", delegating["allowed"]), 403,
                     forbidden(f"system:serviceaccount:{ns}:prometheus", "get", "/configz"), "configz")

    secure_server(secure, test)


def test_an_unreachable_api_server_is_401_for_tokens_and_the_open_paths_stay_open(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                                   ) -> None:
    from framework.observe import delegated

    monkeypatch.setattr(delegated, "REVIEW_TIMEOUT", 1.0)
    dead = _free_port()
    kubeconfig = tmp_path / "dead.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{dead}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    secure = SecureServing(port=0, authentication_kubeconfig=str(kubeconfig), authorization_kubeconfig=str(kubeconfig))

    async def test(srv: Server, client: Client) -> None:
        check_answer(await client("/metrics", "some-token"), 401, unauthorized(), "unreachable")
        assert await client("/readyz") == (200, "ok")

    secure_server(secure, test)


def test_outrigger_serve_on_a_live_cluster_is_ready_only_once_its_informers_synced(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    """The whole thing as deployed: ``outrigger serve --kubeconfig`` with the framework's service account.
    Until it may list pods its informers cannot sync and /readyz says so; once RBAC grants it, ready."""
    framework = kube_cluster.service_account_kubeconfig(kube_namespace, "outrigger",
                                                        cluster_roles=["system:auth-delegator"])
    port, grpc_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "serve", "--listen", f"127.0.0.1:{grpc_port}", "--kubeconfig",
         str(framework), "--secure-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)

    async def readyz() -> tuple[int, str]:
        try:
            ctx = await fetched_context(port)
        except OSError:
            return 0, ""
        client = Client(f"https://127.0.0.1:{port}", ctx)
        try:
            return await client("/readyz?verbose")
        except aiohttp.ClientError:
            return 0, ""
        finally:
            await client.close()

    def until(want: int, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        got = (0, "")
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            got = asyncio.run(readyz())
            if got[0] == want:
                return got[1]
            time.sleep(0.3)
        raise AssertionError(f"/readyz did not answer {want} within {seconds}s: {got}")

    try:
        body = until(500, 60)
        # Leader election is on (kube-scheduler's default): a standby is healthy, its informers decide.
        assert body == ("[+]ping ok\n[+]shutdown ok\n[-]informer-sync failed: reason withheld\n"
                        "[+]leaderElection ok\nreadyz check failed\n")
        role = manifest("outrigger-scheduler", "ClusterRole", DEPLOY / "rbac.yaml")
        kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(role))
        kube_cluster.kubectl("create", "clusterrolebinding", f"outrigger-scheduler:{kube_namespace}",
                             "--clusterrole", "outrigger-scheduler",
                             f"--serviceaccount={kube_namespace}:outrigger")
        assert until(200, 60) == ("[+]ping ok\n[+]shutdown ok\n[+]informer-sync ok\n[+]leaderElection ok\n"
                                  "readyz check passed\n")
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
        kube_cluster.kubectl("delete", "clusterrolebinding", f"outrigger-scheduler:{kube_namespace}",
                             "--ignore-not-found")


def test_serve_announces_the_secure_port_and_serves_it() -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "serve", "--listen", "127.0.0.1:0",
                             "--secure-port", str(port), "--http", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # serve prints within seconds, or exits (and the line is empty)

        async def healthz() -> tuple[int, str]:
            client = Client(f"https://127.0.0.1:{port}", await fetched_context(port))
            try:
                return await client("/healthz")
            finally:
                await client.close()

        answer = asyncio.run(healthz()) if ready else None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    head, _, rest = ready.partition(f", HTTPS on 127.0.0.1:{port}, HTTP on 127.0.0.1:")
    assert head.startswith("outrigger: serving the Scheduler API on 127.0.0.1:") and rest.strip().isdigit(), (
        ready, err)
    assert answer == (200, "ok")
