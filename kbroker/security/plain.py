"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer and PlainServerCallbackHandler do it: one message
`[authzid] NUL authcid NUL passwd`, checked against the JAAS `user_<name>="<password>"` options in
constant time; the authzid must be empty or the username. Also the client's token.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.mechanisms import checked_token

__all__ = ["PlainServer", "plain_client_token"]


def _tokens(response: str) -> list[str]:
    """PlainSaslServer.extractTokens: up to four NUL-separated pieces; anything but three fails."""
    tokens: list[str] = []
    start = 0
    for _ in range(4):
        end = response.find("\0", start)
        if end == -1:
            tokens.append(response[start:])
            break
        tokens.append(response[start:end])
        start = end + 1
    if len(tokens) != 3:
        raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None
        self.session_expiry_ms: int | None = None
        self._failed = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self._failed:
            state = "COMPLETE" if self.complete else "FAILED"
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state}")
        try:
            return self._evaluate(token)
        except SaslAuthenticationError:
            self._failed = True
            raise

    def _evaluate(self, token: bytes) -> bytes:
        # Java's new String(bytes, UTF_8): malformed input becomes U+FFFD, it never throws
        response = checked_token(token).decode("utf-8", "replace")
        authzid, username, password = _tokens(response)
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare against something even for an unknown user, so the time taken does not tell
        matches = hmac.compare_digest(password.encode("utf-8", "surrogatepass"),
                                      (expected if expected is not None else "\0" + password)
                                      .encode("utf-8", "surrogatepass"))
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def plain_client_token(username: str, password: str) -> bytes:
    """The client's single PLAIN message, `NUL username NUL password` (no authzid, as Kafka's client)."""
    if "\0" in username or "\0" in password:
        raise ValueError("a SASL/PLAIN username or password cannot contain NUL")
    return b"\0" + username.encode() + b"\0" + password.encode()
