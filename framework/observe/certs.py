"""The secure port's TLS: its serving certificate and the client CA it trusts.

:func:`server_context` builds the :class:`ssl.SSLContext` of the secure port from
``--tls-cert-file``/``--tls-private-key-file`` or, when neither is given, from a self-signed certificate
generated in memory at startup, as kube-scheduler does (ECDSA P-256, valid for a year, naming
``localhost``, ``127.0.0.1``, ``::1``, this host's name and the bind address). Callers that want to
verify a self-signed port pin its certificate (its SHA-256 fingerprint is logged at startup).

``--client-ca-file`` makes the port ask for client certificates and verify them against that CA: a
verified certificate authenticates its caller (:mod:`framework.observe.authn`); a certificate the CA
did not sign fails the TLS handshake.

The files are read again when they change, as kube-scheduler's dynamic serving certificate and client
CA are (a certificate rotated by cert-manager or a mounted Secret takes effect without a restart):
:class:`CertificateFiles` looks at them every :data:`RELOAD_SECONDS`, builds a new context from them
(a self-signed certificate stays the same), and every new connection gets the newest context (the
listening one hands each handshake over to it); open connections keep theirs. Files that cannot be
loaded are logged once per change, and the last good context stays in use.

Errors are :class:`CertificateError`, one line naming the flag and the file.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pluginhost.errors import OutriggerError

__all__ = ["CertificateError", "CertificateFiles", "ServingTLS", "file_stamp", "self_signed", "server_context"]

log = logging.getLogger("outrigger.serving")

SELF_SIGNED_DAYS = 365
#: How often the certificate, key and client CA files are looked at for a change (seconds).
RELOAD_SECONDS = 10.0


class CertificateError(OutriggerError, ValueError):
    """A certificate, key or CA file that cannot be used (the message names the flag and the file)."""


@dataclass(frozen=True)
class ServingTLS:
    """The secure port's TLS context and what it serves: ``source`` (the file, or ``self-signed``),
    ``fingerprint`` (SHA-256 of the certificate, colon-separated hex) and ``client_ca`` (the file, or "")."""

    context: ssl.SSLContext
    source: str
    fingerprint: str
    cert_pem: bytes
    client_ca: str = ""
    #: The files behind it, read again when they change (None for a self-signed port without a client CA).
    files: CertificateFiles | None = None


def _names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in hosts:
        host = host.strip("[]")
        if not host or host in seen or host in ("0.0.0.0", "::"):
            continue
        seen.add(host)
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def self_signed(hosts: Iterable[str] = ()) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key (PEM), for ``localhost``, ``127.0.0.1``, ``::1``, this
    host's name and ``hosts``."""
    key = ec.generate_private_key(ec.SECP256R1())
    hostname = socket.gethostname()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"outrigger@{hostname}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(_names(["localhost", "127.0.0.1", "::1", hostname, *hosts])),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def fingerprint(cert_pem: bytes) -> str:
    """The SHA-256 fingerprint of the first certificate in ``cert_pem`` (``AB:CD:...``)."""
    der = x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def _read(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CertificateError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None


def server_context(cert_file: str = "", key_file: str = "", client_ca_file: str = "",
                   hosts: Iterable[str] = (), *, watch: bool = True,
                   pair: tuple[bytes, bytes] | None = None) -> ServingTLS:
    """The secure port's TLS (see the module docstring); :class:`CertificateError` naming a bad flag.
    ``watch``: files given are read again when they change (:attr:`ServingTLS.files`); ``pair``: the
    self-signed certificate and key to serve when no certificate file is given (made here otherwise)."""
    hosts = list(hosts)
    if bool(cert_file) != bool(key_file):
        raise CertificateError("--tls-cert-file and --tls-private-key-file go together (the certificate and its key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file:
        cert_pem = _read(cert_file, "--tls-cert-file")
        _read(key_file, "--tls-private-key-file")
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except ssl.SSLError as exc:
            raise CertificateError(f"--tls-cert-file {cert_file} with --tls-private-key-file {key_file}: "
                                   f"{exc.reason or exc} (not a PEM certificate and its key?)") from None
        source = cert_file
    else:
        cert_pem, key_pem = pair if pair is not None else self_signed(hosts)
        # ssl loads a certificate chain only from files: a private folder, gone once loaded.
        with tempfile.TemporaryDirectory(prefix="outrigger-serving-") as tmp:
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_path.write_bytes(cert_pem)
            key_path.touch(0o600)
            key_path.write_bytes(key_pem)
            ctx.load_cert_chain(cert_path, key_path)
        source = "self-signed"
    try:
        digest = fingerprint(cert_pem)
    except ValueError:
        raise CertificateError(f"--tls-cert-file {cert_file}: not a PEM certificate") from None
    if client_ca_file:
        _read(client_ca_file, "--client-ca-file")
        try:
            ctx.load_verify_locations(cafile=client_ca_file)
        except ssl.SSLError as exc:
            raise CertificateError(f"--client-ca-file {client_ca_file}: {exc.reason or exc} "
                                   "(not a PEM certificate?)") from None
        # Ask for a certificate, verify one when given; callers without one authenticate otherwise.
        ctx.verify_mode = ssl.CERT_OPTIONAL
    if not (watch and (cert_file or client_ca_file)):
        return ServingTLS(ctx, source, digest, cert_pem, client_ca_file)
    files = CertificateFiles(cert_file, key_file, client_ca_file, hosts, None if cert_file else (cert_pem, key_pem))
    ctx.sni_callback = files.hand_over
    files.latest = ServingTLS(ctx, source, digest, cert_pem, client_ca_file, files)
    return files.latest


class CertificateFiles:
    """The certificate, key and client CA files of a secure port, read again when they change.

    :meth:`reload` (every :data:`RELOAD_SECONDS` in :meth:`watch`) compares each file's size and
    modification time with what it last saw and, on a change, builds the port's TLS anew from the files;
    :meth:`hand_over`, the listening context's SNI callback (called for every handshake, with or without
    a server name), moves each new connection to the newest context. A change that does not load (a key
    that does not match, a half-written file) is logged and left: the last good context keeps serving,
    and the files are tried again when they change again.
    """

    latest: ServingTLS

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str, hosts: list[str],
                 pair: tuple[bytes, bytes] | None) -> None:
        self.cert_file, self.key_file, self.client_ca_file = cert_file, key_file, client_ca_file
        self.hosts, self.pair = hosts, pair
        self.reloads = 0
        self.seen = self.stamps()

    def stamps(self) -> tuple[tuple[int, int] | None, ...]:
        """Each file's (modification time, size) as it is now (None: not there)."""
        return tuple(file_stamp(path) for path in (self.cert_file, self.key_file, self.client_ca_file))

    def reload(self) -> bool:
        """Load the files again if any changed since they were last looked at; True when the port now
        serves what they hold."""
        stamps = self.stamps()
        if stamps == self.seen:
            return False
        self.seen = stamps
        try:
            fresh = server_context(self.cert_file, self.key_file, self.client_ca_file, self.hosts, watch=False,
                                   pair=self.pair)
        except (CertificateError, OSError) as exc:
            log.error("secure port: the changed certificate files were not loaded; the previous ones stay in "
                      "use: %s", exc)
            return False
        self.latest = fresh
        self.reloads += 1
        log.warning("secure port: certificate files reloaded (%s certificate, SHA-256 %s%s)", fresh.source,
                    fresh.fingerprint, f"; client CA {fresh.client_ca}" if fresh.client_ca else "")
        return True

    def hand_over(self, conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                  context: ssl.SSLContext) -> None:
        """The listening context's SNI callback: a new connection gets the newest context."""
        newest = self.latest.context
        if newest is not context:
            conn.context = newest

    async def watch(self) -> None:
        """Look at the files every :data:`RELOAD_SECONDS` until cancelled."""
        while True:
            await asyncio.sleep(RELOAD_SECONDS)
            self.reload()


def file_stamp(path: str | None) -> tuple[int, int] | None:
    """A file's (modification time, size) as it is now: what the reloading files compare to tell a
    change (None: no path, or no file there)."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return None if st is None else (st.st_mtime_ns, st.st_size)
