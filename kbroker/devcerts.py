"""Throwaway TLS certificates for development and tests: a CA made for one directory, and a broker
certificate it signs for this machine (SAN DNS:localhost, IP:127.0.0.1), made with `cryptography`.
`kbroker serve --dev-security`, `kbroker dev-cluster --security ...` and kbroker.testing's
`with_tls()` use them. Not for production: the CA's private key is discarded once it has signed,
so nothing else can ever be signed by it, and the files are only as safe as the directory.

    ca.pem              the CA certificate: the clients' truststore (ssl.truststore.type=PEM,
                        confluent-kafka's ssl.ca.location, kafka-python's ssl_cafile)
    broker.p12          the broker's key and certificate chain (ssl.keystore.type=PKCS12), its
                        password in broker.p12.password (both readable by the owner only)
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["DEFAULT_HOSTS", "DEFAULT_IPS", "DevCertificates", "dev_certificates", "make_dev_certificates"]

DEFAULT_HOSTS = ("localhost",)
DEFAULT_IPS = ("127.0.0.1",)
VALID_DAYS = 365
_RENEW_BEFORE = datetime.timedelta(days=7)  # a reused certificate must have this much life left
CA_FILE, KEYSTORE_FILE, PASSWORD_FILE = "ca.pem", "broker.p12", "broker.p12.password"


@dataclass(frozen=True)
class DevCertificates:
    directory: Path
    ca_file: Path  # PEM
    keystore: Path  # PKCS12: the broker's key, certificate and the CA
    keystore_password: str = field(repr=False)

    def broker_ssl_config(self) -> dict[str, str]:
        """Kafka's broker keys for a listener with these certificates (and the truststore its own
        client connections to other brokers use)."""
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": self.keystore_password,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}

    def client_ssl_config(self) -> dict[str, str]:
        """Kafka's (Java) client keys that trust the broker's certificate."""
        return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner can read, replacing it atomically."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kbroker development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_dev_certificates(directory: str | Path, hosts: tuple[str, ...] = DEFAULT_HOSTS,
                          ips: tuple[str, ...] = DEFAULT_IPS, days: int = VALID_DAYS) -> DevCertificates:
    """A new CA and broker certificate in `directory` (created, mode 0700), replacing any there."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"kbroker development CA {secrets.token_hex(4)}")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))

    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(h) for h in hosts] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder().subject_name(_name(hosts[0] if hosts else ips[0])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=True, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256()))
    del ca_key  # nothing else will ever be signed by this CA

    password = secrets.token_urlsafe(18)
    keystore = pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, [ca], serialization.BestAvailableEncryption(password.encode()))
    (directory / CA_FILE).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_private(directory / KEYSTORE_FILE, keystore)
    _write_private(directory / PASSWORD_FILE, password.encode())
    return DevCertificates(directory, directory / CA_FILE, directory / KEYSTORE_FILE, password)


def dev_certificates(directory: str | Path, hosts: tuple[str, ...] = DEFAULT_HOSTS,
                     ips: tuple[str, ...] = DEFAULT_IPS) -> DevCertificates:
    """The certificates already in `directory` when they are complete, for these names and valid
    for another week; new ones otherwise (so a restarted dev setup keeps its clients' files)."""
    directory = Path(directory)
    try:
        password = (directory / PASSWORD_FILE).read_text().strip()
        _key, cert, _extra = pkcs12.load_key_and_certificates((directory / KEYSTORE_FILE).read_bytes(),
                                                               password.encode())
        ca = x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        wanted = {*hosts, *(str(ipaddress.ip_address(i)) for i in ips)}
        have = {*san.get_values_for_type(x509.DNSName), *(str(i) for i in san.get_values_for_type(x509.IPAddress))}
        fresh = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > _RENEW_BEFORE
        if cert.issuer == ca.subject and wanted <= have and fresh:
            return DevCertificates(directory, directory / CA_FILE, directory / KEYSTORE_FILE, password)
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound):
        pass
    return make_dev_certificates(directory, hosts, ips)
