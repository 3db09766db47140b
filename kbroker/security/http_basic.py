"""HTTP basic authentication (RFC 7617) checked against a listener's SASL users: the schema
registry's logins. Pure: the password is put through the listener's own SASL servers in memory —
PLAIN against its JAAS `user_<name>` options, SCRAM-SHA-256/512 against the stored credentials —
so a registry login succeeds exactly when a Kafka login with the same name and password would.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence

from kbroker.security.errors import SaslAuthenticationError
from kbroker.security.plain import plain_client_token
from kbroker.security.scram import ScramClient

__all__ = ["MAX_HEADER", "parse_basic", "verify_password"]

MAX_HEADER = 4096
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header; None when absent or malformed."""
    if not header or len(header) > MAX_HEADER:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password


def verify_password(mechanisms: Sequence[str], server_for: Callable[[str], object], user: str, password: str) -> bool:
    """Whether one of the listener's password mechanisms accepts `user`/`password`."""
    for mechanism in PASSWORD_MECHANISMS:
        if mechanism not in mechanisms:
            continue
        server = server_for(mechanism)
        try:
            if mechanism == "PLAIN":
                server.evaluate(plain_client_token(user, password))
            else:
                client = ScramClient(mechanism, user, password)
                server_first = server.evaluate(client.first_message())
                server.evaluate(client.final_message(server_first))
        except (SaslAuthenticationError, ValueError):
            continue
        if getattr(server, "complete", False) and getattr(server, "authorization_id", None) == user:
            return True
    return False
