"""SSL contexts from Kafka's keys, for the broker's listeners and for every client kbroker makes
(inter-broker connections, the kbroker commands, the console): PKCS12 and PEM keystores and
truststores, files or inline PEM, ssl.client.auth, protocols and cipher suites. No sockets here.

A PKCS12 keystore is read into memory with `cryptography`; OpenSSL's loader wants files, so the key
goes through a private temporary file, encrypted with a random password, removed at once. JKS
files (magic 0xFEEDFEED) are refused with a one-line error naming PKCS12 and PEM: no well-kept
Python library reads them.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kbroker.errors import StartupError

__all__ = ["KeyMaterial", "server_context", "client_context"]

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
              "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Kafka (Java) names cipher suites by their IANA names; OpenSSL by its own. The common TLS 1.2 ones:
_IANA_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
}
_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


@dataclass(frozen=True)
class KeyMaterial:
    """One listener's (or the broker's client side's) SSL settings, read with its key prefix resolved:
    `get(key)` returns the listener-scoped value if set, else the broker's."""

    get: Callable[[str], Any]
    what: str  # "listener SSL://127.0.0.1:9093", for start-up errors


def _read(path: str, what: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise StartupError(f"{what}: cannot read {key}={path}: {exc.strerror or exc}") from None


def _password(value: Any) -> bytes | None:
    return None if value in (None, "") else str(value).encode()


def _keystore_pem(m: KeyMaterial) -> tuple[bytes, bytes, bytes | None]:
    """(certificate chain PEM, private key PEM, the key's password) of the keystore."""
    kind = str(m.get("ssl.keystore.type") or "JKS").upper()
    location, inline_chain = m.get("ssl.keystore.location"), m.get("ssl.keystore.certificate.chain")
    if inline_chain:
        key = m.get("ssl.keystore.key")
        if kind != "PEM":
            raise StartupError(f"{m.what}: ssl.keystore.certificate.chain needs ssl.keystore.type=PEM")
        if not key:
            raise StartupError(f"{m.what}: ssl.keystore.certificate.chain is set without ssl.keystore.key")
        return str(inline_chain).encode(), str(key).encode(), _password(m.get("ssl.key.password"))
    if not location:
        raise StartupError(f"{m.what} needs a keystore: set ssl.keystore.location (PKCS12 or PEM), or "
                           f"ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key")
    data = _read(location, m.what, "ssl.keystore.location")
    if kind == "PEM":
        return data, data, _password(m.get("ssl.key.password"))
    if data[:4] == _JKS_MAGIC:
        raise StartupError(f"{m.what}: {location} is a JKS keystore, which kbroker does not read; use "
                           f"ssl.keystore.type=PKCS12 (keytool -importkeystore -deststoretype PKCS12) or PEM")
    if kind not in ("PKCS12", "JKS"):  # a "JKS" file made by keytool since Java 9 is PKCS12
        raise StartupError(f"{m.what}: ssl.keystore.type={kind} is not supported: PKCS12 or PEM")
    store_pw = _password(m.get("ssl.keystore.password"))
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, store_pw)
    except (ValueError, TypeError) as exc:
        raise StartupError(f"{m.what}: cannot read the PKCS12 keystore {location}: {exc} "
                           f"(is ssl.keystore.password right?)") from None
    if key is None or cert is None:
        raise StartupError(f"{m.what}: the keystore {location} holds no private key with its certificate")
    transit = secrets.token_bytes(24)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.BestAvailableEncryption(transit))
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *(extra or [])])
    return chain, key_pem, transit


def _load_chain(ctx: ssl.SSLContext, chain: bytes, key: bytes, password: bytes | None, what: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kbroker-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path, key_path = Path(tmp) / "chain.pem", Path(tmp) / "key.pem"
        cert_path.write_bytes(chain)
        key_path.write_bytes(key)
        if not password and (b"ENCRYPTED PRIVATE KEY" in key or b"Proc-Type: 4,ENCRYPTED" in key):
            raise StartupError(f"{what}: SSL PEM key store is specified, but key password is not specified "
                               f"(ssl.key.password)")
        try:
            # a callable, never None: OpenSSL would otherwise ask for a pass phrase on the terminal
            ctx.load_cert_chain(cert_path, key_path, password=(lambda: password or b""))
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise StartupError(f"{what}: the keystore's certificate and key do not load: {exc} "
                               f"(is ssl.key.password right?)") from None


def _truststore(m: KeyMaterial) -> str | None:
    """The trusted certificates as PEM text, None when no truststore is configured."""
    kind = str(m.get("ssl.truststore.type") or "JKS").upper()
    inline, location = m.get("ssl.truststore.certificates"), m.get("ssl.truststore.location")
    if inline:
        return str(inline)
    if not location:
        return None
    data = _read(location, m.what, "ssl.truststore.location")
    if kind == "PEM":
        return data.decode("ascii", "replace")
    if data[:4] == _JKS_MAGIC:
        raise StartupError(f"{m.what}: {location} is a JKS truststore, which kbroker does not read; use "
                           f"ssl.truststore.type=PKCS12 or PEM")
    try:
        _key, cert, extra = pkcs12.load_key_and_certificates(data, _password(m.get("ssl.truststore.password")))
    except (ValueError, TypeError) as exc:
        raise StartupError(f"{m.what}: cannot read the PKCS12 truststore {location}: {exc}") from None
    certs = [c for c in [cert, *(extra or [])] if c is not None]
    if not certs:
        raise StartupError(f"{m.what}: the truststore {location} holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _protocols(ctx: ssl.SSLContext, m: KeyMaterial) -> None:
    enabled = [p for p in (m.get("ssl.enabled.protocols") or []) if p]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise StartupError(f"{m.what}: ssl.enabled.protocols={','.join(enabled)}: the versions are "
                           f"{', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = [s for s in (m.get("ssl.cipher.suites") or []) if s]
    tls12 = [_IANA_CIPHERS.get(s, s) for s in suites if s not in _TLS13_SUITES]
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise StartupError(f"{m.what}: ssl.cipher.suites names no cipher suite OpenSSL knows: "
                               f"{','.join(suites)}") from None


def server_context(m: KeyMaterial) -> ssl.SSLContext:
    """The SSL context of a listener; StartupError (one line) when its settings do not work."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, m)
    _load_chain(ctx, *_keystore_pem(m), m.what)
    auth = str(m.get("ssl.client.auth") or "none").lower()
    trusted = _truststore(m)
    if auth != "none":
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
        if trusted:
            ctx.load_verify_locations(cadata=trusted)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(m: KeyMaterial) -> ssl.SSLContext:
    """The context the broker (or a kbroker command) connects to an SSL listener with: its truststore
    (else the system's), its keystore when one is set (mTLS), host name checks unless
    ssl.endpoint.identification.algorithm is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, m)
    trusted = _truststore(m)
    if trusted:
        ctx.load_verify_locations(cadata=trusted)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = bool(m.get("ssl.endpoint.identification.algorithm"))
    if m.get("ssl.keystore.location") or m.get("ssl.keystore.certificate.chain"):
        _load_chain(ctx, *_keystore_pem(m), m.what)
    return ctx
