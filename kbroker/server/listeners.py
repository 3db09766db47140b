"""Each listener's security, assembled at start-up from Kafka's keys: its TLS context (SSL,
SASL_SSL), its SASL mechanisms with their JAAS options (SASL_PLAINTEXT, SASL_SSL), the mapping of
client certificates to principals, and the session every new connection starts with. A listener
whose security cannot be served never comes up: `build` raises StartupError, one line.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from typing import Callable

from kbroker.config import BrokerConfig, Endpoint
from kbroker.errors import InvalidConfigError, StartupError
from kbroker.security.credentials import ScramCredential
from kbroker.security.jaas import parse_jaas_config, plain_users
from kbroker.security.mechanisms import SUPPORTED_MECHANISMS, server_for
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper, distinguished_name
from kbroker.security.session import ConnectionSession
from kbroker.tlsconfig import KeyMaterial, server_context

__all__ = ["ListenerSecurity", "build", "ScramLookup"]

ScramLookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ListenerSecurity:
    endpoint: Endpoint
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    oauth_options: dict[str, str] = field(default_factory=dict)
    scram_lookup: ScramLookup | None = None
    mapper: SslPrincipalMapper | None = None
    reauth_ms: int = 0
    failed_auth_delay_s: float = 0.1
    max_receive_size: int = 524288

    @property
    def sasl(self) -> bool:
        return self.endpoint.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_server(self, mechanism: str):
        lookup = self.scram_lookup
        return server_for(mechanism, plain_users=self.plain_users,
                          scram_lookup=(lambda m, user: lookup(user, m)) if lookup else (lambda m, user: None),
                          oauth_options=self.oauth_options, now_ms=_now_ms)

    def new_session(self, peer_certificate: bytes | None = None) -> ConnectionSession:
        """The state a new connection starts in: anonymous, the mTLS principal of an SSL listener, or
        waiting for SASL. ValueError when a client certificate's name matches no mapping rule."""
        principal = ANONYMOUS
        if self.endpoint.protocol == "SSL" and peer_certificate and self.mapper is not None:
            principal = KafkaPrincipal("User", self.mapper.name_for(distinguished_name(peer_certificate)))
        return ConnectionSession(self.endpoint.name, self.endpoint.protocol, principal, self.mechanisms,
                                 self.sasl_server if self.sasl else None, self.reauth_ms)


def key_material(config: BrokerConfig, endpoint: Endpoint) -> KeyMaterial:
    return KeyMaterial(lambda key: config.listener_get(endpoint.name, key), f"listener {endpoint}")


def build(config: BrokerConfig, endpoint: Endpoint, scram_lookup: ScramLookup | None) -> ListenerSecurity:
    what = f"listener {endpoint}"
    sec = ListenerSecurity(endpoint, reauth_ms=int(config.listener_get(endpoint.name, "connections.max.reauth.ms")),
                           failed_auth_delay_s=config.get("connection.failed.authentication.delay.ms") / 1000,
                           max_receive_size=config.listener_get(endpoint.name, "sasl.server.max.receive.size"))
    if endpoint.protocol in ("SSL", "SASL_SSL"):
        sec.ssl_context = server_context(key_material(config, endpoint))
        try:
            sec.mapper = SslPrincipalMapper.from_rules(config.listener_get(endpoint.name, "ssl.principal.mapping.rules"))
        except ValueError as exc:
            raise StartupError(f"{what}: ssl.principal.mapping.rules: {exc}") from None
    if sec.sasl:
        mechanisms = tuple(m.strip().upper() for m in config.listener_get(endpoint.name, "sasl.enabled.mechanisms") or ())
        if not mechanisms:
            raise StartupError(f"{what}: sasl.enabled.mechanisms is empty")
        if "GSSAPI" in mechanisms:
            raise StartupError(f"{what}: GSSAPI (Kerberos) is not served by kbroker; set sasl.enabled.mechanisms "
                               f"to any of {', '.join(SUPPORTED_MECHANISMS)}")
        unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise StartupError(f"{what}: sasl.enabled.mechanisms names {', '.join(unknown)}; kbroker serves "
                               f"{', '.join(SUPPORTED_MECHANISMS)}")
        sec.mechanisms = mechanisms
        sec.scram_lookup = scram_lookup
        for mechanism in mechanisms:
            jaas_key = f"listener.name.{endpoint.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
            text = config.listener_get(endpoint.name, "sasl.jaas.config", mechanism)
            if text is None:
                if mechanism == "PLAIN":
                    raise StartupError(f"{what}: PLAIN needs its users: set {jaas_key} to a PlainLoginModule line "
                                       f"with user_<name>=\"<password>\" options")
                continue
            try:
                entry = parse_jaas_config(str(text))
            except ValueError as exc:
                raise StartupError(f"{what}: {jaas_key}: {exc}") from None
            if mechanism == "PLAIN":
                sec.plain_users = plain_users(entry)
            elif mechanism == "OAUTHBEARER":
                sec.oauth_options = dict(entry.options)
    return sec


def build_all(config: BrokerConfig, scram_lookup: ScramLookup | None) -> dict[str, ListenerSecurity]:
    try:
        endpoints = config.endpoints
    except InvalidConfigError as exc:
        raise StartupError(str(exc)) from None
    return {e.name: build(config, e, scram_lookup) for e in endpoints}
