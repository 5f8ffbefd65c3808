"""A throwaway CA and certificates for trying TLS on one machine (docs/security.md); needs `cryptography`.

Writes to ./pki: ca.pem (and ca-key.pem), then framework, labels (a plugin host) and operator (a client),
each NAME.pem + NAME-key.pem signed by the CA for 127.0.0.1 and localhost, usable as server and client
certificates; and labels.token, a random bearer token for the plugin host. Never use these in production.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

OUT = Path("pki")
DAYS = 365


def name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    print(f"wrote {path}")


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def main() -> None:
    OUT.mkdir(exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("outrigger CA")).issuer_name(name("outrigger CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    write(OUT / "ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    write(OUT / "ca-key.pem", key_pem(ca_key))
    sans = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    for who in ("framework", "labels", "operator"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(who)).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=DAYS))
                .add_extension(sans, critical=False).add_extension(usage, critical=False)
                .sign(ca_key, hashes.SHA256()))
        write(OUT / f"{who}.pem", cert.public_bytes(serialization.Encoding.PEM))
        write(OUT / f"{who}-key.pem", key_pem(key))
    write(OUT / "labels.token", (secrets.token_urlsafe(32) + "\n").encode())


if __name__ == "__main__":
    main()
