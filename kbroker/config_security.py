"""Kafka's connection-security keys (listeners' protocols, SSL, SASL, re-authentication) with their
defaults, and the listener-scoped form `listener.name.<listener>.<key>` (and, for SASL keys,
`listener.name.<listener>.<mechanism>.<key>`) that Kafka lets override them per listener.

What the keys mean at run time is server/'s and security/'s; the table lives here so that
config_defs.py's broker table stays one screenful per concern.
"""

from __future__ import annotations

import re

from kbroker.config_defs import BROKER_CONFIGS, ConfigDef, ConfigType, Range, Rule
from kbroker.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users

_B, _S, _I, _L, _D, _LIST, _P, _C = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                                     ConfigType.DOUBLE, ConfigType.LIST, ConfigType.PASSWORD, ConfigType.CLASS)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"



def _super_users_valid(value: str) -> bool:
    try:
        parse_super_users(value)
    except ValueError:
        return False
    return True


SECURITY_CONFIGS: list[ConfigDef] = [
    ConfigDef("listener.security.protocol.map", _S, DEFAULT_PROTOCOL_MAP,
              "Listener names to security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."),
    ConfigDef("security.inter.broker.protocol", _S, "PLAINTEXT", "Security protocol between brokers "
              "(alternative to inter.broker.listener.name).", choices=SECURITY_PROTOCOLS),
    ConfigDef("inter.broker.listener.name", _S, None, "The listener brokers use to reach each other."),
    ConfigDef("control.plane.listener.name", _S, None, "The listener the controller's requests use "
              "(default: the inter-broker listener)."),
    ConfigDef("principal.builder.class", _C, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
              "Principal builder (kbroker builds Kafka's default principals: User:<name>)."),
    ConfigDef("connections.max.reauth.ms", _L, 0, "Longest SASL session before the client must re-authenticate "
              "(KIP-368); 0 = sessions never expire.", Range(0)),
    ConfigDef("connection.failed.authentication.delay.ms", _I, 100, "Delay before a connection that failed "
              "authentication is closed.", Range(0)),
    # SSL
    ConfigDef("ssl.protocol", _S, "TLSv1.3", "The TLS protocol of the SSL context."),
    ConfigDef("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    ConfigDef("ssl.cipher.suites", _LIST, [], "TLS 1.2 cipher suites (IANA or OpenSSL names); empty = defaults."),
    ConfigDef("ssl.keystore.type", _S, "JKS", "Keystore format: PKCS12 or PEM (JKS files made by Java 9+ "
              "keytool are PKCS12 and are read)."),
    ConfigDef("ssl.keystore.location", _S, None, "The keystore file."),
    ConfigDef("ssl.keystore.password", _P, None, "The keystore password.", sensitive=True),
    ConfigDef("ssl.key.password", _P, None, "The private key's password.", sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", _P, None, "PEM certificate chain, inline (ssl.keystore.type=PEM).",
              sensitive=True),
    ConfigDef("ssl.keystore.key", _P, None, "PEM private key, inline (ssl.keystore.type=PEM).", sensitive=True),
    ConfigDef("ssl.truststore.type", _S, "JKS", "Truststore format: PKCS12 or PEM."),
    ConfigDef("ssl.truststore.location", _S, None, "The truststore file."),
    ConfigDef("ssl.truststore.password", _P, None, "The truststore password.", sensitive=True),
    ConfigDef("ssl.truststore.certificates", _P, None, "PEM trusted certificates, inline (ssl.truststore.type=PEM).",
              sensitive=True),
    ConfigDef("ssl.client.auth", _S, "none", "Client certificates: required, requested or none.",
              choices=("required", "requested", "none")),
    ConfigDef("ssl.endpoint.identification.algorithm", _S, "https", "Host name verification of the peer's "
              "certificate (https) on the broker's own client connections; empty = off."),
    ConfigDef("ssl.principal.mapping.rules", _S, "DEFAULT", "Rules mapping a client certificate's distinguished "
              "name to a principal name (Kafka's RULE:pattern/replacement/[LU] syntax)."),
    ConfigDef("ssl.keymanager.algorithm", _S, "SunX509", "Key manager algorithm (accepted, no effect)."),
    ConfigDef("ssl.trustmanager.algorithm", _S, "PKIX", "Trust manager algorithm (accepted, no effect)."),
    ConfigDef("ssl.provider", _S, None, "Security provider (accepted, no effect)."),
    ConfigDef("ssl.secure.random.implementation", _S, None, "SecureRandom algorithm (accepted, no effect)."),
    ConfigDef("ssl.engine.factory.class", _C, None, "SSL engine factory (accepted, no effect)."),
    ConfigDef("ssl.allow.dn.changes", _B, False, "Whether a reloaded keystore may change the DN."),
    ConfigDef("ssl.allow.san.changes", _B, False, "Whether a reloaded keystore may change the SANs."),
    # SASL
    ConfigDef("sasl.enabled.mechanisms", _LIST, ["GSSAPI"], "SASL mechanisms served: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512, OAUTHBEARER (GSSAPI is not served)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", "The SASL mechanism brokers use between them."),
    ConfigDef("sasl.jaas.config", _P, None, "JAAS login module line (Kafka's syntax); on a broker, per listener "
              "and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config.", sensitive=True),
    ConfigDef("sasl.server.max.receive.size", _I, 524288, "Largest SASL token read before authentication.",
              Range(1)),
    ConfigDef("sasl.server.callback.handler.class", _C, None, "Server callback handler (accepted, no effect)."),
    ConfigDef("sasl.client.callback.handler.class", _C, None, "Client callback handler (accepted, no effect)."),
    ConfigDef("sasl.login.class", _C, None, "Login class (accepted, no effect)."),
    ConfigDef("sasl.login.callback.handler.class", _C, None, "Login callback handler (accepted, no effect)."),
    ConfigDef("sasl.login.refresh.window.factor", _D, 0.8, "Login refresh window factor.", Range(0.5, 1.0)),
    ConfigDef("sasl.login.refresh.window.jitter", _D, 0.05, "Login refresh window jitter.", Range(0.0, 0.25)),
    ConfigDef("sasl.login.refresh.min.period.seconds", _S, "60", "Login refresh minimum period."),
    ConfigDef("sasl.login.refresh.buffer.seconds", _S, "300", "Login refresh buffer."),
    ConfigDef("sasl.login.connect.timeout.ms", _I, None, "OAUTHBEARER token endpoint connect timeout."),
    ConfigDef("sasl.login.read.timeout.ms", _I, None, "OAUTHBEARER token endpoint read timeout."),
    ConfigDef("sasl.login.retry.backoff.ms", _L, 100, "OAUTHBEARER login retry backoff."),
    ConfigDef("sasl.login.retry.backoff.max.ms", _L, 10000, "OAUTHBEARER login retry backoff maximum."),
    ConfigDef("sasl.kerberos.service.name", _S, None, "Kerberos service name (GSSAPI is not served)."),
    ConfigDef("sasl.kerberos.kinit.cmd", _S, "/usr/bin/kinit", "Kerberos kinit (GSSAPI is not served)."),
    ConfigDef("sasl.kerberos.min.time.before.relogin", _L, 60000, "Kerberos relogin wait (GSSAPI is not served)."),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", _D, 0.05, "Kerberos renew jitter (GSSAPI is not served)."),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", _D, 0.8,
              "Kerberos renew window factor (GSSAPI is not served)."),
    ConfigDef("sasl.kerberos.principal.to.local.rules", _LIST, ["DEFAULT"],
              "Kerberos principal rules (GSSAPI is not served)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", _S, None, "JWKS endpoint for OAUTHBEARER token validation "
              "(not served: kbroker validates unsecured tokens, see docs/security.md)."),
    ConfigDef("sasl.oauthbearer.token.endpoint.url", _S, None, "OAUTHBEARER token endpoint (client side)."),
    ConfigDef("sasl.oauthbearer.expected.audience", _LIST, [], "Expected JWT audiences."),
    ConfigDef("sasl.oauthbearer.expected.issuer", _S, None, "Expected JWT issuer."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", _S, "scope", "JWT scope claim name."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", _S, "sub", "JWT subject claim name."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", _I, 30, "Allowed JWT clock skew."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", _L, 3600000, "JWKS refresh interval."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _L, 100, "JWKS retry backoff."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _L, 10000, "JWKS retry backoff maximum."),
    # authorization (ACLs): docs/security.md#authorization-acls
    ConfigDef("authorizer.class.name", _C, "", "The authorizer: empty (every principal may do everything), or "
              "kafka.security.authorizer.AclAuthorizer, org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
              "kbroker.security.authorizer.AclAuthorizer (Kafka's ACL rules, ACLs in the metadata store).",
              valid=Rule(lambda v: v == "" or v in AUTHORIZER_CLASS_NAMES,
                         "kbroker serves ACL authorization under the names " + ", ".join(AUTHORIZER_CLASS_NAMES)
                         + " (or none: empty)")),
    ConfigDef("super.users", _S, None, "Principals allowed everything, whatever the ACLs: User:admin;User:broker.",
              valid=Rule(_super_users_valid, "expected principals in format principalType:principalName, "
                                             "separated by ';' (User:admin;User:broker)")),
    ConfigDef("allow.everyone.if.no.acl.found", _B, False, "Whether a resource without any ACL is open to "
              "everyone (default: denied to all but the super users)."),
]

BROKER_CONFIGS.update((d.name, d) for d in SECURITY_CONFIGS)

# listener.name.<listener>.<key> or listener.name.<listener>.<mechanism>.<key>
_PREFIXED = re.compile(r"listener\.name\.([a-z0-9_]+)\.(?:([a-z0-9-]+)\.)?(.+)")
SASL_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.server.callback.handler.class", "sasl.login.class",
                       "sasl.login.callback.handler.class")


def listener_key(listener: str, key: str, mechanism: str | None = None) -> str:
    """Kafka's listener-scoped name of `key` (listener names are lower-cased, as Kafka's ListenerName
    configPrefix does; so are mechanisms)."""
    middle = f"{mechanism.lower()}." if mechanism else ""
    return f"listener.name.{listener.lower()}.{middle}{key}"


def split_listener_key(key: str, known: dict[str, ConfigDef]) -> tuple[str, str | None, str] | None:
    """(listener, mechanism or None, base key) of a listener-scoped key whose base key is known."""
    match = _PREFIXED.fullmatch(key)
    if not match:
        return None
    listener, maybe_mechanism, rest = match.groups()
    if maybe_mechanism is not None and rest in SASL_MECHANISM_KEYS:
        return listener, maybe_mechanism.upper(), rest
    base = f"{maybe_mechanism}.{rest}" if maybe_mechanism is not None else rest
    return (listener, None, base) if base in known else None
