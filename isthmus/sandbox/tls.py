"""A private CA and a server certificate for the sandbox (``sandbox up --tls``).

Written once into the state directory; clouds.yaml names the CA (``cacert``) so
every client verifies the services' certificates, as in a real deployment.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 365


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate: what clients trust
    cert: Path  # the server certificate (127.0.0.1, localhost)
    key: Path  # its private key


def ensure(directory: Path, names: tuple[str, ...] = ("localhost",),
           addresses: tuple[str, ...] = ("127.0.0.1", "::1")) -> Certificates:
    """The CA and server certificate in ``directory``, made if missing.

    Under a lock: the gateway and the Admin API start side by side and both ask.
    Unlocked, each made a CA and the files ended up from two of them, so a server
    presented a certificate its clients' CA had not signed (seen once in a test run:
    the TLS sandbox's gateway never passed its health check)."""
    made = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (made.ca.exists() and made.cert.exists() and made.key.exists()):
            _make(made, names, addresses)
    return made


def _make(made: Certificates, names: tuple[str, ...], addresses: tuple[str, ...]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Isthmus sandbox CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    made.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    made.key.chmod(0o600)
    made.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    made.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
