"""The two ways a SASL exchange fails, as Kafka's SaslServerAuthenticator reports them.

`SaslAuthenticationError.message` is exactly what goes into SaslAuthenticate's error_message
(error code SASL_AUTHENTICATION_FAILED). Kafka's mechanisms fail in two flavours: a
SaslAuthenticationException, whose own words reach the client ("Authentication failed: Invalid
username or password"), and a plain SaslException, whose words stay in the broker's log while the
client gets the generic "Authentication failed during authentication due to invalid credentials
with SASL mechanism <M>" (so that, say, a user's existence is not revealed). The second flavour is
`SaslAuthenticationError.invalid_credentials(mechanism, detail)`: `detail` keeps the reason for the
log, `mechanism` is set so the authenticator can reword it for a re-authentication.

`IllegalSaslStateError` is Kafka's IllegalSaslStateException: a token arriving when the exchange
expects none (after it completed or failed).
"""

from __future__ import annotations

__all__ = [
    "INVALID_RECEIVE_SIZE",
    "IllegalSaslStateError",
    "SaslAuthenticationError",
    "invalid_credentials_message",
    "unsupported_mechanism_message",
]

# SaslServerAuthenticator's words when a SASL token is larger than the receive limit
INVALID_RECEIVE_SIZE = "Failing SASL authentication due to invalid receive size"


def invalid_credentials_message(mechanism: str, *, reauthenticating: bool = False) -> str:
    """The generic message Kafka sends for a SaslException (its detail is never sent)."""
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


def unsupported_mechanism_message(mechanism: str) -> str:
    """UnsupportedSaslMechanismException's message for a SaslHandshake naming a disabled mechanism."""
    return f"Unsupported SASL mechanism {mechanism}"


class SaslAuthenticationError(Exception):
    """The exchange failed; `message` is SaslAuthenticate's error_message, `detail` (if any) is the
    server-side reason for the log only."""

    def __init__(self, message: str, *, detail: str | None = None, mechanism: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        # set when `message` is the generic invalid-credentials text standing for a SaslException
        self.mechanism = mechanism

    @classmethod
    def invalid_credentials(cls, mechanism: str, detail: str | None = None) -> SaslAuthenticationError:
        return cls(invalid_credentials_message(mechanism), detail=detail, mechanism=mechanism)

    def client_message(self, *, reauthenticating: bool = False) -> str:
        """The error_message to send, worded for a re-authentication when it is one."""
        if self.mechanism is not None:
            return invalid_credentials_message(self.mechanism, reauthenticating=reauthenticating)
        return self.message


class IllegalSaslStateError(Exception):
    """A token out of sequence (Kafka's IllegalSaslStateException); `message` is Kafka's wording."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
