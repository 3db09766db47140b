"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer,
ScramSaslClient, ScramMessages and ScramFormatter do them: the message grammar (Kafka's regular
expressions, so only the gs2 header `n` — no channel binding — and ASCII sasl names), the saslname
escaping of ',' and '=' (=2C, =3D), the auth message rebuilt from the parsed messages, the nonce and
proof checks, and the failures: all but one are SaslExceptions, whose detail stays in the log while
the client gets the generic invalid-credentials message; the authzid mismatch is the one the client
reads. An unknown user fails at the client-first message, as in Kafka (its callback finds no
credential: "Authentication failed: Invalid user credentials", sent as the generic message).
Delegation tokens (the `tokenauth=true` extension) are not served: such a login fails as Kafka's does
for an unknown token id.

Also the client side, for our broker-to-broker and command-line connections.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping

from kbroker.security import _java
from kbroker.security.credentials import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    salted_password,
)
from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.mechanisms import checked_token

__all__ = ["ScramClient", "ScramServer", "sasl_name", "secure_random_string", "username_from_sasl_name"]

# ScramMessages' grammar, character classes spelt out ([\x01-\x7F&&[^=,]] and the like)
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = "[a-zA-Z0-9/+]"
_BASE64 = f"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = f"(?:m={_VALUE},)?"
_EXTENSIONS = f"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(f"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
                           f"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_SERVER_FIRST = re.compile(f"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),"
                           f"i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_CLIENT_FINAL = re.compile(f"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")
_SERVER_FINAL = re.compile(f"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}")
_NONCE = re.compile(_PRINTABLE)

_TOKEN_AUTH = "tokenauth"  # ScramLoginModule.TOKEN_AUTH_CONFIG


def _enum_name(mechanism: str) -> str:
    """How Kafka's ScramMechanism prints in messages: the enum constant, SCRAM_SHA_256."""
    return mechanism.replace("-", "_")


def sasl_name(username: str) -> str:
    """ScramFormatter.saslName: '=' -> =3D, ',' -> =2C."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_from_sasl_name(name: str) -> str:
    """ScramFormatter.username; ValueError for an '=' that is not part of =2C or =3D."""
    username = name.replace("=2C", ",")
    if "=" in username.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return username.replace("=3D", "=")


def secure_random_string() -> str:
    """ScramFormatter.secureRandomString: a random 130-bit number in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _parse_map(text: str, kv_separator: str, separator: str) -> dict[str, str]:
    """Kafka's Utils.parseMap (the grammar has already made every element key=value)."""
    result: dict[str, str] = {}
    if text:
        for element in _java.split(text, separator):
            key, _, value = element.partition(kv_separator)
            result[key] = value
    return result


def _extensions_text(extensions: Mapping[str, str]) -> str:
    """Utils.mkString(extensions, "", "", "=", ",") over a HashMap: Java's iteration order."""
    return ",".join(f"{k}={extensions[k]}" for k in _java.hashmap_order(extensions))


def _first_bare(saslname: str, nonce: str, extensions: Mapping[str, str]) -> str:
    """ClientFirstMessage.clientFirstMessageBare, rebuilt from the parsed message as Kafka does."""
    ext = _extensions_text(extensions)
    return f"n={saslname},r={nonce}" + (f",{ext}" if ext else "")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramServer:
    """One SCRAM exchange on the broker: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"Requested mechanism '{mechanism}' is not supported. Supported mechanisms are "
                             f"'{_java.list_str(MECHANISMS)}'.")
        if nonce is not None and not _NONCE.fullmatch(nonce):
            raise ValueError(f"invalid SCRAM server nonce {nonce!r}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._lookup = lookup
        self._server_nonce = nonce
        self.complete = False
        self.authorization_id: str | None = None
        self.session_expiry_ms: int | None = None
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._username = ""
        self._credential: ScramCredential | None = None
        self._first_bare = ""
        self._server_first = ""
        self._server_first_nonce = ""

    def _fail(self, detail: str) -> SaslAuthenticationError:
        return SaslAuthenticationError.invalid_credentials(self.mechanism, detail)

    def evaluate(self, token: bytes) -> bytes:
        if self._state not in ("RECEIVE_CLIENT_FIRST_MESSAGE", "RECEIVE_CLIENT_FINAL_MESSAGE"):
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {self._state}")
        try:
            message = checked_token(token).decode("utf-8", "replace")
            if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._client_first(message)
            return self._client_final(message)
        except SaslAuthenticationError:
            self._credential = None
            self._state = "FAILED"
            raise

    def _client_first(self, message: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise self._fail(f"Invalid SCRAM client first message format: {message}")
        authzid = m["authzid"] or ""
        saslname, client_nonce = m["saslname"], m["nonce"]
        ext_text = m["extensions"]
        extensions = _parse_map(ext_text[1:], "=", ",") if ext_text.startswith(",") else {}
        server_nonce = self._server_nonce or secure_random_string()
        try:
            username = username_from_sasl_name(saslname)
        except ValueError:
            raise self._fail("Authentication failed: Credentials could not be obtained") from None
        if extensions.get(_TOKEN_AUTH, "").lower() == "true":
            # a delegation token's id in place of a username: we keep no tokens, so none is found
            raise self._fail(f"Token Authentication failed: Invalid tokenId : {username}")
        try:
            credential = self._lookup(username)
        except Exception as exc:  # noqa: BLE001 - Kafka: any failure of the callback is "could not be obtained"
            raise self._fail(f"Authentication failed: Credentials could not be obtained ({exc!r})") from None
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        # Kafka compares the authzid as sent (still saslname-escaped) with the unescaped username
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise self._fail(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                             f"for {_enum_name(self.mechanism)}")
        self._username = username
        self._credential = credential
        self._first_bare = _first_bare(saslname, client_nonce, extensions)
        self._server_first_nonce = client_nonce + server_nonce
        self._server_first = (f"r={self._server_first_nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise self._fail(f"Invalid SCRAM client final message format: {message}")
        channel_binding = base64.b64decode(m["channel"])
        nonce, proof = m["nonce"], base64.b64decode(m["proof"])
        if not nonce.endswith(self._server_first_nonce):
            raise self._fail("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        # the channel binding is not checked against the gs2 header, as in Kafka; it is in the proof
        auth_message = f"{self._first_bare},{self._server_first},c={_b64(channel_binding)},r={nonce}".encode()
        client_signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise self._fail("Argument arrays must be of the same length")
        computed_stored_key = hashlib.new(self._hash, _xor(client_signature, proof)).digest()
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise self._fail("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        self._credential = None
        self._state = "COMPLETE"
        self.authorization_id = self._username
        self.complete = True
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """One SCRAM exchange from the client side, as Kafka's ScramSaslClient: first_message(), then
    final_message(server_first), then verify_server_final(server_final). Failures raise
    SaslAuthenticationError with Kafka's client-side wording. The iteration count a server asks for
    is bounded by MAX_ITERATIONS (Kafka's client bounds it only below), so a server cannot make us
    spin."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None,
                 extensions: Mapping[str, str] | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SCRAM mechanism {mechanism}")
        if nonce is not None and not _NONCE.fullmatch(nonce):
            raise ValueError(f"invalid SCRAM client nonce {nonce!r}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._username = username
        self._password = password
        self._nonce = nonce
        self._extensions = dict(extensions or {})
        self.complete = False
        self._state = "SEND_CLIENT_FIRST_MESSAGE"
        self._first_bare = ""
        self._auth_message = b""
        self._salted = b""

    def _check_state(self, expected: str) -> None:
        if self._state != expected:
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl client state {self._state}")

    def _failed(self, message: str) -> SaslAuthenticationError:
        self._state = "FAILED"
        return SaslAuthenticationError(message)

    def first_message(self) -> bytes:
        self._check_state("SEND_CLIENT_FIRST_MESSAGE")
        if self._nonce is None:
            self._nonce = secure_random_string()
        self._first_bare = _first_bare(sasl_name(self._username), self._nonce, self._extensions)
        self._state = "RECEIVE_SERVER_FIRST_MESSAGE"
        return ("n,," + self._first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        self._check_state("RECEIVE_SERVER_FIRST_MESSAGE")
        message = bytes(server_first).decode("utf-8", "replace")
        m = _SERVER_FIRST.fullmatch(message)
        if m is None:
            raise self._failed(f"Invalid SCRAM server first message format: {message}")
        try:
            iterations = _java.parse_int(m["iterations"])
        except ValueError:
            raise self._failed("Invalid SCRAM server first message format: invalid iterations") from None
        if iterations <= 0:
            raise self._failed(f"Invalid SCRAM server first message format: invalid iterations {iterations}")
        nonce, salt = m["nonce"], base64.b64decode(m["salt"])
        assert self._nonce is not None
        if not nonce.startswith(self._nonce):
            raise self._failed("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise self._failed(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                               f"for {_enum_name(self.mechanism)}")
        if iterations > MAX_ITERATIONS:
            raise self._failed(f"Requested iterations {iterations} is more than the maximum {MAX_ITERATIONS} "
                               f"for {_enum_name(self.mechanism)}")
        self._salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        # ScramFormatter.authMessage over the messages as parsed: the server-first rebuilt from its fields
        self._auth_message = f"{self._first_bare},r={nonce},s={_b64(salt)},i={iterations},{without_proof}".encode()
        client_key = hmac.new(self._salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        client_signature = hmac.new(stored_key, self._auth_message, self._hash).digest()
        self._state = "RECEIVE_SERVER_FINAL_MESSAGE"
        return f"{without_proof},p={_b64(_xor(client_key, client_signature))}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        self._check_state("RECEIVE_SERVER_FINAL_MESSAGE")
        message = bytes(server_final).decode("utf-8", "replace")
        m = _SERVER_FINAL.fullmatch(message)
        if m is None:
            raise self._failed(f"Invalid SCRAM server final message format: {message}")
        if m["error"] is not None:
            raise self._failed(f"Sasl authentication using {_enum_name(self.mechanism)} failed with error: "
                               f"{m['error']}")
        try:
            signature = base64.b64decode(m["signature"], validate=True)
        except binascii.Error:  # pragma: no cover - the grammar admits only valid base64
            raise self._failed("Invalid server signature in server final message") from None
        server_key = hmac.new(self._salted, b"Server Key", self._hash).digest()
        expected = hmac.new(server_key, self._auth_message, self._hash).digest()
        if not hmac.compare_digest(signature, expected):
            raise self._failed("Invalid server signature in server final message")
        self._state = "COMPLETE"
        self.complete = True
