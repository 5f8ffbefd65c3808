"""The TLS of the framework's gRPC ports (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``), read again
when its files change, as the secure port's are (:mod:`framework.observe.certs`).

gRPC asks :meth:`ReloadingCredentials.fetch` before every new connection's handshake. At most once every
:data:`framework.observe.certs.RELOAD_SECONDS` it looks at the files' size and modification time; on a
change it loads them and hands gRPC the new certificate, key and client CA, which that connection and
every later one get; open connections keep theirs. Files that do not load (a key that does not match
its certificate, a half-written file) are logged once per change and the last good ones keep serving.
Whether clients must present a certificate is fixed at startup (``--tls-client-ca`` given or not).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from pluginhost.security import SERVER_FLAG_NAMES, ServerTLS, TLSConfigError, read_pem

from ..observe import certs

__all__ = ["ReloadingCredentials"]

log = logging.getLogger("outrigger.service")

Stamps = tuple[tuple[int, int] | None, ...]


def _public_key(key: Any) -> bytes:
    """A public key's DER bytes, to tell whether a certificate and a private key belong together."""
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


class ReloadingCredentials:
    """gRPC server credentials from a :class:`ServerTLS`'s files, taken again when they change (see the
    module docstring). ``names``: what errors call each file (the command-line flags by default)."""

    def __init__(self, tls: ServerTLS, names: Mapping[str, str] = SERVER_FLAG_NAMES) -> None:
        if not tls.cert_file or not tls.key_file:
            raise TLSConfigError(f"{names['cert']} and {names['key']} are both required to serve TLS")
        self.tls, self.names = tls, names
        self.reloads = 0
        self._lock = threading.Lock()  # gRPC may ask from more than one thread
        self.seen = self.stamps()
        self._looked = time.monotonic()
        self.credentials = grpc.dynamic_ssl_server_credentials(
            self._configuration(), self.fetch, require_client_authentication=bool(tls.client_ca_file))

    def stamps(self) -> Stamps:
        """Each file's (modification time, size) as it is now (None: not there)."""
        return tuple(certs.file_stamp(path) for path in (self.tls.cert_file, self.tls.key_file,
                                                         self.tls.client_ca_file))

    def _configuration(self) -> Any:
        """The files as a gRPC certificate configuration; :class:`TLSConfigError` naming what is wrong."""
        names, tls = self.names, self.tls
        cert, key = read_pem(tls.cert_file, names["cert"]), read_pem(tls.key_file, names["key"])
        try:
            cert_key = _public_key(x509.load_pem_x509_certificate(cert).public_key())
        except ValueError:
            raise TLSConfigError(f"{names['cert']}: {tls.cert_file} holds no PEM certificate") from None
        try:
            key_key = _public_key(serialization.load_pem_private_key(key, password=None).public_key())
        except (ValueError, TypeError):
            raise TLSConfigError(f"{names['key']}: {tls.key_file} holds no unencrypted PEM private key") from None
        if cert_key != key_key:
            raise TLSConfigError(f"{names['key']}: {tls.key_file} is not the key of the certificate in "
                                 f"{tls.cert_file}")
        ca = None
        if tls.client_ca_file:
            ca = read_pem(tls.client_ca_file, names["ca"])
            try:
                x509.load_pem_x509_certificates(ca)
            except ValueError:
                raise TLSConfigError(f"{names['ca']}: {tls.client_ca_file} holds no PEM certificate") from None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def fetch(self) -> Any:
        """gRPC's certificate configuration fetcher, asked before each new connection's handshake: the
        files' new configuration when they changed since they were last looked at, else None."""
        now = time.monotonic()
        with self._lock:
            if now - self._looked < certs.RELOAD_SECONDS:
                return None
            self._looked = now
            return self.reload()

    def reload(self) -> Any:
        """The files' configuration if any of them changed and they load (None otherwise)."""
        stamps = self.stamps()
        if stamps == self.seen:
            return None
        self.seen = stamps
        try:
            configuration = self._configuration()
        except TLSConfigError as exc:
            log.error("gRPC port: the changed certificate files were not loaded; the previous ones stay in use: %s",
                      exc)
            return None
        self.reloads += 1
        log.warning("gRPC port: certificate files reloaded (%s%s)", self.tls.cert_file,
                    f"; client CA {self.tls.client_ca_file}" if self.tls.client_ca_file else "")
        return configuration
