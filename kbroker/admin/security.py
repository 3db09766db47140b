"""The kbroker commands' (and the console's) side of a secured listener: Kafka's client keys, as
`--command-config client.properties` gives them to Kafka's own tools —

    security.protocol       PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism          PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured tokens)
    sasl.jaas.config        the login module's line: username="..." password="..."; for OAUTHBEARER
                            unsecuredLoginStringClaim_sub="..." (Kafka's unsecured login options)
    ssl.truststore.type / .location / .password / .certificates      PKCS12 or PEM (else the system's CAs)
    ssl.keystore.type / .location / .password, ssl.key.password      for mTLS (ssl.client.auth)
    ssl.endpoint.identification.algorithm   https (default): the broker's name must match its
                            certificate; empty: the certificate is still verified, its name is not
    ssl.enabled.protocols, ssl.cipher.suites

Other keys (bootstrap.servers, client.id, timeouts, ...) are accepted and not used. On the socket:
TLS first (`wrap`), then ApiVersions (the connection's), then the SASL exchange (`authenticate`:
SaslHandshake v1 then SaslAuthenticate tokens) before any other request, as Kafka's clients do. A
refused authentication is a `KafkaErrorResponse` (SASL_AUTHENTICATION_FAILED with the broker's
message), which the commands print as one line with exit status 1.

Reading the file is `command_config.py`'s (kbroker.config's properties parser, which the console
may not import); this module only turns the keys into a `ClientSecurity`.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.connection import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AdminError,
    KafkaErrorResponse,
)
from kbroker.errors import StartupError
from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.jaas import LOGIN_MODULES, format_jaas, parse_jaas_config
from kbroker.security.oauthbearer import unsecured_client_token
from kbroker.security.plain import plain_client_token
from kbroker.security.scram import ScramClient
from kbroker.tlsconfig import KeyMaterial, client_context

__all__ = [
    "MECHANISMS",
    "PROTOCOLS",
    "ClientSecurity",
    "add_command_config_argument",
    "client_security",
    "security_of",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = tuple(LOGIN_MODULES)  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
# Kafka's client defaults for the keys the SSL context reads; lists as Kafka's LIST type reads them.
_SSL_DEFAULTS: dict[str, Any] = {"ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "ssl.cipher.suites": "",
                                 "ssl.endpoint.identification.algorithm": "https", "ssl.keystore.type": "JKS",
                                 "ssl.truststore.type": "JKS"}
_LIST_KEYS = ("ssl.enabled.protocols", "ssl.cipher.suites")

Exchange = Generator[bytes, bytes, None]  # yields each token, is sent the broker's answer to it


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connection is secured. `options` (the JAAS line's) hold the password: never
    printed (repr leaves them out)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    mechanism: str | None = None
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def username(self) -> str | None:
        return self.options.get("username") or self.options.get("unsecuredLoginStringClaim_sub")

    def wrap(self, sock: socket.socket, host: str, address: str) -> socket.socket:
        """The TLS handshake over a connected socket (the socket unchanged without TLS)."""
        if self.ssl_context is None:
            return sock
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            raise AdminError(f"{address}: TLS handshake failed: the broker's certificate was refused: "
                             f"{exc.verify_message or exc.reason} (is ssl.truststore.location the CA that signed "
                             f"it? ssl.endpoint.identification.algorithm= turns off the host name check)") from None
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            if isinstance(exc, socket.timeout):
                reason = "timed out"
            raise AdminError(f"{address}: TLS handshake failed: {reason} (is it an SSL or SASL_SSL listener?)") from None

    def authenticate(self, conn: Any) -> None:
        """The SASL exchange on a connection that has just negotiated versions; KafkaErrorResponse
        (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...) when the broker refuses."""
        if self.mechanism is None:
            return
        answer = conn.call(SASL_HANDSHAKE, {"mechanism": self.mechanism})
        if answer.error_code != ErrorCode.none:
            offered = ", ".join(answer.mechanisms or []) or "none"
            raise KafkaErrorResponse(answer.error_code, f"SaslHandshake with {conn.address}",
                                     f"sasl.mechanism={self.mechanism}; the listener offers {offered}")
        what = f"SASL {self.mechanism} authentication at {conn.address}"
        exchange = self._exchange()
        try:
            token = next(exchange)
            while True:
                answer = conn.call(SASL_AUTHENTICATE, {"auth_bytes": token})
                if answer.error_code != ErrorCode.none:
                    raise KafkaErrorResponse(answer.error_code, what, answer.error_message)
                try:
                    token = exchange.send(bytes(answer.auth_bytes or b""))
                except StopIteration:
                    return
        except (SaslAuthenticationError, IllegalSaslStateError, ValueError) as exc:
            raise KafkaErrorResponse(ErrorCode.sasl_authentication_failed, what, str(exc)) from None

    def _exchange(self) -> Exchange:
        user, password = self.options.get("username", ""), self.options.get("password", "")
        if self.mechanism == "PLAIN":
            yield plain_client_token(user, password)
        elif self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            client = ScramClient(self.mechanism, user, password)
            server_first = yield client.first_message()
            server_final = yield client.final_message(server_first)
            client.verify_server_final(server_final)
        elif self.mechanism == "OAUTHBEARER":
            error = yield unsecured_client_token(self.options, int(time.time() * 1000))
            if error:  # RFC 7628: the server's error JSON, acknowledged with a lone %x01, then it fails
                yield b"\x01"
                raise SaslAuthenticationError(f"the broker refused the token: {error.decode('utf-8', 'replace')}")
        else:
            raise AdminError(f"SASL mechanism {self.mechanism} is not supported")


def _ssl_context(props: Mapping[str, str], source: str) -> ssl.SSLContext:
    def get(key: str) -> Any:
        value = props.get(key, _SSL_DEFAULTS.get(key))
        if key in _LIST_KEYS:
            return [v.strip() for v in str(value or "").split(",") if v.strip()]
        return value

    try:
        return client_context(KeyMaterial(get, source))
    except StartupError as exc:
        raise AdminError(str(exc)) from None
    except (ssl.SSLError, ValueError) as exc:  # e.g. a truststore that is not PEM
        raise AdminError(f"{source}: the SSL settings do not load: {exc}") from None


def client_security(props: Mapping[str, str], source: str = "--command-config", *,
                    require_credentials: bool = True) -> ClientSecurity:
    """A `ClientSecurity` from Kafka's client keys; AdminError (one line, naming `source`) when
    they do not make one. `require_credentials=False` (`kbroker console --login`, whose sessions
    bring their own username and password): a SASL config may leave out sasl.jaas.config, or its
    username and password; a line that is there must still parse and name the mechanism's module."""
    protocol = str(props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise AdminError(f"{source}: security.protocol={props.get('security.protocol')} is not one of "
                         f"{', '.join(PROTOCOLS)}")
    context = _ssl_context(props, source) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context)
    mechanism = str(props.get("sasl.mechanism") or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        hint = " (Kafka's default: set sasl.mechanism)" if "sasl.mechanism" not in props else ""
        raise AdminError(f"{source}: sasl.mechanism={mechanism}{hint} is not supported: one of {', '.join(MECHANISMS)}")
    module = LOGIN_MODULES[mechanism]
    example = format_jaas(module, {"username": "alice", "password": "alice-secret"} if mechanism != "OAUTHBEARER"
                          else {"unsecuredLoginStringClaim_sub": "alice"})
    text = props.get("sasl.jaas.config")
    if not text and not require_credentials:
        return ClientSecurity(protocol, context, mechanism, {})
    if not text:
        raise AdminError(f"{source}: sasl.mechanism={mechanism} needs sasl.jaas.config, e.g. {example}")
    try:
        entry = parse_jaas_config(text)
    except ValueError as exc:
        raise AdminError(f"{source}: sasl.jaas.config: {exc}") from None
    if entry.login_module != module:
        raise AdminError(f"{source}: sasl.mechanism={mechanism} needs the login module {module}, "
                         f"not {entry.login_module}")
    options = dict(entry.options)
    if require_credentials and mechanism != "OAUTHBEARER" and (not options.get("username") or "password" not in options):
        raise AdminError(f"{source}: sasl.jaas.config needs username and password for {mechanism}, e.g. {example}")
    return ClientSecurity(protocol, context, mechanism, options)


# -- the commands' flag ------------------------------------------------------------------------------

def add_command_config_argument(parser: Any) -> None:
    """`--command-config FILE` on a command's parser (`kbroker` reads the file before running it)."""
    parser.add_argument("--command-config", metavar="FILE", dest="command_config",
                        help="client properties for a secured listener (Kafka's keys: security.protocol, "
                             "sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*, ...)")


def security_of(args: Any) -> ClientSecurity | None:
    """The `ClientSecurity` of a parsed command: what `kbroker` (cli.py) read from --command-config
    before running it; None without the flag."""
    security = getattr(args, "client_security", None)
    if security is None and getattr(args, "command_config", None):
        raise AdminError(f"--command-config {args.command_config} was not read (run the command through kbroker.cli)")
    return security
