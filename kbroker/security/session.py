"""One connection's authentication state, as Kafka's SaslServerAuthenticator keeps it: which
requests a connection may send before it has authenticated, the SaslHandshake and SaslAuthenticate
steps (and the v0 handshake's unframed tokens), the principal, the session's lifetime and KIP-368
re-authentication. Pure: the server feeds it requests and a clock, and acts on what it answers.

    TLS (SSL, SASL_SSL) ─▶ HANDSHAKE ─SaslHandshake─▶ AUTHENTICATE ─SaslAuthenticate…─▶ AUTHENTICATED
                               ▲  (ApiVersions any time)                │ failure: FAILED (answer, delay, close)
                               └──── re-authentication (SaslHandshake v1 on an authenticated connection)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

from kbroker.errors import ErrorCode
from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["Phase", "ConnectionSession", "AuthStep", "API_VERSIONS", "SASL_HANDSHAKE", "SASL_AUTHENTICATE"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_BEFORE_AUTH = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class Phase(enum.Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # the mechanism's exchange is under way
    AUTHENTICATED = "authenticated"
    FAILED = "failed"  # the answer goes out, then the connection closes


@dataclass(frozen=True)
class AuthStep:
    """What one SaslAuthenticate (or unframed token) produced."""

    token: bytes = b""
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    session_lifetime_ms: int = 0
    close: bool = False  # the connection closes after the answer (and the failed-authentication delay)


@dataclass
class ConnectionSession:
    """`sasl_servers` makes the mechanism's server for a mechanism name (None = not a SASL listener);
    `reauth_ms` is connections.max.reauth.ms (0 = sessions never expire)."""

    listener: str
    protocol: str
    principal: KafkaPrincipal = ANONYMOUS
    mechanisms: tuple[str, ...] = ()
    sasl_servers: Callable[[str], object] | None = None
    reauth_ms: int = 0
    phase: Phase = Phase.AUTHENTICATED
    handshake_version: int = -1
    mechanism: str | None = None
    session_expiry_ms: int | None = None  # absolute ms; past it only a re-authentication may be sent
    reauthenticating: bool = False
    _server: object | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.sasl_servers is not None:
            self.phase = Phase.HANDSHAKE

    @property
    def sasl(self) -> bool:
        return self.sasl_servers is not None

    @property
    def authenticated(self) -> bool:
        return self.phase is Phase.AUTHENTICATED

    @property
    def unframed_tokens(self) -> bool:
        """After a v0 SaslHandshake the client sends bare tokens, each size-prefixed, no header."""
        return self.phase is Phase.AUTHENTICATE and self.handshake_version == 0

    def may_send(self, api_key: int, now_ms: int) -> bool:
        """Whether a request with this key is served now; anything else closes the connection."""
        if self.phase is Phase.AUTHENTICATED:
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and not self.sasl:
                return False
            return not self.expired(now_ms) or api_key in _BEFORE_AUTH
        if self.phase is Phase.FAILED:
            return False
        return api_key in _BEFORE_AUTH

    def expired(self, now_ms: int) -> bool:
        return self.session_expiry_ms is not None and now_ms >= self.session_expiry_ms

    # -- SaslHandshake ---------------------------------------------------------------------------
    def handshake(self, version: int, mechanism: str) -> tuple[ErrorCode, list[str]]:
        """The answer's error code and the enabled mechanisms. After an error the connection closes
        (`phase` is FAILED), as Kafka's authenticator throws once the answer is sent."""
        enabled = list(self.mechanisms)
        if not self.sasl:
            self.phase = Phase.FAILED
            return ErrorCode.illegal_sasl_state, enabled
        if self.phase is Phase.AUTHENTICATED:  # KIP-368: re-authentication, v1 only, same mechanism
            if version < 1 or mechanism != self.mechanism:
                self.phase = Phase.FAILED
                return ErrorCode.illegal_sasl_state, enabled
            self.reauthenticating = True
        elif self.phase is not Phase.HANDSHAKE:
            self.phase = Phase.FAILED
            return ErrorCode.illegal_sasl_state, enabled
        if mechanism not in self.mechanisms:
            self.phase = Phase.FAILED
            return ErrorCode.unsupported_sasl_mechanism, enabled
        self.handshake_version = version
        self.mechanism = mechanism
        self._server = self.sasl_servers(mechanism)
        self.phase = Phase.AUTHENTICATE
        return ErrorCode.none, enabled

    # -- SaslAuthenticate / unframed tokens --------------------------------------------------------
    def authenticate(self, token: bytes, now_ms: int) -> AuthStep:
        if self.phase is not Phase.AUTHENTICATE or self._server is None:
            self.phase = Phase.FAILED
            return AuthStep(error=ErrorCode.illegal_sasl_state,
                            message="Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.",
                            close=True)
        server = self._server
        try:
            reply = server.evaluate(bytes(token))
        except SaslAuthenticationError as exc:
            self.phase = Phase.FAILED
            return AuthStep(error=ErrorCode.sasl_authentication_failed, message=str(exc), close=True)
        except IllegalSaslStateError as exc:
            self.phase = Phase.FAILED
            return AuthStep(error=ErrorCode.illegal_sasl_state, message=str(exc), close=True)
        if not server.complete:
            return AuthStep(token=reply)
        principal = KafkaPrincipal("User", server.authorization_id or "")
        if self.reauthenticating and principal != self.principal:
            self.phase = Phase.FAILED
            return AuthStep(error=ErrorCode.sasl_authentication_failed, close=True,
                            message=f"Cannot change principals during re-authentication from {self.principal}: "
                                    f"{principal}")
        lifetime = self._session_lifetime_ms(getattr(server, "session_expiry_ms", None), now_ms)
        self.principal = principal
        self.session_expiry_ms = now_ms + lifetime if lifetime > 0 else None
        self.phase = Phase.AUTHENTICATED
        self.reauthenticating = False
        self._server = None
        return AuthStep(token=reply, session_lifetime_ms=lifetime)

    def _session_lifetime_ms(self, credential_expiry_ms: int | None, now_ms: int) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the shorter of
        connections.max.reauth.ms and the credential's remaining life; 0 = no limit."""
        reauth = self.reauth_ms if self.reauth_ms > 0 else None
        remaining = None if credential_expiry_ms is None else max(0, credential_expiry_ms - now_ms)
        if reauth is None and remaining is None:
            return 0
        if reauth is None:
            return remaining or 1  # an expired credential still ends the session at once
        if remaining is None:
            return reauth
        return max(1, min(reauth, remaining))
