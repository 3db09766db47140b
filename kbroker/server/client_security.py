"""The broker's own side of a secured connection to another broker (followers' fetches, the
controller's requests, transaction markers, delayed deliveries): TLS with the listener's truststore
(and keystore, for mTLS), then the SASL exchange with the broker's own credentials —
`sasl.mechanism.inter.broker.protocol` and the `username`/`password` of that listener's JAAS line,
as Kafka's inter-broker clients do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import trio

from kbroker.config import BrokerConfig
from kbroker.errors import InvalidConfigError, StartupError
from kbroker.security.errors import SaslAuthenticationError
from kbroker.security.jaas import parse_jaas_config
from kbroker.security.oauthbearer import unsecured_client_token
from kbroker.security.plain import plain_client_token
from kbroker.security.scram import ScramClient
from kbroker.tlsconfig import KeyMaterial, client_context

__all__ = ["ClientSecurity", "for_listener", "PLAINTEXT"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
Call = Callable[[int, int, dict], Awaitable[Any]]  # (api key, version, body) -> decoded response


@dataclass
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: Any = None
    mechanism: str | None = None
    options: dict[str, str] = field(default_factory=dict)  # the JAAS line's options (username, password, ...)

    async def wrap(self, stream: trio.abc.Stream, host: str) -> trio.abc.Stream:
        """TLS over the TCP stream, when the listener has it."""
        if self.ssl_context is None:
            return stream
        tls = trio.SSLStream(stream, self.ssl_context, server_hostname=host)
        await tls.do_handshake()
        return tls

    async def authenticate(self, call: Call) -> None:
        """The SASL exchange over SaslHandshake v1 and SaslAuthenticate v2; SaslAuthenticationError
        when the other broker refuses."""
        if self.mechanism is None:
            return
        answer = await call(SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if int(answer.error_code) != 0:
            raise SaslAuthenticationError(f"SaslHandshake for {self.mechanism} refused: {answer.error_code!r} "
                                          f"(enabled: {', '.join(answer.mechanisms)})")
        for token, check in self._tokens():
            answer = await call(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if int(answer.error_code) != 0:
                raise SaslAuthenticationError(answer.error_message or f"SASL {self.mechanism} failed")
            check(answer.auth_bytes)

    def _tokens(self):
        user, password = self.options.get("username", ""), self.options.get("password", "")
        if self.mechanism == "PLAIN":
            yield plain_client_token(user, password), lambda _reply: None
        elif self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            client = ScramClient(self.mechanism, user, password)
            replies: list[bytes] = []
            yield client.first_message(), replies.append
            yield client.final_message(replies[0]), client.verify_server_final
        elif self.mechanism == "OAUTHBEARER":
            # issued a second back: Kafka's validator refuses an `iat` in its own millisecond's future
            yield unsecured_client_token(self.options, int(time.time() * 1000) - 1000), lambda _reply: None


PLAINTEXT = ClientSecurity()


def tls_for_listener(config: BrokerConfig, listener: str) -> ClientSecurity:
    """Only the TLS of connecting to `listener` of another broker (its truststore, and its keystore
    as the client certificate), no SASL: what the schema registry forwards requests with."""
    try:
        endpoint = next(e for e in config.endpoints if e.name == listener)
    except (StopIteration, InvalidConfigError) as exc:
        raise StartupError(f"inter-broker listener {listener}: {exc or 'not among the listeners'}") from None
    security = ClientSecurity(endpoint.protocol)
    if endpoint.protocol in ("SSL", "SASL_SSL"):
        security.ssl_context = client_context(KeyMaterial(lambda key: config.listener_get(listener, key),
                                                          f"the inter-broker client of listener {endpoint}"))
    return security


def for_listener(config: BrokerConfig, listener: str) -> ClientSecurity:
    """How this broker connects to `listener` of another broker; StartupError when it cannot."""
    security = tls_for_listener(config, listener)
    endpoint = next(e for e in config.endpoints if e.name == listener)
    if endpoint.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
        if mechanism == "GSSAPI":
            raise StartupError(f"sasl.mechanism.inter.broker.protocol=GSSAPI: Kerberos is not served by kbroker; "
                               f"set it to one of listener {endpoint}'s sasl.enabled.mechanisms")
        text = config.listener_get(listener, "sasl.jaas.config", mechanism)
        if text is None:
            raise StartupError(f"the inter-broker listener {endpoint} uses SASL {mechanism}: set "
                               f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config with the "
                               f"broker's own username and password")
        try:
            options = dict(parse_jaas_config(str(text)).options)
        except ValueError as exc:
            raise StartupError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: {exc}") from None
        if mechanism != "OAUTHBEARER" and not options.get("username"):
            raise StartupError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config has no "
                               f"username/password for the broker's own connections")
        security.mechanism, security.options = mechanism, options
    return security
