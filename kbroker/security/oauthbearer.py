"""SASL/OAUTHBEARER (RFC 7628) with Kafka's default, unsecured token handling: the server side is
OAuthBearerSaslServer with OAuthBearerUnsecuredValidatorCallbackHandler (an unsecured JWS, header
alg "none", no signature; a string principal claim; a numeric `exp`, enforced; `iat`, if present,
not in the future and before `exp`; the required scope; all within the allowed clock skew), the
client side is OAuthBearerUnsecuredLoginCallbackHandler (the token built from the
unsecuredLogin* JAAS options) with OAuthBearerClientInitialResponse's layout.

A token that fails validation is answered as Kafka answers it: `evaluate` returns the JSON error
challenge (`{"status":"invalid_token"}`, or insufficient_scope with the required scope), and the
client's `\\x01` reply then raises SaslAuthenticationError carrying that JSON as its message.
A malformed initial response fails at once with the generic invalid-credentials message.

The JWS sections are decoded as base64url (Kafka before 4.1 used the plain base64 alphabet,
KAFKA-17089, so a token whose sections contain '-' or '_' failed there).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kbroker.security import _java
from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.mechanisms import checked_token

__all__ = [
    "MECHANISM",
    "OAuthBearerServer",
    "UnsecuredJws",
    "client_initial_response",
    "parse_unsecured_jws",
    "unsecured_client_token",
    "unsecured_jws",
]

MECHANISM = "OAUTHBEARER"
_SEPARATOR = "\x01"

# OAuthBearerClientInitialResponse's grammar
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = "[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_KVPAIRS = f"(?:{_KEY}={_VALUE}\x01)*"
_INITIAL_RESPONSE = re.compile(f"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+(=*))", re.ASCII)
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)
_AUTH_KEY = "auth"
_SCOPE_ITEM = re.compile(r"[\x23-\x5b\x5d-\x7e\x21]+")  # OAuthBearerScopeUtils
_URL_ALPHABET = re.compile("[A-Za-z0-9_-]*")

_VALIDATOR = "unsecuredValidator"
PRINCIPAL_CLAIM_NAME_OPTION = _VALIDATOR + "PrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = _VALIDATOR + "ScopeClaimName"
REQUIRED_SCOPE_OPTION = _VALIDATOR + "RequiredScope"
ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION = _VALIDATOR + "AllowableClockSkewMs"

_LOGIN = "unsecuredLogin"
_LOGIN_PRINCIPAL_CLAIM_NAME = _LOGIN + "PrincipalClaimName"
_LOGIN_LIFETIME_SECONDS = _LOGIN + "LifetimeSeconds"
_LOGIN_SCOPE_CLAIM_NAME = _LOGIN + "ScopeClaimName"
_STRING_CLAIM = _LOGIN + "StringClaim_"
_NUMBER_CLAIM = _LOGIN + "NumberClaim_"
_LIST_CLAIM = _LOGIN + "ListClaim_"
_EXTENSION = _LOGIN + "Extension_"
_RESERVED_CLAIMS = ("iat", "exp")


class _IllegalToken(Exception):
    """OAuthBearerIllegalTokenException: the token is refused with a JSON challenge."""

    def __init__(self, description: str, failure_scope: str | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.failure_scope = failure_scope


class _BrokenToken(Exception):
    """What makes Kafka's validator throw something other than an illegal-token exception (a
    NullPointerException for a header without alg): Kafka drops the connection; we fail the
    exchange with the generic message."""


# ---------------------------------------------------------------------------------------------
# the unsecured JWS


def _java_class(value: Any) -> str:
    """The simple class name Kafka's claim type errors print (Jackson's number types, ArrayList)."""
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "Integer"
        return "Long" if -(2**63) <= value < 2**63 else "BigInteger"
    return type(value).__name__  # pragma: no cover - claims hold only the above


def _as_text(node: Any) -> str:
    """Jackson's JsonNode.asText."""
    if isinstance(node, str):
        return node
    if node is True:
        return "true"
    if node is False:
        return "false"
    if node is None:
        return "null"
    if isinstance(node, float):
        return _java.double_str(node)
    if isinstance(node, int):
        return str(node)
    return ""  # objects and arrays


def _convert(node: Any) -> Any:
    """OAuthBearerUnsecuredJws.convert: arrays become lists of their elements' text, numbers stay
    numbers, everything else becomes its text."""
    if isinstance(node, list):
        return [_as_text(e) for e in node]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return node
    return _as_text(node)


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _b64url_decode(segment: str) -> bytes:
    """java.util.Base64's URL decoder: the URL alphabet, padding optional but exact when present."""
    core = segment.rstrip("=")
    pads = len(segment) - len(core)
    if not _URL_ALPHABET.fullmatch(core) or len(core) % 4 == 1:
        raise ValueError("illegal base64url")
    if pads and not ((len(core) % 4 == 2 and pads == 2) or (len(core) % 4 == 3 and pads == 1)):
        raise ValueError("illegal base64url padding")
    return base64.urlsafe_b64decode(core + "=" * (-len(core) % 4))


def _to_map(segment: str) -> dict[str, Any]:
    """OAuthBearerUnsecuredJws.toMap: decode, parse the first JSON value (trailing text is ignored, as
    Jackson's readTree does), keep an object's members; anything but an object gives no members."""
    try:
        raw = _b64url_decode(segment)
    except (ValueError, binascii.Error):
        raise _IllegalToken("malformed Base64 URL encoded value") from None
    try:
        text = raw.decode("utf-8")
        start = len(text) - len(text.lstrip(" \t\r\n"))
        if start == len(text):
            return {}  # empty content: Jackson's MissingNode, no fields
        node, _ = json.JSONDecoder(parse_constant=_no_constant).raw_decode(text, start)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _IllegalToken("malformed JSON") from None
    if not isinstance(node, dict):
        return {}
    return {k: _convert(v) for k, v in node.items()}


def _double(value: float) -> float:
    """Number.doubleValue: a BigInteger too large for a double is infinite, not an error."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")


def _parse_double(text: str) -> float:
    """Double.valueOf for decimal text (hexadecimal floating literals are not accepted)."""
    trimmed = _java.trim(text)
    if not _JAVA_DOUBLE.fullmatch(trimmed):
        raise ValueError(f'For input string: "{trimmed}"')
    return float(trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _claim(claims: Mapping[str, Any], name: str, kind: str) -> Any:
    """OAuthBearerUnsecuredJws.claim(name, String/Number/List): None if absent, refused if the
    wrong type."""
    value = claims.get(name)
    if value is None:
        return None
    ok = {"String": isinstance(value, str), "Number": _is_number(value), "List": isinstance(value, list)}[kind]
    if not ok:
        raise _IllegalToken(f"The '{name}' claim was not of type {kind}: {_java_class(value)}")
    return value


@dataclass(frozen=True)
class UnsecuredJws:
    """A parsed unsecured JWS (OAuthBearerUnsecuredJws)."""

    value: str
    header: dict[str, Any]
    claims: dict[str, Any]
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int
    start_time_ms: int | None


def parse_unsecured_jws(compact: str, principal_claim_name: str = "sub",
                        scope_claim_name: str = "scope") -> UnsecuredJws:
    """OAuthBearerUnsecuredJws's constructor; raises _IllegalToken / _BrokenToken (module-private:
    callers outside use the server or unsecured_client_token)."""
    if ".." in compact:
        raise _IllegalToken("Malformed compact serialization contains '..'")
    splits = _java.split(compact, ".")
    if compact.endswith("."):
        splits.append("")
    if len(splits) != 3:
        raise _IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    header = _to_map(splits[0])
    claims = _to_map(splits[1])
    if "alg" not in header:
        raise _BrokenToken("JWS header must have an Algorithm value")
    if header["alg"] != "none":
        raise _IllegalToken("Unsecured JWS must have 'none' for an algorithm")
    if splits[2]:
        raise _IllegalToken("Unsecured JWS must not contain a digital signature")
    principal_claim_name, scope_claim_name = _java.trim(principal_claim_name), _java.trim(scope_claim_name)
    if not principal_claim_name:
        raise ValueError("Must specify a non-blank principal claim name")
    if not scope_claim_name:
        raise ValueError("Must specify a non-blank scope claim name")
    scope_value = claims.get(scope_claim_name)
    if isinstance(scope_value, str):
        scope = frozenset() if _java.is_blank(scope_value) else frozenset([_java.trim(scope_value)])
    else:
        items = _claim(claims, scope_claim_name, "List") or []
        scope = frozenset(_java.trim(s) for s in items if not _java.is_blank(s))
    exp = _claim(claims, "exp", "Number")
    if exp is None:
        raise _IllegalToken("No expiration time in JWT")
    lifetime_ms = _java.round_half_up(_double(exp) * 1000)
    principal = _claim(claims, principal_claim_name, "String")
    if _java.is_blank(principal):
        raise _IllegalToken(f"No principal name in JWT claim: {principal_claim_name}")
    iat = _claim(claims, "iat", "Number")
    start_time_ms = None if iat is None else _java.round_half_up(_double(iat) * 1000)
    return UnsecuredJws(compact, header, claims, principal, scope, lifetime_ms, start_time_ms)


def _validate(jws: UnsecuredJws, now: int, skew: int, required_scope: list[str]) -> None:
    """OAuthBearerValidationUtils' checks in the validator's order: iat, exp, exp > iat, scope."""
    iat = None if jws.claims.get("iat") is None else _double(jws.claims["iat"])
    if iat is not None and 1000 * iat > now + skew:
        raise _IllegalToken(f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) "
                            f"plus allowable clock skew ({skew} ms)")
    exp = _double(jws.claims["exp"])
    if now - skew >= 1000 * exp:
        raise _IllegalToken(f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or after "
                            f"the Expiration Time value ({exp:f} seconds)")
    if iat is not None and exp <= iat:
        raise _IllegalToken(f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time "
                            f"({iat:f} seconds)")
    for element in required_scope:
        if element not in jws.scope:
            raise _IllegalToken(
                f"The provided scope ({_java.list_str(_java.hashmap_order(sorted(jws.scope)))}) was missing a "
                f"required scope ({element}).  All required scope elements: {_java.list_str(required_scope)}",
                _java.list_str(required_scope))


# ---------------------------------------------------------------------------------------------
# the server


def _parse_scope(text: str) -> list[str]:
    """OAuthBearerScopeUtils.parseScope."""
    items = []
    for item in text.split(" "):
        if item:
            if not _SCOPE_ITEM.fullmatch(item):
                raise ValueError(f"Invalid scope value: {item}")
            items.append(item)
    return items


def _json_error(status: str, scope: str | None) -> str:
    """OAuthBearerSaslServer.jsonErrorResponse (no openid-configuration: the unsecured validator sets none)."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    return text + "}"


class OAuthBearerServer:
    """One OAUTHBEARER exchange on the broker, validating unsecured tokens as Kafka's default does.
    ValueError at construction for invalid unsecuredValidator* options (Kafka finds them at the
    first login and drops that connection)."""

    mechanism = MECHANISM

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int]) -> None:
        principal = options.get(PRINCIPAL_CLAIM_NAME_OPTION)
        self._principal_claim = "sub" if _java.is_blank(principal) else _java.trim(principal or "")
        scope = options.get(SCOPE_CLAIM_NAME_OPTION)
        self._scope_claim = "scope" if _java.is_blank(scope) else _java.trim(scope or "")
        required = options.get(REQUIRED_SCOPE_OPTION)
        self._required_scope = [] if _java.is_blank(required) else _parse_scope(_java.trim(required or ""))
        skew = options.get(ALLOWABLE_CLOCK_SKEW_MILLIS_OPTION)
        self._skew = 0 if _java.is_blank(skew) else _java.parse_int(_java.trim(skew or ""))
        if self._skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        self._now_ms = now_ms
        self.complete = False
        self.authorization_id: str | None = None
        self.session_expiry_ms: int | None = None
        self.extensions: dict[str, str] = {}
        self.token: UnsecuredJws | None = None
        self._error: str | None = None
        self._error_detail: str | None = None
        self._failed = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self._failed:
            state = "COMPLETE" if self.complete else "FAILED"
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state}")
        try:
            return self._evaluate(checked_token(token))
        except SaslAuthenticationError:
            self._failed = True
            raise

    def _evaluate(self, response: bytes) -> bytes:
        if response == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error, detail=self._error_detail)
        self._error = self._error_detail = None
        authzid, token_value, extensions = self._initial_response(response)
        try:
            jws = parse_unsecured_jws(token_value, self._principal_claim, self._scope_claim)
            _validate(jws, self._now_ms(), self._skew, self._required_scope)
        except _IllegalToken as exc:
            status = "insufficient_scope" if exc.failure_scope is not None else "invalid_token"
            self._error = _json_error(status, exc.failure_scope)
            self._error_detail = exc.description
            return self._error.encode()
        except _BrokenToken as exc:
            raise SaslAuthenticationError.invalid_credentials(MECHANISM, str(exc)) from None
        if authzid and authzid != jws.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({jws.principal_name})")
        # the unsecured validator accepts every extension
        self.extensions = extensions
        self.token = jws
        self.authorization_id = jws.principal_name
        self.session_expiry_ms = jws.lifetime_ms
        self.complete = True
        return b""

    @staticmethod
    def _initial_response(response: bytes) -> tuple[str, str, dict[str, str]]:
        """OAuthBearerClientInitialResponse(byte[]): (authzid, token, extensions)."""
        def fail(detail: str) -> SaslAuthenticationError:
            return SaslAuthenticationError.invalid_credentials(MECHANISM, detail)

        message = response.decode("utf-8", "replace")
        m = _INITIAL_RESPONSE.fullmatch(message)
        if m is None:
            raise fail("Invalid OAUTHBEARER client first message")
        properties: dict[str, str] = {}
        if m["kvpairs"]:
            for pair in _java.split(m["kvpairs"], _SEPARATOR):
                key, _, value = pair.partition("=")
                properties[key] = value
        auth = properties.pop(_AUTH_KEY, None)
        if auth is None:
            raise fail("Invalid OAUTHBEARER client first message: 'auth' not specified")
        a = _AUTH.fullmatch(auth)
        if a is None:
            raise fail("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if a["scheme"].lower() != "bearer":
            raise fail(f"Invalid scheme in OAUTHBEARER client first message: {a['scheme']}")
        return m["authzid"] or "", a["token"], properties


# ---------------------------------------------------------------------------------------------
# the client


def _escape(text: str) -> str:
    """OAuthBearerUnsecuredLoginCallbackHandler.escape, as written: quotes first, then backslashes
    (so a quote's escape is itself doubled; a claim holding '"' makes a token Kafka cannot parse)."""
    return text.replace('"', '\\"').replace("\\", "\\\\")


def _list_json_text(value: str) -> str:
    """The handler's listJsonText: the first character is the delimiter of the rest."""
    if len(value) <= 1:
        return "[]"
    delimiter, text = value[0], value[1:]
    if delimiter in "*+?)":
        raise ValueError(f"Dangling meta character '{delimiter}' in list claim delimiter")
    out = ""
    for element in _java.split(text, delimiter):
        out += ("[" if not out else ",") + '"' + _escape(element) + '"'
    if text.startswith(delimiter) or text.endswith(delimiter) or delimiter * 2 in text:
        out += ',""'
    out += "]"
    if not (out.startswith("[") and out.endswith("]")):
        raise ValueError(f"Illegal JSON array: {out}")
    return out


def _not_reserved(name: str) -> str:
    if name in _RESERVED_CLAIMS:
        raise ValueError(f"Cannot explicitly set the '{name}' claim")
    return name


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")


def unsecured_jws(options: Mapping[str, str], now_ms: int) -> str:
    """The compact serialization OAuthBearerUnsecuredLoginCallbackHandler makes from the login
    module's options; ValueError with Kafka's words for what it refuses."""
    if not options:
        raise ValueError("Token not provided, this login cannot be used to establish client connections")
    if all(name.startswith(_EXTENSION) for name in options):
        raise ValueError("Extensions provided in login context without a token")
    principal = options.get(_LOGIN_PRINCIPAL_CLAIM_NAME)
    principal_claim = "sub" if _java.is_blank(principal) else _java.trim(principal or "")
    scope = options.get(_LOGIN_SCOPE_CLAIM_NAME)
    scope_claim = "scope" if _java.is_blank(scope) else _java.trim(scope or "")
    header = '{"alg":"none"}'
    lifetime = _java.parse_long(options.get(_LOGIN_LIFETIME_SECONDS, "3600"))
    extra = ""
    for key in _java.hashmap_order(options):
        value = options[key]
        if key.startswith(_STRING_CLAIM) and len(key) > len(_STRING_CLAIM):
            name = _not_reserved(key[len(_STRING_CLAIM):])
            extra += f',"{_escape(name)}":"{_escape(value)}"'
        elif key.startswith(_NUMBER_CLAIM) and len(key) > len(_NUMBER_CLAIM):
            name = _not_reserved(key[len(_NUMBER_CLAIM):])
            extra += f',"{_escape(name)}":{_java.double_str(_parse_double(value))}'
        elif key.startswith(_LIST_CLAIM) and len(key) > len(_LIST_CLAIM):
            name = _not_reserved(key[len(_LIST_CLAIM):])
            extra += f',"{_escape(name)}":{_list_json_text(value)}'
    now_s = now_ms / 1000.0
    claims = f'{{"exp":{_java.double_str(now_s + lifetime)},"iat":{_java.double_str(now_s)}{extra}}}'
    compact = f"{_b64url(header)}.{_b64url(claims)}."
    try:
        parse_unsecured_jws(compact, principal_claim, scope_claim)
    except (_IllegalToken, _BrokenToken) as exc:
        raise ValueError(str(exc)) from None
    return compact


def _login_extensions(options: Mapping[str, str]) -> dict[str, str]:
    """handleExtensionsCallback: the unsecuredLoginExtension_<name> options, validated."""
    extensions: dict[str, str] = {}
    for key in _java.hashmap_order(options):
        if key.startswith(_EXTENSION):
            extensions[key[len(_EXTENSION):]] = options[key]
    return extensions


def client_initial_response(token: str, extensions: Mapping[str, str] | None = None, authzid: str = "") -> bytes:
    """OAuthBearerClientInitialResponse.toBytes; ValueError for an extension RFC 7628 does not allow."""
    extensions = dict(extensions or {})
    if _AUTH_KEY in extensions:
        raise ValueError(f"Extension name {_AUTH_KEY} is invalid")
    for name, value in extensions.items():
        if not _KEY_RE.fullmatch(name):
            raise ValueError(f"Extension name {name} is invalid")
        if not _VALUE_RE.fullmatch(value):
            raise ValueError(f"Extension value ({value}) for extension {name} is invalid")
    ext = _SEPARATOR.join(f"{k}={extensions[k]}" for k in _java.hashmap_order(extensions))
    if ext:
        ext = _SEPARATOR + ext
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},{_SEPARATOR}auth=Bearer {token}{ext}{_SEPARATOR}{_SEPARATOR}".encode()


def unsecured_client_token(options: Mapping[str, str], now_ms: int) -> bytes:
    """The whole client initial response a Kafka client with OAuthBearerLoginModule's unsecured
    login handler sends: the token from unsecuredLoginStringClaim_sub (etc.), lifetime
    unsecuredLoginLifetimeSeconds (default 3600), extensions unsecuredLoginExtension_<name>."""
    return client_initial_response(unsecured_jws(options, now_ms), _login_extensions(options))
