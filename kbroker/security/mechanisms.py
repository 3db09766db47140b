"""The common face of the server side of every SASL mechanism we serve (the `SaslServer` protocol),
the list of them, the bound on a token's size, and `server_for`, which makes the server for the
mechanism a client's SaslHandshake named.

A server is a pure state machine: the authenticator hands it each SaslAuthenticate's auth_bytes and
sends back what `evaluate` returns, until `complete`; `evaluate` raises SaslAuthenticationError (its
message is the response's error_message) or IllegalSaslStateError, never anything else, whatever the
bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from kbroker.security.errors import (
    INVALID_RECEIVE_SIZE,
    SaslAuthenticationError,
    unsupported_mechanism_message,
)

if TYPE_CHECKING:
    from kbroker.security.credentials import ScramCredential

__all__ = ["MAX_TOKEN_BYTES", "SUPPORTED_MECHANISMS", "SaslServer", "checked_token", "server_for"]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# the largest SASL token accepted (Kafka's sasl.server.max.receive.size, ours fixed at 64 KiB)
MAX_TOKEN_BYTES = 65536


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str | None  # the principal name once complete (User:<this>)
    session_expiry_ms: int | None  # absolute ms the credential expires (OAUTHBEARER's token exp), else None

    def evaluate(self, token: bytes) -> bytes:
        """The next server message; raises SaslAuthenticationError / IllegalSaslStateError."""
        ...


def checked_token(token: bytes | bytearray | memoryview) -> bytes:
    """The token as bytes, refused (as Kafka refuses an oversized receive) past MAX_TOKEN_BYTES."""
    data = bytes(token)
    if len(data) > MAX_TOKEN_BYTES:
        raise SaslAuthenticationError(INVALID_RECEIVE_SIZE,
                                      detail=f"SASL token of {len(data)} bytes exceeds {MAX_TOKEN_BYTES}")
    return data


def server_for(mechanism: str, *, plain_users: Mapping[str, str],
               scram_lookup: Callable[[str, str], ScramCredential | None],
               oauth_options: Mapping[str, str], now_ms: Callable[[], int]) -> SaslServer:
    """A fresh server for one exchange. `plain_users`: PLAIN's user -> password (the JAAS
    user_<name> options); `scram_lookup(mechanism, username)`: the stored SCRAM credential or None;
    `oauth_options`: the OAUTHBEARER JAAS options (unsecuredValidator*); `now_ms`: the wall clock.
    ValueError for a mechanism we do not serve (and for invalid OAUTHBEARER options)."""
    if mechanism == "PLAIN":
        from kbroker.security.plain import PlainServer
        return PlainServer(plain_users)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        from kbroker.security.scram import ScramServer
        return ScramServer(mechanism, lambda username: scram_lookup(mechanism, username))
    if mechanism == "OAUTHBEARER":
        from kbroker.security.oauthbearer import OAuthBearerServer
        return OAuthBearerServer(oauth_options, now_ms)
    raise ValueError(unsupported_mechanism_message(mechanism))
