"""A real etcd and kube-apiserver on loopback: the cluster that live-cluster tests and demos run against.

::

    cluster = LocalCluster.start(Path("/tmp/kube"))
    cluster.kubectl("apply", "-f", "nodes.yaml")
    kubeconfig = cluster.service_account_kubeconfig("ns", "sa", cluster_roles=["system:kube-scheduler"])
    ...
    cluster.stop()

The binaries are the ones ``tests/k8s/build.sh`` (``make k8s``) builds at the pinned versions, found through
``OUTRIGGER_K8S_BIN`` or that script's cache folder for the Kubernetes release ``OUTRIGGER_K8S_RELEASE``
names (1.35, 1.36, 1.37; the script's default without it: :func:`k8s_release`). Everything lives in
``workdir``: etcd's data, the certificates, the kubeconfigs and the two logs (``etcd.log``,
``kube-apiserver.log``).

The API server serves workload-aware scheduling's Workloads and PodGroups where its release has them
(``scheduling.k8s.io/v1beta1`` in 1.37, ``v1alpha2`` in 1.36: :data:`WORKLOAD_API_VERSIONS`), with the
GenericWorkload and TopologyAwareWorkloadScheduling gates on, as kube-scheduler's PodGroup cycle needs them.

The API server authorizes with RBAC. The admin is a static token (``--token-auth-file``) of a user in
``system:masters``; service accounts get tokens from the TokenRequest API (``kubectl create token``),
signed by a key generated here. Clients verify TLS against ``ca_file``, the CA that signed the serving
certificate.

No kubelet runs, and no controller manager unless asked (:meth:`LocalCluster.start_controller_manager`,
with the controllers a test needs, such as the resourceclaim controller that makes the claims of pods'
ResourceClaimTemplates): nodes are objects created with kubectl (with
``status.capacity`` and ``status.allocatable``), a bound pod stays Pending, a namespace being deleted stays
Terminating, a bound pod is deleted at once only with ``--grace-period=0 --force`` (a graceful delete
waits for a kubelet that never comes), and the aggregated ClusterRoles (``admin``, ``edit``, ``view``) are
empty (their aggregation controller does not run). That is all a scheduler needs.

Every process started here is stopped by :meth:`LocalCluster.stop`, at interpreter exit (``atexit``), and by
the kernel if this process dies first (a parent-death signal).

Errors:

- :class:`ClusterError`: a binary is missing, or etcd or the API server did not start or become ready;
  the message quotes the tail of the component's log.
- :class:`KubectlError`: kubectl exited non-zero; a :class:`subprocess.CalledProcessError` whose message
  carries kubectl's own error output.
"""

from __future__ import annotations

import atexit
import base64
import datetime
import http.client
import ipaddress
import os
import queue
import secrets
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pluginhost.errors import OutriggerError

__all__ = ["BIN_ENV", "BUILD_SCRIPT", "RELEASE_ENV", "WORKLOAD_API_VERSIONS", "ClusterError", "KubectlError",
           "LocalCluster", "apiserver_release", "find_bin_dir", "k8s_release", "pinned_version", "releases",
           "workload_api_flags"]

#: The folder of etcd, kube-apiserver and kubectl, when not the one tests/k8s/build.sh builds into.
BIN_ENV = "OUTRIGGER_K8S_BIN"
BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "k8s" / "build.sh"
#: The Kubernetes release whose binaries build.sh builds and finds (a folder of :data:`RELEASES_DIR`).
RELEASE_ENV = "OUTRIGGER_K8S_RELEASE"
RELEASES_DIR = BUILD_SCRIPT.parent / "kubernetes"
BINARIES = ("etcd", "kube-apiserver", "kubectl")
ADMIN_USER = "outrigger-admin"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
#: The scheduling.k8s.io version serving Workload and PodGroup, by the API server's release (none in 1.35:
#: v1alpha1 there has no PodGroup). Off by default in each, it is turned on with the GenericWorkload gate.
WORKLOAD_API_VERSIONS = {"1.36": "scheduling.k8s.io/v1alpha2", "1.37": "scheduling.k8s.io/v1beta1"}
READY_TIMEOUT = 90.0  # seconds; a cold start on 2 busy cores takes a few
STOP_TIMEOUT = 15.0
LOG_TAIL_LINES = 25


class ClusterError(OutriggerError, RuntimeError):
    """A component of the local cluster is missing, did not start, or did not become ready."""


class KubectlError(OutriggerError, subprocess.CalledProcessError):
    """kubectl exited non-zero; ``str()`` carries its error output."""

    def __str__(self) -> str:
        err = (self.stderr or "").strip() or (self.output or "").strip()
        return f"kubectl {' '.join(self.cmd[3:])} exited {self.returncode}: {err}"


def releases() -> list[str]:
    """The pinned Kubernetes releases (``["1.35", "1.36", "1.37"]``), oldest first."""
    found = [d.name for d in RELEASES_DIR.iterdir() if (d / "go.mod").is_file()] if RELEASES_DIR.is_dir() else []
    return sorted(found, key=lambda r: tuple(int(p) for p in r.split(".")))


def k8s_release() -> str:
    """The release the binaries are of: ``$OUTRIGGER_K8S_RELEASE``, else build.sh's default."""
    env = os.environ.get(RELEASE_ENV)
    if env:
        return env
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-release"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise ClusterError(f"{BUILD_SCRIPT} --print-release failed: {out.stderr.strip()}")
    return out.stdout.strip()


def pinned_version(release: str | None = None) -> str:
    """The Kubernetes version ``release`` (default :func:`k8s_release`) pins, e.g. ``v1.35.4``."""
    release = release or k8s_release()
    if release not in releases():
        raise ClusterError(f"no pinned Kubernetes release {release!r} (${RELEASE_ENV}): pinned are "
                           f"{', '.join(releases())}")
    go_mod = RELEASES_DIR / release / "go.mod"
    for line in go_mod.read_text().splitlines():
        if line.startswith("require k8s.io/kubernetes "):
            return line.split()[2]
    raise ClusterError(f"{go_mod} requires no k8s.io/kubernetes")


def apiserver_release(binary: Path) -> str:
    """The release of a kube-apiserver binary (``1.37`` for one saying ``Kubernetes v1.37.2``)."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    words = out.stdout.split()
    if out.returncode != 0 or len(words) != 2 or not words[1].startswith("v"):
        raise ClusterError(f"{binary} --version exited {out.returncode}: {(out.stdout + out.stderr).strip()!r}")
    return ".".join(words[1].removeprefix("v").split(".")[:2])


def workload_api_flags(version: str) -> list[str]:
    """The API server flags that serve Workloads and PodGroups in ``version`` (none for ""): the gates of
    workload-aware scheduling (GenericWorkload, and TopologyAwareWorkloadScheduling, without which the API
    server drops a PodGroup's ``schedulingConstraints``) and the version itself."""
    if not version:
        return []
    return ["--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
            f"--runtime-config={version}=true"]


def find_bin_dir() -> Path:
    """The folder with the built binaries: ``$OUTRIGGER_K8S_BIN``, else tests/k8s/build.sh's cache folder
    (of the release ``$OUTRIGGER_K8S_RELEASE`` names, which the script reads)."""
    env = os.environ.get(BIN_ENV)
    if env:
        return Path(env)
    if not BUILD_SCRIPT.exists():
        raise ClusterError(f"set {BIN_ENV} to the folder of etcd, kube-apiserver and kubectl")
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-dir"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise ClusterError(f"{BUILD_SCRIPT} --print-dir failed: {out.stderr.strip()}")
    return Path(out.stdout.strip())


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that nothing listens on (all held open until all are chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


# ---- certificates -------------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_pki(folder: Path) -> tuple[Path, Path, Path, Path, Path]:
    """A CA, a serving certificate for 127.0.0.1 it signed, and a service-account signing key, as PEM files.

    Returns (ca.crt, apiserver.crt, apiserver.key, sa.key, sa.pub). ECDSA P-256: generated in milliseconds, and
    accepted for TLS and for signing service-account tokens (ES256).
    """
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=365)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "outrigger-local-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    service_ip = next(ipaddress.IPv4Network(SERVICE_CLUSTER_IP_RANGE).hosts())  # the `kubernetes` Service
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.IPAddress(service_ip),
                                     x509.DNSName("localhost")]
    names += [x509.DNSName(n) for n in ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                        "kubernetes.default.svc.cluster.local")]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    sa_key = ec.generate_private_key(ec.SECP256R1())
    paths = (folder / "ca.crt", folder / "apiserver.crt", folder / "apiserver.key", folder / "sa.key",
             folder / "sa.pub")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(_pem_key(key))
    paths[3].write_bytes(_pem_key(sa_key))
    paths[4].write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo))
    for secret in (paths[2], paths[3]):
        secret.chmod(0o600)
    return paths


# ---- processes ----------------------------------------------------------------------------------------


class _Spawner:
    """Starts the cluster's processes from one thread that lives as long as this process.

    The children get a parent-death signal (``setpriv --pdeathsig KILL``) so a test session killed outright
    leaves no etcd or API server behind. The kernel sends it when the *thread* that forked the child ends,
    so the fork happens here, never on a caller's thread (an executor's worker may end at any time).
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], subprocess.Popen[bytes]], Future[subprocess.Popen[bytes]]]]
        self._jobs = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        setpriv = shutil.which("setpriv")
        self.prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []

    def popen(self, argv: Sequence[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kube-local-spawner", daemon=True)
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        argv = [*self.prefix, *argv]
        self._jobs.put((lambda: subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT), done))
        return done.result()

    def _run(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                done.set_result(job())
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)


_spawner = _Spawner()


class _Component:
    """One long-running binary of the cluster with its log file (appended to across restarts)."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.argv, self.log = name, argv, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            log.write(f"---- {self.name} started at {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            try:
                self.proc = _spawner.popen(self.argv, log)
            except OSError as exc:
                raise ClusterError(f"cannot run {self.argv[0]}: {exc}") from exc

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def failure(self, what: str) -> ClusterError:
        return ClusterError(f"{self.name} {what}; the last lines of {self.log}:\n{log_tail(self.log)}")

    def stop(self, *, graceful: bool = True) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if graceful:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
                return
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        proc.wait(STOP_TIMEOUT)


def _wait_until(check: Callable[[], bool], component: _Component, what: str, timeout: float) -> None:
    """Polls ``check`` every 50 ms until it holds; the component exiting or the timeout is a ClusterError."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        code = component.exited()
        if code is not None:
            raise component.failure(f"exited with status {code} before {what}")
        if time.monotonic() > deadline:
            raise component.failure(f"was not {what} after {timeout:.0f}s")
        time.sleep(0.05)


def _http_ok(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, http.client.HTTPException, OSError):  # not listening yet, or 500 while starting
        return False


# ---- the cluster --------------------------------------------------------------------------------------


class LocalCluster:
    """A real etcd and kube-apiserver on 127.0.0.1 (free ports), with RBAC and an admin token.

    Attributes: ``server`` (``https://127.0.0.1:PORT``), ``ca_file`` (verifies the serving certificate),
    ``admin_kubeconfig``, ``admin_token``, ``bin_dir``, ``workdir``, ``etcd_url``.
    """

    def __init__(self, workdir: Path, bin_dir: Path) -> None:
        self.workdir, self.bin_dir = workdir, bin_dir
        #: The scheduling.k8s.io version Workloads and PodGroups are served in ("" when none).
        try:
            release = apiserver_release(bin_dir / "kube-apiserver")
        except ClusterError:
            release = ""  # not a version it names: started without the workload APIs (its start says why)
        self.workload_api = WORKLOAD_API_VERSIONS.get(release, "")
        workload_api = self.workload_api
        etcd_port, peer_port, api_port = free_ports(3)
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.server = f"https://127.0.0.1:{api_port}"
        self.admin_token = secrets.token_hex(24)
        pki = workdir / "pki"
        self.ca_file, cert, key, sa_key, sa_pub = write_pki(pki)
        tokens = pki / "tokens.csv"  # token,user,uid,"groups"
        tokens.write_text(f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        self.admin_kubeconfig = self._write_kubeconfig("admin", ADMIN_USER, self.admin_token)
        self._lock = threading.RLock()
        self._stopped = False
        self.etcd = _Component("etcd", [
            str(bin_dir / "etcd"), "--name", "local", "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"local=http://127.0.0.1:{peer_port}",
            "--log-level", "warn",
            # The cluster's data is thrown away with workdir: no fsync per write (the disk is shared).
            "--unsafe-no-fsync",
        ], workdir / "etcd.log")
        self.apiserver = _Component("kube-apiserver", [
            str(bin_dir / "kube-apiserver"),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(api_port),
            # The `kubernetes` Service's endpoints are not kept: since 1.37 the reconciler that keeps them
            # refuses a loopback address ("may not be in the loopback range") and the server exits.
            "--endpoint-reconciler-type", "none",
            "--tls-cert-file", str(cert), "--tls-private-key-file", str(key), "--cert-dir", str(pki),
            "--token-auth-file", str(tokens),
            # RBAC alone: the Node authorizer serves kubelets, and keeping its graph of pods costs CPU.
            "--authorization-mode", "RBAC",
            "--service-account-issuer", SERVICE_ACCOUNT_ISSUER,
            "--service-account-key-file", str(sa_pub), "--service-account-signing-key-file", str(sa_key),
            "--service-cluster-ip-range", SERVICE_CLUSTER_IP_RANGE,
            # Default admission plugins stay on (Priority, NamespaceLifecycle, DefaultTolerationSeconds, ...:
            # they shape pods as a real cluster does and need nothing else) except those that wait for a
            # controller or kubelet that does not run here:
            # - ServiceAccount refuses every pod of a namespace until the service-account controller has
            #   created its `default` account;
            # - TaintNodesByCondition taints each new Node not-ready until the node lifecycle controller
            #   sees its kubelet report Ready, which no kubelet ever does;
            # - StorageObjectInUseProtection puts finalizers on PVCs and PVs that only the protection
            #   controllers remove, so deleted claims would stay Terminating.
            #   PodGroupProtection (1.36 on) does the same to PodGroups, whose controller does not run either.
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition,StorageObjectInUseProtection"
            + (",PodGroupProtection" if workload_api else ""),
            # No garbage collector runs: a foreground or orphan delete would wait forever for it.
            "--enable-garbage-collector=false",
            "--profiling=false",
            *workload_api_flags(workload_api),
        ], workdir / "kube-apiserver.log")
        self.controller_manager: _Component | None = None

    @classmethod
    def start(cls, workdir: Path, *, bin_dir: Path | None = None, timeout: float = READY_TIMEOUT) -> LocalCluster:
        """Starts etcd and the API server in ``workdir`` (created if missing) and waits until they are ready."""
        bin_dir = bin_dir or find_bin_dir()
        missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
        if missing:
            raise ClusterError(f"{', '.join(missing)} not found in {bin_dir}: build them with `make k8s` "
                               f"(tests/k8s/build.sh) or set {BIN_ENV}")
        workdir.mkdir(parents=True, exist_ok=True)
        cluster = cls(workdir.resolve(), bin_dir.resolve())
        atexit.register(cluster.stop)
        try:
            cluster.etcd.start()
            _wait_until(lambda: _http_ok(f"{cluster.etcd_url}/health"), cluster.etcd, "healthy", timeout)
            cluster._start_apiserver(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    # ---- lifecycle --------------------------------------------------------------------------------------

    def _start_apiserver(self, timeout: float) -> None:
        self.apiserver.start()
        context = ssl.create_default_context(cafile=str(self.ca_file))
        _wait_until(lambda: _http_ok(f"{self.server}/readyz", context=context, token=self.admin_token),
                    self.apiserver, "ready (/readyz)", timeout)
        # The `default` namespace is created by a loop inside the API server that /readyz does not wait for.
        _wait_until(lambda: _http_ok(f"{self.server}/api/v1/namespaces/default", context=context,
                                     token=self.admin_token),
                    self.apiserver, "serving the default namespace", timeout)

    def start_apiserver(self, timeout: float = READY_TIMEOUT) -> None:
        """Starts the API server again (same port, same etcd) and waits until it is ready."""
        with self._lock:
            if self._stopped:
                raise ClusterError("the cluster was stopped")
            if self.apiserver.exited() is None and self.apiserver.proc is not None:
                return
            self._start_apiserver(timeout)

    def stop_apiserver(self, *, graceful: bool = True) -> None:
        """Stops the API server; etcd and its data stay. ``graceful``: SIGTERM (it closes watches and
        finishes requests in flight), SIGKILL after 15 s; otherwise SIGKILL at once, as a crash."""
        with self._lock:
            self.apiserver.stop(graceful=graceful)

    def restart_apiserver(self, timeout: float = READY_TIMEOUT, *, graceful: bool = True) -> None:
        """Stops the API server and starts it again on the same port and etcd; objects persist."""
        with self._lock:
            self.stop_apiserver(graceful=graceful)
            self.start_apiserver(timeout)

    def start_controller_manager(self, controllers: Sequence[str] = ("resourceclaim-controller",),
                                 timeout: float = READY_TIMEOUT) -> None:
        """Starts kube-controller-manager (built with the other binaries) running only ``controllers``, as
        the admin, serving its health on 127.0.0.1, without leader election, and waits until it is healthy.
        Running already (with whatever controllers), it is left as it is. Its log is
        ``kube-controller-manager.log``; :meth:`stop_controller_manager` or :meth:`stop` stop it."""
        with self._lock:
            if self._stopped:
                raise ClusterError("the cluster was stopped")
            running = self.controller_manager
            if running is not None and running.proc is not None and running.exited() is None:
                return
            binary = self.bin_dir / "kube-controller-manager"
            if not os.access(binary, os.X_OK):
                raise ClusterError(f"kube-controller-manager not found in {self.bin_dir}: build it with `make k8s` "
                                   f"(tests/k8s/build.sh) or set {BIN_ENV}")
            (port,) = free_ports(1)
            component = _Component("kube-controller-manager", [
                str(binary), "--kubeconfig", str(self.admin_kubeconfig), "--controllers", ",".join(controllers),
                "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--cert-dir", str(self.workdir / "kcm-certs"),
                # Its health is all that is asked of the port: no lookups of delegated authentication.
                "--authentication-skip-lookup", "--profiling=false",
                # Its client's default 20 requests/s would bound what it serves: the resourceclaim controller
                # writes twice a pod (the claim, then the pod's resourceClaimStatuses), so pods would reach
                # the scheduler at 10/s. scheduler_perf's clients run at 5000.
                "--kube-api-qps", "5000", "--kube-api-burst", "5000",
            ], self.workdir / "kube-controller-manager.log")
            self.controller_manager = component
            component.start()
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # its own self-signed certificate
            _wait_until(lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", context=context), component,
                        "healthy (/healthz)", timeout)

    def stop_controller_manager(self) -> None:
        """Stops kube-controller-manager when it runs."""
        with self._lock:
            if self.controller_manager is not None:
                self.controller_manager.stop()

    def stop(self) -> None:
        """Stops the API server and etcd (and kube-controller-manager). Idempotent; also runs at interpreter
        exit."""
        with self._lock:
            self._stopped = True
            try:
                self.stop_controller_manager()
                self.apiserver.stop()
            finally:
                self.etcd.stop()
            atexit.unregister(self.stop)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- clients ----------------------------------------------------------------------------------------

    def kubectl(self, *args: str, kubeconfig: Path | None = None, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Runs the built kubectl against this cluster (as the admin unless ``kubeconfig`` says otherwise).

        ``check``: a non-zero exit raises :class:`KubectlError`. ``timeout`` (seconds) raises
        :class:`subprocess.TimeoutExpired`.
        """
        cmd = [str(self.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig or self.admin_kubeconfig), *args]
        env = {**os.environ, "KUBECACHEDIR": str(self.workdir / "kubectl-cache")}
        out = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env)
        if check and out.returncode != 0:
            raise KubectlError(out.returncode, cmd, out.stdout, out.stderr)
        return out

    def service_account_kubeconfig(self, namespace: str, name: str, *, cluster_roles: Iterable[str] = (),
                                   roles_yaml: str | None = None, duration: str = "24h") -> Path:
        """A kubeconfig that acts as service account ``namespace/name``, with a token from TokenRequest.

        Creates the namespace and the account when missing and binds ``cluster_roles`` to it (one
        ClusterRoleBinding each). ``roles_yaml`` holds further RBAC objects, applied as they are; each Role
        or ClusterRole in it is also bound to the account (a RoleBinding in the Role's namespace, a
        ClusterRoleBinding).
        """
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        docs: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        ]
        extra = [d for d in yaml.safe_load_all(roles_yaml or "") if d]
        roles = [(None, r) for r in cluster_roles]
        roles += [(d["metadata"].get("namespace") if d["kind"] == "Role" else None, d["metadata"]["name"])
                  for d in extra if d.get("kind") in ("Role", "ClusterRole")]
        for role_namespace, role in roles:
            meta: dict[str, str] = {"name": f"{role}:{namespace}:{name}"}
            if role_namespace is not None:
                meta["namespace"] = role_namespace
            docs.append({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding" if role_namespace is None else "RoleBinding",
                "metadata": meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                            "kind": "ClusterRole" if role_namespace is None else "Role", "name": role},
                "subjects": [subject],
            })
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*docs[:2], *extra, *docs[2:]]))
        token = self.kubectl("create", "token", name, "-n", namespace, f"--duration={duration}").stdout.strip()
        return self._write_kubeconfig(f"sa-{namespace}-{name}", f"system:serviceaccount:{namespace}:{name}", token)

    def _write_kubeconfig(self, stem: str, user: str, token: str) -> Path:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": self.server, "certificate-authority-data": ca}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user, "namespace": "default"}}],
            "current-context": "local",
        }
        path = self.workdir / "kubeconfigs" / f"{stem}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path
