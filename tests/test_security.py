"""Security: TLS and mutual TLS between the framework, plugin hosts and clients of the Scheduler API;
the bearer token a plugin host may require; the credential the framework issues each plugin host for
its Handle and CycleState services; which cycles' CycleState a plugin may use.

Certificates are made here with ``cryptography``: a throwaway CA, certificates it signs for
127.0.0.1/localhost (framework, plugin host, client), and a second CA whose certificate ("rogue")
nobody trusts. Everything runs on 127.0.0.1 with real gRPC servers and real plugin host processes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from security_fakes import TARGET, Hold
from test_remote_harness import ROOT, TESTS, HostProcess, Hosts, endpoint, remote_rig, until

from framework.cli import main
from framework.config import ConfigError, load_config
from framework.plugins import in_tree_registry
from framework.profiles import default_scheduler_config
from framework.remote import EndpointConfig, RemotePlugins, RemotePluginsError, parse_remote_plugins
from framework.remote.services import join_cycle
from framework.scheduler import Scheduler
from framework.service import start_plugin_services, start_server, start_service
from pluginhost import pb
from pluginhost.examples.nodelabels import REQUIRE
from pluginhost.host import PluginHost
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import CycleState
from pluginhost.security import ClientTLS, ServerTLS, aio_channel, bearer_metadata
from pluginhost.state import StateValue

TOKEN = "s3cret-token-for-the-host"

# ---------------------------------------------------------------------------------------------------
# A throwaway PKI


@dataclasses.dataclass(frozen=True)
class Pki:
    """Paths of the PEM files (and token files) of the tests' certificates."""

    ca: str  # the CA everyone trusts
    other_ca: str  # a CA nobody trusts
    framework: tuple[str, str]  # (certificate, key), signed by ca, 127.0.0.1 + localhost
    host: tuple[str, str]  # a plugin host's, signed by ca
    client: tuple[str, str]  # a client of the Scheduler API, signed by ca (client auth only)
    rogue: tuple[str, str]  # signed by other_ca, 127.0.0.1 + localhost
    token: str  # a file holding TOKEN
    wrong_token: str  # a file holding another token


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _builder(subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2)))


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False)
    cert = (_builder(cn, _name(cn), key).add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(usage, critical=True).sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], cn: str, *, server: bool) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
    builder = _builder(cn, ca[1].subject, key).add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca[0], hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")

    def write(name: str, data: bytes) -> str:
        path = d / name
        path.write_bytes(data)
        return str(path)

    def pair(name: str, cert_key: tuple[bytes, bytes]) -> tuple[str, str]:
        return write(f"{name}.pem", cert_key[0]), write(f"{name}-key.pem", cert_key[1])

    ca, other = _ca("outrigger test CA"), _ca("someone else's CA")
    return Pki(
        ca=write("ca.pem", ca[1].public_bytes(serialization.Encoding.PEM)),
        other_ca=write("other-ca.pem", other[1].public_bytes(serialization.Encoding.PEM)),
        framework=pair("framework", _leaf(ca, "framework", server=True)),
        host=pair("host", _leaf(ca, "plugin host", server=True)),
        client=pair("client", _leaf(ca, "operator", server=False)),
        rogue=pair("rogue", _leaf(other, "rogue", server=True)),
        token=write("token", f"{TOKEN}\n".encode()),
        wrong_token=write("wrong-token", b"not-the-token\n"),
    )


# ---------------------------------------------------------------------------------------------------
# Cluster objects and configurations


def make_node(name: str, labels: dict[str, str]) -> Node:
    return node_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                           "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})


def make_pod(name: str, annotations: dict[str, str] | None = None, scheduler: str = "default-scheduler") -> Pod:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}]},
    })  # fmt: skip


def profiles_config(*profiles: tuple[str, str]) -> str:
    """A KubeSchedulerConfiguration with one profile per ``(schedulerName, remote plugin)``."""
    lines = ["apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
             "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 1", "profiles:"]
    for name, plugin in profiles:
        lines += [f"- schedulerName: {name}", "  plugins:", "    multiPoint:", f"      enabled: [{{name: {plugin}}}]"]
    return "\n".join(lines) + "\n"


CLUSTER_YAML = """\
apiVersion: v1
kind: Node
metadata: {name: ssd-1, labels: {disktype: ssd}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: hdd-1, labels: {disktype: hdd}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: fast, annotations: {example.outrigger.io/require-node-labels: disktype=ssd}}
spec: {containers: [{name: c, image: app:1, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: slow, annotations: {example.outrigger.io/require-node-labels: disktype=hdd}}
spec: {containers: [{name: c, image: app:1, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu, annotations: {example.outrigger.io/require-node-labels: gpu}}
spec: {containers: [{name: c, image: app:1, resources: {requests: {cpu: 100m}}}]}
"""


async def cli(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """``outrigger ARGS`` in a subprocess (the event loop keeps serving meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "framework.cli", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def grpc_noise_free(text: str) -> list[str]:
    """Lines of a CLI's stderr without gRPC's own log lines (``I1121 12:00:00.000 ... ssl_transport...``)."""
    return [line for line in text.splitlines() if line and not re.match(r"^[IWE]\d{4} ", line)]


# ---------------------------------------------------------------------------------------------------
# Mutual TLS end to end


def test_mutual_tls_end_to_end_schedules_pods_through_a_remote_plugin(pki: Pki) -> None:
    """Framework, plugin host and CLI all on mutual TLS, the host also requiring a bearer token: the
    remote plugin filters over its snapshot mirror (the host dials back with its client certificate
    and the framework's credential) and the pods land where it says."""
    host_args = ["--tls-cert", pki.host[0], "--tls-key", pki.host[1], "--tls-client-ca", pki.ca,
                 "--token-file", pki.token, "--framework-ca", pki.ca]
    seen: dict[str, Any] = {}

    async def run(address: str) -> None:
        ep = dataclasses.replace(endpoint("labels", address), tls=ClientTLS(pki.ca, *pki.framework),
                                 token_file=pki.token)
        srv = await start_service(lambda reg: load_config(profiles_config(("default-scheduler", "NodeLabels")),
                                                          reg.points()),
                                  [ep], tls=ServerTLS(*pki.framework, client_ca_file=pki.ca))
        client = ["--server", srv.address, "--tls-ca", pki.ca, "--tls-cert", pki.client[0],
                  "--tls-key", pki.client[1]]
        try:
            cluster = Path(pki.ca).parent / "cluster.yaml"
            cluster.write_text(CLUSTER_YAML)
            seen["apply"] = await cli("apply", "-f", str(cluster), *client)
            s = srv.scheduler
            await until(lambda: len(s.pods) == 3 and all(r.phase in ("Bound", "Unschedulable")
                                                         for r in s.pods.values()), 60, "every pod settled")
            code, out, _ = await cli("get", "pods", "-o", "json", *client)
            seen["get"] = (code, {p["metadata"]["name"]: (p["status"]["conditions"][0]["status"],
                                                          p["spec"].get("nodeName", ""))
                                  for p in json.loads(out)["items"]})
            seen["gpu"] = list(s.pods["uid-gpu"].last_status.reasons) if "uid-gpu" in s.pods else None
            seen["mirror"] = s.cache.snapshot().generation
        finally:
            await srv.stop(0.5)

    with HostProcess("pluginhost.examples.nodelabels:NodeLabels", args=host_args) as host:
        asyncio.run(run(host.address))
    code, out, _ = seen["apply"]
    assert (code, out.splitlines()) == (0, ["node/ssd-1 created", "node/hdd-1 created", "pod/default/fast created",
                                            "pod/default/slow created", "pod/default/gpu created"])
    # The pods as v1 objects: PodScheduled True where bound.
    assert seen["get"] == (0, {"fast": ("True", "ssd-1"), "slow": ("True", "hdd-1"), "gpu": ("False", "")})


# ---------------------------------------------------------------------------------------------------
# The framework refuses callers without a valid client certificate or credential


def test_framework_refuses_callers_without_a_valid_client_certificate_or_credential(pki: Pki) -> None:
    """The Handle service behind mutual TLS: plaintext, no client certificate or one from another CA
    cannot even connect; a valid certificate without the credential the framework issued is
    UNAUTHENTICATED; with both, the call is answered."""
    ca = pki.ca
    cases: list[tuple[str, ClientTLS | None, str, str]] = [
        # (case, client TLS, credential sent, expected code)
        ("plaintext", None, "cred", "UNAVAILABLE"),
        ("no client certificate", ClientTLS(ca), "cred", "UNAVAILABLE"),
        ("client certificate from another CA", ClientTLS(ca, *pki.rogue), "cred", "UNAVAILABLE"),
        ("server not verified (another CA)", ClientTLS(pki.other_ca, *pki.host), "cred", "UNAVAILABLE"),
        ("valid certificate, no credential", ClientTLS(ca, *pki.host), "", "UNAUTHENTICATED"),
        ("valid certificate, wrong credential", ClientTLS(ca, *pki.host), "forged", "UNAUTHENTICATED"),
        ("valid certificate and credential", ClientTLS(ca, *pki.host), "cred", "OK"),
    ]
    got: dict[str, tuple[str, str]] = {}

    async def run() -> None:
        reg = in_tree_registry()
        scheduler = Scheduler(default_scheduler_config(reg), reg, seed=0)
        await scheduler.apply([make_node("n0", {})])
        services = await start_plugin_services(tls=ServerTLS(*pki.framework, client_ca_file=ca))
        services.services.attach(scheduler)
        services.services.grant("cred", SimpleNamespace(name="labels", manifests={"NodeLabels": None}))
        try:
            for name, tls, credential, _ in cases:
                async with aio_channel(services.address, tls) as channel:
                    stub = pb.handle_grpc.HandleStub(channel)  # type: ignore[no-untyped-call]
                    try:
                        reply = await stub.ListNodeInfos(pb.handle.ListNodeInfosRequest(), timeout=10,
                                                         metadata=bearer_metadata(credential) if credential else None)
                        got[name] = ("OK", ",".join(n.node.metadata.name for n in reply.nodes))
                    except grpc.aio.AioRpcError as exc:
                        got[name] = (exc.code().name, exc.details() or "")
        finally:
            await services.stop(0.2)

    asyncio.run(run())
    assert {name: got[name][0] for name, *_ in cases} == {name: want for name, _, _, want in cases}
    assert got["valid certificate and credential"] == ("OK", "n0")
    assert got["valid certificate, no credential"][1] == (
        "the Handle and CycleState services serve registered plugin hosts only; this call has no credential: "
        "send HandshakeRequest.credential as 'authorization: Bearer <credential>' metadata")
    assert got["valid certificate, wrong credential"][1] == (
        "the Handle and CycleState services serve registered plugin hosts only; this call has an unknown "
        "credential (issued by an earlier framework? the host gets a new one at its next Handshake)")
    assert "CERTIFICATE_VERIFY_FAILED" in got["server not verified (another CA)"][1]


def test_a_plugin_host_without_a_valid_client_certificate_is_refused_by_the_framework(pki: Pki) -> None:
    """Real plugin host processes dialing back a framework that requires client certificates: without
    one, or with one from another CA, the host never gets the snapshot mirror, so its plugin fails
    (the pod is requeued with the error as its reason); with a valid one the pod binds."""
    cases = [
        # (case, the host's flags for dialing the framework, expected (phase, node), expected reason)
        ("no client certificate", ["--framework-ca", pki.ca], ("Pending", ""), "mirror"),
        ("client certificate from another CA",
         ["--framework-ca", pki.ca, "--framework-cert", pki.rogue[0], "--framework-key", pki.rogue[1]],
         ("Pending", ""), "mirror"),
        ("valid client certificate",
         ["--framework-ca", pki.ca, "--framework-cert", pki.host[0], "--framework-key", pki.host[1]],
         ("Bound", "ssd-1"), ""),
    ]
    hosts = [HostProcess("pluginhost.examples.nodelabels:NodeLabels", args=args) for _, args, _, _ in cases]
    got: dict[str, tuple[tuple[str, str], list[str]]] = {}

    async def run(name: str, address: str) -> None:
        # The host's PreFilter waits up to 5 s for the mirror: the call's deadline must be longer.
        ep = dataclasses.replace(endpoint("labels", address), deadlines={"default": 30.0})
        srv = await start_service(lambda reg: load_config(profiles_config(("default-scheduler", "NodeLabels")),
                                                          reg.points()),
                                  [ep], tls=ServerTLS(*pki.framework, client_ca_file=pki.ca))
        s = srv.scheduler
        try:
            await s.apply([make_node("ssd-1", {"disktype": "ssd"}), make_pod("p", {REQUIRE: "disktype=ssd"})])
            await until(lambda: s.pods["uid-p"].phase == "Bound" or s.pods["uid-p"].last_status is not None,
                        60, f"pod settled ({name})")
            rec = s.pods["uid-p"]
            got[name] = ((rec.phase, rec.pod.node_name), list(rec.last_status.reasons) if rec.last_status else [])
        finally:
            await srv.stop(0.5)

    with Hosts(*hosts) as addresses:
        for (name, *_), address in zip(cases, addresses, strict=True):
            asyncio.run(run(name, address))
    for name, _, placement, reason in cases:
        assert got[name][0] == placement, name
        if reason:
            (message,) = got[name][1]
            assert re.fullmatch(
                r"running PreFilter plugin \"NodeLabels\": UNAVAILABLE: snapshot generation \d+ not reached within "
                r"5s \(the mirror is at generation 0\) \(plugin host 'labels' at 127\.0\.0\.1:\d+\)", message
            ), (name, message)


# ---------------------------------------------------------------------------------------------------
# The framework refuses plugin hosts it cannot verify (or that refuse it)


def test_framework_refuses_plugin_hosts_it_cannot_verify_or_authenticate_to(pki: Pki) -> None:
    """Startup fails with an error naming the endpoint, its address and what to fix."""
    target = "pluginhost.examples.nodelabels:NodeLabels"
    hosts = {
        "rogue": HostProcess(target, args=["--tls-cert", pki.rogue[0], "--tls-key", pki.rogue[1]]),
        "plaintext+token": HostProcess(target, args=["--token-file", pki.token]),
        "mtls": HostProcess(target, args=["--tls-cert", pki.host[0], "--tls-key", pki.host[1],
                                          "--tls-client-ca", pki.ca]),
        "tls": HostProcess(target, args=["--tls-cert", pki.host[0], "--tls-key", pki.host[1]]),
    }
    trusted = ClientTLS(pki.ca)
    cases: list[tuple[str, str, ClientTLS | None, str, str]] = [
        # (case, host, the endpoint's tls, its tokenFile, expected error after "plugin host 'labels' at ADDR")
        ("host certificate from another CA", "rogue", trusted, "",
         r"TLS handshake with {where} failed: UNAVAILABLE: .*CERTIFICATE_VERIFY_FAILED.* "
         r"\(the host's certificate is not signed by the endpoint's tls\.caFile\)"),
        ("host serves plaintext", "plaintext+token", trusted, pki.token,
         r"TLS handshake with {where} failed: UNAVAILABLE: .*WRONG_VERSION_NUMBER.* \(the host does not serve TLS: "
         r"remove the endpoint's tls block, or start the host with --tls-cert\)"),
        ("no bearer token", "plaintext+token", None, "",
         r"handshake with {where} failed: UNAUTHENTICATED: this plugin host refused a call with no bearer token "
         r"\('authorization: Bearer <token>' metadata\)"),
        ("wrong bearer token", "plaintext+token", None, pki.wrong_token,
         r"handshake with {where} failed: UNAUTHENTICATED: this plugin host refused a call with an invalid "
         r"bearer token"),
        ("host requires a client certificate", "mtls", trusted, "",
         r"{where} is unreachable after 2s: UNAVAILABLE: .*Socket closed \(the host may require a client "
         r"certificate: set the endpoint's tls\.certFile and tls\.keyFile\)"),
        ("client certificate from another CA", "mtls", ClientTLS(pki.ca, *pki.rogue), "",
         r"{where} is unreachable after 2s: UNAVAILABLE: .*Socket closed \(the host may not accept the endpoint's "
         r"client certificate \(is it signed by the host's --tls-client-ca\?\)\)"),
        ("host serves TLS, endpoint plaintext", "tls", None, "",
         r"{where} is unreachable after 2s: UNAVAILABLE: .*Socket closed \(the host may serve TLS: add a tls block "
         r"to the endpoint\)"),
        ("server name not in the host's certificate", "tls", ClientTLS(pki.ca, server_name="other.example"), "",
         r"TLS handshake with {where} failed: UNAVAILABLE: .*Hostname Verification Check failed\. \(the host's "
         r"certificate does not name the address's host \(or tls\.serverName\)\)"),
    ]
    errors: dict[str, str] = {}

    async def connect(config: EndpointConfig) -> str:
        try:
            remote = await RemotePlugins.connect([config], "127.0.0.1:9")
        except RemotePluginsError as exc:
            return str(exc)
        await remote.close()
        return "connected"

    with Hosts(*hosts.values()) as addresses:
        address_of = dict(zip(hosts, addresses, strict=True))
        for name, host, tls, token_file, _ in cases:
            config = dataclasses.replace(endpoint("labels", address_of[host]), connect_timeout=2.0, tls=tls,
                                         token_file=token_file)
            errors[name] = asyncio.run(connect(config))
    for name, host, _, _, pattern in cases:
        where = re.escape(f"plugin host 'labels' at {address_of[host]}")
        assert re.fullmatch(pattern.format(where=where), errors[name], re.DOTALL), (name, errors[name])


# ---------------------------------------------------------------------------------------------------
# Bearer tokens on the plugin host


def test_plugin_host_requiring_a_bearer_token_refuses_calls_without_it(pki: Pki) -> None:
    """Every RPC but health checks needs ``authorization: Bearer <token>``."""
    cases: list[tuple[str, tuple[tuple[str, str], ...], str]] = [
        ("no metadata", (), "UNAUTHENTICATED: this plugin host refused a call with no bearer token "
                            "('authorization: Bearer <token>' metadata)"),
        ("another scheme", (("authorization", f"Basic {TOKEN}"),),
         "UNAUTHENTICATED: this plugin host refused a call with no bearer token ('authorization: Bearer <token>' "
         "metadata)"),
        ("wrong token", bearer_metadata("not-the-token"),
         "UNAUTHENTICATED: this plugin host refused a call with an invalid bearer token"),
        ("a prefix of the token", bearer_metadata(TOKEN[:-1]),
         "UNAUTHENTICATED: this plugin host refused a call with an invalid bearer token"),
        ("the token", bearer_metadata(TOKEN), "OK: Hold"),
    ]
    got: dict[str, str] = {}

    async def run() -> None:
        async with (PluginHost([Hold], listen="127.0.0.1:0", token=TOKEN) as host,
                    grpc.aio.insecure_channel(host.address) as channel):
            stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
            for name, metadata, _ in cases:
                try:
                    reply = await stub.Handshake(pb.plugin.HandshakeRequest(), timeout=5, metadata=metadata)
                    got[name] = "OK: " + ",".join(m.name for m in reply.plugins)
                except grpc.aio.AioRpcError as exc:
                    got[name] = f"{exc.code().name}: {exc.details()}"
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            got["health check without a token"] = health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)

    asyncio.run(run())
    assert got == {**{name: want for name, _, want in cases}, "health check without a token": "SERVING"}


# ---------------------------------------------------------------------------------------------------
# The Handle and CycleState services: registered plugin hosts only, their own plugins, their cycles


def test_handle_and_cycle_state_services_refuse_calls_without_a_valid_credential() -> None:
    """Every RPC of both services, token-less and with a forged token: UNAUTHENTICATED."""
    calls: list[tuple[str, str, Any]] = [
        ("handle", "ListWaitingPods", pb.handle.ListWaitingPodsRequest()),
        ("handle", "GetWaitingPod", pb.handle.GetWaitingPodRequest(uid="u")),
        ("handle", "AllowWaitingPod", pb.handle.AllowWaitingPodRequest(uid="u", plugin="P")),
        ("handle", "RejectWaitingPod", pb.handle.RejectWaitingPodRequest(uid="u", plugin="P")),
        ("handle", "BindPod", pb.handle.BindPodRequest(pod=pb.types.PodRef(uid="u"), node_name="n0")),
        ("handle", "DeletePod", pb.handle.DeletePodRequest(pod=pb.types.PodRef(uid="u"))),
        ("handle", "GetNodeInfo", pb.handle.GetNodeInfoRequest(name="n0")),
        ("handle", "ListNodeInfos", pb.handle.ListNodeInfosRequest()),
        ("handle", "FollowSnapshot", pb.handle.FollowRequest(plugin="P")),
        ("cyclestate", "Read", pb.cyclestate.ReadStateRequest(cycle_id="c1", plugin="P")),
        ("cyclestate", "Write", pb.cyclestate.WriteStateRequest(cycle_id="c1", plugin="P")),
        ("cyclestate", "Delete", pb.cyclestate.DeleteStateRequest(cycle_id="c1", plugin="P")),
    ]
    got: dict[tuple[str, str], str] = {}

    async def run() -> None:
        reg = in_tree_registry()
        scheduler = Scheduler(default_scheduler_config(reg), reg, seed=0)
        services = await start_plugin_services()
        services.services.attach(scheduler)
        services.services.grant("cred", SimpleNamespace(name="host", manifests={"P": None}))
        try:
            async with grpc.aio.insecure_channel(services.address) as channel:
                stubs = {"handle": pb.handle_grpc.HandleStub(channel),  # type: ignore[no-untyped-call]
                         "cyclestate": pb.cyclestate_grpc.CycleStateStub(channel)}  # type: ignore[no-untyped-call]
                for service, method, request in calls:
                    for who, metadata in (("token-less", ()), ("forged", bearer_metadata("forged"))):
                        call = getattr(stubs[service], method)(request, timeout=5, metadata=metadata)
                        try:
                            if method == "FollowSnapshot":
                                async for _ in call:
                                    break
                            else:
                                await call
                            got[(method, who)] = "OK"
                        except grpc.aio.AioRpcError as exc:
                            got[(method, who)] = exc.code().name
        finally:
            await services.stop(0.2)

    asyncio.run(run())
    assert got == {(m, who): "UNAUTHENTICATED" for _, m, _ in calls for who in ("token-less", "forged")}


def test_cycle_state_and_handle_calls_are_limited_to_the_callers_plugins_and_cycles() -> None:
    """A host acts only for the plugins it serves; a plugin uses only the CycleState of cycles it was
    called in; framework-private values cannot be overwritten or deleted."""
    cases: list[tuple[str, str, Any, str]] = [
        # (case, method, request, expected "CODE: details" or "OK: ...")
        ("read a cycle it is part of", "Read", pb.cyclestate.ReadStateRequest(cycle_id="mine", plugin="P"),
         "OK: a"),
        ("read a cycle it is not part of", "Read", pb.cyclestate.ReadStateRequest(cycle_id="theirs", plugin="P"),
         "PERMISSION_DENIED: plugin 'P' is not part of cycle 'theirs': a plugin may only read the cycle state of "
         "scheduling contexts it was called in"),
        ("write a cycle it is not part of", "Write", pb.cyclestate.WriteStateRequest(
            cycle_id="theirs", plugin="P", entries=[pb.types.StateEntry(key="a", value=b"x")]),
         "PERMISSION_DENIED: plugin 'P' is not part of cycle 'theirs': a plugin may only write the cycle state of "
         "scheduling contexts it was called in"),
        ("delete in a cycle it is not part of", "Delete",
         pb.cyclestate.DeleteStateRequest(cycle_id="theirs", plugin="P", keys=["a"]),
         "PERMISSION_DENIED: plugin 'P' is not part of cycle 'theirs': a plugin may only delete the cycle state of "
         "scheduling contexts it was called in"),
        ("read for a plugin of another host", "Read", pb.cyclestate.ReadStateRequest(cycle_id="theirs", plugin="Q"),
         "PERMISSION_DENIED: plugin host 'host-p' does not serve plugin 'Q', so it cannot read cycle state for it"),
        ("read without naming the plugin", "Read", pb.cyclestate.ReadStateRequest(cycle_id="mine"),
         "PERMISSION_DENIED: plugin host 'host-p' does not serve plugin '', so it cannot read cycle state for it"),
        ("read a finished cycle", "Read", pb.cyclestate.ReadStateRequest(cycle_id="gone", plugin="P"),
         "NOT_FOUND: no scheduling context with cycle id 'gone' (finished?)"),
        ("overwrite a framework-private value", "Write", pb.cyclestate.WriteStateRequest(
            cycle_id="mine", plugin="P", entries=[pb.types.StateEntry(key="private", value=b"x")]),
         "FAILED_PRECONDITION: cycle state key 'private' holds a dict, not a StateValue (changed by plugin 'P')"),
        ("delete a framework-private value", "Delete",
         pb.cyclestate.DeleteStateRequest(cycle_id="mine", plugin="P", keys=["private"]),
         "FAILED_PRECONDITION: cycle state key 'private' holds a dict, not a StateValue (changed by plugin 'P')"),
        ("allow a waiting pod for a plugin of another host", "AllowWaitingPod",
         pb.handle.AllowWaitingPodRequest(uid="u", plugin="Q"),
         "PERMISSION_DENIED: plugin host 'host-p' does not serve plugin 'Q', so it cannot allow waiting pods on its "
         "behalf"),
        ("reject a waiting pod for a plugin of another host", "RejectWaitingPod",
         pb.handle.RejectWaitingPodRequest(uid="u", plugin="Q"),
         "PERMISSION_DENIED: plugin host 'host-p' does not serve plugin 'Q', so it cannot reject waiting pods on its "
         "behalf"),
        ("bind a pod for a plugin of another host", "BindPod",
         pb.handle.BindPodRequest(pod=pb.types.PodRef(uid="u"), node_name="n0", plugin="Q"),
         "PERMISSION_DENIED: plugin host 'host-p' does not serve plugin 'Q', so it cannot bind pods on its behalf"),
        ("allow a waiting pod for its own plugin", "AllowWaitingPod",
         pb.handle.AllowWaitingPodRequest(uid="u", plugin="P"), "OK: found=False"),
    ]
    got: dict[str, str] = {}
    states: dict[str, CycleState] = {}

    async def run() -> None:
        reg = in_tree_registry()
        scheduler = Scheduler(default_scheduler_config(reg), reg, seed=0)
        services = await start_plugin_services()
        services.services.attach(scheduler)
        services.services.grant("cred-p", SimpleNamespace(name="host-p", manifests={"P": None}))
        services.services.grant("cred-q", SimpleNamespace(name="host-q", manifests={"Q": None}))
        for cycle, plugin in (("mine", "P"), ("theirs", "Q")):
            state = CycleState(cycle)
            state.write("a", StateValue.json(cycle))
            state.write("private", {"framework": "only"})
            join_cycle(state, plugin)
            scheduler.cycle_states[cycle] = states[cycle] = state
        try:
            async with grpc.aio.insecure_channel(services.address) as channel:
                cs = pb.cyclestate_grpc.CycleStateStub(channel)  # type: ignore[no-untyped-call]
                handle = pb.handle_grpc.HandleStub(channel)  # type: ignore[no-untyped-call]
                for name, method, request, _ in cases:
                    stub = cs if method in ("Read", "Write", "Delete") else handle
                    try:
                        reply = await getattr(stub, method)(request, timeout=5, metadata=bearer_metadata("cred-p"))
                        if method == "Read":
                            got[name] = "OK: " + ",".join(e.key for e in reply.entries)
                        else:
                            got[name] = f"OK: found={reply.found}"
                    except grpc.aio.AioRpcError as exc:
                        got[name] = f"{exc.code().name}: {exc.details()}"
        finally:
            await services.stop(0.2)

    asyncio.run(run())
    assert got == {name: want for name, _, _, want in cases}
    # Nothing refused changed anything.
    assert {c: sorted(s.keys()) for c, s in states.items()} == {
        "mine": ["a", "outrigger.io/remote/participants", "private"],
        "theirs": ["a", "outrigger.io/remote/participants", "private"],
    }
    assert states["theirs"].read("a") == StateValue.json("theirs")
    assert states["mine"].read("private") == {"framework": "only"}


def test_a_plugin_reading_another_cycles_cycle_state_gets_permission_denied() -> None:
    """Real plugin host process: ``Hold`` keeps a pod at Permit (its cycle stays alive, with a value
    Hold wrote); ``CycleSnoop``, in another pod's PreFilter, may use its own cycle's CycleState but
    not the held pod's — which the same host's ``Hold`` may, since Hold is part of that cycle."""
    seen: dict[str, Any] = {}

    async def run(address: str) -> None:
        cfg = profiles_config(("hold", "Hold"), ("snoop", "CycleSnoop"))
        rig = await remote_rig([endpoint("fakes", address)], lambda reg: load_config(cfg, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply([make_node("n0", {}), make_pod("held", scheduler="hold")])
            await until(lambda: len(s.waiting_pods) == 1, 60, "the held pod waiting at Permit")
            (held_cycle,) = [c for c in s.cycle_states if c.startswith("uid-held:")]
            await s.apply([make_pod("snoop", {TARGET: "held"}, scheduler="snoop")])
            await until(lambda: s.pods["uid-snoop"].last_status is not None, 60, "the snooping pod's first attempt")
            seen["held_cycle"] = held_cycle
            rec = s.pods["uid-snoop"]
            seen["snoop"] = (rec.phase, list(rec.last_status.reasons))
            seen["secret"] = s.cycle_states[held_cycle].get("Hold/secret")
        finally:
            for wp in list(s.waiting_pods):
                wp.reject("Hold", "the test is over")
            await s.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await rig.close()

    with HostProcess("security_fakes:PLUGINS") as host:
        asyncio.run(run(host.address))
    held, (phase, reasons) = seen["held_cycle"], seen["snoop"]
    assert phase == "Unschedulable"
    outcomes = [
        "write own: ok None",
        "read own: ok ['CycleSnoop/own']",
        f"read held: reading cycle state of cycle {held}: PERMISSION_DENIED: plugin 'CycleSnoop' is not part of "
        f"cycle '{held}': a plugin may only read the cycle state of scheduling contexts it was called in",
        f"write held: writing cycle state of cycle {held}: PERMISSION_DENIED: plugin 'CycleSnoop' is not part of "
        f"cycle '{held}': a plugin may only write the cycle state of scheduling contexts it was called in",
        "read held as Hold: ok ['Hold/secret']",
    ]
    assert reasons == [f"0/1 nodes are available: {', '.join(outcomes)}. "
                       "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."]
    assert seen["secret"] == StateValue.json("only for Hold")  # the refused write changed nothing


# ---------------------------------------------------------------------------------------------------
# Configuration: the RemotePlugins tls block and tokenFile, command-line flags


def _doc(entry: str) -> str:
    return ("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            "- name: labels\n  address: 127.0.0.1:50061\n" + entry)


def test_remote_plugins_tls_block_and_token_file() -> None:
    good = _doc("  tls: {caFile: ca.pem, certFile: fw.pem, keyFile: fw-key.pem, serverName: labels.example}\n"
                "  tokenFile: labels.token\n")
    (config,) = parse_remote_plugins(good, "rp.yaml")
    assert (config.tls, config.token_file) == (ClientTLS("ca.pem", "fw.pem", "fw-key.pem", "labels.example"),
                                               "labels.token")
    (plain,) = parse_remote_plugins(_doc(""), "rp.yaml")
    assert (plain.tls, plain.token_file) == (None, "")
    (system_roots,) = parse_remote_plugins(_doc("  tls: {}\n"), "rp.yaml")
    assert system_roots.tls == ClientTLS()
    bad = [
        ("  tls: yes\n", "rp.yaml: plugins[0].tls: must be a mapping with caFile, certFile, keyFile, serverName "
                         "(an empty mapping: TLS with the system's CAs)"),
        ("  tls: {caFile: ca.pem, cafile: x}\n",
         "rp.yaml: plugins[0].tls.cafile: unknown field (allowed: caFile, certFile, keyFile, serverName)"),
        ("  tls: {certFile: fw.pem}\n", "rp.yaml: plugins[0].tls: certFile and keyFile go together (the client "
                                        "certificate for mutual TLS and its key)"),
        ("  tls: {caFile: ''}\n", "rp.yaml: plugins[0].tls.caFile: must be a non-empty string"),
        ("  tokenFile: ''\n", "rp.yaml: plugins[0].tokenFile: must be the path of a file holding the host's bearer "
                              "token"),
        ("  tokenFile: [a]\n", "rp.yaml: plugins[0].tokenFile: must be the path of a file holding the host's "
                               "bearer token"),
    ]
    for entry, message in bad:
        with pytest.raises(ConfigError) as err:
            parse_remote_plugins(_doc(entry), "rp.yaml")
        assert str(err.value) == message, entry


def test_unreadable_certificate_and_token_files_are_errors_naming_the_endpoint(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    cases = [
        (ClientTLS(missing), "", f"endpoint 'labels': tls.caFile: cannot read {missing}: No such file or directory"),
        (ClientTLS(pki.ca, str(not_pem), pki.host[1]), "",
         f"endpoint 'labels': tls.certFile: {not_pem} is not a PEM file (no -----BEGIN line)"),
        (None, missing, f"endpoint 'labels': tokenFile: cannot read {missing}: No such file or directory"),
        (None, str(empty), f"endpoint 'labels': tokenFile: {empty} is empty"),
    ]
    for tls, token_file, message in cases:
        config = dataclasses.replace(endpoint("labels", "127.0.0.1:9"), tls=tls, token_file=token_file)
        with pytest.raises(RemotePluginsError) as err:
            asyncio.run(RemotePlugins.connect([config], "127.0.0.1:9"))
        assert str(err.value) == message


def test_command_line_tls_mistakes_print_one_line_and_exit_1(pki: Pki, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.pem")
    cases: list[tuple[Sequence[str], str]] = [
        (["serve", "--listen", "127.0.0.1:0", "--tls-cert", pki.framework[0]],
         "error: --tls-cert and --tls-key are both required to serve TLS"),
        (["serve", "--listen", "127.0.0.1:0", "--tls-client-ca", pki.ca],
         "error: --tls-cert and --tls-key are both required to serve TLS (--tls-client-ca only adds client "
         "certificate checks)"),
        (["serve", "--listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", pki.framework[1]],
         f"error: --tls-cert: cannot read {missing}: No such file or directory"),
        (["plugin", "serve", "security_fakes:Hold", "--listen", "127.0.0.1:0", "--token-file", missing],
         f"error: --token-file: cannot read {missing}: No such file or directory"),
        (["plugin", "serve", "security_fakes:Hold", "--listen", "127.0.0.1:0", "--framework-cert", pki.host[0]],
         "error: --framework-cert and --framework-key go together (a client certificate needs its key)"),
        (["plugin", "serve", "security_fakes:Hold", "--listen", "127.0.0.1:0", "--framework-ca", missing],
         f"error: --framework-ca: cannot read {missing}: No such file or directory"),
        (["plugin", "serve", "security_fakes:Hold", "--listen", "127.0.0.1:0", "--tls-cert", pki.host[0],
          "--tls-key", missing], f"error: --tls-key: cannot read {missing}: No such file or directory"),
        (["get", "pods", "--tls-cert", pki.client[0]],
         "error: --tls-cert and --tls-key go together (a client certificate needs its key)"),
    ]
    sys.path.insert(0, str(TESTS))  # security_fakes, for `plugin serve`
    try:
        for argv, message in cases:
            assert main(list(argv)) == 1, argv
            captured = capsys.readouterr()
            assert (captured.out, grpc_noise_free(captured.err)) == ("", [message]), argv
    finally:
        sys.path.remove(str(TESTS))


def test_scheduler_api_clients_need_the_ca_and_a_client_certificate(pki: Pki) -> None:
    """``outrigger get`` against a framework serving mutual TLS, with each set of client flags."""
    ca, cert, key = pki.ca, *pki.client
    closed = ("error: cannot reach the framework at {addr} (it closed the connection: it may serve TLS (--tls-ca) "
              "or require a client certificate signed by its CA (--tls-cert, --tls-key))")
    table_ = ["node/ssd-1"]
    cases: list[tuple[str, list[str], int, list[str]]] = [
        # (case, client flags, exit code, output (stdout on success, stderr otherwise))
        # (plaintext: how the refusal reads depends on timing, since a plaintext channel gives its
        # connection attempt 100 ms; it is checked below.)
        ("CA but no client certificate", ["--tls-ca", ca], 1, [closed]),
        ("client certificate from another CA",
         ["--tls-ca", ca, "--tls-cert", pki.rogue[0], "--tls-key", pki.rogue[1]], 1, [closed]),
        ("system CAs", ["--tls", "--tls-cert", cert, "--tls-key", key], 1,
         ["error: cannot reach the framework at {addr} (its certificate is not signed by the CA given with --tls-ca)"]),
        ("name not in the certificate",
         ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "other.example"], 1,
         ["error: cannot reach the framework at {addr} (its certificate does not name that address: see "
          "--tls-server-name)"]),
        ("CA and client certificate", ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", key], 0, table_),
        ("by the name in the certificate",
         ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "localhost"], 0, table_),
    ]
    got: dict[str, tuple[int, list[str]]] = {}
    address = ""

    async def run() -> None:
        nonlocal address
        reg = in_tree_registry()
        srv = await start_server(default_scheduler_config(reg), reg, tls=ServerTLS(*pki.framework, client_ca_file=ca))
        address = srv.address
        try:
            await srv.scheduler.apply([make_node("ssd-1", {"disktype": "ssd"})])
            runs = [("plaintext", []), *((name, flags) for name, flags, _, _ in cases)]
            results = await asyncio.gather(*(cli("get", "nodes", "-o", "name", "--server", srv.address, *flags)
                                             for _, flags in runs))
            for (name, _), (code, out, err) in zip(runs, results, strict=True):
                got[name] = (code, out.splitlines() if code == 0 else grpc_noise_free(err))
        finally:
            await srv.stop(0.5)

    asyncio.run(run())
    plaintext = got.pop("plaintext")
    assert got == {name: (code, [line.format(addr=address) for line in lines]) for name, _, code, lines in cases}
    assert plaintext[0] == 1 and len(plaintext[1]) == 1
    assert plaintext[1][0].startswith(f"error: cannot reach the framework at {address}")
