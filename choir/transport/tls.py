"""TLS for the HTTP transport: a self-signed certificate for one host, and the ssl contexts.

v1 runs HTTP over loopback or a local Docker network (§12.4): server-only TLS with a self-signed
certificate is enough, the client trusting exactly that certificate. The certificate is its own
trust anchor (no separate CA to guard) and names localhost, 127.0.0.1 and ::1 plus any extra
names given. A P-256 key keeps handshakes cheap. mTLS (§12.4 "future") only changes these
context factories.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from choir.config.atomic import atomic_write

DEFAULT_NAMES = ("localhost", "127.0.0.1", "::1")
"""Who the certificate vouches for unless told otherwise."""


def create_self_signed(
    cert_file: Path,
    key_file: Path,
    *,
    names: Sequence[str] = DEFAULT_NAMES,
    days: int = 825,
) -> None:
    """Write a new self-signed server certificate and its private key, both mode 0600.

    `names` become subjectAltNames: IP addresses as IP entries, anything else as DNS names.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"choird {names[0]}")])
    public_key = key.public_key()
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([_san(name) for name in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    cert_file.parent.mkdir(parents=True, exist_ok=True)
    key_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(key_file, key_pem, 0o600)
    atomic_write(cert_file, certificate.public_bytes(serialization.Encoding.PEM), 0o600)


def ensure_self_signed(
    cert_file: Path, key_file: Path, *, names: Sequence[str] = DEFAULT_NAMES
) -> bool:
    """Create the certificate and key unless both exist; whether they were created."""
    if cert_file.exists() and key_file.exists():
        return False
    create_self_signed(cert_file, key_file, names=names)
    return True


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The listener's context: TLS 1.2 or newer, presenting the certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def client_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """A verifying client context trusting `ca_file` (the self-signed certificate) or, with
    None, the system's CAs. Hostname checking stays on: connect by a name the cert carries."""
    context = ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=False,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
