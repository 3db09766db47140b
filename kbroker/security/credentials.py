"""SCRAM credentials as Kafka stores them (ScramCredentialUtils): salt, stored key, server key and
iteration count, never the password. The text form `salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>` is what `/config/users/<user>` holds under the mechanism's name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["MECHANISMS", "ScramCredential", "make_credential", "credential_from_salted_password",
           "salted_password", "MIN_ITERATIONS", "MAX_ITERATIONS", "DEFAULT_ITERATIONS", "mechanism_by_type",
           "mechanism_type", "credentials_from_config", "credentials_to_config"]

# mechanism name -> (hashlib name, Kafka's ScramMechanism type code of DescribeUserScramCredentials)
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials upper bound
DEFAULT_ITERATIONS = 4096


def mechanism_by_type(code: int) -> str | None:
    return next((name for name, (_, c) in MECHANISMS.items() if c == code), None)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka_string(self) -> str:
        b = lambda v: base64.b64encode(v).decode()  # noqa: E731
        return (f"salt={b(self.salt)},stored_key={b(self.stored_key)},server_key={b(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> "ScramCredential":
        """Parse Kafka's text form; ValueError when it is not one."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ValueError(f"unsupported SCRAM mechanism {mechanism}") from None


def salted_password(mechanism: str, password: str | bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    pw = password.encode() if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(_hash(mechanism), pw, salt, iterations)


def credential_from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials sends (the salted password) made into the stored form."""
    name = _hash(mechanism)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str | bytes, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                           salt, iterations)


def mechanism_type(mechanism: str) -> int:
    """Kafka's ScramMechanism type code of a mechanism name (ValueError for an unknown one)."""
    try:
        return MECHANISMS[mechanism][1]
    except KeyError:
        raise ValueError(f"unsupported SCRAM mechanism {mechanism}") from None


def credentials_from_config(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's config entries (Kafka keeps quotas beside them in
    `/config/users/<user>`): mechanism name -> credential, in MECHANISMS order; ValueError when an
    entry under a mechanism's name is not a credential."""
    return {m: ScramCredential.from_kafka_string(config[m]) for m in MECHANISMS if m in config}


def credentials_to_config(credentials: Mapping[str, ScramCredential]) -> dict[str, str]:
    """mechanism name -> Kafka's text form, what the stores write."""
    return {m: credentials[m].to_kafka_string() for m in MECHANISMS if m in credentials}
